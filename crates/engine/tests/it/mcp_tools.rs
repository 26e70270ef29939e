//! Agents calling tools of real MCP servers (server-everything, and tests/mcp/misbehaving.mjs)
//! in runs of the engine: the events, what the store keeps, a failed server by the agent's
//! error rules, and tool results given back from the record to a continued run and a replay
//! without calling the tool again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_engine::{Engine, ResumeOptions, RunOptions};
use weft_event::{EventType, RunEvent, RunStatus};
use weft_flow::Flow;
use weft_providers::{LlmClients, ProviderSettings, Secret};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, ToolCall};
use weft_store::Store;

fn servers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/.bin/mcp-server-everything").exists(),
        "the MCP test servers are not installed: run scripts/setup-mcp.sh"
    );
    dir
}

fn everything() -> Value {
    json!({
        "command": "node",
        "args": [servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"],
    })
}

/// The misbehaving server in mode `count`, counting its calls in `count_file`.
fn counting(count_file: &Path) -> Value {
    json!({
        "command": "node",
        "args": [servers_dir().join("misbehaving.mjs"), "count"],
        "env": {"WEFT_MCP_COUNT_FILE": count_file},
    })
}

fn engine(server: &ScriptedLlm, db: &Path) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-mcp")),
        max_attempts: 1,
        read_timeout: Duration::from_secs(20),
        ..ProviderSettings::default()
    };
    Engine::new(LlmClients::new(settings), Store::open(db).expect("store"))
}

/// start → research (an agent with `tools`) → end, with `servers` as settings.mcpServers.
fn research_flow(servers: Value, tools: Value) -> Flow {
    Flow::from_value(
        json!({
            "settings": {"mcpServers": servers},
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "rivers"}},
                {"id": "research", "type": "agent", "data": {"model": "m", "userPrompt": "research {{ PREVIOUS_OUTPUT }}", "tools": {"mcp": tools}}},
                {"id": "end", "type": "output"}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "research"},
                {"id": "b", "source": "research", "target": "end"}
            ]
        }),
        "research",
    )
    .expect("flow")
}

/// The model calls `calls` first, then answers with what the tools said (echoing the
/// conversation's last message, a tool result).
fn calling(calls: Vec<ToolCall>) -> Script {
    Script::default()
        .with_rule(Rule::on(
            Match {
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::ToolCalls { calls, delay_ms: 0 },
        ))
        .with_rule(Rule::on(
            Match {
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::Slow {
                delay_ms: 300,
                content: "the tools answered".into(),
            },
        ))
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: Some(id.into()),
        name: name.into(),
        arguments,
    }
}

fn of_type(events: &[RunEvent], kind: EventType) -> Vec<Value> {
    events
        .iter()
        .filter(|event| event.kind == kind)
        .map(|event| serde_json::from_str(&event.content).expect("JSON content"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_calls_mcp_tools_and_the_run_keeps_their_results() {
    let script = calling(vec![
        call("c1", "everything__echo", json!({"message": "rivers"})),
        call("c2", "everything__get-sum", json!({"a": 2, "b": 3})),
    ]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(&server, &dir.path().join("runs.db"));
    let flow = research_flow(
        json!({"everything": everything()}),
        json!(["everything/echo", "everything/get-sum"]),
    );
    let outcome = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("the tools answered").into()));

    let requests = server.requests();
    let conversation = requests[1].conversation();
    let tool_results: Vec<&str> = conversation
        .iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(tool_results[0], "Echo: rivers");
    assert!(tool_results[1].contains('5'), "{tool_results:?}");

    let events = engine.store().events(&outcome.run_id).expect("events");
    let called = of_type(&events, EventType::ToolCall);
    assert_eq!(
        called
            .iter()
            .map(|call| (
                call["server"].clone(),
                call["tool"].clone(),
                call["callId"].clone()
            ))
            .collect::<Vec<_>>(),
        [
            (json!("everything"), json!("echo"), json!("c1")),
            (json!("everything"), json!("get-sum"), json!("c2"))
        ]
    );
    let results = of_type(&events, EventType::ToolResult);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|result| result["isError"] == false));
    assert!(
        results
            .iter()
            .any(|result| result["content"] == "Echo: rivers")
    );

    // The store keeps the list of tools and both results beside the two LLM calls; the run's
    // cost counts the LLM calls only.
    let calls = engine.store().llm_calls(&outcome.run_id).expect("calls");
    let tools: Vec<&str> = calls
        .iter()
        .filter_map(|call| call.tool.as_deref())
        .collect();
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools.contains(&"everything") && tools.contains(&"everything/echo"));
    assert_eq!(
        engine
            .store()
            .call_usage(&outcome.run_id)
            .expect("usage")
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_takes_tool_results_from_the_record_and_needs_no_server() {
    let dir = tempfile::tempdir().expect("dir");
    let count_file = dir.path().join("calls.txt");
    let script = calling(vec![call("c1", "counter__work", json!({"task": "a"}))]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));
    let recorded = engine
        .start(
            research_flow(
                json!({"counter": counting(&count_file)}),
                json!(["counter"]),
            ),
            RunOptions::default(),
        )
        .await
        .expect("runs");
    assert_eq!(
        recorded.status,
        RunStatus::Completed,
        "{:?}",
        recorded.error
    );
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .expect("count")
            .lines()
            .count(),
        1
    );

    // The same flow with a server that cannot even start: a replay does not need it.
    let gone = json!({"counter": {"command": "weft-no-such-mcp-server"}});
    let replay = engine
        .start(
            research_flow(gone, json!(["counter"])),
            RunOptions {
                replay: Some(recorded.run_id.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("replays");
    assert_eq!(replay.status, RunStatus::Completed, "{:?}", replay.error);
    assert_eq!(replay.result, recorded.result);
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .expect("count")
            .lines()
            .count(),
        1,
        "the tool ran once"
    );
    let events = engine.store().events(&replay.run_id).expect("events");
    let replayed: Vec<&str> = events
        .iter()
        .filter(|event| {
            event.kind == EventType::LogicCheck && event.content.contains("MCP server `counter`")
        })
        .map(|event| event.content.as_str())
        .collect();
    assert_eq!(replayed.len(), 2, "the list and the call: {replayed:?}");
    assert_eq!(
        of_type(&events, EventType::ToolResult)[0]["content"],
        "done 1"
    );
}

#[test]
fn a_run_interrupted_after_a_tool_call_does_not_call_it_again() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let count_file = dir.path().join("calls.txt");
    let db = dir.path().join("runs.db");
    // The answer after the tool call is slow: the run is killed while it waits.
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::ToolCalls {
                calls: vec![call("c1", "counter__work", json!({"task": "a"}))],
                delay_ms: 0,
            },
        ))
        .with_rule(Rule::on(
            Match {
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::Slow {
                delay_ms: 1_500,
                content: "finished".into(),
            },
        ));
    let server = support
        .block_on(ScriptedLlm::start(script))
        .expect("server");
    let flow = || {
        research_flow(
            json!({"counter": counting(&count_file)}),
            json!(["counter/work"]),
        )
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let killed = engine(&server, &db);
    let handle = runtime
        .block_on(killed.spawn(flow(), RunOptions::default()))
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.requests().len() < 2 {
        assert!(Instant::now() < deadline, "the run never called the tool");
        std::thread::sleep(Duration::from_millis(10));
    }
    let run_id = handle.run_id.clone();
    runtime.shutdown_background();
    // Dropping the engine stops its server (this process's other tests keep theirs).
    drop(killed);
    // Its lease now belongs to a process that no longer exists, as after a kill.
    let conn = rusqlite::Connection::open(&db).expect("sqlite");
    conn.execute(
        "UPDATE runs SET lease_owner = lease_owner || '0' WHERE status = 'running'",
        [],
    )
    .expect("orphan");

    let engine = engine(&server, &db);
    let outcome = support
        .block_on(engine.retry(&run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("finished").into()));
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .expect("count")
            .lines()
            .count(),
        1,
        "the tool's result came from the record"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_goes_to_the_model_or_by_the_agents_error_rules() {
    let dir = tempfile::tempdir().expect("dir");
    let script = calling(vec![call("c1", "flaky__work", json!({}))]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));

    // A server that crashes mid-call: the model is told, and the run goes on.
    let crash = json!({"flaky": {"command": "node", "args": [servers_dir().join("misbehaving.mjs"), "crash"]}});
    let outcome = engine
        .start(
            research_flow(crash, json!(["flaky"])),
            RunOptions::default(),
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let told = server.requests()[1].conversation();
    assert!(
        told.iter().any(|(role, text)| role == "tool"
            && text.starts_with("error: MCP server `flaky`: the server stopped")),
        "{told:?}"
    );
    let events = engine.store().events(&outcome.run_id).expect("events");
    let failed = of_type(&events, EventType::ToolError);
    assert_eq!(failed[0]["server"], "flaky");
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("segmentation fault")),
        "{failed:?}"
    );

    // A server that cannot start: the step fails with kind `tool`, taken by its error edge.
    let flow = Flow::from_value(
        json!({
            "settings": {"mcpServers": {"flaky": {"command": "weft-no-such-mcp-server"}}},
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "rivers"}},
                {"id": "research", "type": "agent", "data": {"model": "m", "tools": {"mcp": ["flaky"]}}},
                {"id": "fallback", "type": "template", "data": {"template": "fell back: {{ kind }}: {{ message }}"}},
                {"id": "end", "type": "output"}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "research"},
                {"id": "b", "source": "research", "target": "end"},
                {"id": "c", "source": "research", "sourceHandle": "error", "target": "fallback"},
                {"id": "d", "source": "fallback", "target": "end"}
            ]
        }),
        "fallback",
    )
    .expect("flow");
    let asked = server.requests().len();
    let outcome = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let result = outcome.result.expect("a result");
    let text = result.as_str().expect("text");
    assert!(
        text.starts_with("fell back: tool: tools.mcp: MCP server `flaky`: could not start `weft-no-such-mcp-server`"),
        "{text}"
    );
    assert_eq!(server.requests().len(), asked, "the model was not asked");
}

#[test]
fn validation_names_bad_servers_and_entries_naming_no_server() {
    let flow = Flow::from_value(
        json!({
            "settings": {"mcpServers": {"files": {"command": "x"}, "both": {"command": "x", "url": "http://h/mcp"}}},
            "nodes": [
                {"id": "start", "type": "start", "data": {}},
                {"id": "a", "type": "agent", "data": {"model": "m", "tools": {"mcp": ["files/read", "tracker", "/x"]}}}
            ],
            "edges": [{"id": "e", "source": "start", "target": "a"}]
        }),
        "invalid",
    )
    .expect("loads");
    let problems: Vec<String> = weft_nodes::validate(&flow, None)
        .iter()
        .filter(|problem| problem.code == weft_nodes::ProblemCode::McpTool)
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        problems,
        [
            "flow: error: settings.mcpServers.both: give `command` (a program started over stdio) or `url` (a streamable HTTP server), not both",
            "node a: error: tools.mcp: `tracker` names server `tracker`, which settings.mcpServers does not define (it has: both, files)",
            "node a: error: tools.mcp: `/x` is not `server` or `server/tool`",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_a_call_the_recording_lacks_fails_the_step_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let count_file = dir.path().join("calls.txt");
    let script = calling(vec![call("c1", "counter__work", json!({"task": "a"}))]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));
    let flow = || {
        research_flow(
            json!({"counter": counting(&count_file)}),
            json!(["counter"]),
        )
    };
    let recorded = engine
        .start(flow(), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(
        recorded.status,
        RunStatus::Completed,
        "{:?}",
        recorded.error
    );
    let mut calls = engine.store().llm_calls(&recorded.run_id).expect("calls");

    // Offline from the whole recording: no server, no tool call.
    let offline = |calls: Vec<weft_store::RecordedCall>| RunOptions {
        recorded: Some(weft_engine::RecordedAnswers {
            calls,
            missing: "record the case again (weft test --record)".into(),
        }),
        ..RunOptions::default()
    };
    let outcome = engine
        .start(flow(), offline(calls.clone()))
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .expect("count")
            .lines()
            .count(),
        1
    );

    // A recording whose tool call was made with other arguments.
    let tool_call = calls
        .iter_mut()
        .find(|call| call.tool.as_deref() == Some("counter/work"))
        .expect("the tool call is recorded");
    tool_call.request_hash = "0".repeat(64);
    let outcome = engine.start(flow(), offline(calls)).await.expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.expect("an error");
    assert!(
        error.contains("MCP server `counter`: the call of `work` has no recorded result")
            && error.contains("differs from the one recorded: record the case again"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .expect("count")
            .lines()
            .count(),
        1
    );
}

/// The research flow whose agent needs a person's approval for `counter/work`.
fn approved_flow(count_file: &Path) -> Flow {
    let mut flow = research_flow(json!({"counter": counting(count_file)}), json!(["counter"]));
    let agent = flow
        .nodes
        .iter_mut()
        .find(|node| node.id == "research")
        .expect("agent");
    agent
        .data
        .insert("approveTools".into(), json!(["counter/*"]));
    flow
}

fn calls_made(count_file: &Path) -> Vec<Value> {
    std::fs::read_to_string(count_file)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_to_approve_pauses_the_run_and_goes_as_the_person_decides() {
    let dir = tempfile::tempdir().expect("dir");
    let count_file = dir.path().join("calls.txt");
    let script = calling(vec![call(
        "c1",
        "counter__work",
        json!({"task": "delete everything"}),
    )]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));

    let paused = engine
        .start(approved_flow(&count_file), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    let waiting = paused.waiting.clone().expect("waits");
    assert_eq!(waiting.node_id, "research/counter/work");
    assert!(
        waiting.message.contains("Allow `counter/work`"),
        "{}",
        waiting.message
    );
    assert!(
        waiting.message.contains("delete everything"),
        "{}",
        waiting.message
    );
    assert_eq!(
        waiting
            .fields
            .iter()
            .map(|field| field.name.as_str())
            .collect::<Vec<_>>(),
        ["task"]
    );
    assert_eq!(waiting.input, json!({"task": "delete everything"}));
    assert!(
        calls_made(&count_file).is_empty(),
        "not called before it is approved"
    );
    let events = engine.store().events(&paused.run_id).expect("events");
    assert!(
        events
            .iter()
            .any(|event| event.kind == EventType::WaitInput
                && event.content.contains("counter/work")),
        "wait_input names the tool"
    );

    // Approved with an edited argument: the tool runs with it, the model is not asked again
    // for what it had answered.
    let decision = weft_nodes::Decision {
        fields: [("task".to_string(), json!("delete nothing"))].into(),
        ..weft_nodes::Decision::parse("approve", "").expect("decision")
    };
    let done = engine
        .resume(&paused.run_id, decision, ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(calls_made(&count_file), [json!({"task": "delete nothing"})]);
    assert_eq!(
        server.requests().len(),
        2,
        "the first answer came from the record"
    );
    let told = server.requests()[1].conversation();
    assert!(
        told.contains(&("tool".to_string(), "done 1".to_string())),
        "{told:?}"
    );

    // Rejected: the model is told, and the tool is never called.
    let paused = engine
        .start(approved_flow(&count_file), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    let rejected = weft_nodes::Decision::parse("reject", "not on a Friday")
        .expect("decision")
        .by(Some("ada".into()));
    let done = engine
        .resume(&paused.run_id, rejected, ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        calls_made(&count_file).len(),
        1,
        "the rejected call was not made"
    );
    let told = server.requests().last().expect("asked").conversation();
    assert!(
        told.iter().any(|(role, text)| role == "tool"
            && text == "error: a person refused this call by ada: not on a Friday"),
        "{told:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_breakpoint_stops_before_the_call_and_takes_replaced_arguments() {
    let dir = tempfile::tempdir().expect("dir");
    let count_file = dir.path().join("calls.txt");
    let script = calling(vec![call(
        "c1",
        "counter__work",
        json!({"task": "as the model said"}),
    )]);
    let server = ScriptedLlm::start(script).await.expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));
    let flow = || {
        research_flow(
            json!({"counter": counting(&count_file)}),
            json!(["counter"]),
        )
    };
    let options = || RunOptions {
        breakpoints: vec![
            weft_engine::breakpoints::Breakpoint::parse("research:tool").expect("parses"),
        ],
        ..RunOptions::default()
    };

    let stopped = engine.start(flow(), options()).await.expect("runs");
    assert_eq!(stopped.status, RunStatus::Paused, "{:?}", stopped.error);
    let waiting = stopped.waiting.clone().expect("waits");
    assert_eq!(
        waiting.breakpoint,
        Some(weft_engine::breakpoints::BreakWhen::Tool)
    );
    assert_eq!(waiting.node_id, "research/counter/work");
    assert_eq!(waiting.input, json!({"task": "as the model said"}));
    assert!(
        waiting
            .message
            .starts_with("breakpoint before the tool call `counter/work`"),
        "{}",
        waiting.message
    );
    assert!(calls_made(&count_file).is_empty());

    // A decision is refused: it is continued, not decided.
    let refused = engine
        .resume(
            &stopped.run_id,
            weft_nodes::Decision::parse("approve", "").expect("decision"),
            ResumeOptions::default(),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let not_an_object = engine
        .continue_run(
            &stopped.run_id,
            weft_engine::Continue {
                set: Some(json!("text")),
                ..weft_engine::Continue::default()
            },
            ResumeOptions::default(),
        )
        .await;
    assert!(
        not_an_object
            .as_ref()
            .is_err_and(|error| error.to_string().contains("must be a JSON object")),
        "{not_an_object:?}"
    );

    let done = engine
        .continue_run(
            &stopped.run_id,
            weft_engine::Continue {
                set: Some(json!({"task": "as the person said"})),
                ..weft_engine::Continue::default()
            },
            ResumeOptions::default(),
        )
        .await
        .expect("continues");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        calls_made(&count_file),
        [json!({"task": "as the person said"})]
    );
    assert_eq!(server.requests().len(), 2, "the model was not asked again");
    let events = engine.store().events(&stopped.run_id).expect("events");
    assert!(
        events
            .iter()
            .any(|event| event.kind == EventType::LogicCheck
                && event.content.contains("replaced at the breakpoint"))
    );

    // A tool breakpoint is for agents.
    let problems = weft_engine::breakpoints::check_breakpoints(
        &flow(),
        &[weft_engine::breakpoints::Breakpoint::parse("start:tool").expect("parses")],
    );
    assert!(
        problems[0].contains("stops before an agent's tool calls"),
        "{problems:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tools_offered_under_one_name_fail_the_step_naming_both() {
    let dir = tempfile::tempdir().expect("dir");
    let server = ScriptedLlm::start(calling(Vec::new()))
        .await
        .expect("server");
    let engine = engine(&server, &dir.path().join("runs.db"));
    let mut twins = counting(&dir.path().join("calls.txt"));
    twins["env"]["WEFT_MCP_TOOLS"] = json!("read.file,read_file");
    let outcome = engine
        .start(
            research_flow(json!({"twins": twins}), json!(["twins"])),
            RunOptions::default(),
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.expect("an error");
    assert!(
        error.contains("`twins/read_file` and `twins/read.file` are both offered to the model as `twins__read_file`"),
        "{error}"
    );
    assert!(server.requests().is_empty(), "the model is not asked");
}
