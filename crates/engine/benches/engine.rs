//! `cargo bench -p weft-engine` — prints the engine's speed figures (not a pass/fail test):
//!
//! 1. per-step overhead on a chain of 10,000 non-LLM nodes (target ≤ 5 µs per step);
//! 2. wall time of 1,000 concurrent agent branches against the scripted LLM server answering
//!    after 50 ms (target: within 0.1 s of the ideal 50 ms);
//! 3. events written per second to the run store (target ≥ 50,000 events/s);
//! 4. forEach over 1,000 items with maxConcurrency 50 (a template step, then a Python step);
//! 5. validation of a 1,000-node flow, first and after an edit of one node, as the canvas
//!    validates on every change (target ≤ 10 ms);
//! 6. replay of a recorded 100-node run with 50 LLM nodes: engine time with every answer from
//!    the recording (target ≤ 50 ms);
//! 7. what a breakpoint costs: a run stopped and continued, against the same run unstopped
//!    (target ≤ 1 ms more).
//!
//! Flow tests run offline have a bench of their own (`cargo bench -p weft-testing`).
//!
//! Whole-process figures of the `weft` command (start-up, set-up, printing events) are
//! `bash scripts/bench.sh`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_engine::{Engine, RunOptions};
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_event::{EventType, RunEvent, RunStatus};

use weft_flow::Flow;

use weft_scripted_llm::{Reply, Script, ScriptedLlm};
use weft_store::Store;

fn chain_flow(length: usize, kind: &str) -> Flow {
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    let mut edges = Vec::new();
    let mut previous = "start".to_string();
    for index in 0..length {
        let id = format!("n{index}");
        let data = match kind {
            "if" => json!({"conditions": [{"operator": "is_not_empty"}]}),
            _ => json!({"template": "{{ PREVIOUS_OUTPUT }}"}),
        };
        nodes.push(json!({"id": id, "type": kind, "data": data}));
        let handle = if previous != "start" && kind == "if" {
            "condition-0"
        } else {
            "output"
        };
        edges.push(json!({"id": format!("e{index}"), "source": previous, "target": id, "sourceHandle": handle}));
        previous = id;
    }
    // A final `output` gives the last `if` a branch (validation requires one).
    nodes.push(json!({"id": "end", "type": "output", "data": {}}));
    let handle = if kind == "if" {
        "condition-0"
    } else {
        "output"
    };
    edges.push(json!({"id": "e-end", "source": previous, "target": "end", "sourceHandle": handle}));
    Flow::from_value(
        json!({"name": "chain", "nodes": nodes, "edges": edges}),
        "bench",
    )
    .expect("chain flow")
}

fn fan_out_flow(branches: usize) -> Flow {
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    let mut edges = Vec::new();
    for index in 0..branches {
        let id = format!("a{index}");
        nodes.push(json!({"id": id, "type": "agent", "data": {"model": "scripted", "userPrompt": "branch {{ PREVIOUS_OUTPUT }}"}}));
        edges.push(json!({"id": format!("e{index}"), "source": "start", "target": id}));
    }
    Flow::from_value(
        json!({"name": "fan-out", "nodes": nodes, "edges": edges}),
        "bench",
    )
    .expect("fan-out flow")
}

fn engine(dir: &std::path::Path, base_url: String) -> Engine {
    let settings = ProviderSettings {
        openai_base_url: base_url,
        openai_api_key: Some(Secret::new("sk-bench")),
        ..ProviderSettings::default()
    };
    Engine::new(
        LlmClients::new(settings),
        Store::open(&dir.join("bench.db")).expect("store"),
    )
}

async fn chain_step_overhead(kind: &str, length: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = engine(dir.path(), "http://127.0.0.1:9/v1".into());
    let flow = chain_flow(length, kind);
    let started = Instant::now();
    let problems = weft_nodes::validate(&flow, None);
    let validated = started.elapsed();
    let errors: Vec<String> = problems
        .iter()
        .filter(|problem| problem.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "the bench flow is invalid: {errors:?}");
    let mut best = Duration::MAX;
    let mut best_steps = Duration::MAX;
    let mut best_delivered = Duration::MAX;
    for _ in 0..3 {
        let flow = flow.clone();
        // Steps run from the first step_start to run_end; before that is per-run setup
        // (validation, parsing configs, compiling templates, storing the flow). The engine's
        // pace is read from the events' own times (when they were made); a listener gets each
        // event only once the store has committed it, so what it sees is the store's pace.
        let marks: Arc<Mutex<Marks>> = Arc::default();
        let sink = marks.clone();
        let listener: weft_event::EventListener = Arc::new(move |event: &RunEvent| {
            let mut marks = sink.lock().expect("marks");
            match event.kind {
                EventType::StepStart if marks.first_made.is_none() => {
                    marks.first_made = Some(event.ts.to_string());
                    marks.first_seen = Some(Instant::now());
                }
                EventType::RunEnd => {
                    marks.end_made = Some(event.ts.to_string());
                    marks.end_seen = Some(Instant::now());
                }
                _ => {}
            }
        });
        let options = RunOptions {
            on_event: Some(listener),
            ..RunOptions::default()
        };
        let started = Instant::now();
        let outcome = engine.start(flow, options).await.expect("runs");
        let elapsed = started.elapsed();
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
        best = best.min(elapsed);
        let marks = marks.lock().expect("marks");
        if let (Some(made), Some(delivered)) = (marks.steps_made(), marks.steps_seen()) {
            best_steps = best_steps.min(made);
            best_delivered = best_delivered.min(delivered);
        }
    }
    let steps = length + 2;
    println!(
        "chain of {length} `{kind}` nodes: whole run {:.1} ms (validation alone {:.1} ms), steps {:.1} ms = {:.2} µs per step incl. events and store writes  [target ≤ 5 µs]; \
         their events committed and delivered within {:.1} ms",
        best.as_secs_f64() * 1e3,
        validated.as_secs_f64() * 1e3,
        best_steps.as_secs_f64() * 1e3,
        best_steps.as_secs_f64() * 1e6 / steps as f64,
        best_delivered.as_secs_f64() * 1e3,
    );
}

/// When the first step started and the run ended: as the events say they were made, and as
/// the listener saw them.
#[derive(Default)]
struct Marks {
    first_made: Option<String>,
    end_made: Option<String>,
    first_seen: Option<Instant>,
    end_seen: Option<Instant>,
}

impl Marks {
    fn steps_made(&self) -> Option<Duration> {
        let time = |ts: &Option<String>| chrono::DateTime::parse_from_rfc3339(ts.as_deref()?).ok();
        (time(&self.end_made)? - time(&self.first_made)?)
            .to_std()
            .ok()
    }

    fn steps_seen(&self) -> Option<Duration> {
        Some(self.end_seen? - self.first_seen?)
    }
}

async fn concurrent_agent_branches(branches: usize, delay_ms: u64) {
    let server = ScriptedLlm::start(Script::always(Reply::Text {
        content: "ok".into(),
        delay_ms,
        echo: false,
        chunk_gap_ms: 0,
    }))
    .await
    .expect("server");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = engine(dir.path(), server.base_url());
    // Warm-up run: opens the connection pool, as a second run in a long-lived app would find it.
    let warm = engine
        .start(fan_out_flow(branches), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(warm.status, RunStatus::Completed, "{:?}", warm.error);
    let mut cold_and_warm = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let outcome = engine
            .start(fan_out_flow(branches), RunOptions::default())
            .await
            .expect("runs");
        cold_and_warm.push(started.elapsed());
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
        let responses = engine
            .store()
            .events(&outcome.run_id)
            .expect("events")
            .iter()
            .filter(|event| event.kind == EventType::LlmResponse)
            .count();
        assert_eq!(responses, branches);
    }
    let best = cold_and_warm.iter().min().copied().unwrap_or_default();
    let worst = cold_and_warm.iter().max().copied().unwrap_or_default();
    println!(
        "{branches} concurrent agent branches, server answers after {delay_ms} ms: best {:.1} ms, worst {:.1} ms (ideal {delay_ms} ms; overhead {:.1} ms)  [target: within 100 ms of ideal]",
        best.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3,
        best.as_secs_f64() * 1e3 - delay_ms as f64,
    );
}

/// forEach over `count` items, `max_concurrency` at a time, each item a nested run of a small
/// flow whose step is a `kind` node (`template`, or `code` for the Python sandbox).
async fn for_each_items(count: usize, max_concurrency: u32, kind: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let step = match kind {
        "code" => json!({"id": "work", "type": "code", "data": {"code": "return input * 2"}}),
        _ => json!({"id": "work", "type": "template", "data": {"template": "{{ input * 2 }}"}}),
    };
    let item = json!({"nodes": [{"id": "start", "type": "start"}, step],
                      "edges": [{"id": "e", "source": "start", "target": "work"}]});
    std::fs::write(dir.path().join("item.json"), item.to_string()).expect("write item flow");
    let parent = json!({
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "each", "type": "forEach", "data": {"flow": "item.json", "maxConcurrency": max_concurrency}},
        ],
        "edges": [{"id": "e", "source": "start", "target": "each"}]
    });
    let path = dir.path().join("parent.json");
    std::fs::write(&path, parent.to_string()).expect("write parent flow");
    let engine = engine(dir.path(), "http://127.0.0.1:9/v1".into());
    let input = serde_json::to_string(&(0..count).collect::<Vec<_>>()).expect("items");
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let flow = Flow::load(&path).expect("flow");
        let options = RunOptions {
            input: Some(input.clone()),
            flow_path: Some(path.clone()),
            ..RunOptions::default()
        };
        let started = Instant::now();
        let outcome = engine.start(flow, options).await.expect("runs");
        best = best.min(started.elapsed());
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
        assert_eq!(
            outcome
                .result
                .as_ref()
                .and_then(|list| list.as_array())
                .map(Vec::len),
            Some(count)
        );
    }
    println!(
        "forEach over {count} items, maxConcurrency {max_concurrency}, `{kind}` step per item: {:.1} ms (best of 3) = {:.1} µs per item",
        best.as_secs_f64() * 1e3,
        best.as_secs_f64() * 1e6 / count as f64,
    );
}

/// A flow of `size` nodes, each with a template of its own (as a real flow's prompts are),
/// alternating `template` and `if` nodes.
fn varied_flow(size: usize, edited: usize) -> Flow {
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    let mut edges = Vec::new();
    let mut previous = ("start".to_string(), "output");
    for index in 0..size {
        let id = format!("n{index}");
        let (kind, data, handle) = if index % 2 == 0 {
            let text = format!(
                "Step {index} (edit {}): {{{{ PREVIOUS_OUTPUT | upper }}}} {{% if vars.tone %}}in a {{{{ vars.tone }}}} tone{{% endif %}}",
                if index == 0 { edited } else { 0 }
            );
            (
                "template",
                json!({"template": text, "label": format!("Step {index}")}),
                "output",
            )
        } else {
            let condition = json!({"operator": "contains", "value": format!("Step {}", index - 1)});
            ("if", json!({"conditions": [condition]}), "condition-0")
        };
        nodes.push(
            json!({"id": id, "type": kind, "data": data, "position": {"x": index * 200, "y": 0}}),
        );
        edges.push(json!({"id": format!("e{index}"), "source": previous.0, "target": id, "sourceHandle": previous.1}));
        previous = (id, handle);
    }
    nodes.push(json!({"id": "end", "type": "output", "data": {}}));
    edges.push(
        json!({"id": "e-end", "source": previous.0, "target": "end", "sourceHandle": previous.1}),
    );
    Flow::from_value(json!({"name": "varied", "settings": {"vars": {"tone": "dry"}}, "nodes": nodes, "edges": edges}), "bench")
        .expect("varied flow")
}

fn validation_per_edit(size: usize) {
    let started = Instant::now();
    let problems = weft_nodes::validate(&varied_flow(size, 0), None);
    let first = started.elapsed();
    assert!(
        problems.iter().all(|problem| !problem.is_error()),
        "{problems:?}"
    );
    let mut edits: Vec<Duration> = (1..=21)
        .map(|edit| {
            let flow = varied_flow(size, edit);
            let started = Instant::now();
            weft_nodes::validate(&flow, None);
            started.elapsed()
        })
        .collect();
    edits.sort();
    println!(
        "validation of a {size}-node flow: first {:.2} ms, after editing one node {:.2} ms (median of {})  [target ≤ 10 ms]",
        first.as_secs_f64() * 1e3,
        edits[edits.len() / 2].as_secs_f64() * 1e3,
        edits.len()
    );
}

fn store_events_per_second(count: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("events.db")).expect("store");
    store.create_run(&weft_store::NewRun {
        id: "bench".into(),
        flow_name: "bench".into(),
        flow_path: None,
        flow_json: "{}".into(),
        flow_version: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a".into(),
        version_path: None,
        pins_json: None,
        input: Value::Null,
        started_at: "2026-01-01T00:00:00.000Z".into(),
        host: None,
        trigger: None,
    });
    store.flush().expect("flush");
    let started = Instant::now();
    for seq in 1..=count {
        store.append_event(
            RunEvent {
                seq,
                run_id: "bench".into(),
                ts: "2026-01-01T00:00:00.000Z".into(),
                kind: EventType::LlmDelta,
                node_id: Some("agent".into()),
                content: "a token ".into(),
                scope: None,
                item: None,
                from: None,
                usage: None,
                model: None,
            },
            None,
        );
    }
    store.flush().expect("flush");
    let elapsed = started.elapsed();
    let stored = store.events("bench").expect("events").len() as u64;
    assert_eq!(stored, count);
    println!(
        "run store: {count} events appended and committed in {:.1} ms = {:.0} events/s  [target ≥ 50,000/s]",
        elapsed.as_secs_f64() * 1e3,
        count as f64 / elapsed.as_secs_f64()
    );
}

/// start → 100 nodes alternating agent and template → the answers of a scripted server.
fn llm_chain_flow(nodes: usize) -> Flow {
    let mut flow_nodes =
        vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    let mut edges = Vec::new();
    let mut previous = "start".to_string();
    for index in 0..nodes {
        let id = format!("n{index}");
        let node = if index % 2 == 0 {
            json!({"id": id, "type": "agent", "data": {"model": "scripted", "userPrompt": "step {{ PREVIOUS_OUTPUT }}"}})
        } else {
            json!({"id": id, "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}"}})
        };
        flow_nodes.push(node);
        edges.push(json!({"id": format!("e{index}"), "source": previous, "target": id}));
        previous = id;
    }
    Flow::from_value(
        json!({"name": "llm chain", "nodes": flow_nodes, "edges": edges}),
        "bench",
    )
    .expect("llm chain flow")
}

/// Engine time (first `step_start` to `run_end`, from the events' own times) of a run.
fn engine_time(engine: &Engine, run_id: &str) -> Duration {
    let events = engine.store().events(run_id).expect("events");
    let time = |kind: EventType| {
        events
            .iter()
            .find(|event| event.kind == kind)
            .and_then(|event| chrono::DateTime::parse_from_rfc3339(&event.ts).ok())
    };
    match (time(EventType::StepStart), time(EventType::RunEnd)) {
        (Some(first), Some(end)) => (end - first).to_std().unwrap_or_default(),
        _ => Duration::ZERO,
    }
}

async fn replay_recorded_run(nodes: usize) {
    let server = ScriptedLlm::start(Script::always(Reply::text("answer")))
        .await
        .expect("server");
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = engine(dir.path(), server.base_url());
    let recorded = engine
        .start(llm_chain_flow(nodes), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(
        recorded.status,
        RunStatus::Completed,
        "{:?}",
        recorded.error
    );
    let live = engine_time(&engine, &recorded.run_id);
    let asked = server.requests().len();
    let mut best = Duration::MAX;
    let mut best_wall = Duration::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let replayed = engine
            .start(
                llm_chain_flow(nodes),
                RunOptions {
                    replay: Some(recorded.run_id.clone()),
                    ..RunOptions::default()
                },
            )
            .await
            .expect("replays");
        best_wall = best_wall.min(started.elapsed());
        assert_eq!(
            replayed.status,
            RunStatus::Completed,
            "{:?}",
            replayed.error
        );
        best = best.min(engine_time(&engine, &replayed.run_id));
    }
    assert_eq!(server.requests().len(), asked, "a replay asks nothing");
    println!(
        "replay of a {nodes}-node run with {} LLM nodes: engine {:.1} ms (whole call {:.1} ms; live against a local server: {:.1} ms)  [target ≤ 50 ms]",
        nodes.div_ceil(2),
        best.as_secs_f64() * 1e3,
        best_wall.as_secs_f64() * 1e3,
        live.as_secs_f64() * 1e3,
    );
}

async fn breakpoint_stop_and_continue(rounds: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = engine(dir.path(), "http://127.0.0.1:9/v1".into());
    let flow = chain_flow(3, "template");
    let mut plain = Vec::new();
    let mut stopped = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let outcome = engine
            .start(flow.clone(), RunOptions::default())
            .await
            .expect("runs");
        plain.push(started.elapsed());
        assert_eq!(outcome.status, RunStatus::Completed);
        let started = Instant::now();
        let paused = engine
            .start(
                flow.clone(),
                RunOptions {
                    breakpoints: vec![
                        weft_engine::breakpoints::Breakpoint::parse("n1").expect("breakpoint"),
                    ],
                    ..RunOptions::default()
                },
            )
            .await
            .expect("runs");
        assert_eq!(paused.status, RunStatus::Paused);
        let done = engine
            .continue_run(
                &paused.run_id,
                weft_engine::Continue::default(),
                weft_engine::ResumeOptions::default(),
            )
            .await
            .expect("continues");
        stopped.push(started.elapsed());
        assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    }
    plain.sort();
    stopped.sort();
    let median = |times: &[Duration]| times[times.len() / 2];
    println!(
        "a breakpoint stop and continue (stored pause, claim, resume) on a 5-step run: median {:.2} ms against {:.2} ms unstopped: {:.2} ms more  [target ≤ 1 ms]",
        median(&stopped).as_secs_f64() * 1e3,
        median(&plain).as_secs_f64() * 1e3,
        (median(&stopped).as_secs_f64() - median(&plain).as_secs_f64()) * 1e3,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (chain, branches, events) = if quick {
        (200, 20, 2_000)
    } else {
        (10_000, 1_000, 200_000)
    };
    // `cargo bench -p weft-engine -- branches` runs only the benchmarks whose name matches.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted =
        |name: &str| filter.is_empty() || filter.iter().any(|part| name.contains(part.as_str()));
    runtime.block_on(async {
        if wanted("chain") {
            chain_step_overhead("if", chain).await;
            chain_step_overhead("template", chain).await;
        }
        if wanted("branches") {
            concurrent_agent_branches(branches, 50).await;
        }
        if wanted("replay") {
            replay_recorded_run(if quick { 20 } else { 100 }).await;
        }
        if wanted("breakpoint") {
            breakpoint_stop_and_continue(if quick { 3 } else { 50 }).await;
        }
        if wanted("forEach") {
            let items = if quick { 20 } else { 1_000 };
            for_each_items(items, 50, "template").await;
            for_each_items(items, 50, "code").await;
        }
    });
    if wanted("store") {
        store_events_per_second(events);
    }
    if wanted("validation") {
        validation_per_edit(if quick { 100 } else { 1_000 });
    }
}
