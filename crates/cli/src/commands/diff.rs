//! `weft diff RUN_A RUN_B`: two runs node by node (docs/debugging.md). Exit 0 when every node's
//! output
//! is the same in both, 1 when any differs.

use weft_history::compare::{
    DiffLine, NodeComparison, NodeRun, NodeStatus, OutputDiff, RunComparison, RunSide,
};
use weft_history::cost::Cost;

use crate::output::{self, Style};
use crate::{DiffArgs, Exit};

/// Lines of a text diff, or changed paths of a JSON one, shown per node.
const SHOWN_CHANGES: usize = 12;
/// Characters of one diff line or value.
const CELL: usize = 160;

pub(crate) fn diff(args: &DiffArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    let location = super::location(&args.store)?;
    let weft = super::open(location)?;
    let comparison = weft_api::views::comparison(weft.store(), &args.a, &args.b, &prices)
        .map_err(|error| super::api_error(error.into()))?;
    if args.json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&comparison)?))?;
    } else {
        output::out(&report(&comparison, Style::stdout()))?;
    }
    Ok(if comparison.equal {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The two runs, a table of nodes, the differing outputs, and a verdict.
fn report(comparison: &RunComparison, style: Style) -> String {
    let mut text = String::new();
    for (label, side) in [("A", &comparison.a), ("B", &comparison.b)] {
        text.push_str(&run_line(label, side, style));
    }
    // What changed in the flow comes first: it may be why the outputs differ.
    if let Some(changes) = &comparison.flow_changes {
        text.push_str(&style.bold("\nthe two runs ran different versions of the flow (A → B):\n"));
        text.push_str(&super::flow_diff::changes_text(changes, style));
    }
    let rows: Vec<[String; 6]> = comparison
        .nodes
        .iter()
        .map(|node| {
            [
                node.node.clone(),
                pair(status_text(&node.a), status_text(&node.b)),
                pair(visits_text(&node.a), visits_text(&node.b)),
                pair(
                    millis_text(node.a.duration_ms),
                    millis_text(node.b.duration_ms),
                ),
                pair(tokens_text(&node.a.cost), tokens_text(&node.b.cost)),
                pair(node.a.cost.text(), node.b.cost.text()),
            ]
        })
        .collect();
    let header = [
        "NODE",
        "STATUS A | B",
        "VISITS",
        "TIME",
        "TOKENS (IN/OUT)",
        "COST",
    ];
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 6]| {
        let mut line = String::from("  ");
        for (cell, width) in cells.iter().zip(widths) {
            line.push_str(&output::pad(cell, width));
            line.push_str("  ");
        }
        line
    };
    text.push('\n');
    text.push_str(&style.dim(&format!("{}OUTPUT", line(&header.map(str::to_string)))));
    text.push('\n');
    for (row, node) in rows.iter().zip(&comparison.nodes) {
        let verdict = if node.same_output {
            style.dim("same")
        } else {
            style.yellow("differs")
        };
        text.push_str(&format!("{}{verdict}\n", line(row)));
    }
    let differing: Vec<&NodeComparison> = comparison
        .nodes
        .iter()
        .filter(|node| !node.same_output)
        .collect();
    for node in &differing {
        text.push_str(&format!("\n{}\n", style.bold(&node.node)));
        text.push_str(&diff_text(node, style));
    }
    text.push('\n');
    if differing.is_empty() {
        text.push_str(&style.green(&format!(
            "same outputs: all {} agree\n",
            output::count(comparison.nodes.len(), "node")
        )));
    } else {
        text.push_str(&style.yellow(&format!(
            "outputs differ at {} of {}\n",
            output::count(differing.len(), "node"),
            comparison.nodes.len()
        )));
    }
    text
}

fn run_line(label: &str, side: &RunSide, style: Style) -> String {
    let took = side
        .duration_ms
        .map(|ms| format!("  {}", output::duration(ms as f64 / 1000.0)))
        .unwrap_or_default();
    let name = if side.flow_name.is_empty() {
        "(unnamed)"
    } else {
        &side.flow_name
    };
    let spent = if side.cost.calls > 0 {
        format!(
            "  tokens {}  cost {}",
            tokens_text(&side.cost),
            side.cost.text()
        )
    } else {
        String::new()
    };
    format!(
        "{}  {}  {}  {name}{took}{spent}\n",
        style.bold(label),
        side.id,
        style.status(side.status)
    )
}

fn pair(a: String, b: String) -> String {
    if a == b { a } else { format!("{a} | {b}") }
}

fn status_text(node: &NodeRun) -> String {
    match node.status {
        NodeStatus::Completed => "completed",
        NodeStatus::Failed => "failed",
        NodeStatus::Waiting => "waiting",
        NodeStatus::Stopped => "stopped",
        NodeStatus::Running => "running",
        NodeStatus::NotRun => "not run",
    }
    .to_string()
}

fn visits_text(node: &NodeRun) -> String {
    node.visits.to_string()
}

fn millis_text(millis: Option<u64>) -> String {
    match millis {
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) => output::duration(ms as f64 / 1000.0),
        None => "-".into(),
    }
}

fn tokens_text(cost: &Cost) -> String {
    if cost.calls == 0 {
        "-".into()
    } else {
        format!("{}/{}", cost.input_tokens, cost.output_tokens)
    }
}

/// A node's differing outputs: `-`/`+` lines of text, or `path: a → b` for JSON.
fn diff_text(node: &NodeComparison, style: Style) -> String {
    let mut text = String::new();
    match &node.diff {
        Some(OutputDiff::Text { lines }) => {
            let changed: Vec<&DiffLine> = lines
                .iter()
                .filter(|line| !matches!(line, DiffLine::Same(_)))
                .collect();
            for line in changed.iter().take(SHOWN_CHANGES) {
                text.push_str(&match line {
                    DiffLine::Removed(line) => {
                        style.red(&format!("  - {}", output::one_line(line, CELL)))
                    }
                    DiffLine::Added(line) => {
                        style.green(&format!("  + {}", output::one_line(line, CELL)))
                    }
                    DiffLine::Same(_) => String::new(),
                });
                text.push('\n');
            }
            if changed.len() > SHOWN_CHANGES {
                text.push_str(&style.dim(&format!(
                    "  … {} more (--json has all)\n",
                    output::count(changed.len() - SHOWN_CHANGES, "changed line")
                )));
            }
        }
        Some(OutputDiff::Json { changes, truncated }) => {
            let value = |value: &Option<serde_json::Value>| match value {
                Some(value) => output::one_line(&value.to_string(), CELL / 2),
                None => "(none)".into(),
            };
            for change in changes.iter().take(SHOWN_CHANGES) {
                text.push_str(&format!(
                    "  {}: {} → {}\n",
                    change.path,
                    style.red(&value(&change.a)),
                    style.green(&value(&change.b))
                ));
            }
            if changes.len() > SHOWN_CHANGES || *truncated {
                text.push_str(&style.dim("  … more changes (--json has them)\n"));
            }
        }
        None => {}
    }
    text
}
