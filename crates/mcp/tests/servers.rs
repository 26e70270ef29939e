//! The hub against real MCP servers: @modelcontextprotocol/server-everything over stdio and
//! streamable HTTP, and a stdio server written to misbehave (tests/mcp/misbehaving.mjs).
//! `scripts/setup-mcp.sh` installs the npm packages (the test command runs it).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    args, def, everything_http, everything_stdio, flaky_proxy, gone, marker, misbehaving,
    processes_marked,
};
use tokio_util::sync::CancellationToken;
use weft_mcp::{Hub, JsonObject, McpErrorKind};

#[tokio::test]
async fn a_stdio_server_is_started_once_lists_its_tools_and_answers_calls() {
    let marker = marker();
    let hub = Arc::new(Hub::default());
    let server = everything_stdio(&marker);
    let (first, second) = tokio::join!(
        hub.tools("everything", &server, None),
        hub.tools("everything", &server, None)
    );
    let tools = first.expect("tools");
    assert_eq!(tools, second.expect("tools"));
    let echo = tools
        .iter()
        .find(|tool| tool.name == "echo")
        .expect("an echo tool");
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert_eq!(
        processes_marked(&marker).len(),
        1,
        "one process for one definition"
    );

    let cancel = CancellationToken::new();
    let outcome = hub
        .call(
            "everything",
            &server,
            None,
            "echo",
            args(json!({"message": "hi"})),
            &cancel,
        )
        .await
        .expect("echo");
    assert_eq!(outcome.text(), "Echo: hi");
    assert!(!outcome.is_error);

    // Arguments that do not fit the schema: the tool's error result, not a failed call.
    let wrong = hub
        .call(
            "everything",
            &server,
            None,
            "get-sum",
            args(json!({"a": "one"})),
            &cancel,
        )
        .await;
    match wrong {
        Ok(outcome) => assert!(outcome.is_error, "{outcome:?}"),
        Err(error) => assert_eq!(error.kind, McpErrorKind::Protocol, "{error}"),
    }

    let unknown = hub
        .call(
            "everything",
            &server,
            None,
            "nope",
            JsonObject::new(),
            &cancel,
        )
        .await
        .expect_err("no such tool");
    assert_eq!(unknown.kind, McpErrorKind::UnknownTool);
    assert!(
        unknown
            .to_string()
            .starts_with("MCP server `everything`: has no tool `nope`"),
        "{unknown}"
    );
    assert!(
        unknown.message.contains("echo"),
        "names the tools it has: {unknown}"
    );

    hub.stop();
    assert!(gone(&marker).await, "stopping the hub stops the server");
}

#[tokio::test]
async fn a_streamable_http_server_gets_its_headers_with_names_read_at_run_time() {
    let (mut server, url) = everything_http().await;
    let lookup = |name: &str| (name == "EVERYTHING_TOKEN").then(|| "t0ken-value".to_string());
    let hub = Hub::new(Arc::new(lookup));
    let http = def(json!({
        "url": url,
        "headers": {"X-Api-Key": "${EVERYTHING_TOKEN}"},
    }));
    let cancel = CancellationToken::new();
    let outcome = hub
        .call(
            "remote",
            &http,
            None,
            "get-sum",
            args(json!({"a": 2, "b": 40})),
            &cancel,
        )
        .await
        .expect("a call over HTTP");
    assert!(outcome.text().contains("42"), "{}", outcome.text());

    let unset = def(json!({
        "url": url,
        "headers": {"Authorization": "Bearer ${NOT_SET_FOR_THIS_TEST}"},
    }));
    let error = hub
        .tools("remote", &unset, None)
        .await
        .expect_err("an unset name");
    assert_eq!(error.kind, McpErrorKind::Config);
    assert!(
        error
            .to_string()
            .contains("${NOT_SET_FOR_THIS_TEST} in headers.Authorization is not set"),
        "{error}"
    );
    let _ = server.kill().await;
}

#[tokio::test]
async fn a_busy_http_server_is_asked_again_but_a_tool_call_it_may_have_run_is_not() {
    let (_server, upstream) = everything_http().await;
    let dir = tempfile_dir();
    let log = dir.join("posts.log");
    // Busy twice while starting, once when the tool is called (429), then a 500 on a call.
    let (_proxy, url) =
        flaky_proxy(&upstream, &["initialize:503:2", "tools/call:429:1"], &log).await;
    let hub = Hub::default();
    let remote = def(json!({ "url": url }));
    let cancel = CancellationToken::new();
    let sum = hub
        .call(
            "remote",
            &remote,
            None,
            "get-sum",
            args(json!({"a": 1, "b": 2})),
            &cancel,
        )
        .await
        .expect("the call goes through after the busy answers");
    assert!(sum.text().contains('3'), "{}", sum.text());
    let posts = std::fs::read_to_string(&log).expect("the log");
    let seen: Vec<&str> = posts
        .lines()
        .filter(|line| line.starts_with("initialize") || line.starts_with("tools/call"))
        .collect();
    assert_eq!(
        seen,
        [
            "initialize 503",
            "initialize 503",
            "initialize forwarded",
            "tools/call 429",
            "tools/call forwarded"
        ]
    );

    // A 500 on a tool call is not sent again: the tool may have run. The error names it.
    let log = dir.join("posts-500.log");
    let (_proxy, url) = flaky_proxy(&upstream, &["tools/call:500:1"], &log).await;
    let remote = def(json!({ "url": url }));
    let error = hub
        .call(
            "remote",
            &remote,
            None,
            "get-sum",
            args(json!({"a": 1, "b": 2})),
            &cancel,
        )
        .await
        .expect_err("a 500 on a call");
    assert!(
        error
            .to_string()
            .contains("it answered `tools/call` with HTTP 500"),
        "{error}"
    );
    let posts = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(posts.matches("tools/call").count(), 1, "{posts}");

    // A server that stays busy is given up on after three tries, naming the status.
    let log = dir.join("posts-busy.log");
    let (_proxy, url) = flaky_proxy(&upstream, &["initialize:503:9"], &log).await;
    let error = hub
        .tools("busy", &def(json!({ "url": url })), None)
        .await
        .expect_err("always busy");
    assert!(
        error
            .to_string()
            .contains("it answered `initialize` with HTTP 503 (3 tries)"),
        "{error}"
    );
    let posts = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(posts.matches("initialize 503").count(), 3, "{posts}");
}

/// A fresh folder for one test's files.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-mcp-test-{}", marker()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

#[tokio::test]
async fn a_server_that_cannot_start_or_stops_mid_call_is_named_with_its_last_words() {
    let hub = Hub::default();
    let cancel = CancellationToken::new();
    let marker = marker();

    let missing = def(json!({"command": "weft-no-such-mcp-server"}));
    let error = hub
        .tools("ghost", &missing, None)
        .await
        .expect_err("not found");
    assert_eq!(error.kind, McpErrorKind::Start);
    assert!(
        error
            .to_string()
            .contains("could not start `weft-no-such-mcp-server`"),
        "{error}"
    );

    let fails = misbehaving("fail", &marker, 5.0);
    let error = hub
        .tools("db", &fails, None)
        .await
        .expect_err("exits at once");
    assert_eq!(error.kind, McpErrorKind::Start, "{error}");
    assert!(
        error.to_string().contains("cannot open the database"),
        "{error}"
    );

    let crashes = misbehaving("crash", &marker, 5.0);
    let error = hub
        .call("flaky", &crashes, None, "work", JsonObject::new(), &cancel)
        .await
        .expect_err("crashes mid-call");
    assert_eq!(error.kind, McpErrorKind::Stopped, "{error}");
    assert!(
        error
            .to_string()
            .contains("MCP server `flaky`: the server stopped"),
        "{error}"
    );
    assert!(
        error.to_string().contains("segmentation fault (pretend)"),
        "{error}"
    );
    // The next call starts it again (and it crashes again).
    let again = hub
        .call("flaky", &crashes, None, "work", JsonObject::new(), &cancel)
        .await
        .expect_err("crashes again");
    assert_eq!(again.kind, McpErrorKind::Stopped, "{again}");
    assert!(gone(&marker).await);
}

#[tokio::test]
async fn hanging_garbage_and_huge_answers_end_in_time_with_a_clear_error() {
    let hub = Hub::default();
    let cancel = CancellationToken::new();
    let marker = marker();

    let silent = misbehaving("silent", &marker, 5.0);
    let started = Instant::now();
    let error = hub
        .tools("mute", &silent, None)
        .await
        .expect_err("no initialize");
    assert_eq!(error.kind, McpErrorKind::Timeout);
    assert!(
        error
            .to_string()
            .contains("did not answer `initialize` within 10 s"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));

    let hangs = misbehaving("hang", &marker, 1.0);
    let error = hub
        .call("slow", &hangs, None, "work", JsonObject::new(), &cancel)
        .await
        .expect_err("no answer");
    assert_eq!(error.kind, McpErrorKind::Timeout);
    assert!(
        error
            .to_string()
            .contains("`work` did not answer within 1 s"),
        "{error}"
    );

    let garbage = misbehaving("garbage", &marker, 1.0);
    let error = hub
        .call("noisy", &garbage, None, "work", JsonObject::new(), &cancel)
        .await
        .expect_err("garbage");
    assert!(
        error.to_string().starts_with("MCP server `noisy`:"),
        "{error}"
    );
    assert!(
        error.to_string().contains("`work`") || error.kind == McpErrorKind::Stopped,
        "{error}"
    );

    let huge = misbehaving("huge", &marker, 20.0);
    let error = hub
        .call("big", &huge, None, "work", JsonObject::new(), &cancel)
        .await
        .expect_err("too large");
    assert_eq!(error.kind, McpErrorKind::TooLarge, "{error}");
    assert!(
        error.to_string().contains("over the 16 MiB limit"),
        "{error}"
    );

    // A cancelled run does not wait for the call's timeout.
    let cancelled = CancellationToken::new();
    let started = Instant::now();
    let slow = misbehaving("hang", &marker, 60.0);
    let (error, ()) = tokio::join!(
        hub.call("slow", &slow, None, "work", JsonObject::new(), &cancelled),
        async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancelled.cancel();
        }
    );
    assert_eq!(error.expect_err("cancelled").kind, McpErrorKind::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    hub.stop();
    assert!(gone(&marker).await);
}
