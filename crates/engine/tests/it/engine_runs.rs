//! Runs through the engine's public API against the scripted LLM server, asserting on what
//! was sent to the provider as well as on what came back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_nodes::Decision;
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_engine::{Engine, Entry, ResumeOptions, RunOptions};

use weft_event::{EventType, RunEvent, RunStatus};

use weft_flow::Flow;

use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::{Store, StoreError};

const KEY: &str = "sk-engine-test-key";

fn repo_flow(name: &str) -> Flow {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../flows")
        .join(name);
    Flow::load(&path).expect("example flow loads")
}

fn engine_for(server: &ScriptedLlm, db: &Path) -> Engine {
    engine_with(settings_for(server), db)
}

/// Settings that reach `server`, with short backoffs.
fn settings_for(server: &ScriptedLlm) -> ProviderSettings {
    ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new(KEY)),
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..ProviderSettings::default()
    }
}

fn engine_with(settings: ProviderSettings, db: &Path) -> Engine {
    Engine::new(
        LlmClients::new(settings),
        Store::open(db).expect("store opens"),
    )
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    (dir, path)
}

fn flow_from(value: Value) -> Flow {
    Flow::from_value(value, "test").expect("test flow")
}

fn collector() -> (Arc<Mutex<Vec<RunEvent>>>, weft_event::EventListener) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let listener: weft_event::EventListener = Arc::new(move |event: &RunEvent| {
        sink.lock().expect("events lock").push(event.clone());
    });
    (events, listener)
}

fn message(body: &Value, index: usize) -> (&str, &str) {
    let message = &body["messages"][index];
    (
        message["role"].as_str().unwrap_or_default(),
        message["content"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn agent_requests_carry_templated_prompts_effort_model_and_key() {
    let server = ScriptedLlm::start(
        Script::default()
            .with_rule(Rule::on(
                Match {
                    last_user_contains: Some("Ticket:".into()),
                    ..Match::default()
                },
                Reply::text("refund"),
            ))
            .with_fallback(Reply::text("Your refund is on its way.")),
    )
    .await
    .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let (events, listener) = collector();
    let outcome = engine
        .start(
            repo_flow("triage.json"),
            RunOptions {
                input: Some("Parcel lost, refund please".into()),
                decisions: HashMap::from([(
                    "review".into(),
                    Decision::parse("approve", "").expect("decision"),
                )]),
                on_event: Some(listener),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.result,
        Some(json!("SENT: Your refund is on its way.").into())
    );

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "classifier and drafter each call the model once"
    );
    let classify = &requests[0].body;
    assert_eq!(classify["model"], "gpt-4o-mini");
    assert_eq!(classify["reasoning_effort"], "low");
    assert_eq!(classify["stream"], true);
    assert_eq!(
        message(classify, 0),
        (
            "system",
            "Classify the support ticket. Answer with one word: refund or other."
        )
    );
    assert_eq!(
        message(classify, 1),
        ("user", "Ticket: Parcel lost, refund please")
    );
    assert!(
        classify.get("tools").is_none(),
        "an agent without subagents offers no tools"
    );
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        message(&requests[1].body, 1).1,
        "Write a reply confirming a refund for this ticket: Parcel lost, refund please"
    );

    // The listener saw the same ordered stream the store holds.
    let seen = events.lock().expect("events").clone();
    let stored = engine
        .store()
        .events(&outcome.run_id)
        .expect("stored events");
    assert_eq!(seen, stored);
    let deltas: String = seen
        .iter()
        .filter(|event| {
            event.kind == EventType::LlmDelta && event.node_id.as_deref() == Some("draft")
        })
        .map(|event| event.content.as_str())
        .collect();
    assert_eq!(
        deltas, "Your refund is on its way.",
        "tokens stream as llm_delta events"
    );
    assert!(seen.iter().all(|event| !event.content.contains(KEY)));
}

#[tokio::test]
async fn subagents_are_offered_as_tools_and_their_answers_fed_back() {
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::ToolCalls {
                calls: vec![
                    weft_scripted_llm::ToolCall {
                        id: Some("call_a".into()),
                        name: "researcher".into(),
                        arguments: json!({"task": "facts about deltas"}),
                    },
                    weft_scripted_llm::ToolCall {
                        id: Some("call_b".into()),
                        name: "writer".into(),
                        arguments: json!({"task": "a line about deltas"}),
                    },
                ],
                delay_ms: 0,
            },
        ))
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::text("final answer"),
        ))
        .with_rule(Rule::on(
            Match {
                any_message_contains: Some("List three key facts".into()),
                ..Match::default()
            },
            Reply::echo("facts for: "),
        ))
        .with_fallback(Reply::status(
            500,
            json!({"error": {"message": "writer is down"}}),
        ));
    let server = ScriptedLlm::start(script).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let outcome = engine
        .start(repo_flow("team.json"), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("final answer").into()));

    let requests = server.requests();
    let lead_first = &requests[0].body;
    let tools = lead_first["tools"].as_array().expect("tools offered");
    let names: Vec<&str> = tools
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["researcher", "writer"]);
    assert_eq!(
        tools[0]["function"]["description"],
        "Finds three key facts about a topic."
    );
    assert_eq!(
        tools[0]["function"]["parameters"]["required"],
        json!(["task"])
    );

    let child = requests
        .iter()
        .find(|request| message(&request.body, 0).1 == "List three key facts, one per line.")
        .expect("researcher was called");
    assert_eq!(message(&child.body, 1), ("user", "facts about deltas"));
    assert!(child.body.get("tools").is_none());

    let lead_last = &requests.last().expect("lead answered").body;
    let tool_messages: Vec<&Value> = lead_last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 2);
    assert_eq!(tool_messages[0]["tool_call_id"], "call_a");
    assert_eq!(tool_messages[0]["content"], "facts for: facts about deltas");
    assert!(
        tool_messages[1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("writer is down"),
        "a failed subagent's error is the tool result: {}",
        tool_messages[1]["content"]
    );

    let events = engine.store().events(&outcome.run_id).expect("events");
    let of_type = |kind: EventType| -> Vec<Value> {
        events
            .iter()
            .filter(|event| event.kind == kind)
            .map(|event| serde_json::from_str(&event.content).expect("subagent events carry JSON"))
            .collect()
    };
    assert_eq!(of_type(EventType::SubagentCallStart).len(), 2);
    let ended = of_type(EventType::SubagentCallEnd);
    assert_eq!(ended[0]["child"], "researcher");
    assert_eq!(ended[0]["output"], "facts for: facts about deltas");
    let failed = of_type(EventType::SubagentCallError);
    assert_eq!(failed[0]["child"], "writer");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("HTTP 500")
    );
}

#[tokio::test]
async fn cancelling_a_run_stops_the_llm_call_and_stores_cancelled() {
    let server = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 30_000,
        content: "too late".into(),
    }))
    .await
    .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let outcome = engine
        .start(
            repo_flow("hello.json"),
            RunOptions {
                cancel,
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancel did not wait for the slow answer"
    );
    let record = engine.store().run(&outcome.run_id).expect("stored");
    assert_eq!(record.summary.status, RunStatus::Cancelled);
    let events = engine.store().events(&outcome.run_id).expect("events");
    let last = events.last().expect("events");
    assert_eq!(last.kind, EventType::RunEnd);
    assert!(last.content.contains("\"status\":\"cancelled\""));
}

#[tokio::test]
async fn a_paused_run_resumes_from_a_fresh_store_and_cannot_be_resumed_twice() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let run_id = {
        let engine = engine_for(&server, &db);
        let outcome = engine
            .start(repo_flow("offline.json"), RunOptions::default())
            .await
            .expect("runs");
        assert_eq!(outcome.status, RunStatus::Paused);
        let waiting = outcome.waiting.expect("waits");
        assert_eq!(waiting.node_id, "review");
        assert_eq!(
            waiting.message,
            "Ada asks for 120 EUR: parcel lost. Approve the refund?"
        );
        outcome.run_id
    };
    // A different engine and store on the same file, as another process would have.
    let engine = engine_for(&server, &db);
    let decision = Decision::parse("approved", "ok").expect("decision");
    let prefix = &run_id[..8];
    let outcome = engine
        .resume(prefix, decision.clone(), ResumeOptions::default())
        .await
        .expect("resumes by id prefix");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.result,
        Some(json!("Refunded 120 EUR to Ada.").into())
    );
    let outputs = engine.store().node_outputs(&run_id).expect("outputs");
    let review = outputs
        .iter()
        .find(|record| record.node_id == "review")
        .expect("review stored");
    let approval = review.approval.clone().expect("a decision");
    assert_eq!(
        (&approval["decision"], &approval["note"], &approval["by"]),
        (&json!("approve"), &json!("ok"), &json!("unknown"))
    );
    assert!(
        approval["at"].as_str().is_some_and(|at| at.ends_with('Z')),
        "{approval}"
    );

    match engine
        .resume(&run_id, decision.clone(), ResumeOptions::default())
        .await
    {
        Err(weft_engine::RunError::Store(StoreError::Finished { status, .. })) => {
            assert_eq!(status, RunStatus::Completed);
        }
        other => panic!("a finished run must be refused, got {other:?}"),
    }
    match engine
        .resume("no-such-run", decision, ResumeOptions::default())
        .await
    {
        Err(weft_engine::RunError::Store(StoreError::NoSuchRun(_))) => {}
        other => panic!("an unknown run must be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_run_can_start_at_any_node_with_earlier_outputs_seeded() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = repo_flow("offline.json");
    let seeded = json!({"customer": "Cy", "amount": 500, "summary": "Cy asks for 500 EUR"});
    let outcome = engine
        .start(
            flow,
            RunOptions {
                entry: Entry::Node {
                    node_id: "refunded".into(),
                    input: seeded.clone(),
                    outputs: HashMap::from([("summary".into(), seeded)]),
                    only: false,
                },
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.result,
        Some(json!("Refunded 500 EUR to Cy.").into())
    );
    let events = engine.store().events(&outcome.run_id).expect("events");
    let ran: Vec<&str> = events
        .iter()
        .filter(|event| event.kind == EventType::StepStart)
        .filter_map(|event| event.node_id.as_deref())
        .collect();
    assert_eq!(
        ran,
        ["refunded", "result"],
        "only the entry node and what follows it ran"
    );
}

#[tokio::test]
async fn keep_history_sends_the_conversation_again_on_a_revisit() {
    let server = ScriptedLlm::start(Script::always(Reply::echo("seen: ")))
        .await
        .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = flow_from(json!({
        "name": "loop with memory",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "one"}},
            {"id": "chat", "type": "agent", "data": {"model": "m", "keepHistory": true, "systemPrompt": "Be brief."}},
            {"id": "again", "type": "if", "data": {"conditions": [{"operator": "not_contains", "value": "seen: seen:"}]}},
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "chat"},
            {"id": "b", "source": "chat", "target": "again"},
            {"id": "c", "source": "again", "target": "chat", "sourceHandle": "condition-0"},
        ]
    }));
    let outcome = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let roles: Vec<&str> = requests[1].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(message(&requests[1].body, 2).1, "seen: one");
}

#[tokio::test]
async fn a_missing_model_or_key_is_a_clear_error_naming_the_setting() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = flow_from(json!({
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "ask", "type": "agent", "data": {"model": ""}},
        ],
        "edges": [{"id": "a", "source": "start", "target": "ask"}]
    }));
    let outcome = engine
        .start(flow.clone(), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or("")
            .contains("WEFT_DEFAULT_MODEL"),
        "{:?}",
        outcome.error
    );

    // No key and the default OpenAI address: the error names OPENAI_API_KEY.
    let store = Store::open(&db).expect("store");
    let keyless = Engine::new(
        LlmClients::new(ProviderSettings {
            default_model: Some("gpt-4o-mini".into()),
            ..ProviderSettings::default()
        }),
        store,
    );
    let outcome = keyless
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or("")
            .contains("OPENAI_API_KEY"),
        "{:?}",
        outcome.error
    );
    let events = keyless.store().events(&outcome.run_id).expect("events");
    assert!(events.iter().any(|event| event.kind == EventType::LlmError));
}

#[tokio::test]
async fn a_provider_error_that_echoes_the_key_is_redacted_everywhere() {
    let server = ScriptedLlm::start(Script::always(Reply::status(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
    )))
    .await
    .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let outcome = engine
        .start(repo_flow("hello.json"), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("HTTP 401") && error.contains("[redacted]"),
        "{error}"
    );
    assert!(!error.contains(KEY));
    let events = engine.store().events(&outcome.run_id).expect("events");
    assert!(events.iter().all(|event| !event.content.contains(KEY)));
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn a_node_reached_by_two_branches_runs_once_for_each() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = flow_from(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "x"}},
            {"id": "left", "type": "template", "data": {"template": "L"}},
            {"id": "right", "type": "template", "data": {"template": "R"}},
            {"id": "both", "type": "template", "data": {"template": "got {{ PREVIOUS_OUTPUT }}"}},
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "left"},
            {"id": "b", "source": "start", "target": "right"},
            {"id": "c", "source": "left", "target": "both"},
            {"id": "d", "source": "right", "target": "both"},
        ]
    }));
    let outcome = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed);
    let events = engine.store().events(&outcome.run_id).expect("events");
    let mut ends: Vec<&str> = events
        .iter()
        .filter(|event| {
            event.kind == EventType::StepEnd && event.node_id.as_deref() == Some("both")
        })
        .map(|event| event.content.as_str())
        .collect();
    ends.sort_unstable();
    assert_eq!(ends, ["got L", "got R"]);
    let visits = engine
        .store()
        .node_outputs(&outcome.run_id)
        .expect("outputs")
        .into_iter()
        .find(|record| record.node_id == "both")
        .expect("both stored")
        .visits;
    assert_eq!(visits, 2);
}

/// The step_start node ids of a run, in order.
fn started_nodes(engine: &Engine, run_id: &str) -> Vec<String> {
    engine
        .store()
        .events(run_id)
        .expect("events")
        .into_iter()
        .filter(|event| event.kind == EventType::StepStart)
        .filter_map(|event| event.node_id.as_deref().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn run_from_here_and_run_this_node_reuse_an_earlier_runs_outputs() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let first = engine
        .start(
            repo_flow("offline.json"),
            RunOptions {
                decisions: HashMap::from([(
                    "review".into(),
                    Decision::parse("approve", "").expect("decision"),
                )]),
                ..RunOptions::default()
            },
        )
        .await
        .expect("first run");
    assert_eq!(first.status, RunStatus::Completed);

    // The person edits `refunded` and re-runs from it: the nodes before it do not run again,
    // and its input is what `review` passed on in the first run.
    let mut edited = repo_flow("offline.json");
    let refunded = edited
        .nodes
        .iter_mut()
        .find(|node| node.id == "refunded")
        .expect("refunded node");
    refunded.data.insert(
        "template".into(),
        json!("Paid {{ amount }} EUR back to {{ customer }}."),
    );
    let entry = engine
        .entry_after(&first.run_id, &edited, "refunded", false)
        .await
        .expect("entry");
    let from_here = engine
        .start(
            edited.clone(),
            RunOptions {
                entry,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run from here");
    assert_eq!(
        from_here.result,
        Some(json!("Paid 120 EUR back to Ada.").into())
    );
    assert_eq!(
        started_nodes(&engine, &from_here.run_id),
        ["refunded", "result"]
    );

    // "Run this node": only `refunded` runs.
    let entry = engine
        .entry_after(&first.run_id, &edited, "refunded", true)
        .await
        .expect("entry");
    let this_node = engine
        .start(
            edited,
            RunOptions {
                entry,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run this node");
    assert_eq!(this_node.status, RunStatus::Completed);
    assert_eq!(
        this_node.result,
        Some(json!("Paid 120 EUR back to Ada.").into())
    );
    assert_eq!(started_nodes(&engine, &this_node.run_id), ["refunded"]);
}

#[tokio::test]
async fn run_from_here_is_refused_where_nothing_before_the_node_has_run() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = repo_flow("offline.json");
    // Without a decision the run pauses at `review`: nothing has reached `refunded` yet.
    let paused = engine
        .start(flow.clone(), RunOptions::default())
        .await
        .expect("run");
    assert_eq!(paused.status, RunStatus::Paused);
    match engine
        .entry_after(&paused.run_id, &flow, "refunded", false)
        .await
    {
        Err(error @ weft_engine::RunError::NoEarlierOutput { .. }) => {
            assert!(error.to_string().contains("`refunded`"), "{error}");
        }
        other => panic!("expected NoEarlierOutput, got {other:?}"),
    }
    match engine
        .entry_after(&paused.run_id, &flow, "nope", false)
        .await
    {
        Err(weft_engine::RunError::NoSuchEntry(id)) => assert_eq!(id, "nope"),
        other => panic!("expected NoSuchEntry, got {other:?}"),
    }
}

/// A host checks a flow once, shows its warnings, and runs what it checked; a flow with an
/// error is refused with every problem, before any run exists.
#[tokio::test]
async fn a_flow_checked_by_the_host_runs_with_its_warnings_known_and_an_invalid_one_never_starts() {
    let server = ScriptedLlm::start(Script::default()).await.expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let settings = ProviderSettings::default();
    // An unreachable `template` node: a warning, not an error.
    let with_warning = flow_from(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "hi"}},
            {"id": "out", "type": "output"},
            {"id": "stray", "type": "template", "data": {"template": "x"}}
        ],
        "edges": [{"id": "e", "source": "start", "target": "out"}]
    }));
    let checked = weft_nodes::check_for_run(with_warning, None, &settings).expect("no errors");
    let warned: Vec<&str> = checked
        .warnings()
        .iter()
        .filter_map(|problem| problem.node_id.as_deref())
        .collect();
    assert_eq!(warned, ["stray"], "{:?}", checked.warnings());
    let outcome = engine
        .start(checked, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.result, Some(json!("hi").into()));

    let broken = flow_from(json!({
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "t", "type": "template", "data": {"template": "{{ unclosed"}}
        ],
        "edges": [{"id": "e", "source": "start", "target": "t"}]
    }));
    let problems = weft_nodes::check_for_run(broken, None, &settings).expect_err("an error");
    assert!(
        problems
            .iter()
            .any(|problem| problem.is_error() && problem.node_id.as_deref() == Some("t")),
        "{problems:?}"
    );
    assert_eq!(
        engine.store().list_runs(10).expect("runs").len(),
        1,
        "only the first ran"
    );
}

#[tokio::test]
async fn branches_beyond_the_request_limit_wait_for_a_turn() {
    let server = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 1_000,
        content: "done".into(),
    }))
    .await
    .expect("server");
    let (_dir, db) = temp_db();
    let settings = ProviderSettings {
        max_requests: 2,
        ..settings_for(&server)
    };
    let engine = engine_with(settings, &db);
    let branches: Vec<Value> = (0..4)
        .map(|index| json!({"id": format!("a{index}"), "type": "agent", "data": {"model": "m"}}))
        .collect();
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    nodes.extend(branches);
    let edges: Vec<Value> = (0..4)
        .map(|index| json!({"id": format!("e{index}"), "source": "start", "target": format!("a{index}")}))
        .collect();
    let flow = flow_from(json!({"nodes": nodes, "edges": edges}));
    let run = tokio::spawn(async move { engine.start(flow, RunOptions::default()).await });

    // Two requests arrive; the other two branches wait while those are answered (1 s each).
    let waited = std::time::Instant::now();
    while server.requests().len() < 2 {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the first requests never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.requests().len(),
        2,
        "more requests than the limit were sent at once"
    );

    let outcome = run.await.expect("joined").expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(server.requests().len(), 4, "every branch got its turn");
}

/// What a host may drive from one thread: only a flow in which no two steps can be going at once.
#[test]
fn a_flow_runs_one_step_at_a_time_only_when_nothing_in_it_branches() {
    let settings = ProviderSettings::default();
    let one_at_a_time = |nodes: Value, edges: Value| {
        let flow = flow_from(json!({ "version": 1, "nodes": nodes, "edges": edges }));
        weft_nodes::check_for_run(flow, None, &settings)
            .expect("valid")
            .runs_one_step_at_a_time()
    };
    let edge = |id: &str, source: &str, target: &str| json!({"id": id, "source": source, "target": target});
    let start = json!({"id": "start", "type": "start"});
    let template = |id: &str| json!({"id": id, "type": "template", "data": {"template": "x"}});

    // A chain, whatever its kinds.
    assert!(one_at_a_time(
        json!([start, template("a"), {"id": "c", "type": "code", "data": {"code": "output = 1"}}, {"id": "out", "type": "output"}]),
        json!([
            edge("e1", "start", "a"),
            edge("e2", "a", "c"),
            edge("e3", "c", "out")
        ]),
    ));
    // Two branches from one node.
    assert!(!one_at_a_time(
        json!([start, template("a"), template("b")]),
        json!([edge("e1", "start", "a"), edge("e2", "start", "b")]),
    ));
    // Both ways of an `if` (a loop back, too, leaves a node by two edges).
    assert!(!one_at_a_time(
        json!([start, {"id": "check", "type": "if", "data": {"conditions": [{"operator": "contains", "value": "x"}]}}, template("yes"), template("no")]),
        json!([
            edge("e1", "start", "check"),
            {"id": "e2", "source": "check", "target": "yes", "sourceHandle": "true"},
            {"id": "e3", "source": "check", "target": "no", "sourceHandle": "false"}
        ]),
    ));
}

/// `step_start` names the node as a person sees it: its label, or its id when it has none (or
/// a blank one), for steps that finish at once and for those that run as tasks alike.
#[tokio::test]
async fn step_start_events_name_each_node_by_its_label_or_else_its_id() {
    let server = ScriptedLlm::start(Script::always(Reply::text("hello")))
        .await
        .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = flow_from(json!({
        "version": 1,
        "name": "labels",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "go", "label": "Begin"}},
            {"id": "shout", "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}!", "label": "Shout it"}},
            {"id": "plain", "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}", "label": "  "}},
            {"id": "ask", "type": "agent", "data": {"model": "gpt-test", "userPrompt": "{{ PREVIOUS_OUTPUT }}", "label": "Asker"}}
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "shout"},
            {"id": "e2", "source": "shout", "target": "plain"},
            {"id": "e3", "source": "plain", "target": "ask"}
        ]
    }));
    let outcome = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let events = engine.store().events(&outcome.run_id).expect("events");
    let started: Vec<(&str, &str)> = events
        .iter()
        .filter(|event| event.kind == EventType::StepStart)
        .map(|event| {
            (
                event.node_id.as_deref().unwrap_or(""),
                event.content.as_str(),
            )
        })
        .collect();
    assert_eq!(
        started,
        [
            ("start", "Begin"),
            ("shout", "Shout it"),
            ("plain", "plain"),
            ("ask", "Asker")
        ]
    );
}

#[tokio::test]
async fn whoever_sees_a_pause_announced_finds_the_run_paused_in_the_store() {
    // A sibling branch still asks its model when the approval is reached: the run is stored
    // as paused only once the sibling ends. The `wait_input` event is told (printed by `weft`,
    // drawn on the canvas) only after that, so a process killed the moment it is seen leaves a
    // run that `weft resume` continues, never one read as interrupted.
    let server = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 600,
        content: "slow answer".into(),
    }))
    .await
    .expect("server");
    let (_dir, db) = temp_db();
    let engine = engine_for(&server, &db);
    let flow = flow_from(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "x"}},
            {"id": "review", "type": "approval", "data": {"message": "Go on?"}},
            {"id": "slow", "type": "agent", "data": {"model": "openai:gpt-4o", "userPrompt": "hi"}},
            {"id": "sent", "type": "output", "data": {}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "review"},
            {"id": "b", "source": "start", "target": "slow"},
            {"id": "c", "source": "review", "sourceHandle": "approve", "target": "sent"}
        ]
    }));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&statuses);
    let reader = Store::open(&db).expect("a second connection");
    let listener: weft_event::EventListener = Arc::new(move |event: &RunEvent| {
        if event.kind == EventType::WaitInput {
            let status = reader.run(&event.run_id).map(|run| run.summary.status);
            seen.lock().expect("lock").push(status);
        }
    });
    let outcome = engine
        .start(
            flow,
            RunOptions {
                on_event: Some(listener),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Paused);
    let statuses = statuses.lock().expect("lock");
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert!(
        matches!(statuses[0], Ok(RunStatus::Paused)),
        "the run read {:?} when its pause was told",
        statuses[0]
    );
}
