//! Runs whose process dies: they are marked `interrupted` when the store is next opened, and
//! `retry` continues them from their last checkpoint without asking the model again for what
//! it already answered. A process's death is played here by dropping its runtime mid-run and
//! giving its lease to a process that no longer exists; `crates/cli/tests/it/crash.rs` kills the
//! real `weft` with SIGKILL.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_nodes::Decision;
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_engine::{Engine, ResumeOptions, RunOptions};

use weft_event::{EventType, RunStatus};

use weft_flow::Flow;

use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::Store;

fn engine(server: &ScriptedLlm, db: &Path) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-crash")),
        max_attempts: 1,
        read_timeout: Duration::from_secs(20),
        ..ProviderSettings::default()
    };
    Engine::new(LlmClients::new(settings), Store::open(db).expect("store"))
}

fn flow(value: Value) -> Flow {
    Flow::from_value(value, "test").expect("flow")
}

/// start → first (agent) → second (agent, slow) → end.
fn two_agents() -> Flow {
    flow(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "rivers"}},
            {"id": "first", "type": "agent", "data": {"model": "m", "userPrompt": "first about {{ PREVIOUS_OUTPUT }}"}},
            {"id": "second", "type": "agent", "data": {"model": "m", "userPrompt": "second about {{ PREVIOUS_OUTPUT }}"}},
            {"id": "end", "type": "output"}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "first"},
            {"id": "b", "source": "first", "target": "second"},
            {"id": "c", "source": "second", "target": "end"}
        ]
    }))
}

fn script() -> Script {
    Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("first about".into()),
                ..Match::default()
            },
            Reply::text("FIRST"),
        ))
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("second about".into()),
                ..Match::default()
            },
            Reply::Slow {
                delay_ms: 1_500,
                content: "SECOND".into(),
            },
        ))
}

/// Gives every running run's lease to a process of this machine that no longer exists, as
/// when its process was killed.
fn orphan_running_runs(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    conn.execute(
        "UPDATE runs SET lease_owner = lease_owner || '0' WHERE status = 'running'",
        [],
    )
    .expect("orphan");
}

fn requests_containing(server: &ScriptedLlm, text: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|request| request.last_user_text().unwrap_or_default().contains(text))
        .count()
}

/// Runs `flow` on a runtime of its own until `stop` holds, then drops that runtime (its tasks
/// with it) and the engine, as a killed process would leave the store. Returns the run id.
fn run_until_killed(
    server: &ScriptedLlm,
    db: &Path,
    flow: Flow,
    stop: impl Fn() -> bool,
) -> String {
    run_until_killed_with(server, db, flow, RunOptions::default(), stop)
}

/// [`run_until_killed`] with `options`.
fn run_until_killed_with(
    server: &ScriptedLlm,
    db: &Path,
    flow: Flow,
    options: RunOptions,
    stop: impl Fn() -> bool,
) -> String {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = engine(server, db);
    let handle = runtime
        .block_on(engine.spawn(flow, options))
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !stop() {
        assert!(Instant::now() < deadline, "the run never got there");
        std::thread::sleep(Duration::from_millis(10));
    }
    let run_id = handle.run_id.clone();
    runtime.shutdown_background();
    drop(engine);
    run_id
}

#[test]
fn an_interrupted_run_is_continued_without_asking_again_what_was_answered() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    let server = support
        .block_on(ScriptedLlm::start(script()))
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    // Killed while `second` waits for its slow answer: `first` has finished.
    let run_id = run_until_killed(&server, &db, two_agents(), || {
        requests_containing(&server, "second about") == 1
    });
    orphan_running_runs(&db);

    let engine = engine(&server, &db);
    let record = engine.store().run(&run_id).expect("run");
    assert_eq!(record.summary.status, RunStatus::Interrupted);
    let outcome = support
        .block_on(engine.retry(&run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("SECOND").into()));
    assert_eq!(
        requests_containing(&server, "first about"),
        1,
        "first was not asked again"
    );
    assert_eq!(
        requests_containing(&server, "second about"),
        2,
        "second was running, so it runs again"
    );
    let events = engine.store().events(&run_id).expect("events");
    assert!(events.windows(2).all(|pair| pair[0].seq + 1 == pair[1].seq));
    let note = events
        .iter()
        .find(|event| event.kind == EventType::LogicCheck && event.node_id.is_none())
        .expect("the continuation is logged");
    assert!(
        note.content
            .contains("running again what was running: second"),
        "{}",
        note.content
    );
    let started = |node: &str| {
        events
            .iter()
            .filter(|event| {
                event.kind == EventType::StepStart && event.node_id.as_deref() == Some(node)
            })
            .count()
    };
    assert_eq!((started("first"), started("second")), (1, 2));
    // Retrying again is refused: the run completed.
    let again = support.block_on(engine.retry(&run_id, None, ResumeOptions::default()));
    assert!(again.is_err());
}

#[test]
fn a_run_killed_in_the_middle_of_a_resume_can_be_answered_again() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    let server = support
        .block_on(ScriptedLlm::start(Script::always(Reply::echo("draft: "))))
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let approval = flow(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "x"}},
            {"id": "write", "type": "agent", "data": {"model": "m"}},
            {"id": "review", "type": "approval", "data": {"message": "ok? {{ PREVIOUS_OUTPUT }}"}},
            {"id": "sent", "type": "template", "data": {"template": "sent {{ PREVIOUS_OUTPUT }} ({{ approval.note }})"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "write"},
            {"id": "b", "source": "write", "target": "review"},
            {"id": "c", "source": "review", "target": "sent", "sourceHandle": "approve"}
        ]
    }));
    let engine = engine(&server, &db);
    let paused = support
        .block_on(engine.start(approval, RunOptions::default()))
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    // A resumer claims the run and dies before doing anything else.
    engine
        .store()
        .claim_paused(&paused.run_id, "2026-01-01T00:00:00.000Z", None)
        .expect("claimed");
    drop(engine);
    orphan_running_runs(&db);

    let engine = self::engine(&server, &db);
    assert_eq!(
        engine
            .store()
            .run(&paused.run_id)
            .expect("run")
            .summary
            .status,
        RunStatus::Interrupted
    );
    // Continued, it waits for the decision again; the person's answer then goes through.
    let waiting = support
        .block_on(engine.retry(&paused.run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(waiting.status, RunStatus::Paused);
    assert_eq!(
        waiting.waiting.as_ref().map(|w| w.node_id.as_str()),
        Some("review")
    );
    let decision = Decision::parse("approve", "fine").expect("decision");
    let done = support
        .block_on(engine.resume(&paused.run_id, decision, ResumeOptions::default()))
        .expect("resumes");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.result, Some(json!("sent draft: x (fine)").into()));
    assert_eq!(server.requests().len(), 1, "the draft was written once");

    // The same kill, then a person answers the interrupted run directly.
    let engine2 = self::engine(&server, &db);
    let paused = support
        .block_on(engine2.start(
            flow(json!({
                "nodes": [
                    {"id": "start", "type": "start", "data": {"initialInput": "y"}},
                    {"id": "review", "type": "approval", "data": {"message": "ok?"}},
                    {"id": "sent", "type": "template", "data": {"template": "sent {{ PREVIOUS_OUTPUT }}"}}
                ],
                "edges": [
                    {"id": "a", "source": "start", "target": "review"},
                    {"id": "c", "source": "review", "target": "sent", "sourceHandle": "approve"}
                ]
            })),
            RunOptions::default(),
        ))
        .expect("runs");
    engine2
        .store()
        .claim_paused(&paused.run_id, "2026-01-01T00:00:00.000Z", None)
        .expect("claimed");
    drop(engine2);
    orphan_running_runs(&db);
    let engine3 = self::engine(&server, &db);
    let decision = Decision::parse("yes", "").expect("decision");
    let done = support
        .block_on(engine3.resume(&paused.run_id, decision, ResumeOptions::default()))
        .expect("answers the interrupted run");
    assert_eq!(done.result, Some(json!("sent y").into()));
}

#[test]
fn a_decision_taken_by_a_resume_killed_before_it_went_on_is_kept() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    let server = support
        .block_on(ScriptedLlm::start(Script::always(Reply::echo("unused: "))))
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let engine = engine(&server, &db);
    let paused = support
        .block_on(engine.start(
            flow(json!({
                "nodes": [
                    {"id": "start", "type": "start", "data": {"initialInput": "z"}},
                    {"id": "review", "type": "approval", "data": {"message": "ok?"}},
                    {"id": "sent", "type": "template", "data": {"template": "sent {{ PREVIOUS_OUTPUT }}"}},
                    {"id": "dropped", "type": "template", "data": {"template": "dropped ({{ approval.note }})"}}
                ],
                "edges": [
                    {"id": "a", "source": "start", "target": "review"},
                    {"id": "b", "source": "review", "target": "sent", "sourceHandle": "approve"},
                    {"id": "c", "source": "review", "target": "dropped", "sourceHandle": "reject"}
                ]
            })),
            RunOptions::default(),
        ))
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    // A resumer claims the run with a person's "reject" and dies before its first checkpoint
    // (its output may already have shown the decision going through).
    let reject = Decision::parse("reject", "too long").expect("decision");
    engine
        .store()
        .claim_paused(
            &paused.run_id,
            "2026-01-01T00:00:00.000Z",
            Some(&serde_json::to_value(&reject).expect("json")),
        )
        .expect("claimed");
    drop(engine);
    orphan_running_runs(&db);

    // A different answer now is refused, naming the decision taken...
    let engine = self::engine(&server, &db);
    let approve = Decision::parse("approve", "").expect("decision");
    let refused = support
        .block_on(engine.resume(&paused.run_id, approve, ResumeOptions::default()))
        .expect_err("decided already");
    assert!(refused.to_string().contains("(reject)"), "{refused}");
    // ...and continuing goes on with it, note included, without asking again.
    let done = support
        .block_on(engine.retry(&paused.run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.result, Some(json!("dropped (too long)").into()));
    let events = engine.store().events(&paused.run_id).expect("events");
    assert!(
        events.iter().any(|event| event
            .content
            .contains("decision already taken at `review` (reject)")),
        "the log says why nothing was asked"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn calls_an_interrupted_step_had_made_are_answered_from_the_record() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    // The lead asks its helper (a subagent), then answers slowly; it is killed while waiting
    // for that last answer.
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::tool_call("helper", json!({"task": "find facts"})),
        ))
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::Slow {
                delay_ms: 1_500,
                content: "LEAD DONE".into(),
            },
        ))
        .with_fallback(Reply::echo("facts for: "));
    let server = support
        .block_on(ScriptedLlm::start(script))
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let team = flow(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "rivers"}},
            {"id": "lead", "type": "agent", "data": {"model": "m", "tools": {"subagents": true}}},
            {"id": "helper", "type": "agent", "data": {"model": "m", "agentName": "helper"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "lead"},
            {"id": "s", "source": "lead", "target": "helper", "sourceHandle": "subagent"}
        ]
    }));
    let lead_finishing = |server: &ScriptedLlm| {
        server
            .requests()
            .iter()
            .filter(|request| {
                request
                    .conversation()
                    .last()
                    .is_some_and(|(role, _)| role == "tool")
            })
            .count()
    };
    let run_id = run_until_killed(&server, &dir.path().join("runs.db"), team, || {
        lead_finishing(&server) == 1
    });
    assert_eq!(server.requests().len(), 3, "lead, helper, lead again");
    orphan_running_runs(&db);

    let engine = engine(&server, &db);
    let outcome = support
        .block_on(engine.retry(&run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("LEAD DONE").into()));
    // The lead ran again, but its first call and the helper's answer came from the record:
    // only the call that had no answer yet was sent again.
    assert_eq!(server.requests().len(), 4);
    assert_eq!(lead_finishing(&server), 2);
    let helper_calls = server
        .requests()
        .iter()
        .filter(|request| request.last_user_text().unwrap_or_default() == "find facts")
        .count();
    assert_eq!(helper_calls, 1);
}

#[test]
fn a_replay_interrupted_mid_way_goes_on_replaying_what_it_had_not_reached() {
    let support = tokio::runtime::Runtime::new().expect("runtime");
    // Between the two agents, a slow HTTP call (to the scripted server, not an LLM call, so a
    // replay makes it for real): the replay is killed while it waits.
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("hold on".into()),
                ..Match::default()
            },
            Reply::Slow {
                delay_ms: 1_500,
                content: "held".into(),
            },
        ))
        .with_fallback(Reply::text("an answer"));
    let server = support
        .block_on(ScriptedLlm::start(script))
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let hold = json!({"model": "m", "messages": [{"role": "user", "content": "hold on"}]});
    let slow_middle = || {
        flow(json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "rivers"}},
                {"id": "first", "type": "agent", "data": {"model": "m", "userPrompt": "first about {{ PREVIOUS_OUTPUT }}"}},
                {"id": "wait", "type": "http", "data": {"method": "POST", "url": format!("{}/chat/completions", server.base_url()), "body": hold.to_string()}},
                {"id": "second", "type": "agent", "data": {"model": "m", "userPrompt": "second about {{ nodes.first }}"}},
                {"id": "end", "type": "output"}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "first"},
                {"id": "b", "source": "first", "target": "wait"},
                {"id": "c", "source": "wait", "target": "second"},
                {"id": "d", "source": "second", "target": "end"}
            ]
        }))
    };
    let recorded = support
        .block_on(engine(&server, &db).start(slow_middle(), RunOptions::default()))
        .expect("runs");
    assert_eq!(
        recorded.status,
        RunStatus::Completed,
        "{:?}",
        recorded.error
    );
    let asked = |text: &str| requests_containing(&server, text);
    assert_eq!((asked("first about"), asked("second about")), (1, 1));

    let replay = RunOptions {
        replay: Some(recorded.run_id.clone()),
        ..RunOptions::default()
    };
    let run_id = run_until_killed_with(&server, &db, slow_middle(), replay, || {
        asked("hold on") == 2
    });
    orphan_running_runs(&db);
    let engine = engine(&server, &db);
    let outcome = support
        .block_on(engine.retry(&run_id, None, ResumeOptions::default()))
        .expect("continues");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, recorded.result);
    assert_eq!(asked("hold on"), 3, "the HTTP step ran again");
    assert_eq!(
        (asked("first about"), asked("second about")),
        (1, 1),
        "both agents' answers came from the replayed run, before and after the interruption"
    );
    let events = engine.store().events(&run_id).expect("events");
    let replayed: Vec<&str> = events
        .iter()
        .filter(|event| {
            event.kind == EventType::LogicCheck && event.content.starts_with("replayed:")
        })
        .filter_map(|event| event.node_id.as_deref())
        .collect();
    assert_eq!(replayed, ["first", "second"]);
}
