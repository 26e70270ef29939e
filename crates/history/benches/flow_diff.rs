//! `cargo bench -p weft-history --bench flow_diff` — how long two versions of a 10,000-node
//! flow take to compare (not a pass/fail test; target ≤ 100 ms, docs/benchmarks.md). Under
//! `cargo test --benches` it compares once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_flow::Flow;
use weft_history::flow_diff::diff_flows;

/// A chain of `count` template nodes, every `edit_every`-th one edited (its text and a field
/// added), every `move_every`-th one moved, and the last ten taken out.
fn version(count: usize, edit_every: usize, move_every: usize) -> Flow {
    let mut nodes = vec![json!({"id": "start", "type": "start", "position": {"x": 0, "y": 0}})];
    let mut edges = Vec::new();
    let mut previous = "start".to_string();
    let kept = if edit_every == 0 { count } else { count - 10 };
    for index in 0..kept {
        let id = format!("n{index}");
        let edited = edit_every != 0 && index % edit_every == 0;
        let moved = move_every != 0 && index % move_every == 0;
        let mut data = json!({"label": format!("Step {index}"), "template": format!("{{{{ PREVIOUS_OUTPUT }}}}\nline {index}\nthe end")});
        if edited {
            data["template"] = Value::from(format!(
                "{{{{ PREVIOUS_OUTPUT }}}}\nline {index}, edited\nthe end"
            ));
            data["parseJson"] = Value::from(true);
        }
        let x = (index * 240) as f64 + if moved { 30.0 } else { 0.0 };
        nodes.push(
            json!({"id": id, "type": "template", "position": {"x": x, "y": 0}, "data": data}),
        );
        edges.push(json!({"id": format!("e{index}"), "source": previous, "target": id}));
        previous = id;
    }
    Flow::from_value(
        json!({"version": 1, "name": "big", "nodes": nodes, "edges": edges}),
        "bench",
    )
    .expect("a flow")
}

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let rounds = if quick { 1 } else { 20 };
    let a = version(10_000, 0, 0);
    let b = version(10_000, 100, 7);
    let mut best = Duration::MAX;
    let mut changed = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        let diff = diff_flows(&a, &b);
        best = best.min(started.elapsed());
        changed = diff.nodes_changed.len() + diff.nodes_removed.len() + diff.nodes_moved.len();
    }
    assert!(changed > 1_000, "the versions differ: {changed}");
    println!(
        "two versions of a 10,000-node flow ({changed} nodes changed, removed or moved): {:.1} ms  [target ≤ 100 ms]",
        best.as_secs_f64() * 1e3
    );
}
