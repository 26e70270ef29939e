//! OpenTelemetry traces (docs/traces.md) read back from a real tracing backend: Arize Phoenix
//! (PyPI `arize-phoenix`, installed by scripts/setup-phoenix.sh), which takes OTLP over HTTP
//! and answers its REST API with the spans it stored. `weft run` exports the run, its steps,
//! the agent's LLM call (against the scripted LLM server) and its MCP tool call (a real MCP
//! server); a `TRACEPARENT` parents the run; content is there only when switched on; a resumed
//! run continues its trace with a link; `weft serve` takes a `traceparent` header on an API
//! request and a webhook; a collector that is down costs one warning, not time.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, ToolCall};

use crate::common::ports::{free_port, listened_by, start_on_free_ports};
use crate::common::serve::{Server, TOKEN};
use crate::common::{Ran, Sandbox, approval_flow, edge, node, paused_run_id};

const LIMIT: Duration = Duration::from_secs(60);
const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// The `phoenix` program of the venv scripts/setup-phoenix.sh made.
fn phoenix_program() -> PathBuf {
    let venv = std::env::var_os("WEFT_PHOENIX_VENV").map_or_else(
        || {
            let home = std::env::var_os("HOME").expect("HOME");
            PathBuf::from(home).join(".cache/weft/phoenix-venv")
        },
        PathBuf::from,
    );
    let program = venv.join("bin/phoenix");
    assert!(
        program.exists(),
        "Arize Phoenix is not installed at {}: run scripts/setup-phoenix.sh",
        program.display()
    );
    program
}

/// A Phoenix server on loopback with a store of its own, stopped when dropped.
struct Phoenix {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Phoenix {
    /// A server on ports of its own, once it answers.
    fn start() -> Phoenix {
        start_on_free_ports("Phoenix", Phoenix::try_start)
    }

    /// One start: the server once it answers on its port, or its log when it exited first.
    fn try_start() -> Result<Phoenix, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("phoenix.log")).expect("log");
        let child = Command::new(phoenix_program())
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start phoenix");
        let mut phoenix = Phoenix {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let log_path = phoenix._dir.path().join("phoenix.log");
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        let started = Instant::now();
        let client = reqwest::blocking::Client::new();
        // Its own answer: whatever took the port since it was picked would answer too.
        while !listened_by(phoenix.child.id(), port)
            || client
                .get(format!("{}/healthz", phoenix.url))
                .send()
                .map_or(true, |answer| !answer.status().is_success())
        {
            if let Ok(Some(status)) = phoenix.child.try_wait() {
                return Err(format!("exited ({status}):\n{}", log()));
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "Phoenix did not start: {}",
                log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(phoenix)
    }

    /// The spans `wanted` picks, once `at_least` of them arrived (Phoenix stores what it is
    /// sent a moment later).
    fn spans_where(&self, at_least: usize, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
        let client = reqwest::blocking::Client::new();
        let started = Instant::now();
        loop {
            let answer: Value = client
                .get(format!("{}/v1/projects/default/spans?limit=1000", self.url))
                .send()
                .and_then(|answer| answer.json())
                .unwrap_or(Value::Null);
            let spans: Vec<Value> = answer["data"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|span| wanted(span))
                .collect();
            if spans.len() >= at_least || started.elapsed() > Duration::from_secs(30) {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The spans of `trace_id`, once `at_least` of them arrived.
    fn trace(&self, trace_id: &str, at_least: usize) -> Vec<Value> {
        self.spans_where(at_least, |span| span["context"]["trace_id"] == trace_id)
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An attribute of a span as Phoenix gives it back (flat, or nested by the dots).
fn attr<'a>(span: &'a Value, name: &str) -> &'a Value {
    let attributes = &span["attributes"];
    if let Some(value) = attributes.get(name) {
        return value;
    }
    attributes
        .pointer(&format!("/{}", name.replace('.', "/")))
        .unwrap_or(&Value::Null)
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|span| span["name"] == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
}

fn span_id(span: &Value) -> &str {
    span["context"]["span_id"].as_str().expect("span id")
}

/// start → agent (an MCP tool, server-everything's `echo`) → end.
fn tool_flow() -> Value {
    let servers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    let everything =
        servers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.exists(),
        "the MCP test servers are not installed: run scripts/setup-mcp.sh"
    );
    json!({
        "version": 1,
        "name": "traced",
        "settings": {"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"]}}},
        "nodes": [
            node("start", "start", json!({"initialInput": "rivers"})),
            node("agent", "agent", json!({"model": "gpt-4o-mini", "userPrompt": "tell me about {{ PREVIOUS_OUTPUT }}", "tools": {"mcp": ["everything/echo"]}})),
            node("end", "output", json!({}))
        ],
        "edges": [edge("a", "start", "agent", None), edge("b", "agent", "end", None)]
    })
}

async fn model_calling_echo() -> ScriptedLlm {
    ScriptedLlm::start(
        Script::default()
            .with_rule(Rule::on(
                Match {
                    last_role: Some("user".into()),
                    ..Match::default()
                },
                Reply::ToolCalls {
                    calls: vec![ToolCall {
                        id: Some("call_1".into()),
                        name: "everything__echo".into(),
                        arguments: json!({"message": "secret-ish rivers"}),
                    }],
                    delay_ms: 0,
                },
            ))
            .with_fallback(Reply::text("Rivers flow downhill.")),
    )
    .await
    .expect("server")
}

async fn output_of(mut command: Command) -> Ran {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
        .await
        .expect("join")
        .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_export_their_spans_to_a_real_tracing_backend() {
    let phoenix = tokio::task::spawn_blocking(Phoenix::start)
        .await
        .expect("join");
    let llm = model_calling_echo().await;
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("traced.json", &tool_flow());
    let db = sandbox.db_arg();
    let traced = |command: &mut Command| {
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    };

    // A run parented by TRACEPARENT, content not captured.
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    traced(&mut command);
    command.env("TRACEPARENT", format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"));
    let ran = output_of(command).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let spans = {
        let phoenix = &phoenix;
        tokio::task::block_in_place(|| phoenix.trace(PARENT_TRACE, 6))
    };
    let run = named(&spans, "run traced");
    assert_eq!(run["parent_id"], PARENT_SPAN, "TRACEPARENT parents the run");
    assert_eq!(attr(run, "weft.run.status"), "completed");
    let step = |node: &str| {
        let span = named(&spans, &format!("step {node}"));
        assert_eq!(
            span["parent_id"],
            span_id(run),
            "{node} is a step of the run"
        );
        span
    };
    step("start");
    let agent = step("agent");
    step("end");
    let chat = named(&spans, "chat gpt-4o-mini");
    assert_eq!(
        chat["parent_id"],
        span_id(agent),
        "the LLM call is the agent's"
    );
    assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(chat, "gen_ai.request.model"), "gpt-4o-mini");
    assert!(attr(chat, "gen_ai.response.model").is_string(), "{chat:#}");
    assert!(
        attr(chat, "gen_ai.usage.input_tokens").as_i64() > Some(0),
        "{chat:#}"
    );
    assert!(
        attr(chat, "gen_ai.usage.output_tokens").as_i64() > Some(0),
        "{chat:#}"
    );
    let reasons: Vec<String> = spans
        .iter()
        .filter(|span| span["name"] == "chat gpt-4o-mini")
        .flat_map(|span| {
            attr(span, "gen_ai.response.finish_reasons")
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|reason| reason.as_str().map(str::to_string))
        .collect();
    assert!(
        reasons.contains(&"tool_calls".to_string()) && reasons.contains(&"stop".to_string()),
        "{reasons:?}"
    );
    assert!(attr(chat, "weft.cost.usd").as_f64() > Some(0.0), "{chat:#}");
    let tool = named(&spans, "execute_tool echo");
    assert_eq!(
        tool["parent_id"],
        span_id(agent),
        "the tool call is the agent's"
    );
    assert_eq!(attr(tool, "gen_ai.tool.name"), "echo");
    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    let everything = serde_json::to_string(&spans).expect("json");
    for content in [
        "secret-ish rivers",
        "tell me about rivers",
        "Rivers flow downhill",
    ] {
        assert!(
            !everything.contains(content),
            "content is not exported unless switched on: {content}"
        );
    }

    // The same with content switched on: a trace of its own.
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    traced(&mut command);
    let other_trace = "0af7651916cd43dd8448eb211c80319c";
    command
        .env(
            "TRACEPARENT",
            format!("00-{other_trace}-b7ad6b7169203331-01"),
        )
        .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    let ran = output_of(command).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let spans = tokio::task::block_in_place(|| phoenix.trace(other_trace, 6));
    let everything = serde_json::to_string(&spans).expect("json");
    for content in [
        "secret-ish rivers",
        "tell me about rivers",
        "Rivers flow downhill",
    ] {
        assert!(
            everything.contains(content),
            "content is exported: {content}"
        );
    }
    assert!(!everything.contains(crate::common::KEY), "never a key");

    // A paused run resumed in another process continues its trace, with a link.
    let approval = sandbox.flow("review.json", &approval_flow());
    let mut command = sandbox.command(&["run", &approval, "--db", &db], None);
    traced(&mut command);
    let ran = output_of(command).await;
    assert_eq!(ran.code, Some(3), "paused: {ran:?}");
    let run_id = paused_run_id(&ran);
    let mut command = sandbox.command(
        &["resume", &run_id, "--decision", "approve", "--db", &db],
        None,
    );
    traced(&mut command);
    let ran = output_of(command).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let first = tokio::task::block_in_place(|| {
        phoenix.spans_where(1, |span| {
            span["name"] == "run Review" && attr(span, "weft.run.resumed").is_null()
        })
    });
    let first = first.first().cloned().expect("the first run span");
    let trace_id = first["context"]["trace_id"].as_str().expect("trace");
    let spans = tokio::task::block_in_place(|| phoenix.trace(trace_id, 8));
    assert_eq!(attr(&first, "weft.run.status"), "paused");
    let review = named(&spans, "step review");
    assert!(
        review["events"].to_string().contains("weft.approval"),
        "the approval is an event of its step: {review:#}"
    );
    let resumed = spans
        .iter()
        .find(|span| span["name"] == "run Review" && attr(span, "weft.run.resumed") == true)
        .unwrap_or_else(|| panic!("a resumed run span in {spans:#?}"));
    assert_eq!(resumed["parent_id"], span_id(&first), "{resumed:#}");
    assert_eq!(attr(resumed, "weft.run.status"), "completed");
    named(&spans, "step out");

    // `weft serve`: a traceparent on an API request or a webhook parents the run it starts.
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    sandbox.flow("flows/traced.json", &tool_flow());
    let server = Server::start_with_env(
        &sandbox,
        &[],
        Some(&llm),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    for (path, body, trace, parent) in [
        (
            "/v1/runs",
            json!({ "flow": "traced" }).to_string(),
            "5af7651916cd43dd8448eb211c80319d",
            "c7ad6b7169203332",
        ),
        (
            "/v1/hooks/traced",
            "\"by a hook\"".to_string(),
            "6af7651916cd43dd8448eb211c80319e",
            "d7ad6b7169203333",
        ),
    ] {
        let answer = server
            .http
            .post(format!("{}{path}", server.url))
            .bearer_auth(TOKEN)
            .header("traceparent", format!("00-{trace}-{parent}-01"))
            .body(body)
            .send()
            .await
            .expect("the server answers");
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        let started: Value = answer.json().await.expect("JSON");
        server
            .wait_for(started["runId"].as_str().expect("id"), "completed")
            .await;
        let spans = tokio::task::block_in_place(|| phoenix.trace(trace, 6));
        let run = named(&spans, "run traced");
        assert_eq!(
            run["parent_id"], parent,
            "{path}: the traceparent parents the run"
        );
        assert_eq!(
            named(&spans, "chat gpt-4o-mini")["context"]["trace_id"],
            trace,
            "{path}: the run's LLM call is in the caller's trace"
        );
    }
    drop(server);

    // A collector that is down: the run is not held up, and says so once.
    let down = format!("http://127.0.0.1:{}", free_port());
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &down)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let started = Instant::now();
    let ran = output_of(command).await;
    let took = started.elapsed();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(took < LIMIT, "{took:?}");
    let warnings = ran.stderr.matches("could not be sent to").count();
    assert_eq!(warnings, 1, "one warning: {}", ran.stderr);
}
