//! The node kinds brought in from the other seeds, run through the engine: join, forEach,
//! subflow, http, code, and structured output with its repair try.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_nodes::{Decision, validate};
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_engine::{Engine, ResumeOptions, RunOptions};

use weft_event::{EventType, RunEvent, RunStatus};

use weft_flow::Flow;

use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::Store;

struct Setup {
    dir: tempfile::TempDir,
    engine: Engine,
    _server: ScriptedLlm,
}

async fn setup(script: Script) -> Setup {
    let server = ScriptedLlm::start(script).await.expect("server");
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-node-kinds")),
        initial_backoff: Duration::from_millis(1),
        ..ProviderSettings::default()
    };
    let engine = Engine::new(
        LlmClients::new(settings),
        Store::open(&dir.path().join("runs.db")).expect("store"),
    );
    Setup {
        dir,
        engine,
        _server: server,
    }
}

impl Setup {
    /// Writes `flow` as `name` in the test folder and returns its path.
    fn write(&self, name: &str, flow: Value) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(&flow).expect("json"))
            .expect("write flow");
        path
    }

    async fn run(
        &self,
        path: &Path,
        input: Option<&str>,
    ) -> (weft_engine::RunOutcome, Vec<RunEvent>) {
        let flow = Flow::load(path).expect("flow loads");
        let outcome = self
            .engine
            .start(
                flow,
                RunOptions {
                    input: input.map(str::to_string),
                    flow_path: Some(path.to_path_buf()),
                    ..RunOptions::default()
                },
            )
            .await
            .expect("run starts");
        let events = self.engine.store().events(&outcome.run_id).expect("events");
        (outcome, events)
    }
}

fn ran(events: &[RunEvent], node: &str) -> usize {
    events
        .iter()
        .filter(|event| {
            event.kind == EventType::StepEnd
                && event.scope.is_none()
                && event.node_id.as_deref() == Some(node)
        })
        .count()
}

fn join_flow(condition: &str) -> Value {
    json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "go"}},
            {"id": "route", "type": "if", "data": {"conditions": [{"operator": "contains", "value": condition}]}},
            {"id": "yes", "type": "template", "data": {"template": "took yes"}},
            {"id": "no", "type": "template", "data": {"template": "took no"}},
            {"id": "side", "type": "template", "data": {"template": "side branch"}},
            {"id": "both", "type": "join", "data": {}},
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "route"},
            {"id": "b", "source": "start", "target": "side"},
            {"id": "c", "source": "route", "target": "yes", "sourceHandle": "condition-0"},
            {"id": "d", "source": "route", "target": "no", "sourceHandle": "false"},
            {"id": "e", "source": "yes", "target": "both"},
            {"id": "f", "source": "no", "target": "both"},
            {"id": "g", "source": "side", "target": "both"},
        ]
    })
}

#[tokio::test]
async fn a_join_behind_an_if_waits_only_for_branches_that_can_still_arrive() {
    let setup = setup(Script::default()).await;
    let path = setup.write("join.json", join_flow("go"));
    let (outcome, events) = tokio::time::timeout(Duration::from_secs(10), setup.run(&path, None))
        .await
        .expect("the join does not hang on the branch the if did not take");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.result,
        Some(json!({"side": "side branch", "yes": "took yes"}).into())
    );
    assert_eq!(ran(&events, "both"), 1, "the join runs once");
    assert_eq!(ran(&events, "no"), 0);
}

#[tokio::test]
async fn a_join_with_every_branch_taken_waits_for_all() {
    let setup = setup(Script::default()).await;
    let mut flow = join_flow("go");
    // Both branches of a fan-out arrive: start → yes and start → no directly.
    flow["edges"] = json!([
        {"id": "a", "source": "start", "target": "yes"},
        {"id": "b", "source": "start", "target": "no"},
        {"id": "b2", "source": "start", "target": "side"},
        {"id": "e", "source": "yes", "target": "both"},
        {"id": "f", "source": "no", "target": "both"},
        {"id": "g", "source": "side", "target": "both"},
        {"id": "h", "source": "start", "target": "route"},
        {"id": "i", "source": "route", "target": "side", "sourceHandle": "false"},
    ]);
    let path = setup.write("join_all.json", flow);
    let (outcome, events) = setup.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.result,
        Some(json!({"no": "took no", "side": "side branch", "yes": "took yes"}).into())
    );
    assert_eq!(ran(&events, "both"), 1);
}

fn write_item_flow(setup: &Setup) {
    setup.write(
        "item.json",
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "work", "type": "code", "data": {"code": "if input < 0:\n    return 1 // 0\nreturn input * 10"}},
            ],
            "edges": [{"id": "a", "source": "start", "target": "work"}]
        }),
    );
}

fn for_each_flow(max_concurrency: u32, fail_fast: bool) -> Value {
    json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": {"values": [1, 2, 3]}}},
            {"id": "each", "type": "forEach", "data": {"items": "values", "flow": "item.json",
                "maxConcurrency": max_concurrency, "failFast": fail_fast}},
        ],
        "edges": [{"id": "a", "source": "start", "target": "each"}]
    })
}

#[tokio::test]
async fn for_each_keeps_item_order_and_tags_events_with_the_item_index() {
    let setup = setup(Script::default()).await;
    write_item_flow(&setup);
    let path = setup.write("each.json", for_each_flow(2, false));
    let (outcome, events) = setup.run(&path, Some(r#"{"values": [3, -1, 5, 7]}"#)).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let result = outcome.result.expect("result");
    assert_eq!(result[0], 30);
    assert!(
        result[1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("ZeroDivisionError"),
        "without failFast a failed item's slot holds its error: {result}"
    );
    assert_eq!(result[2], 50);
    assert_eq!(result[3], 70);
    for (index, expected) in [(0u64, "30"), (2, "50"), (3, "70")] {
        let end = events
            .iter()
            .find(|event| {
                event.item == Some(index)
                    && event.node_id.as_deref() == Some("work")
                    && event.kind == EventType::StepEnd
            })
            .expect("per-item step_end");
        assert_eq!(end.content, expected);
        assert_eq!(
            end.scope.as_deref(),
            Some(format!("each[{index}]").as_str())
        );
    }
}

#[tokio::test]
async fn for_each_fail_fast_stops_the_items_not_yet_started() {
    let setup = setup(Script::default()).await;
    write_item_flow(&setup);
    let path = setup.write("each.json", for_each_flow(1, true));
    let (outcome, events) = setup.run(&path, Some(r#"{"values": [-1, 2, 3]}"#)).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("item 0 failed") && error.contains("ZeroDivisionError"),
        "{error}"
    );
    assert!(
        events
            .iter()
            .all(|event| event.item.is_none_or(|item| item == 0)),
        "items after the failure never started"
    );
}

#[tokio::test]
async fn a_subflow_error_is_caught_or_raised_as_the_node_says() {
    let setup = setup(Script::default()).await;
    setup.write(
        "broken.json",
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "parse", "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}", "parseJson": true}},
            ],
            "edges": [{"id": "a", "source": "start", "target": "parse"}]
        }),
    );
    for (on_error, expected) in [
        ("catch", RunStatus::Completed),
        ("raise", RunStatus::Failed),
    ] {
        let path = setup.write(
            "parent.json",
            json!({
                "nodes": [
                    {"id": "start", "type": "start", "data": {"initialInput": "not json"}},
                    {"id": "child", "type": "subflow", "data": {"flow": "broken.json", "onError": on_error}},
                ],
                "edges": [{"id": "a", "source": "start", "target": "child"}]
            }),
        );
        let (outcome, _) = setup.run(&path, None).await;
        assert_eq!(outcome.status, expected, "onError {on_error}");
        if on_error == "catch" {
            let result = outcome.result.expect("result");
            assert_eq!(result["error"]["nodeId"], "child");
            assert!(
                result["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("parseJson"),
                "{result}"
            );
        } else {
            assert!(outcome.error.unwrap_or_default().contains("broken.json"));
        }
    }
}

#[tokio::test]
async fn a_subflow_paused_at_an_approval_resumes_in_a_fresh_engine() {
    let setup = setup(Script::default()).await;
    setup.write(
        "ask.json",
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "ok", "type": "approval", "data": {"message": "Ship {{ PREVIOUS_OUTPUT }}?"}},
                {"id": "yes", "type": "template", "data": {"template": "shipped {{ PREVIOUS_OUTPUT }} ({{ approval.note }})"}},
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "ok"},
                {"id": "b", "source": "ok", "target": "yes", "sourceHandle": "approve"},
            ]
        }),
    );
    let path = setup.write(
        "outer.json",
        json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "v2"}},
                {"id": "release", "type": "subflow", "data": {"flow": "ask.json"}},
                {"id": "done", "type": "template", "data": {"template": "outer saw: {{ PREVIOUS_OUTPUT }}"}},
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "release"},
                {"id": "b", "source": "release", "target": "done"},
            ]
        }),
    );
    let (outcome, _) = setup.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Paused);
    let waiting = outcome.waiting.expect("waiting");
    assert_eq!(waiting.node_id, "release/ok");
    assert_eq!(waiting.message, "Ship v2?");

    let store = Store::open(&setup.dir.path().join("runs.db")).expect("store");
    let fresh = Engine::new(LlmClients::new(ProviderSettings::default()), store);
    let resumed = fresh
        .resume(
            &outcome.run_id,
            Decision::parse("approve", "go").expect("decision"),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
    assert_eq!(
        resumed.result,
        Some(json!("outer saw: shipped v2 (go)").into())
    );
    let events = fresh.store().events(&outcome.run_id).expect("events");
    let inner = events
        .iter()
        .find(|event| event.kind == EventType::InputReceived)
        .expect("decision logged");
    assert_eq!(inner.scope.as_deref(), Some("release"));
    assert_eq!(inner.node_id.as_deref(), Some("ok"));
}

#[tokio::test]
async fn child_flow_files_are_checked_before_running() {
    let setup = setup(Script::default()).await;
    let a = setup.write(
        "a.json",
        json!({"nodes": [{"id": "start", "type": "start"}, {"id": "sub", "type": "subflow", "data": {"flow": "b.json"}}],
               "edges": [{"id": "e", "source": "start", "target": "sub"}]}),
    );
    setup.write(
        "b.json",
        json!({"nodes": [{"id": "start", "type": "start"}, {"id": "sub", "type": "subflow", "data": {"flow": "a.json"}}],
               "edges": [{"id": "e", "source": "start", "target": "sub"}]}),
    );
    let problems = validate(&Flow::load(&a).expect("loads"), Some(&a));
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|line| line.contains("flow files form a cycle: a.json → b.json → a.json")),
        "{text:?}"
    );

    let missing = setup.write(
        "missing.json",
        json!({"nodes": [{"id": "start", "type": "start"}, {"id": "sub", "type": "subflow", "data": {"flow": "nowhere.json"}}],
               "edges": [{"id": "e", "source": "start", "target": "sub"}]}),
    );
    let problems = validate(&Flow::load(&missing).expect("loads"), Some(&missing));
    assert_eq!(
        problems[0].to_string(),
        "node sub: error: the flow file nowhere.json does not exist (next to this flow's file)"
    );

    // Twelve files deep: refused past ten.
    for level in 0..12 {
        setup.write(
            &format!("level{level}.json"),
            json!({"nodes": [{"id": "start", "type": "start"}, {"id": "sub", "type": "subflow", "data": {"flow": format!("level{}.json", level + 1)}}],
                   "edges": [{"id": "e", "source": "start", "target": "sub"}]}),
        );
    }
    setup.write("level12.json", json!({"nodes": [{"id": "start", "type": "start"}, {"id": "t", "type": "template", "data": {"template": "x"}}],
        "edges": [{"id": "e", "source": "start", "target": "t"}]}));
    let top = setup.dir.path().join("level0.json");
    let problems = validate(&Flow::load(&top).expect("loads"), Some(&top));
    assert!(
        problems
            .iter()
            .any(|problem| problem.to_string().contains("nest more than 10 deep")),
        "{problems:?}"
    );
}

#[tokio::test]
async fn code_that_runs_forever_is_stopped_by_its_timeout() {
    let setup = setup(Script::default()).await;
    let path = setup.write(
        "spin.json",
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "spin", "type": "code", "data": {"code": "while True:\n    pass", "timeoutSeconds": 0.5}},
            ],
            "edges": [{"id": "a", "source": "start", "target": "spin"}]
        }),
    );
    let (outcome, _) = setup.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        outcome.error.clone().unwrap_or_default().contains("0.5"),
        "the error names the timeout: {:?}",
        outcome.error
    );
    // The engine is still usable afterwards.
    let again = setup.write(
        "ok.json",
        json!({"nodes": [{"id": "start", "type": "start", "data": {"initialInput": 4}},
                         {"id": "double", "type": "code", "data": {"code": "print('doubling', input)\nreturn input * 2"}}],
               "edges": [{"id": "a", "source": "start", "target": "double"}]}),
    );
    let (outcome, events) = setup.run(&again, None).await;
    assert_eq!(outcome.result, Some(json!(8).into()));
    assert!(
        events
            .iter()
            .any(|event| event.content == "print: doubling 4"),
        "print is captured into the log"
    );
}

#[tokio::test]
async fn hostile_code_is_refused_by_the_validator_with_its_line() {
    let flow = Flow::from_value(
        json!({"nodes": [{"id": "start", "type": "start"},
                         {"id": "evil", "type": "code", "data": {"code": "x = 1\nimport os\nreturn x"}}],
               "edges": [{"id": "a", "source": "start", "target": "evil"}]}),
        "test",
    )
    .expect("loads");
    let problems = validate(&flow, None);
    let line = problems[0].to_string();
    assert!(
        line.starts_with("node evil: error: field `code`: line 2"),
        "{line}"
    );
    assert!(line.contains("import"), "{line}");
}

/// A tiny HTTP server for `http` nodes: `/ok` answers JSON, `/flaky` fails once with 500,
/// anything else 404. Records each request's first line, headers and body.
async fn http_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut flaky_failed = false;
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = vec![0u8; 16 * 1024];
            let mut read = 0;
            // Read until the headers and the announced body are in.
            let request = loop {
                let Ok(n) = socket.read(&mut buffer[read..]).await else {
                    break String::new();
                };
                read += n;
                let text = String::from_utf8_lossy(&buffer[..read]).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|line| {
                            line.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if read >= end + 4 + length || n == 0 {
                        break text;
                    }
                } else if n == 0 {
                    break text;
                }
            };
            record.lock().expect("record").push(request.clone());
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body) = if path.starts_with("/ok") {
                ("200 OK", r#"{"hello": "world"}"#)
            } else if path.starts_with("/flaky") && !flaky_failed {
                flaky_failed = true;
                ("500 Internal Server Error", "try again")
            } else if path.starts_with("/flaky") {
                ("200 OK", r#"{"second": true}"#)
            } else {
                ("404 Not Found", "no such page")
            };
            let kind = if body.starts_with('{') {
                "application/json"
            } else {
                "text/plain"
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    (address, seen)
}

#[tokio::test]
async fn http_nodes_send_templated_requests_and_parse_json() {
    let (address, seen) = http_server().await;
    let setup = setup(Script::default()).await;
    let path = setup.write(
        "http.json",
        json!({
            "settings": {"vars": {"base": address}},
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": {"user": "ada"}}},
                {"id": "call", "type": "http", "data": {"method": "POST", "url": "{{ vars.base }}/ok?u={{ user }}",
                    "headers": {"X-User": "{{ user }}"}, "body": "{\"name\": \"{{ user }}\"}"}},
                {"id": "missing", "type": "http", "data": {"url": "{{ vars.base }}/missing"}},
                {"id": "tolerant", "type": "http", "data": {"url": "{{ vars.base }}/missing", "allowErrorStatus": true}},
                {"id": "flaky", "type": "http", "data": {"url": "{{ vars.base }}/flaky", "retry": {"maxAttempts": 2, "backoffMs": 1}}},
                {"id": "caught", "type": "template", "data": {"template": "caught {{ kind }}: {{ message }}"}},
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "call"},
                {"id": "b", "source": "call", "target": "missing"},
                {"id": "c", "source": "missing", "target": "caught", "sourceHandle": "error"},
                {"id": "d", "source": "call", "target": "tolerant"},
                {"id": "e", "source": "call", "target": "flaky"},
            ]
        }),
    );
    let (outcome, _) = setup.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let outputs = setup
        .engine
        .store()
        .node_outputs(&outcome.run_id)
        .expect("outputs");
    let output = |id: &str| {
        outputs
            .iter()
            .find(|record| record.node_id == id)
            .map(|record| record.output.clone())
    };
    let call = output("call").expect("call ran");
    assert_eq!(call["status"], 200);
    assert_eq!(
        call["body"],
        json!({"hello": "world"}),
        "JSON bodies are parsed"
    );
    assert_eq!(call["headers"]["content-type"], "application/json");
    assert_eq!(output("tolerant").expect("tolerant ran")["status"], 404);
    assert_eq!(
        output("flaky").expect("flaky retried")["body"],
        json!({"second": true})
    );
    let caught = output("caught").expect("error edge taken");
    assert!(
        caught
            .as_str()
            .unwrap_or("")
            .starts_with("caught http: GET"),
        "{caught}"
    );
    assert!(
        caught
            .as_str()
            .unwrap_or("")
            .contains("answered 404: no such page"),
        "{caught}"
    );

    let requests = seen.lock().expect("seen").clone();
    let post = requests
        .iter()
        .find(|request| request.starts_with("POST"))
        .expect("POST sent");
    assert!(post.starts_with("POST /ok?u=ada "), "{post}");
    assert!(post.to_ascii_lowercase().contains("x-user: ada"), "{post}");
    assert!(
        post.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{post}"
    );
    assert!(post.ends_with(r#"{"name": "ada"}"#), "{post}");
}

#[tokio::test]
async fn output_schema_answers_are_validated_with_one_repair_try() {
    let schema = json!({"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]});
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("does not match".into()),
                ..Match::default()
            },
            Reply::text(r#"{"score": 7}"#),
        ))
        .with_fallback(Reply::text(r#"{"score": "high"}"#));
    let setup = setup(script).await;
    let flow = json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "rate this"}},
            {"id": "rate", "type": "agent", "data": {"model": "m", "outputSchema": schema}},
            {"id": "check", "type": "if", "data": {"conditions": [{"field": "score", "operator": "gt", "value": 5}]}},
            {"id": "high", "type": "template", "data": {"template": "high {{ score }}"}},
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "rate"},
            {"id": "b", "source": "rate", "target": "check"},
            {"id": "c", "source": "check", "target": "high", "sourceHandle": "condition-0"},
        ]
    });
    let path = setup.write("rate.json", flow.clone());
    let (outcome, events) = setup.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("high 7").into()));
    let requests = setup._server.requests();
    assert_eq!(requests.len(), 2, "one repair try");
    assert_eq!(requests[0].body["response_format"]["type"], "json_schema");
    assert_eq!(
        requests[0].body["response_format"]["json_schema"]["schema"],
        schema
    );
    let repair = requests[1].last_user_text().unwrap_or_default();
    assert!(
        repair.contains(r#"at /score: "high" is not of type "integer""#),
        "the repair request says what was wrong and where: {repair}"
    );
    // Usage is on llm_response events and summed per node and run in the store.
    let usage = events
        .iter()
        .filter(|event| event.kind == EventType::LlmResponse)
        .filter_map(|event| event.usage)
        .fold(0, |sum, usage| {
            sum + usage.input_tokens + usage.output_tokens
        });
    assert!(usage > 0, "llm_response events carry usage");
    let record = setup.engine.store().run(&outcome.run_id).expect("run");
    assert_eq!(
        record.usage.input_tokens + record.usage.output_tokens,
        usage
    );
    let node = setup
        .engine
        .store()
        .node_outputs(&outcome.run_id)
        .expect("outputs")
        .into_iter()
        .find(|record| record.node_id == "rate")
        .expect("rate stored");
    assert_eq!(node.usage, record.usage);
    let end = events.last().expect("run_end");
    assert_eq!(
        end.usage,
        Some(record.usage),
        "run_end carries the run's total"
    );

    // Still wrong after the repair try: a clear error.
    let stubborn = setup_with_fallback(r#"{"score": "high"}"#).await;
    let path = stubborn.write("rate.json", flow);
    let (outcome, _) = stubborn.run(&path, None).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("does not match outputSchema after one repair try"),
        "{error}"
    );
}

async fn setup_with_fallback(answer: &str) -> Setup {
    setup(Script::always(Reply::text(answer))).await
}

#[tokio::test]
async fn web_search_sources_are_logged_and_kept_with_the_output() {
    let server = ScriptedLlm::start(Script::always(Reply::WebSearch {
        content: "Rivers meander through erosion.".into(),
        sources: vec![
            weft_scripted_llm::SearchResult::new("https://example.org/rivers", "Rivers"),
            weft_scripted_llm::SearchResult::new("https://example.org/silt", "Silt"),
        ],
    }))
    .await
    .expect("server");
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-search")),
        anthropic_base_url: server.root_url(),
        anthropic_api_key: Some(Secret::new("sk-ant-search")),
        ..ProviderSettings::default()
    };
    let engine = Engine::new(
        LlmClients::new(settings),
        Store::open(&dir.path().join("runs.db")).expect("store"),
    );
    for model in ["openai/gpt-4o-search-preview", "anthropic/claude-sonnet-4"] {
        let flow = Flow::from_value(
            json!({"nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "Why do rivers meander?"}},
                {"id": "search", "type": "agent", "data": {"model": model, "tools": {"web_search": true}}},
            ], "edges": [{"id": "a", "source": "start", "target": "search"}]}),
            "test",
        )
        .expect("flow");
        let outcome = engine
            .start(flow, RunOptions::default())
            .await
            .expect("runs");
        assert_eq!(
            outcome.status,
            RunStatus::Completed,
            "{model}: {:?}",
            outcome.error
        );
        assert_eq!(
            outcome.result,
            Some(json!("Rivers meander through erosion.").into()),
            "{model}"
        );
        let record = engine
            .store()
            .node_outputs(&outcome.run_id)
            .expect("outputs")
            .into_iter()
            .find(|record| record.node_id == "search")
            .expect("stored");
        let urls: Vec<&str> = record.metadata.as_ref().expect("metadata")["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .filter_map(|source| source["url"].as_str())
            .collect();
        assert_eq!(
            urls,
            ["https://example.org/rivers", "https://example.org/silt"],
            "{model}"
        );
        let events = engine.store().events(&outcome.run_id).expect("events");
        assert!(
            events.iter().any(|event| event.content
                == "web sources: https://example.org/rivers https://example.org/silt"),
            "{model}: sources are logged"
        );
    }
    let requests = server.requests();
    assert!(
        requests[0].body.get("web_search_options").is_some(),
        "OpenAI's search is asked for"
    );
    let tools = requests[1].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tools.iter().any(|tool| tool["name"] == "web_search"),
        "Anthropic's search tool is offered"
    );

    // Ollama has no web search: refused before the run starts.
    let flow = Flow::from_value(
        json!({"nodes": [
            {"id": "start", "type": "start"},
            {"id": "search", "type": "agent", "data": {"model": "ollama/llama3.2", "tools": {"web_search": true}}},
        ], "edges": [{"id": "a", "source": "start", "target": "search"}]}),
        "test",
    )
    .expect("flow");
    match engine.start(flow, RunOptions::default()).await {
        Err(weft_engine::RunError::Invalid { problems }) => {
            assert_eq!(
                problems[0].to_string(),
                "node search: error: tools.web_search: provider ollama has no web search"
            );
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn keys_nobody_reads_are_warnings_naming_the_nearest_field() {
    let flow = Flow::from_value(
        json!({"version": 1, "name": "typos",
               "settings": {"maxNodeVisit": 3, "budgett": {"usd": 1}},
               "nodes": [{"id": "start", "type": "start", "data": {}},
                         {"id": "a", "type": "agent", "data": {
                             "model": "openai:gpt-4o", "systemPromt": "Be brief.",
                             "fallbakModels": ["openai:gpt-4o-mini"],
                             "tools": {"web_serch": true}, "retry": {"maxAttempt": 2}}}],
               "edges": [{"id": "e", "source": "start", "target": "a"}]}),
        "typos",
    )
    .expect("loads");
    let warnings: Vec<String> = validate(&flow, None)
        .iter()
        .filter(|problem| problem.code == weft_nodes::ProblemCode::UnknownField)
        .map(|problem| {
            assert!(!problem.is_error(), "{problem}");
            problem.to_string()
        })
        .collect();
    let expected = [
        "`settings.maxNodeVisit` is not a field of the flow's settings (did you mean `settings.maxNodeVisits`?)",
        // Fields added since (settings.budget, fallbackModels) are suggested like any other.
        "`settings.budgett` is not a field of the flow's settings (did you mean `settings.budget`?)",
        "node a: warning: `systemPromt` is not a field of `agent` nodes (did you mean `systemPrompt`?); it is ignored",
        "node a: warning: `fallbakModels` is not a field of `agent` nodes (did you mean `fallbackModels`?)",
        "node a: warning: `tools.web_serch` is not a field of `agent` nodes (did you mean `tools.web_search`?)",
        "node a: warning: `retry.maxAttempt` is not a field of `agent` nodes (did you mean `retry.maxAttempts`?)",
    ];
    for line in expected {
        assert!(
            warnings.iter().any(|warning| warning.contains(line)),
            "missing {line:?} in {warnings:#?}"
        );
    }
    assert_eq!(warnings.len(), expected.len(), "{warnings:#?}");

    // The example flows use only keys Weft reads.
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
    for entry in std::fs::read_dir(&folder).expect("flows folder") {
        let path = entry.expect("entry").path();
        let name = path.display().to_string();
        if !name.ends_with(".json") || name.ends_with(".tests.json") || name.ends_with(".pins.json")
        {
            continue;
        }
        let Ok(flow) = Flow::load(&path) else {
            continue;
        };
        let unknown: Vec<String> = validate(&flow, Some(&path))
            .iter()
            .filter(|problem| problem.code == weft_nodes::ProblemCode::UnknownField)
            .map(ToString::to_string)
            .collect();
        assert!(unknown.is_empty(), "{name}: {unknown:#?}");
    }
}
