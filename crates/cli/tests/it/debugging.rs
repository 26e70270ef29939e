//! Debugging headless (docs/debugging.md), through the real executable with a scripted LLM server
//! on
//! loopback: `weft show` and `weft runs` say what a run cost (prices shipped or from a file),
//! `weft diff` compares two runs node by node, and `weft run --pins` keeps pinned nodes from
//! running.

use crate::common;

use common::{Ran, Sandbox, edge, node};
use serde_json::{Value, json};
use weft_scripted_llm::{Reply, Script, ScriptedLlm};

fn agent_flow(model: &str) -> Value {
    json!({
        "version": 1,
        "name": "Ask",
        "nodes": [
            node("start", "start", json!({ "initialInput": "Ada" })),
            node("ask", "agent", json!({ "model": model, "userPrompt": "Greet {{PREVIOUS_OUTPUT}}" })),
        ],
        "edges": [edge("e1", "start", "ask", None)]
    })
}

fn json_of(ran: &Ran) -> Value {
    assert_eq!(ran.code, Some(0), "{ran:?}");
    serde_json::from_str(&ran.stdout).expect("JSON on stdout")
}

/// Runs `weft` with `WEFT_PRICES` naming `prices`.
fn with_prices(sandbox: &Sandbox, args: &[&str], prices: &str) -> Ran {
    sandbox
        .command(args, None)
        .env("WEFT_PRICES", prices)
        .output()
        .expect("weft runs")
        .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn show_and_runs_price_each_call_and_a_prices_file_overrides_them() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("four words right here")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("ask.json", &agent_flow("gpt-4o-mini"));
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");

    let listed = json_of(&sandbox.run(&["runs", "--db", &db, "--json"]));
    let id = listed[0]["id"].as_str().expect("id").to_string();
    let shown = json_of(&sandbox.run(&["show", &id, "--db", &db, "--json"]));
    let input = shown["run"]["usage"]["inputTokens"]
        .as_u64()
        .expect("tokens");
    assert!(input > 0);
    // gpt-4o-mini's shipped list price: $0.15 per million input tokens, $0.60 output.
    let expected = (input as f64 * 0.15 + 4.0 * 0.60) / 1e6;
    let usd = |value: &Value| value.as_f64().expect("dollars");
    assert!(
        (usd(&shown["cost"]["total"]["usd"]) - expected).abs() < 1e-12,
        "{shown}"
    );
    assert!((usd(&shown["cost"]["nodes"]["ask"]["usd"]) - expected).abs() < 1e-12);
    assert!(
        (usd(&listed[0]["cost"]["usd"]) - expected).abs() < 1e-12,
        "{listed}"
    );
    let call = &shown["cost"]["calls"][0];
    assert_eq!(call["model"], "openai/gpt-4o-mini");
    assert_eq!(call["usage"]["outputTokens"], 4);

    // A prices file replaces the shipped price: a dollar per token makes the figure exact.
    let prices = sandbox.dir.path().join("prices.json");
    std::fs::write(
        &prices,
        json!({"openai/gpt-4o-mini": {"input": 1_000_000, "output": 1_000_000}}).to_string(),
    )
    .expect("write prices");
    let prices = prices.display().to_string();
    let dollars = format!("${}.00", input + 4);
    let text = with_prices(&sandbox, &["show", &id, "--db", &db], &prices);
    assert_eq!(text.code, Some(0), "{text:?}");
    let cost_line = text
        .stdout
        .lines()
        .find(|line| line.starts_with("cost"))
        .expect("a cost line");
    assert!(cost_line.contains(&dollars), "{}", text.stdout);
    assert!(text.stdout.contains("llm calls"), "{}", text.stdout);
    assert!(
        text.stdout.contains("openai/gpt-4o-mini"),
        "{}",
        text.stdout
    );
    let table = with_prices(&sandbox, &["runs", "--db", &db], &prices);
    assert!(table.stdout.contains("COST"), "{table:?}");
    assert!(table.stdout.contains(&dollars), "{table:?}");

    // A model with no price shows its tokens and no dollar figure, and says how to add one.
    let unpriced = sandbox.flow("local.json", &agent_flow("local-model"));
    let ran = sandbox
        .run_with(&["run", &unpriced, "--db", &db], &llm)
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed = json_of(&sandbox.run(&["runs", "--db", &db, "--json"]));
    let local = listed[0]["id"].as_str().expect("id").to_string();
    assert_eq!(
        listed[0]["cost"]["unpricedModels"],
        json!(["openai/local-model"])
    );
    let text = sandbox.run(&["show", &local, "--db", &db]);
    assert!(
        text.stdout
            .contains("no price for openai/local-model; WEFT_PRICES can add one"),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("$"), "no guess: {}", text.stdout);
}

#[test]
fn a_prices_file_that_cannot_be_used_is_named_and_exits_2() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let prices = sandbox.dir.path().join("prices.json");
    std::fs::write(&prices, "{\n  \"openai/x\": {\"input\": 1,,\n}").expect("write");
    let ran = with_prices(
        &sandbox,
        &["runs", "--db", &db],
        &prices.display().to_string(),
    );
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("prices.json: line 2"), "{ran:?}");
    assert!(ran.stderr.contains("WEFT_PRICES"), "{ran:?}");
    std::fs::write(&prices, r#"{"gpt-4o": {"input": 1, "output": 2}}"#).expect("write");
    let ran = with_prices(
        &sandbox,
        &["runs", "--db", &db],
        &prices.display().to_string(),
    );
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("`openai/gpt-4o`"), "{ran:?}");
}

/// start → greet (template, two lines) → out.
fn greeting_flow() -> Value {
    json!({
        "version": 1,
        "name": "Greet",
        "nodes": [
            node("start", "start", json!({ "initialInput": "Ada" })),
            node("greet", "template", json!({ "template": "Hello {{ PREVIOUS_OUTPUT }}\nhave a good day" })),
            node("out", "output", json!({})),
        ],
        "edges": [edge("e1", "start", "greet", None), edge("e2", "greet", "out", None)]
    })
}

fn run_id(sandbox: &Sandbox, flow: &str, input: &str) -> String {
    let db = sandbox.db_arg();
    let ran = sandbox.run(&["run", flow, "--db", &db, "--input", input]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    latest_run(sandbox)
}

#[test]
fn diff_tells_equal_runs_from_different_ones() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("greet.json", &greeting_flow());
    let first = run_id(&sandbox, &flow, "Ada");
    let again = run_id(&sandbox, &flow, "Ada");
    let other = run_id(&sandbox, &flow, "Bob");

    let same = sandbox.run(&["diff", &first, &again, "--db", &db]);
    assert_eq!(same.code, Some(0), "{same:?}");
    assert!(
        same.stdout.contains("same outputs: all 3 nodes agree"),
        "{}",
        same.stdout
    );

    let differ = sandbox.run(&["diff", &first[..8], &other, "--db", &db]);
    assert_eq!(differ.code, Some(1), "{differ:?}");
    assert!(differ.stdout.contains("  - Hello Ada"), "{}", differ.stdout);
    assert!(differ.stdout.contains("  + Hello Bob"), "{}", differ.stdout);
    assert!(
        !differ.stdout.contains("- have a good day"),
        "unchanged lines are not listed"
    );
    assert!(
        differ.stdout.contains("outputs differ at 3 nodes of 3"),
        "{}",
        differ.stdout
    );

    let report = sandbox.run(&["diff", &first, &other, "--db", &db, "--json"]);
    assert_eq!(report.code, Some(1), "{report:?}");
    let report: Value = serde_json::from_str(&report.stdout).expect("JSON");
    assert_eq!(report["equal"], false);
    assert_eq!(report["a"]["id"], json!(first));
    let greet = report["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|node| node["node"] == "greet")
        .expect("greet compared");
    assert_eq!(greet["a"]["status"], "completed");
    assert_eq!(greet["sameOutput"], false);
    assert_eq!(greet["diff"]["kind"], "text");
    assert_eq!(
        greet["diff"]["lines"],
        json!([
            {"kind": "removed", "text": "Hello Ada"},
            {"kind": "added", "text": "Hello Bob"},
            {"kind": "same", "text": "have a good day"}
        ])
    );
}

#[test]
fn diff_names_changed_json_paths_and_nodes_one_run_never_reached() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    // start → check (if: contains "go") → yes (template) on the first condition only.
    let flow = sandbox.flow(
        "branch.json",
        &json!({
            "nodes": [
                node("start", "start", json!({})),
                node("check", "if", json!({ "conditions": [{ "operator": "contains", "value": "go" }] })),
                node("yes", "template", json!({ "template": "went" })),
            ],
            "edges": [
                edge("e1", "start", "check", None),
                edge("e2", "check", "yes", Some("condition-0")),
            ]
        }),
    );
    let going = run_id(&sandbox, &flow, r#"{"say": "go", "n": 1}"#);
    let staying = run_id(&sandbox, &flow, r#"{"say": "stay", "n": 1}"#);
    let report = sandbox.run(&["diff", &going, &staying, "--db", &db, "--json"]);
    assert_eq!(report.code, Some(1), "{report:?}");
    let report: Value = serde_json::from_str(&report.stdout).expect("JSON");
    let node = |id: &str| {
        report["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|node| node["node"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} compared: {report}"))
    };
    assert_eq!(
        node("start")["diff"],
        json!({"kind": "json", "changes": [{"path": "$.say", "a": "go", "b": "stay"}], "truncated": false})
    );
    assert_eq!(node("yes")["a"]["status"], "completed");
    assert_eq!(node("yes")["b"]["status"], "not_run");
    assert_eq!(node("yes")["b"]["output"], Value::Null);

    let text = sandbox.run(&["diff", &going, &staying, "--db", &db]);
    assert!(
        text.stdout.contains("$.say: \"go\" → \"stay\""),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("completed | not run"),
        "{}",
        text.stdout
    );

    let unknown = sandbox.run(&["diff", &going, "no-such-run", "--db", &db]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("no-such-run"), "{unknown:?}");
}

/// start → review (approval) → classify (agent) → reply (template).
fn pinned_flow() -> Value {
    json!({
        "version": 1,
        "name": "Pinned",
        "nodes": [
            node("start", "start", json!({ "initialInput": "my parcel never came" })),
            node("review", "approval", json!({ "message": "go on?" })),
            node("classify", "agent", json!({ "model": "gpt-4o-mini", "userPrompt": "Label: {{ PREVIOUS_OUTPUT }}" })),
            node("reply", "template", json!({ "template": "Reply for {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [
            edge("e1", "start", "review", None),
            edge("e2", "review", "classify", Some("approve")),
            edge("e3", "classify", "reply", None),
        ]
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_node_does_not_run_and_stays_pinned_across_a_resume() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("live label")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("pinned.json", &pinned_flow());
    std::fs::write(
        sandbox.dir.path().join("pinned.pins.json"),
        json!({"pins": {"classify": {"output": "delivery", "from": "typed"}}}).to_string(),
    )
    .expect("write pins");

    // Pinned, the run pauses at the approval; resumed by another process, the pin still holds.
    let ran = sandbox
        .run_with(&["run", &flow, "--db", &db, "--pins"], &llm)
        .await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let run_id = common::paused_run_id(&ran);
    // The pins are stored once with the run, not in its row or the state, which each
    // checkpoint writes again.
    let stored = |query: &str| -> Option<String> {
        rusqlite::Connection::open(sandbox.db())
            .expect("sqlite")
            .query_row(query, [&run_id], |row| row.get(0))
            .expect("the run's row")
    };
    let pins = stored("SELECT pins_json FROM run_pins WHERE run_id = ?1");
    assert!(
        pins.as_ref().is_some_and(|pins| pins.contains("delivery")),
        "{pins:?}"
    );
    let row = stored("SELECT state_json || input_json FROM runs WHERE id = ?1");
    assert!(
        row.as_ref().is_some_and(|row| !row.contains("delivery")),
        "{row:?}"
    );
    let ran = sandbox
        .run_with(
            &["resume", &run_id, "--decision", "approve", "--db", &db],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Reply for delivery");
    assert!(llm.requests().is_empty(), "no request reached the server");
    let shown = json_of(&sandbox.run(&["show", &run_id, "--db", &db, "--json"]));
    let events = shown["events"].as_array().expect("events");
    assert!(
        events.iter().any(|event| event["type"] == "logic_check"
            && event["nodeId"] == "classify"
            && event["content"].as_str().unwrap_or("").contains("pinned")),
        "the log says the node was pinned: {shown}"
    );

    // Stopped before by a breakpoint, a pinned node stays pinned when the run goes on.
    let ran = sandbox
        .run_with(
            &[
                "run",
                &flow,
                "--db",
                &db,
                "--pins",
                "--decide",
                "review=approve",
                "--break",
                "classify",
            ],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let stopped = common::paused_run_id(&ran);
    // As a Weft from before kept them: in the run's state. They still hold.
    let as_before = |run_id: &str| {
        let conn = rusqlite::Connection::open(sandbox.db()).expect("sqlite");
        conn.execute(
            "UPDATE runs SET state_json = json_set(state_json, '$.pins', \
             json((SELECT pins_json FROM run_pins WHERE run_id = runs.id))) WHERE id = ?1",
            [run_id],
        )
        .expect("pins moved into the state");
        conn.execute("DELETE FROM run_pins WHERE run_id = ?1", [run_id])
            .expect("and out of their table");
    };
    as_before(&stopped);
    let ran = sandbox
        .run_with(&["resume", &stopped, "--continue", "--db", &db], &llm)
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Reply for delivery");
    assert!(llm.requests().is_empty(), "still no request");
    // Such a run that pauses again before its pinned node (at its approval) keeps its pins.
    let ran = sandbox
        .run_with(
            &["run", &flow, "--db", &db, "--pins", "--break", "review"],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let stopped = common::paused_run_id(&ran);
    as_before(&stopped);
    let ran = sandbox
        .run_with(&["resume", &stopped, "--continue", "--db", &db], &llm)
        .await;
    assert_eq!(ran.code, Some(3), "paused at the approval: {ran:?}");
    let ran = sandbox
        .run_with(
            &["resume", &stopped, "--decision", "approve", "--db", &db],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Reply for delivery");
    assert!(
        llm.requests().is_empty(),
        "no request after the second pause either"
    );

    // Without --pins the node runs.
    let ran = sandbox
        .run_with(
            &["run", &flow, "--db", &db, "--decide", "review=approve"],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Reply for live label");
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn a_paused_runs_state_names_the_nodes_of_its_result_not_their_values() {
    // start → out (output), and start → after (template) → review (approval) → done
    // (template): the result is `out`'s value.
    let flow = json!({
        "version": 1,
        "name": "Result kept",
        "nodes": [
            node("start", "start", json!({ "initialInput": "the first answer" })),
            node("out", "output", json!({})),
            node("after", "template", json!({ "template": "a draft" })),
            node("review", "approval", json!({ "message": "go on?" })),
            node("done", "template", json!({ "template": "done" })),
            node("again", "approval", json!({ "message": "and now?" })),
            node("end", "template", json!({ "template": "the end" })),
        ],
        "edges": [
            edge("e1", "start", "out", None),
            edge("e2", "start", "after", None),
            edge("e3", "after", "review", None),
            edge("e4", "review", "done", Some("approve")),
            edge("e5", "done", "again", None),
            edge("e6", "again", "end", Some("approve")),
        ]
    });
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let path = sandbox.flow("kept.json", &flow);
    let state_of = |run_id: &str| -> Value {
        let text: String = rusqlite::Connection::open(sandbox.db())
            .expect("sqlite")
            .query_row(
                "SELECT state_json FROM runs WHERE id = ?1",
                [run_id],
                |row| row.get(0),
            )
            .expect("the run's state");
        serde_json::from_str(&text).expect("state JSON")
    };

    let ran = sandbox.run(&["run", &path, "--db", &db]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let run_id = common::paused_run_id(&ran);
    // Each checkpoint writes the state whole: it names the nodes, whose outputs are stored
    // once, rather than carrying their values again.
    let state = state_of(&run_id);
    assert_eq!(state["lastOutputNode"], json!("out"), "{state}");
    assert!(
        ["out", "after"].contains(&state["lastFinishedNode"].as_str().unwrap_or("")),
        "{state}"
    );
    assert!(!state.to_string().contains("the first answer"), "{state}");
    let ran = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(3), "paused again: {ran:?}");
    let ran = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "the first answer");

    // A run paused by a Weft from before kept the values in its state: they still count.
    let ran = sandbox.run(&["run", &path, "--db", &db]);
    let run_id = common::paused_run_id(&ran);
    rusqlite::Connection::open(sandbox.db())
        .expect("sqlite")
        .execute(
            "UPDATE runs SET state_json = json_set(json_remove(state_json, \
             '$.lastOutputNode', '$.lastFinishedNode'), \
             '$.lastOutput', 'kept by an older Weft', '$.lastFinished', 'after it') \
             WHERE id = ?1",
            [&run_id],
        )
        .expect("the state as an older Weft wrote it");
    // Paused again before an `output` node runs: the value is still the result.
    let ran = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(3), "paused again: {ran:?}");
    let ran = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "kept by an older Weft");
}

#[test]
fn pins_that_cannot_apply_are_refused_before_anything_runs() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("pinned.json", &pinned_flow());
    let pins = sandbox.dir.path().join("pinned.pins.json");
    let refused = |what: &str| {
        let ran = sandbox.run(&["run", &flow, "--db", &db, "--pins"]);
        assert_eq!(ran.code, Some(2), "{what}: {ran:?}");
        ran.stderr
    };
    let stderr = refused("no file");
    assert!(stderr.contains("pinned.pins.json"), "{stderr}");
    std::fs::write(&pins, "{\"pins\": {\n  \"classify\": {\"output\": 1,}\n}}").expect("write");
    let stderr = refused("not JSON");
    assert!(stderr.contains("pinned.pins.json: line 2"), "{stderr}");
    std::fs::write(
        &pins,
        json!({"pins": {"clasify": {"output": 1}}}).to_string(),
    )
    .expect("write");
    let stderr = refused("a node the flow lacks");
    assert!(
        stderr.contains("pin `clasify`: the flow has no such node"),
        "{stderr}"
    );
    std::fs::write(
        &pins,
        json!({"pins": {"review": {"output": 1}}}).to_string(),
    )
    .expect("write");
    let stderr = refused("an approval");
    assert!(stderr.contains("cannot be pinned"), "{stderr}");
    let runs = json_of(&sandbox.run(&["runs", "--db", &db, "--json"]));
    assert_eq!(runs, json!([]), "nothing was stored");
}

/// start → a → b → c: three agents, each asked about the previous answer.
fn chain_flow(b_prompt: &str) -> Value {
    let agent = |prompt: &str| json!({ "model": "gpt-4o-mini", "userPrompt": prompt });
    json!({
        "version": 1,
        "name": "Chain",
        "nodes": [
            node("start", "start", json!({ "initialInput": "a parcel" })),
            node("a", "agent", agent("First: {{ PREVIOUS_OUTPUT }}")),
            node("b", "agent", agent(b_prompt)),
            node("c", "agent", agent("Third: {{ PREVIOUS_OUTPUT }}")),
        ],
        "edges": [
            edge("e1", "start", "a", None),
            edge("e2", "a", "b", None),
            edge("e3", "b", "c", None),
        ]
    })
}

fn latest_run(sandbox: &Sandbox) -> String {
    let db = sandbox.db_arg();
    let listed = json_of(&sandbox.run(&["runs", "--db", &db, "--json", "--limit", "1"]));
    listed[0]["id"].as_str().expect("id").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replay_asks_only_from_the_changed_node_on() {
    // Every answer is the same text, so c's request after an edit of b is byte for byte the
    // recorded one: only the rule "after a live node, live" sends it.
    let llm = ScriptedLlm::start(Script::always(Reply::text("same answer")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("chain.json", &chain_flow("Second: {{ PREVIOUS_OUTPUT }}"));
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let recorded = latest_run(&sandbox);
    assert_eq!(llm.requests().len(), 3);

    // Unchanged: no request at all, the same outputs, and every call kept as the replay's own.
    let ran = sandbox
        .run_with(
            &["run", &flow, "--db", &db, "--replay", &recorded[..8]],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        llm.requests().len(),
        3,
        "a replay of an unchanged flow asks nothing"
    );
    let replayed = latest_run(&sandbox);
    let same = sandbox.run(&["diff", &recorded, &replayed, "--db", &db]);
    assert_eq!(same.code, Some(0), "{same:?}");
    let shown = json_of(&sandbox.run(&["show", &replayed, "--db", &db, "--json"]));
    assert_eq!(shown["cost"]["calls"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        shown["cost"]["total"]["usd"],
        json!(0.0),
        "replayed answers cost nothing"
    );
    let replay_notes = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| {
            event["type"] == "logic_check"
                && event["content"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("replayed:")
        })
        .count();
    assert_eq!(replay_notes, 3, "{shown}");

    // b's prompt edited: b and everything after it go live, a is replayed.
    sandbox.flow(
        "chain.json",
        &chain_flow("Second, briefly: {{ PREVIOUS_OUTPUT }}"),
    );
    let ran = sandbox
        .run_with(&["run", &flow, "--db", &db, "--replay", &recorded], &llm)
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let requests = llm.requests();
    assert_eq!(requests.len(), 5, "exactly b and c were asked again");
    let asked: Vec<String> = requests[3..]
        .iter()
        .map(|request| {
            request
                .conversation()
                .last()
                .map(|(_, text)| text.clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        asked,
        ["Second, briefly: same answer", "Third: same answer"]
    );

    let unknown = sandbox.run(&["run", &flow, "--db", &db, "--replay", "no-such-run"]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("no-such-run"), "{unknown:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_replay_replays_on_after_the_decision() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("live label")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("pinned.json", &pinned_flow());
    let ran = sandbox
        .run_with(
            &["run", &flow, "--db", &db, "--decide", "review=approve"],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let recorded = latest_run(&sandbox);
    assert_eq!(llm.requests().len(), 1);

    let ran = sandbox
        .run_with(&["run", &flow, "--db", &db, "--replay", &recorded], &llm)
        .await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let paused = common::paused_run_id(&ran);
    let ran = sandbox
        .run_with(
            &["resume", &paused, "--decision", "approve", "--db", &db],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Reply for live label");
    assert_eq!(llm.requests().len(), 1, "the resumed replay asked nothing");
}

/// start → greet (template) → shout (template) → out.
fn shouting_flow() -> Value {
    json!({
        "version": 1,
        "name": "Shout",
        "nodes": [
            node("start", "start", json!({ "initialInput": "Ada" })),
            node("greet", "template", json!({ "template": "Hello {{ PREVIOUS_OUTPUT }}" })),
            node("shout", "template", json!({ "template": "{{ PREVIOUS_OUTPUT | upper }}" })),
            node("out", "output", json!({})),
        ],
        "edges": [
            edge("e1", "start", "greet", None),
            edge("e2", "greet", "shout", None),
            edge("e3", "shout", "out", None),
        ]
    })
}

fn status_of(sandbox: &Sandbox, run_id: &str) -> Value {
    let shown = json_of(&sandbox.run(&["show", run_id, "--db", &sandbox.db_arg(), "--json"]));
    shown["run"]["summary"]["status"].clone()
}

#[test]
fn a_breakpoint_stops_before_and_after_and_a_replaced_value_goes_downstream() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("shout.json", &shouting_flow());

    // Before: the run pauses with greet's input, resumable by another process.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "greet"]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(
        ran.stderr
            .contains("breakpoint before `greet` (visit 1): its input is Ada"),
        "{ran:?}"
    );
    assert!(
        ran.stderr
            .contains("⏸ stopped at a breakpoint before `greet`"),
        "{ran:?}"
    );
    assert!(ran.stderr.contains("--continue"), "{ran:?}");
    let run_id = common::paused_run_id(&ran);
    // A decision is not what a breakpoint takes; the run stays paused.
    let refused = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("paused at a breakpoint at `greet`"),
        "{refused:?}"
    );
    assert_eq!(status_of(&sandbox, &run_id), "paused");
    // A value that is not JSON is refused before the run is touched.
    let refused = sandbox.run(&["resume", &run_id, "--continue", "--set", "Bob", "--db", &db]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("--set: not JSON"), "{refused:?}");
    assert_eq!(status_of(&sandbox, &run_id), "paused");
    // Replaced, the new input is what greet and everything after it get, and the log says so.
    let ran = sandbox.run(&[
        "resume",
        &run_id,
        "--continue",
        "--set",
        "\"Bob\"",
        "--db",
        &db,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "HELLO BOB");
    let shown = json_of(&sandbox.run(&["show", &run_id, "--db", &db, "--json"]));
    assert!(
        shown["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|event| {
                event["type"] == "logic_check"
                    && event["nodeId"] == "greet"
                    && event["content"]
                        .as_str()
                        .unwrap_or("")
                        .contains("replaced by the person: \"Bob\"")
            }),
        "{shown}"
    );

    // After: the run pauses with greet's output; the replaced output goes on downstream and is
    // greet's stored output.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "greet:after"]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(
        ran.stderr
            .contains("breakpoint after `greet` (visit 1): its output is Hello Ada"),
        "{ran:?}"
    );
    let run_id = common::paused_run_id(&ran);
    let ran = sandbox.run(&[
        "resume",
        &run_id,
        "--continue",
        "--set",
        "\"Hi there\"",
        "--db",
        &db,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "HI THERE");
    let shown = json_of(&sandbox.run(&["show", &run_id, "--db", &db, "--json"]));
    let greet = shown["nodeOutputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|output| output["nodeId"] == "greet")
        .cloned()
        .expect("greet's output");
    assert_eq!(greet["output"], "Hi there");

    // After the output node: the replaced value is the run's result.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "out:after"]);
    let run_id = common::paused_run_id(&ran);
    let ran = sandbox.run(&[
        "resume",
        &run_id,
        "--continue",
        "--set",
        "\"Bye\"",
        "--db",
        &db,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "Bye");
}

#[test]
fn stepping_stops_before_each_next_step() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("shout.json", &shouting_flow());
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "greet"]);
    let run_id = common::paused_run_id(&ran);
    let ran = sandbox.run(&["resume", &run_id, "--continue", "--step", "--db", &db]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(
        ran.stderr
            .contains("breakpoint before `shout` (visit 1) (a step): its input is Hello Ada"),
        "{ran:?}"
    );
    let ran = sandbox.run(&["resume", &run_id, "--continue", "--step", "--db", &db]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(ran.stderr.contains("before `out`"), "{ran:?}");
    let ran = sandbox.run(&["resume", &run_id, "--continue", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "HELLO ADA");
}

#[test]
fn a_conditional_breakpoint_stops_at_the_loop_visit_it_names() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    // start → grow (adds an x) → enough? (contains "xxxx") → out; otherwise back to grow.
    let flow = sandbox.flow(
        "loop.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({ "initialInput": "" })),
                node("grow", "template", json!({ "template": "{{ PREVIOUS_OUTPUT }}x" })),
                node("enough", "if", json!({ "conditions": [{ "operator": "contains", "value": "xxxx" }] })),
                node("out", "output", json!({})),
            ],
            "edges": [
                edge("e1", "start", "grow", None),
                edge("e2", "grow", "enough", None),
                edge("e3", "enough", "out", Some("condition-0")),
                edge("e4", "enough", "grow", Some("false")),
            ]
        }),
    );
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "grow if visit == 3"]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(
        ran.stderr
            .contains("breakpoint before `grow` (visit 3) (visit == 3): its input is xx"),
        "{ran:?}"
    );
    let run_id = common::paused_run_id(&ran);
    // Continued, the condition no longer holds: the loop runs to its end.
    let ran = sandbox.run(&["resume", &run_id, "--continue", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "xxxx");

    // Breakpoints that cannot apply are refused before anything runs.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "gorw"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr
            .contains("breakpoint at `gorw`: the flow has no such node"),
        "{ran:?}"
    );
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--break", "grow if visit =="]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("does not parse"), "{ran:?}");
    // Refused before the store is opened: a store that did not exist is not created.
    let fresh = Sandbox::new();
    let flow = fresh.flow(
        "loop.json",
        &json!({
            "nodes": [node("start", "start", json!({}))],
            "edges": []
        }),
    );
    let ran = fresh.run(&["run", &flow, "--db", &fresh.db_arg(), "--break", "gorw"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(!fresh.db().exists(), "no store was created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_output_must_fit_the_schema_and_approvals_are_not_continued() {
    let llm = ScriptedLlm::start(Script::always(Reply::text(r#"{"label": "bug"}"#)))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow(
        "classify.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({ "initialInput": "it crashes" })),
                node("classify", "agent", json!({ "model": "gpt-4o-mini", "outputSchema": {
                    "type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]
                }})),
                node("say", "template", json!({ "template": "label: {{ input.label }}" })),
            ],
            "edges": [edge("e1", "start", "classify", None), edge("e2", "classify", "say", None)]
        }),
    );
    let ran = sandbox
        .run_with(
            &["run", &flow, "--db", &db, "--break", "classify:after"],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let run_id = common::paused_run_id(&ran);
    let refused = sandbox.run(&[
        "resume",
        &run_id,
        "--continue",
        "--set",
        r#"{"label": 3}"#,
        "--db",
        &db,
    ]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("does not match its outputSchema"),
        "{refused:?}"
    );
    assert_eq!(status_of(&sandbox, &run_id), "paused");
    let ran = sandbox.run(&[
        "resume",
        &run_id,
        "--continue",
        "--set",
        r#"{"label": "feature"}"#,
        "--db",
        &db,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "label: feature");

    // --continue on a run that waits at an approval is refused; the run stays paused.
    let flow = sandbox.flow("pinned.json", &pinned_flow());
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let run_id = common::paused_run_id(&ran);
    let refused = sandbox.run(&["resume", &run_id, "--continue", "--db", &db]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("waits at the approval `review`, not at a breakpoint"),
        "{refused:?}"
    );
    assert_eq!(status_of(&sandbox, &run_id), "paused");
}

#[tokio::test(flavor = "multi_thread")]
async fn show_node_lists_every_visit_of_a_loop_with_its_input_output_and_cost() {
    let llm = ScriptedLlm::start(Script::always(Reply::echo("heard ")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow(
        "loop.json",
        &json!({
            "version": 1,
            "name": "Two passes",
            "nodes": [
                node("start", "start", json!({ "initialInput": { "n": 0 } })),
                node("step", "template", json!({ "template": "{\"n\": {{ n + 1 }}}", "parseJson": true })),
                node("ask", "agent", json!({ "model": "gpt-4o-mini", "userPrompt": "Pass {{ n }}" })),
                node("carry", "template", json!({ "template": "{\"n\": {{ nodes.step.n }}}", "parseJson": true })),
                node("more", "if", json!({ "conditions": [{ "field": "n", "operator": "lt", "value": "2" }] })),
                node("done", "output", json!({})),
            ],
            "edges": [
                edge("e1", "start", "step", None),
                edge("e2", "step", "ask", None),
                edge("e3", "ask", "carry", None),
                edge("e4", "carry", "more", None),
                edge("e5", "more", "step", Some("condition-0")),
                edge("e6", "more", "done", Some("false")),
            ]
        }),
    );
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let id = json_of(&sandbox.run(&["runs", "--db", &db, "--json"]))[0]["id"]
        .as_str()
        .expect("id")
        .to_string();

    let visits = json_of(&sandbox.run(&["show", &id, "--db", &db, "--node", "ask", "--json"]));
    let visits = visits.as_array().expect("a list of visits");
    assert_eq!(visits.len(), 2);
    for (index, visit) in visits.iter().enumerate() {
        let pass = index as u64 + 1;
        assert_eq!(visit["visit"], pass);
        assert_eq!(visit["status"], "completed");
        assert_eq!(visit["input"], json!({ "n": pass }));
        assert_eq!(visit["output"], json!(format!("heard Pass {pass}")));
        assert_eq!(visit["cost"]["calls"], 1);
        assert!(visit["cost"]["usd"].as_f64().expect("dollars") > 0.0);
    }
    // The whole run's JSON has them too.
    let shown = json_of(&sandbox.run(&["show", &id, "--db", &db, "--json"]));
    let asked = shown["visits"]
        .as_array()
        .expect("visits")
        .iter()
        .filter(|visit| visit["key"] == "ask")
        .count();
    assert_eq!(asked, 2);

    let text = sandbox.run(&["show", &id, "--db", &db, "--node", "ask"]);
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout.starts_with("2 visits of `ask`"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("ask #2"), "{}", text.stdout);
    assert!(
        text.stdout.contains("output  heard Pass 1"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("1 LLM call, tokens"),
        "{}",
        text.stdout
    );

    let missing = sandbox.run(&["show", &id, "--db", &db, "--node", "nope"]);
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(
        missing.stderr.contains("has no node `nope`"),
        "{}",
        missing.stderr
    );
}
