//! What bounds `weft serve` (docs/serving.md) against slow or hostile clients, through the real
//! executable: requests sent half (a "slowloris") are closed after the header timeout, so that
//! with its file descriptors all taken the server serves again once they pass; SIGTERM stops a
//! server that holds such requests; an event stream is not cut by the header timeout; and a
//! tokens file that is no regular file, or too large, is refused with exit 2.

use crate::common;

use std::io::Write as _;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::serve::{Server, TOKEN};
use common::{Sandbox, edge, node};
use serde_json::json;
use weft_scripted_llm::{Reply, Script, ScriptedLlm};

/// Half a request: a line and a header, never the blank line that ends them.
const HALF: &[u8] = b"GET /v1/runs HTTP/1.1\r\nHost: x\r\n";

/// Up to `count` connections to `server`, each having sent half a request (those the system
/// would not queue for the server any more are left out).
fn half_sent(server: &Server, count: usize) -> Vec<TcpStream> {
    let address = server
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    (0..count)
        .filter_map(|_| {
            let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok()?;
            stream.write_all(HALF).ok()?;
            Some(stream)
        })
        .collect()
}

/// `GET /v1/runs` on a new connection: its status, or the error.
async fn list_runs(server: &Server) -> Result<u16, String> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let answer = http
        .get(format!("{}/v1/runs?limit=1", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .map_err(|error| error.to_string())?;
    Ok(answer.status().as_u16())
}

#[tokio::test(flavor = "multi_thread")]
async fn half_sent_requests_taking_every_descriptor_keep_others_out_only_until_they_time_out() {
    let sandbox = Sandbox::new();
    // At most 64 open files: fewer than the half-sent requests below, which take every one
    // the server has left while the rest wait to be accepted (as does the next request).
    let server = Server::start_with(&sandbox, &["--header-timeout", "1"], None, Some(64));
    assert_eq!(list_runs(&server).await, Ok(200));
    let flood = half_sent(&server, 150);
    assert!(flood.len() > 64, "only {} connections", flood.len());
    // Answered once the requests ahead of it time out (a few rounds of a second); without
    // the timeout, never.
    let answered = tokio::time::timeout(Duration::from_secs(60), list_runs(&server)).await;
    assert_eq!(answered, Ok(Ok(200)), "a whole request waited for ever");
    // The half-sent ones were closed, unanswered.
    for mut stream in flood.into_iter().take(3) {
        use std::io::Read as _;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        assert!(
            !read.as_ref().is_err_and(|error| matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )),
            "still open: {read:?}"
        );
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }
    // And the server goes on serving.
    assert_eq!(list_runs(&server).await, Ok(200));
}

#[test]
fn sigterm_stops_a_server_holding_requests_that_never_complete() {
    let sandbox = Sandbox::new();
    // The header timeout far off: the requests are still arriving when the server stops.
    let mut server = Server::start(&sandbox, &["--header-timeout", "600"], None);
    let held = half_sent(&server, 20);
    assert_eq!(held.len(), 20);
    let address = server.url.trim_start_matches("http://").to_string();
    let _silent = TcpStream::connect(&address).expect("connect");
    std::thread::sleep(Duration::from_millis(300));
    std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_stream_lasts_past_the_header_timeout() {
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 3_000,
        content: "worth the wait".into(),
    }))
    .await
    .expect("server");
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &["--header-timeout", "1"], Some(&llm));
    sandbox.flow(
        "flows/slow.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("ask", "agent", json!({ "model": "gpt-4o-mini" })),
            ],
            "edges": [edge("e1", "start", "ask", None)]
        }),
    );
    let (status, started) = server.post("/v1/runs", json!({ "flow": "slow" })).await;
    assert_eq!(status, 201, "{started}");
    let id = started["runId"].as_str().expect("id");
    let answer = server
        .http
        .get(format!("{}/v1/runs/{id}/events", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("events");
    assert_eq!(answer.status().as_u16(), 200);
    let events = tokio::time::timeout(Duration::from_secs(60), answer.text())
        .await
        .expect("the stream ends")
        .expect("the whole stream");
    assert!(events.contains("event: run_end"), "{events}");
    assert!(events.contains("worth the wait"), "{events}");
}

#[test]
fn a_tokens_file_that_is_not_a_regular_file_or_too_large_is_refused() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    let fifo = sandbox.dir.path().join("tokens.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let large = sandbox.dir.path().join("large.txt");
    std::fs::File::create(&large)
        .expect("large")
        .set_len(32 * 1024 * 1024 + 1)
        .expect("a sparse file");
    let folder = sandbox.dir.path().join("flows");
    for (tokens, wanted) in [
        (fifo.display().to_string(), "is not a regular file"),
        ("/dev/zero".to_string(), "is not a regular file"),
        (folder.display().to_string(), "is not a regular file"),
        (large.display().to_string(), "is larger than 32 MiB"),
    ] {
        let ran = sandbox.run_within(
            &[
                "serve",
                "--flows",
                "flows",
                "--addr",
                "127.0.0.1:0",
                "--tokens",
                &tokens,
                "--db",
                &sandbox.db_arg(),
            ],
            None,
            Duration::from_secs(20),
        );
        assert_eq!(ran.code, Some(2), "{tokens}: {ran:?}");
        assert!(
            ran.stderr
                .contains(&format!("the tokens file {tokens} {wanted}")),
            "{tokens}: {ran:?}"
        );
        assert!(ran.stdout.is_empty(), "{tokens}: {ran:?}");
    }
}
