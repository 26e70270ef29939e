//! Debugging a run through the engine API: a person pausing a run that is going.

use std::time::Duration;

use serde_json::json;
use weft_engine::breakpoints::BreakWhen;
use weft_engine::{Continue, Engine, ResumeOptions, RunOptions};
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_flow::Flow;

use weft_event::RunStatus;

use weft_scripted_llm::{Reply, Script, ScriptedLlm};
use weft_store::Store;

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_run_starts_no_new_step_and_continues_where_it_stopped() {
    let server = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 600,
        content: "slow answer".into(),
    }))
    .await
    .expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-pause")),
        initial_backoff: Duration::from_millis(1),
        ..ProviderSettings::default()
    };
    let engine = Engine::new(
        LlmClients::new(settings),
        Store::open(&dir.path().join("runs.db")).expect("store"),
    );
    let flow = Flow::from_value(
        json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "go"}},
                {"id": "think", "type": "agent", "data": {"model": "m"}},
                {"id": "after", "type": "template", "data": {"template": "then: {{ PREVIOUS_OUTPUT }}"}}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "think"},
                {"id": "b", "source": "think", "target": "after"}
            ]
        }),
        "test",
    )
    .expect("flow");
    let handle = engine
        .spawn(flow, RunOptions::default())
        .await
        .expect("starts");
    let run_id = handle.run_id.clone();
    // While the agent waits for its answer, the person pauses the run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(engine.pause(&run_id), "the run is going");
    let paused = handle.outcome().await.expect("outcome");
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    let waiting = paused.waiting.expect("waits");
    assert_eq!(
        waiting.node_id, "after",
        "the running step ended; the next did not start"
    );
    assert_eq!(waiting.breakpoint, Some(BreakWhen::Before));
    assert!(
        waiting.message.contains("paused by the person"),
        "{}",
        waiting.message
    );
    assert!(
        waiting.message.contains("its input is slow answer"),
        "{}",
        waiting.message
    );
    assert!(!engine.pause(&run_id), "a paused run is not going");

    let done = engine
        .continue_run(&run_id, Continue::default(), ResumeOptions::default())
        .await
        .expect("continues");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.result, Some(json!("then: slow answer").into()));
    assert_eq!(server.requests().len(), 1);
}
