//! `cargo bench -p weft-cli --bench mcp_flows` — how fast `weft mcp --flows flows/` answers an
//! MCP client's `tools/list` (every flow of the folder a tool, its input schema read from the
//! start node), median over many lists on one stdio connection.
//!
//! `cargo test --benches` runs it small.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let lists = if quick { 20 } else { 1_000 };
    let flows = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = tempfile::tempdir().expect("a temp dir");
        let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .arg("mcp")
            .arg("--flows")
            .arg(&flows)
            .env("WEFT_DB", store.path().join("runs.db"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("weft mcp starts");
        let (Some(stdout), Some(stdin)) = (server.stdout.take(), server.stdin.take()) else {
            panic!("no pipes");
        };
        let client = ()
            .serve(AsyncRwTransport::new_client(stdout, stdin))
            .await
            .expect("weft mcp initializes");
        let tools = client.list_all_tools().await.expect("tools/list").len();
        let mut times: Vec<Duration> = Vec::with_capacity(lists);
        for _ in 0..lists {
            let started = Instant::now();
            client.list_all_tools().await.expect("tools/list");
            times.push(started.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        let slowest = times[times.len() - 1];
        println!(
            "tools/list of `weft mcp --flows flows/` ({tools} flows as tools): median {:.3} ms, slowest {:.3} ms  [target < 5 ms; {lists} lists]",
            median.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3,
        );
        let _ = client.cancel().await;
        let _ = server.kill().await;
    });
}
