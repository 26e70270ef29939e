//! Budgets (SPEC §15): before each LLM call, a run that has spent its `settings.budget` (tokens,
//! or US dollars at the engine's prices) fails naming it, or with `onExceed: approve` pauses
//! until a person lets it go on without the limit. Subagents, subflows and forEach items spend
//! from the same budget: the top-level run's.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weft_engine::{Engine, ResumeOptions, RunOptions, RunOutcome};
use weft_event::{EventType, RunStatus};
use weft_flow::Flow;
use weft_nodes::Decision;
use weft_providers::{LlmClients, ProviderSettings, Secret};
use weft_scripted_llm::{Reply, Script, ScriptedLlm};
use weft_store::Store;

/// Every answer costs $0.30, whatever its tokens.
fn engine(server: &ScriptedLlm, store: &Store) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-budgets")),
        initial_backoff: Duration::from_millis(1),
        ..ProviderSettings::default()
    };
    Engine::new(LlmClients::new(settings), store.clone()).with_pricer(Arc::new(
        |model: &str, _usage| (model == "openai/priced").then_some(0.30),
    ))
}

fn agent(id: &str) -> Value {
    json!({"id": id, "type": "agent", "data": {"model": "priced", "userPrompt": format!("{id}: {{{{ PREVIOUS_OUTPUT }}}}")}})
}

/// start → one → two → three (agents), or with `sub` in place of `three`, a subflow whose own
/// agent asks.
fn chain(budget: Value, last: Value) -> Flow {
    serde_json::from_value(json!({
        "version": 1,
        "settings": {"budget": budget},
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "go"}},
            agent("one"), agent("two"), last
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "one"},
            {"id": "b", "source": "one", "target": "two"},
            {"id": "c", "source": "two", "target": last["id"]}
        ]
    }))
    .expect("a flow")
}

fn write_child(dir: &Path) -> String {
    let child = json!({
        "version": 1,
        "nodes": [{"id": "start", "type": "start"}, agent("inner")],
        "edges": [{"id": "a", "source": "start", "target": "inner"}]
    });
    let path = dir.join("child.json");
    std::fs::write(&path, child.to_string()).expect("child");
    path.display().to_string()
}

fn options(dir: &Path) -> RunOptions {
    RunOptions {
        flow_path: Some(dir.join("parent.json")),
        ..RunOptions::default()
    }
}

fn contents(store: &Store, run: &RunOutcome, kind: EventType) -> Vec<String> {
    store
        .events(&run.run_id)
        .expect("events")
        .into_iter()
        .filter(|event| event.kind == kind)
        .map(|event| event.content)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spent_budget_fails_the_next_call_naming_it_inside_a_subflow_too() {
    let server = ScriptedLlm::start(Script::default().with_fallback(Reply::text("fine")))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let engine = engine(&server, &store);

    // $0.30 per answer: the third call would start at $0.60 of $0.50.
    let child = write_child(dir.path());
    let flow = chain(
        json!({"maxCostUsd": 0.5}),
        json!({"id": "sub", "type": "subflow", "data": {"flow": child}}),
    );
    let outcome = engine
        .start(
            flow,
            RunOptions {
                flow_path: Some(dir.path().join("parent.json")),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(
        server.request_count(),
        2,
        "the call over budget was not made"
    );
    let error = outcome.error.unwrap_or_default();
    assert!(
        error.contains("budget reached: $0.60 of $0.50 (settings.budget.maxCostUsd)"),
        "{error}"
    );

    // Tokens count as well: the scripted server's answers use a few each.
    let server_calls = server.request_count();
    let tokens = engine
        .start(
            chain(json!({"maxTokens": 1}), agent("three")),
            RunOptions::default(),
        )
        .await
        .expect("runs");
    assert_eq!(tokens.status, RunStatus::Failed);
    assert_eq!(server.request_count(), server_calls + 1);
    assert!(
        tokens
            .error
            .as_deref()
            .is_some_and(|error| error.contains("tokens (settings.budget.maxTokens)")),
        "{:?}",
        tokens.error
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn over_budget_with_approve_pauses_and_an_approval_lets_the_run_finish_without_the_limit() {
    let server = ScriptedLlm::start(Script::default().with_fallback(Reply::text("fine")))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let child = write_child(dir.path());
    let flow = || {
        let mut flow = chain(
            json!({"maxCostUsd": 0.5, "onExceed": "approve"}),
            agent("three"),
        );
        // After the pause, a subflow's agent runs too: the limit is lifted for the whole run.
        flow.nodes.push(
            serde_json::from_value(
                json!({"id": "sub", "type": "subflow", "data": {"flow": child}}),
            )
            .expect("node"),
        );
        flow.edges.push(
            serde_json::from_value(json!({"id": "d", "source": "three", "target": "sub"}))
                .expect("edge"),
        );
        flow
    };

    let first = Store::open(&db).expect("store");
    let paused = engine(&server, &first)
        .start(flow(), options(dir.path()))
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(server.request_count(), 2);
    let waits = contents(&first, &paused, EventType::WaitInput);
    assert_eq!(
        waits,
        ["budget reached: $0.60 of $0.50 (settings.budget.maxCostUsd). Go on without the limit?"]
    );
    drop(first);

    // Approved in another process: three and the subflow's agent run, with no pause.
    let second = Store::open(&db).expect("store");
    let ended = engine(&server, &second)
        .resume(
            &paused.run_id,
            Decision::parse("approve", "worth it")
                .expect("decision")
                .by(Some("ada".into())),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(ended.status, RunStatus::Completed, "{:?}", ended.error);
    assert_eq!(server.request_count(), 4);
    assert!(
        contents(&second, &ended, EventType::LogicCheck)
            .iter()
            .any(|check| check.ends_with("going on without the limit, as approved by ada")),
        "the lift is logged"
    );

    // Rejected, the run fails naming the budget.
    let rejected = engine(&server, &second)
        .start(flow(), options(dir.path()))
        .await
        .expect("runs");
    assert_eq!(rejected.status, RunStatus::Paused);
    let failed = engine(&server, &second)
        .resume(
            &rejected.run_id,
            Decision::parse("reject", "").expect("decision"),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(
        failed.error.as_deref().is_some_and(
            |error| error.contains("budget reached") && error.contains("going on was rejected")
        ),
        "{:?}",
        failed.error
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gate_over_budget_with_approve_pauses_too_and_judges_once_approved() {
    let server = ScriptedLlm::start(
        Script::default()
            .with_rule(weft_scripted_llm::Rule::on(
                weft_scripted_llm::Match {
                    last_user_contains: Some("Criteria:".into()),
                    ..weft_scripted_llm::Match::default()
                },
                Reply::text(r#"{"pass": true, "reason": "short enough"}"#),
            ))
            .with_fallback(Reply::text("fine")),
    )
    .await
    .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let gate =
        json!({"id": "check", "type": "gate", "data": {"model": "priced", "criteria": "Short."}});
    let flow = chain(json!({"maxCostUsd": 0.5, "onExceed": "approve"}), gate);

    let paused = engine(&server, &store)
        .start(flow.clone(), options(dir.path()))
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    assert_eq!(
        paused
            .waiting
            .as_ref()
            .map(|waiting| waiting.node_id.as_str()),
        Some("check/budget"),
        "the gate waits, as an agent does"
    );
    assert_eq!(server.request_count(), 2, "the judge was not asked yet");
    assert_eq!(
        contents(&store, &paused, EventType::WaitInput),
        ["budget reached: $0.60 of $0.50 (settings.budget.maxCostUsd). Go on without the limit?"]
    );

    let ended = engine(&server, &store)
        .resume(
            &paused.run_id,
            Decision::parse("approve", "").expect("decision"),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(ended.status, RunStatus::Completed, "{:?}", ended.error);
    assert_eq!(server.request_count(), 3, "the judge was asked once");
    assert!(
        contents(&store, &ended, EventType::LogicCheck)
            .iter()
            .any(|check| check == "pass: short enough"),
        "the gate judged and took `pass`"
    );

    // Rejected, the gate's step fails naming the budget; no judge is asked.
    let paused = engine(&server, &store)
        .start(flow, options(dir.path()))
        .await
        .expect("runs");
    let asked = server.request_count();
    let failed = engine(&server, &store)
        .resume(
            &paused.run_id,
            Decision::parse("reject", "").expect("decision"),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(server.request_count(), asked);
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|error| error.contains("going on was rejected")),
        "{:?}",
        failed.error
    );
}
