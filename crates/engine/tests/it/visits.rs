//! Every visit of a node (docs/debugging.md): a real run against the scripted server loops through
//! a
//! subflow three times and runs a forEach over two items; each visit shows its own input,
//! output, time, tokens and cost. And the LLM calls of a subflow visited again after the run was
//! resumed by another engine (another process) are all kept.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use weft_history::compare::NodeStatus;
use weft_history::cost::{Prices, run_cost};
use weft_history::visits::{NodeVisit, node_visits};
use weft_nodes::Decision;
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_engine::{Engine, ResumeOptions, RunOptions, RunOutcome};

use weft_flow::Flow;

use weft_event::RunStatus;

use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
use weft_store::Store;

fn write(dir: &Path, name: &str, flow: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, flow.to_string()).expect("write flow");
    path
}

fn engine(server: &ScriptedLlm, store: &Store) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new("sk-visits")),
        initial_backoff: Duration::from_millis(1),
        ..ProviderSettings::default()
    };
    Engine::new(LlmClients::new(settings), store.clone())
}

/// Answers "Pass N" with N words, so each visit's tokens tell which visit it was.
fn counting_script() -> Script {
    let mut script = Script::default();
    for (n, answer) in [(1, "one"), (2, "two two"), (3, "three three three")] {
        script = script.with_rule(Rule::on(
            Match {
                last_user_contains: Some(format!("Pass {n}")),
                ..Match::default()
            },
            Reply::text(answer),
        ));
    }
    script.with_fallback(Reply::text("item done"))
}

/// A child flow: its agent asks with the child's input.
fn ask_flow(model: &str) -> Value {
    json!({
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "ask", "type": "agent", "data": {"model": model, "userPrompt": "{{ PREVIOUS_OUTPUT }}"}}
        ],
        "edges": [{"id": "a", "source": "start", "target": "ask"}]
    })
}

fn visits_of(store: &Store, outcome: &RunOutcome) -> (Vec<NodeVisit>, weft_history::cost::RunCost) {
    let record = store.run(&outcome.run_id).expect("record");
    let events = store.events(&outcome.run_id).expect("events");
    let outputs = store.node_outputs(&outcome.run_id).expect("outputs");
    let cost = run_cost(store, &record, &Prices::shipped()).expect("cost");
    (node_visits(&record, &events, &outputs, &cost), cost)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_visit_of_a_loop_a_subflow_and_a_foreach_item_has_its_own_input_output_and_cost() {
    let server = ScriptedLlm::start(counting_script()).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    write(dir.path(), "ask.json", &ask_flow("gpt-4o-mini"));
    let path = write(
        dir.path(),
        "loop.json",
        &json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": {"n": 0}}},
                {"id": "step", "type": "template", "data": {"template": "{\"n\": {{ n + 1 }}}", "parseJson": true}},
                {"id": "say", "type": "template", "data": {"template": "Pass {{ n }}"}},
                {"id": "sub", "type": "subflow", "data": {"flow": "ask.json"}},
                {"id": "carry", "type": "template", "data": {"template": "{\"n\": {{ nodes.step.n }}, \"values\": [\"a\", \"b\"]}", "parseJson": true}},
                {"id": "more", "type": "if", "data": {"conditions": [{"field": "n", "operator": "lt", "value": "3"}]}},
                {"id": "each", "type": "forEach", "data": {"items": "values", "flow": "ask.json"}},
                {"id": "done", "type": "output"}
            ],
            "edges": [
                {"id": "e1", "source": "start", "target": "step"},
                {"id": "e2", "source": "step", "target": "say"},
                {"id": "e3", "source": "say", "target": "sub"},
                {"id": "e4", "source": "sub", "target": "carry"},
                {"id": "e5", "source": "carry", "target": "more"},
                {"id": "e6", "source": "more", "target": "step", "sourceHandle": "condition-0"},
                {"id": "e7", "source": "more", "target": "each", "sourceHandle": "false"},
                {"id": "e8", "source": "each", "target": "done"}
            ]
        }),
    );
    let store = Store::open(&dir.path().join("runs.db")).expect("store");
    let outcome = engine(&server, &store)
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
    let (visits, cost) = visits_of(&store, &outcome);

    // The loop's template: three visits, each given the previous pass's value.
    let step: Vec<&NodeVisit> = visits.iter().filter(|visit| visit.key == "step").collect();
    assert_eq!(step.len(), 3);
    for (index, visit) in step.iter().enumerate() {
        let n = index as u64;
        assert_eq!(visit.visit, n + 1);
        assert_eq!(visit.status, NodeStatus::Completed);
        assert_eq!(visit.output, Some(json!({"n": n + 1})), "visit {}", n + 1);
        let expected_input = if n == 0 {
            json!({"n": 0})
        } else {
            json!({"n": n, "values": ["a", "b"]})
        };
        assert_eq!(visit.input, Some(expected_input), "visit {}", n + 1);
        assert!(visit.duration_ms.is_some());
        assert_eq!(visit.cost.calls, 0);
    }

    // The subflow: three visits, each with its own call — 1, 2 and 3 words answered.
    let sub: Vec<&NodeVisit> = visits.iter().filter(|visit| visit.key == "sub").collect();
    assert_eq!(sub.len(), 3);
    let words = ["one", "two two", "three three three"];
    for (index, visit) in sub.iter().enumerate() {
        let pass = index + 1;
        assert_eq!(visit.input, Some(json!(format!("Pass {pass}"))));
        assert_eq!(visit.output, Some(json!(words[index])));
        assert_eq!(visit.cost.calls, 1, "visit {pass}: {:?}", visit.cost);
        assert_eq!(visit.cost.output_tokens, pass as u64, "visit {pass}");
        assert!(visit.cost.usd > 0.0, "gpt-4o-mini has a price");
    }
    // The step inside each visit of the subflow belongs to that visit.
    let inside: Vec<&NodeVisit> = visits
        .iter()
        .filter(|visit| visit.key == "sub/ask")
        .collect();
    assert_eq!(inside.len(), 3);
    for (index, visit) in inside.iter().enumerate() {
        assert_eq!(visit.node_id, "sub");
        assert_eq!(visit.outer_visit, Some(index as u64 + 1));
        assert_eq!(visit.visit, 1, "the child run counts its own visits");
        assert_eq!(visit.output, Some(json!(words[index])));
        assert_eq!(visit.cost.output_tokens, index as u64 + 1);
    }
    // The visits add up to the node's cost.
    let summed: f64 = sub.iter().map(|visit| visit.cost.usd).sum();
    assert!((summed - cost.node("sub").usd).abs() < 1e-12);
    assert_eq!(
        cost.node("sub").calls,
        3,
        "no call of one visit replaced another's"
    );

    // The forEach: one visit of its own, and each item's steps, given that item.
    let each: Vec<&NodeVisit> = visits
        .iter()
        .filter(|visit| visit.node_id == "each")
        .collect();
    assert_eq!(each[0].key, "each");
    assert_eq!(each[0].cost.calls, 2, "both items' calls are the forEach's");
    for (item, value) in ["a", "b"].into_iter().enumerate() {
        let key = format!("each[{item}]/ask");
        let ask = each
            .iter()
            .find(|visit| visit.key == key)
            .unwrap_or_else(|| panic!("{key} in {each:#?}"));
        assert_eq!(ask.item, Some(item as u64));
        assert_eq!(ask.input, Some(json!(value)));
        assert_eq!(ask.output, Some(json!("item done")));
        assert_eq!(ask.cost.calls, 1);
        let start = each
            .iter()
            .find(|visit| visit.key == format!("each[{item}]/start"))
            .expect("the item's start");
        assert_eq!(
            start.input,
            Some(json!(value)),
            "an item's start is given the item"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subflow_visited_again_after_a_resume_elsewhere_keeps_both_visits_calls() {
    let server = ScriptedLlm::start(counting_script()).await.expect("server");
    let dir = tempfile::tempdir().expect("dir");
    write(dir.path(), "ask.json", &ask_flow("gpt-4o"));
    let path = write(
        dir.path(),
        "again.json",
        &json!({
            "nodes": [
                {"id": "start", "type": "start", "data": {"initialInput": "Pass 1"}},
                {"id": "sub", "type": "subflow", "data": {"flow": "ask.json"}},
                {"id": "review", "type": "approval", "data": {"message": "Again?"}},
                {"id": "twice", "type": "template", "data": {"template": "Pass 2"}},
                {"id": "done", "type": "output"}
            ],
            "edges": [
                {"id": "e1", "source": "start", "target": "sub"},
                {"id": "e2", "source": "sub", "target": "review"},
                {"id": "e3", "source": "review", "target": "twice", "sourceHandle": "approve"},
                {"id": "e4", "source": "twice", "target": "sub"},
                {"id": "e5", "source": "review", "target": "done", "sourceHandle": "reject"}
            ]
        }),
    );
    let db = dir.path().join("runs.db");
    let first = Store::open(&db).expect("store");
    let paused = engine(&server, &first)
        .start(
            Flow::load(&path).expect("flow"),
            RunOptions {
                flow_path: Some(path.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    first.flush().expect("flush");
    drop(first);

    // Another process (a new engine and store) approves: the subflow runs a second time, and
    // pauses again; a third rejects.
    let decide = |answer: &str| Decision::parse(answer, "").expect("decision");
    let second = Store::open(&db).expect("store");
    let again = engine(&server, &second)
        .resume(&paused.run_id, decide("approve"), ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(again.status, RunStatus::Paused);
    second.flush().expect("flush");
    drop(second);
    let third = Store::open(&db).expect("store");
    let ended = engine(&server, &third)
        .resume(&paused.run_id, decide("reject"), ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(ended.status, RunStatus::Completed, "{:?}", ended.error);

    assert_eq!(server.request_count(), 2);
    let (visits, cost) = visits_of(&third, &ended);
    let mut keys: Vec<&str> = cost
        .calls
        .iter()
        .map(|call| call.node_key.as_str())
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["sub/ask", "sub@2/ask"],
        "each visit's call kept under its own key"
    );
    assert_eq!(cost.node("sub").calls, 2);
    assert_eq!(
        cost.node("sub/ask").calls,
        2,
        "both are the node `sub/ask`'s"
    );
    let sub: Vec<&NodeVisit> = visits.iter().filter(|visit| visit.key == "sub").collect();
    assert_eq!(sub.len(), 2);
    assert_eq!(sub[0].output, Some(json!("one")));
    assert_eq!(sub[1].output, Some(json!("two two")));
    assert_eq!(sub[1].cost.output_tokens, 2);
    // The approval waited twice; the second decision ended its visit.
    let review: Vec<&NodeVisit> = visits
        .iter()
        .filter(|visit| visit.key == "review")
        .collect();
    assert_eq!(review.len(), 2);
    assert!(
        review
            .iter()
            .all(|visit| visit.status == NodeStatus::Completed)
    );

    // A replay answered the same way gets both visits' answers from the recording: no request.
    let replaying = engine(&server, &third);
    let replay = replaying
        .start(
            Flow::load(&path).expect("flow"),
            RunOptions {
                flow_path: Some(path.clone()),
                replay: Some(ended.run_id.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("replays");
    assert_eq!(replay.status, RunStatus::Paused);
    let replay_again = replaying
        .resume(&replay.run_id, decide("approve"), ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(replay_again.status, RunStatus::Paused);
    let replayed = replaying
        .resume(&replay.run_id, decide("reject"), ResumeOptions::default())
        .await
        .expect("resumes");
    assert_eq!(replayed.status, RunStatus::Completed);
    assert_eq!(replayed.result, ended.result);
    assert_eq!(server.request_count(), 2, "both visits were replayed");
}
