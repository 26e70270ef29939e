//! `cargo bench -p weft-testing`: flow tests as `weft test` runs them, offline from their
//! recordings: 100 cases of flows/triage.json, its rubric judges included (target ≤ 2 s).
//! `cargo test --benches` runs it small.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_engine::Engine;
use weft_flow::Flow;
use weft_providers::{LlmClients, ProviderSettings, Secret};
use weft_store::Store;
use weft_testing::{self as testing, RecordMode, TestOptions};

/// An engine over a new store in `dir`, its provider an address nothing answers at: every
/// answer must come from a recording.
fn engine(dir: &std::path::Path) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: "http://127.0.0.1:9/v1".into(),
        openai_api_key: Some(Secret::new("sk-bench")),
        ..ProviderSettings::default()
    };
    let store = Store::open(&dir.join("runs.db")).expect("store");
    Engine::new(LlmClients::new(settings), store)
}

/// The example triage flow's three cases, each copied `copies` times with its recording, run
/// offline as `weft test` runs them.
async fn flow_tests_offline(copies: usize) {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
    let dir = tempfile::tempdir().expect("temp dir");
    let flow_path = dir.path().join("triage.json");
    std::fs::copy(examples.join("triage.json"), &flow_path).expect("copy the flow");
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(examples.join("triage.tests.json")).expect("tests file"),
    )
    .expect("JSON");
    let recordings = testing::recordings_dir(&flow_path);
    std::fs::create_dir_all(&recordings).expect("recordings dir");
    let mut cases = Vec::new();
    for copy in 0..copies {
        let case = &written["cases"][copy % 3];
        let name = format!("{} #{copy}", case["name"].as_str().expect("name"));
        let mut case = case.clone();
        case["name"] = json!(name);
        cases.push(case);
        let original = testing::recording_path(
            &testing::recordings_dir(&examples.join("triage.json")),
            written["cases"][copy % 3]["name"].as_str().expect("name"),
        );
        std::fs::copy(original, testing::recording_path(&recordings, &name)).expect("recording");
    }
    let mut file = written.clone();
    file["cases"] = json!(cases);
    std::fs::write(testing::tests_path(&flow_path), file.to_string()).expect("tests file");
    let engine = engine(dir.path());
    let flow = Flow::load(&flow_path).expect("flow");
    let checked =
        weft_nodes::check_for_run(flow, Some(&flow_path), engine.llm().settings()).expect("valid");
    let suite = testing::load_suite(&flow_path, checked.flow()).expect("suite");
    let options = TestOptions {
        mode: RecordMode::Offline,
        ..TestOptions::default()
    };
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let report = testing::run_suite(&engine, &checked, &suite, &options, Arc::new(|_: &_| {}))
            .await
            .expect("runs");
        best = best.min(started.elapsed());
        assert_eq!(
            report.failed(),
            0,
            "{:?}",
            report.cases.iter().find(|case| !case.passed)
        );
    }
    println!(
        "{copies} cases of flows/triage.json offline from their recordings (rubric judges included): {:.0} ms  [target ≤ 2 s]",
        best.as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(flow_tests_offline(if quick { 6 } else { 100 }));
}
