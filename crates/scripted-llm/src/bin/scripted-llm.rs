//! `scripted-llm SCRIPT.json [--port N]`: serves a [`Script`] read from a JSON file until the
//! process is stopped, for tests that drive a whole program (the desktop app's WebDriver tests)
//! rather than a library.
//!
//! Prints one JSON line on stdout once listening:
//! `{"baseUrl": "http://127.0.0.1:PORT/v1", "rootUrl": "http://127.0.0.1:PORT"}`.

use std::process::ExitCode;

use weft_scripted_llm::{Script, ScriptedLlm};

fn usage() -> ExitCode {
    eprintln!("usage: scripted-llm SCRIPT.json");
    ExitCode::from(2)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        return usage();
    };
    let script: Script = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(script) => script,
        Err(e) => {
            eprintln!("scripted-llm: cannot read the script {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let llm = match ScriptedLlm::start(script).await {
        Ok(llm) => llm,
        Err(e) => {
            eprintln!("scripted-llm: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{}",
        serde_json::json!({ "baseUrl": llm.base_url(), "rootUrl": llm.root_url() })
    );
    let _ = tokio::signal::ctrl_c().await;
    ExitCode::SUCCESS
}
