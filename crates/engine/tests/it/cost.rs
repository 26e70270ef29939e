//! What a run cost, from the calls a real run records against the scripted server: each call's
//! model and tokens, priced per call, summed per node across forEach items, subflow steps and
//! subagent calls, and per run.

use std::time::Duration;

use serde_json::{Value, json};
use weft_engine::{Engine, RunOptions};
use weft_history::cost::{Prices, run_cost};
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_flow::Flow;

use weft_event::RunStatus;

use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::Store;

fn write(dir: &std::path::Path, name: &str, flow: &Value) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, flow.to_string()).expect("write flow");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_cost_adds_up_across_items_subflows_and_subagents() {
    // The lead asks its helper once (a tool call), then answers; everything else answers text.
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::tool_call("helper", json!({"task": "find facts"})),
        ))
        .with_fallback(Reply::text("four words right here"));
    let server = ScriptedLlm::start(script).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    let agent = |id: &str, model: &str| json!({"id": id, "type": "agent", "data": {"model": model, "userPrompt": "Say {{ PREVIOUS_OUTPUT }}"}});
    write(
        dir.path(),
        "item.json",
        &json!({
            "nodes": [{"id": "start", "type": "start"}, agent("draft", "gpt-4o-mini")],
            "edges": [{"id": "a", "source": "start", "target": "draft"}]
        }),
    );
    write(
        dir.path(),
        "ask.json",
        &json!({
            "nodes": [{"id": "start", "type": "start"}, agent("ask", "gpt-4o")],
            "edges": [{"id": "a", "source": "start", "target": "ask"}]
        }),
    );
    let path = write(
        dir.path(),
        "team.json",
        &json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": {"values": ["a", "b", "c"]}}},
                {"id": "each", "type": "forEach", "data": {"items": "values", "flow": "item.json"}},
                {"id": "lead", "type": "agent", "data": {"model": "gpt-4o-mini", "tools": {"subagents": true}}},
                {"id": "helper", "type": "agent", "data": {"model": "gpt-4.1-nano", "agentName": "helper"}},
                {"id": "sub", "type": "subflow", "data": {"flow": "ask.json"}},
                {"id": "local", "type": "agent", "data": {"model": "local-model"}}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "each"},
                {"id": "b", "source": "each", "target": "lead"},
                {"id": "s", "source": "lead", "target": "helper", "sourceHandle": "subagent"},
                {"id": "c", "source": "lead", "target": "sub"},
                {"id": "d", "source": "sub", "target": "local"}
            ]
        }),
    );
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-cost")),
        initial_backoff: Duration::from_millis(1),
        ..ProviderSettings::default()
    };
    let engine = Engine::new(LlmClients::new(settings), store.clone());
    let outcome = engine
        .start(
            Flow::load(&path).expect("flow"),
            RunOptions {
                flow_path: Some(path.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let record = store.run(&outcome.run_id).expect("record");
    let prices = Prices::shipped();
    let cost = run_cost(&store, &record, &prices).expect("cost");

    // Every call is recorded with the model it asked and the tokens the server reported.
    let mut keys: Vec<(&str, &str)> = cost
        .calls
        .iter()
        .map(|call| {
            (
                call.node_key.as_str(),
                call.model.as_deref().unwrap_or("none"),
            )
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            ("each[0]/draft", "openai/gpt-4o-mini"),
            ("each[1]/draft", "openai/gpt-4o-mini"),
            ("each[2]/draft", "openai/gpt-4o-mini"),
            ("helper", "openai/gpt-4.1-nano"),
            ("lead", "openai/gpt-4o-mini"),
            ("lead", "openai/gpt-4o-mini"),
            ("local", "openai/local-model"),
            ("sub/ask", "openai/gpt-4o"),
        ]
    );
    for call in &cost.calls {
        assert!(call.usage.input_tokens > 0, "{call:?}");
        let asked_for_a_tool = call.node_key == "lead" && call.call == 0;
        if !asked_for_a_tool {
            assert_eq!(call.usage.output_tokens, 4, "four words: {call:?}");
        }
    }
    // Each call priced at its model's list price; the local model has none.
    let priced = |key: &str| -> f64 {
        cost.calls
            .iter()
            .filter(|call| call.node_key == key)
            .map(|call| {
                let price = prices
                    .price(call.model.as_deref().expect("model"))
                    .expect("a price");
                (call.usage.input_tokens as f64 * price.input
                    + call.usage.output_tokens as f64 * price.output)
                    / 1e6
            })
            .sum()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let items = priced("each[0]/draft") + priced("each[1]/draft") + priced("each[2]/draft");
    assert!(
        close(cost.node("each").usd, items),
        "every item counts for the forEach"
    );
    assert_eq!(cost.node("each").calls, 3);
    assert!(close(cost.node("each[1]").usd, priced("each[1]/draft")));
    assert!(
        close(cost.node("lead").usd, priced("lead") + priced("helper")),
        "the lead counts its subagent's call"
    );
    assert!(close(cost.node("helper").usd, priced("helper")));
    assert!(
        close(cost.node("sub").usd, priced("sub/ask")),
        "the subflow counts its steps"
    );
    assert_eq!(cost.node("local").known_usd(), None);
    assert_eq!(cost.node("local").text(), "no price");
    assert_eq!(cost.total.known_usd(), None, "one model is unpriced");
    assert!(close(
        cost.total.usd,
        items + priced("lead") + priced("helper") + priced("sub/ask")
    ));
    assert_eq!(cost.total.calls, 8);
    assert_eq!(
        cost.total.usage(),
        record.usage,
        "the same tokens as the run's own count"
    );
}
