//! What a tool call costs through Weft's hub beside the same call made directly with the SDK on
//! the same stdio server (server-everything's `echo`), and 100 concurrent calls beside 10
//! sequential ones. `cargo bench -p weft-mcp`; `cargo test --benches` runs it small.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use weft_mcp::{Hub, JsonObject, ServerDef};

fn server_script() -> std::path::PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "run scripts/setup-mcp.sh first");
    script
}

fn arguments() -> JsonObject {
    json!({"message": "hi"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

type Direct = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// The same server, driven by the SDK alone (the child is killed when dropped).
async fn direct_client() -> (Direct, tokio::process::Child) {
    let mut child = tokio::process::Command::new("node")
        .arg(server_script())
        .arg("stdio")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server starts");
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("no pipes");
    };
    let client = ().serve(AsyncRwTransport::new_client(stdout, stdin)).await.expect("initializes");
    (client, child)
}

async fn direct_call(client: &Direct) {
    client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments()))
        .await
        .expect("echo");
}

/// The median of `calls` sequential calls made directly.
async fn direct(client: &Direct, calls: usize) -> Duration {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        direct_call(client).await;
        times.push(started.elapsed());
    }
    median(&mut times)
}

/// `count` direct calls started together: the time until the last one answered.
async fn direct_concurrent(client: &Direct, count: usize) -> Duration {
    let started = Instant::now();
    futures_util::future::join_all((0..count).map(|_| direct_call(client))).await;
    started.elapsed()
}

async fn through_hub(hub: &Hub, server: &ServerDef, calls: usize) -> Duration {
    let cancel = CancellationToken::new();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        hub.call("everything", server, None, "echo", arguments(), &cancel)
            .await
            .expect("echo");
        times.push(started.elapsed());
    }
    median(&mut times)
}

/// `count` calls started together (on one connection, as an agent's calls of one answer
/// are): the time until the last one answered.
async fn concurrent(hub: &Hub, server: &ServerDef, count: usize) -> Duration {
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let calls =
        (0..count).map(|_| hub.call("everything", server, None, "echo", arguments(), &cancel));
    for outcome in futures_util::future::join_all(calls).await {
        outcome.expect("echo");
    }
    started.elapsed()
}

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let calls = if quick { 20 } else { 1_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let server: ServerDef = serde_json::from_value(json!({
            "command": "node",
            "args": [server_script(), "stdio"],
        }))
        .expect("definition");
        let hub = Hub::default();
        let (client, _child) = direct_client().await;
        // Started and warmed once, as a process's later calls find them.
        through_hub(&hub, &server, 10).await;
        direct(&client, 10).await;
        let alone = direct(&client, calls).await;
        let weft = through_hub(&hub, &server, calls).await;
        let one_call_more = weft.as_secs_f64() - alone.as_secs_f64();
        println!(
            "a tool call (server-everything echo over stdio): median {:.3} ms through Weft's hub against {:.3} ms with the SDK alone: {:+.3} ms  [target ≤ +1 ms; {calls} calls each]",
            weft.as_secs_f64() * 1e3,
            alone.as_secs_f64() * 1e3,
            one_call_more * 1e3,
        );
        let rounds = if quick { 2 } else { 21 };
        let (mut weft_100, mut alone_100) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            weft_100.push(concurrent(&hub, &server, 100).await);
            alone_100.push(direct_concurrent(&client, 100).await);
        }
        let (weft_100, alone_100) = (median(&mut weft_100), median(&mut alone_100));
        println!(
            "100 concurrent calls: {:.2} ms through Weft's hub against {:.2} ms with the SDK alone: {:+.2} ms more, against {:+.2} ms more for 10 sequential calls  [target: no more]",
            weft_100.as_secs_f64() * 1e3,
            alone_100.as_secs_f64() * 1e3,
            (weft_100.as_secs_f64() - alone_100.as_secs_f64()) * 1e3,
            one_call_more * 10.0 * 1e3,
        );
        hub.stop();
    });
}
