//! Fallback models (SPEC §15): an agent whose model fails for good is answered by the next of
//! its `fallbackModels`; `llm_response` names the model that answered; the failure is kept
//! with the run, so a replay takes the same path without asking the failed model again. A
//! request the provider refuses as wrong (a 400) is not a reason to fall back.

use std::time::Duration;

use serde_json::{Value, json};
use weft_engine::{Engine, RunOptions};
use weft_event::{EventType, RunStatus};
use weft_flow::Flow;
use weft_history::cost::{Prices, run_cost};
use weft_history::visits::node_visits;
use weft_providers::{LlmClients, ProviderSettings, Secret};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::Store;

fn engine(server: &ScriptedLlm, store: &Store) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-fallbacks")),
        initial_backoff: Duration::from_millis(1),
        max_attempts: 2,
        ..ProviderSettings::default()
    };
    Engine::new(LlmClients::new(settings), store.clone())
}

fn on_model(model: &str, reply: Reply) -> Rule {
    Rule::on(
        Match {
            model: Some(model.to_string()),
            ..Match::default()
        },
        reply,
    )
}

fn busy() -> Reply {
    Reply::Status {
        status: 503,
        body: json!({"error": {"message": "overloaded"}}),
        headers: Vec::new(),
    }
}

fn flow(fallbacks: Value) -> Flow {
    serde_json::from_value(json!({
        "version": 1,
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "Summarize the ticket"}},
            {"id": "ask", "type": "agent", "data": {"model": "primary-model", "fallbackModels": fallbacks}}
        ],
        "edges": [{"id": "a", "source": "start", "target": "ask"}]
    }))
    .expect("a flow")
}

fn asked_models(server: &ScriptedLlm) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter_map(|request| request.body["model"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_fails_for_good_is_answered_by_the_next_fallback_and_a_replay_goes_straight_there()
 {
    let script = Script::default()
        .with_rule(on_model("primary-model", busy()))
        .with_rule(on_model("second-model", busy()))
        .with_rule(on_model(
            "third-model",
            Reply::text("answered by the third"),
        ));
    let server = ScriptedLlm::start(script).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let engine = engine(&server, &store);

    let outcome = engine
        .start(
            flow(json!(["second-model", "openai/third-model"])),
            RunOptions::default(),
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, Some(json!("answered by the third").into()));
    // Each failing model had its retries (two attempts), then the next was asked.
    assert_eq!(
        asked_models(&server),
        [
            "primary-model",
            "primary-model",
            "second-model",
            "second-model",
            "third-model"
        ]
    );
    let events = store.events(&outcome.run_id).expect("events");
    let of = |kind: EventType| -> Vec<&str> {
        events
            .iter()
            .filter(|event| event.kind == kind)
            .map(|event| event.content.as_str())
            .collect()
    };
    let falling_back = of(EventType::LogicCheck);
    assert!(
        falling_back[0].starts_with("`openai/primary-model` failed for good (")
            && falling_back[0].ends_with("; falling back to `openai/second-model`"),
        "{falling_back:?}"
    );
    assert!(falling_back[1].ends_with("falling back to `openai/third-model`"));
    assert_eq!(of(EventType::LlmError).len(), 2);
    let answer = events
        .iter()
        .find(|event| event.kind == EventType::LlmResponse)
        .expect("an answer");
    assert_eq!(answer.model.as_deref(), Some("openai/third-model"));
    // The node's visit says which model answered it.
    let record = store.run(&outcome.run_id).expect("record");
    let outputs = store.node_outputs(&outcome.run_id).expect("outputs");
    let cost = run_cost(&store, &record, &Prices::shipped()).expect("cost");
    let visits = node_visits(&record, &events, &outputs, &cost);
    let ask = visits
        .iter()
        .find(|visit| visit.key == "ask")
        .expect("a visit");
    assert_eq!(ask.models, ["openai/third-model"]);

    // A replay takes the same path from the record: no model is asked at all.
    let asked_before = server.request_count();
    let replay = engine
        .start(
            flow(json!(["second-model", "openai/third-model"])),
            RunOptions {
                replay: Some(outcome.run_id.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("replays");
    assert_eq!(replay.status, RunStatus::Completed, "{:?}", replay.error);
    assert_eq!(replay.result, outcome.result);
    assert_eq!(
        server.request_count(),
        asked_before,
        "the replay asked a model"
    );
    let replayed = store.events(&replay.run_id).expect("events");
    assert!(
        replayed
            .iter()
            .any(|event| event.kind == EventType::LogicCheck
                && event.content.starts_with(
                    "`openai/primary-model` failed for good when this call was recorded"
                )),
        "the replay says why it skipped the model"
    );
    assert_eq!(
        replayed
            .iter()
            .find(|event| event.kind == EventType::LlmResponse)
            .and_then(|event| event.model.as_deref()),
        Some("openai/third-model")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_request_or_the_last_model_failing_ends_the_step_with_the_providers_message() {
    let script = Script::default()
        .with_rule(on_model(
            "primary-model",
            Reply::Status {
                status: 400,
                body: json!({"error": {"message": "messages: too long"}}),
                headers: Vec::new(),
            },
        ))
        .with_rule(on_model("busy-model", busy()))
        .with_fallback(Reply::text("never asked"));
    let server = ScriptedLlm::start(script).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let engine = engine(&server, &store);

    let refused = engine
        .start(flow(json!(["backup-model"])), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(refused.status, RunStatus::Failed);
    assert!(
        refused
            .error
            .as_deref()
            .is_some_and(|error| error.contains("HTTP 400") && error.contains("too long")),
        "{:?}",
        refused.error
    );
    assert_eq!(
        asked_models(&server),
        ["primary-model"],
        "a 400 is not retried elsewhere"
    );

    let mut busy_flow = flow(json!(["busy-model"]));
    busy_flow.nodes[1].data["model"] = json!("busy-model");
    busy_flow.nodes[1].data["fallbackModels"] = json!([]);
    let failed = engine
        .start(busy_flow, RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|error| error.contains("HTTP 503")),
        "{:?}",
        failed.error
    );
}

#[test]
fn fallback_models_are_checked_before_a_run_naming_the_entry() {
    let flow = flow(json!([
        "",
        "primary-model",
        "ollama/llama3.2",
        "anthropic/claude-x"
    ]));
    let settings = ProviderSettings {
        openai_api_key: Some(Secret::new("sk-fallbacks")),
        ..ProviderSettings::default()
    };
    let problems: Vec<String> = weft_nodes::provider_problems(&flow, &settings)
        .iter()
        .map(ToString::to_string)
        .collect();
    let named = |needle: &str| problems.iter().any(|problem| problem.contains(needle));
    assert!(named("error: fallbackModels[0]: empty"), "{problems:?}");
    assert!(
        named("error: fallbackModels[1]: `primary-model` is tried before it already"),
        "{problems:?}"
    );
    assert!(
        named("warning: fallbackModels[3]: anthropic is not configured: set ANTHROPIC_API_KEY"),
        "{problems:?}"
    );
    assert!(
        !named("fallbackModels[2]"),
        "Ollama needs no key: {problems:?}"
    );
}
