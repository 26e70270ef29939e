//! `weft flow-diff A B [--json]` (SPEC §17): two versions of a flow, each a flow file, a kept
//! version (its hash or a unique prefix, as `weft versions` lists them) or the flow a stored
//! run ran (its id or a unique prefix): nodes added, removed, changed (each
//! changed field, a text of several lines as a line diff) and moved, edges added and removed,
//! settings changed. Exit 0 when they are the same, 1 when they differ, 2 for what cannot be
//! read. `weft diff` prints the same list above the outputs when two runs ran different flows.

use std::path::Path;

use serde_json::Value;
use weft_flow::Flow;
use weft_history::compare::DiffLine;
use weft_history::flow_diff::{FieldChange, FlowDiff, NodeName, diff_flows};

use crate::output::{self, Style};
use crate::{Exit, FlowDiffArgs, usage_error};

/// Lines of one field's text diff shown.
const SHOWN_LINES: usize = 12;
/// Characters of one value or line.
const CELL: usize = 160;

pub(crate) fn flow_diff(args: &FlowDiffArgs) -> anyhow::Result<Exit> {
    let a = read_version(&args.a, args)?;
    let b = read_version(&args.b, args)?;
    let diff = diff_flows(&a, &b);
    if args.json {
        let shown = serde_json::json!({ "equal": diff.is_empty(), "changes": diff });
        output::out(&format!("{}\n", serde_json::to_string_pretty(&shown)?))?;
    } else if diff.is_empty() {
        output::out(&Style::stdout().green("the same flow\n"))?;
    } else {
        output::out(&changes_text(&diff, Style::stdout()))?;
    }
    Ok(if diff.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// A flow file, a kept version, else the flow the stored run `given` ran.
fn read_version(given: &str, args: &FlowDiffArgs) -> anyhow::Result<Flow> {
    let path = Path::new(given);
    if path.exists() {
        return Flow::load(path).map_err(|error| usage_error(error.to_string()));
    }
    let location = super::location(&args.store)?;
    let shown = location.to_string();
    let weft = super::open(location)?;
    weft_api::versions::flow_named(weft.store(), given, None)
        .map(|(flow, _)| flow)
        .map_err(|error| usage_error(format!("{} ({shown})", error.message)))
}

/// What changed, one line per node, edge or setting, with each changed field under its node.
pub(crate) fn changes_text(diff: &FlowDiff, style: Style) -> String {
    let mut text = String::new();
    for change in &diff.flow {
        text.push_str(&field_text("flow ", change, "", style));
    }
    for change in &diff.settings {
        text.push_str(&field_text("settings.", change, "", style));
    }
    for node in &diff.nodes_added {
        text.push_str(&style.green(&node_line('+', node)));
        text.push('\n');
    }
    for node in &diff.nodes_removed {
        text.push_str(&style.red(&node_line('-', node)));
        text.push('\n');
    }
    for node in &diff.nodes_changed {
        text.push_str(&style.yellow(&node_line('~', &node.node)));
        text.push('\n');
        for change in &node.fields {
            text.push_str(&field_text("", change, "    ", style));
        }
    }
    if !diff.nodes_moved.is_empty() {
        let moved: Vec<&str> = diff
            .nodes_moved
            .iter()
            .map(|node| node.id.as_str())
            .collect();
        text.push_str(&style.dim(&format!("  moved on the canvas: {}", moved.join(", "))));
        text.push('\n');
    }
    for edge in &diff.edges_added {
        text.push_str(&style.green(&format!(
            "+ edge {}",
            edge_text(&edge.source, &edge.source_handle, &edge.target)
        )));
        text.push('\n');
    }
    for edge in &diff.edges_removed {
        text.push_str(&style.red(&format!(
            "- edge {}",
            edge_text(&edge.source, &edge.source_handle, &edge.target)
        )));
        text.push('\n');
    }
    text
}

/// `+ node draft (agent) “Draft reply”`: the label only where it says more than the id.
fn node_line(sign: char, node: &NodeName) -> String {
    let label = if node.label == node.id {
        String::new()
    } else {
        format!(" “{}”", node.label)
    };
    format!("{sign} node {} ({}){label}", node.id, node.kind)
}

fn edge_text(source: &str, handle: &str, target: &str) -> String {
    if handle == weft_flow::DEFAULT_SOURCE_HANDLE {
        format!("{source} → {target}")
    } else {
        format!("{source}.{handle} → {target}")
    }
}

fn value_text(value: Option<&Value>) -> String {
    match value {
        None => "(none)".into(),
        Some(value) => output::one_line(&value.to_string(), CELL),
    }
}

/// `field: a → b`, or the field's changed lines under it.
fn field_text(prefix: &str, change: &FieldChange, indent: &str, style: Style) -> String {
    let name = format!("{indent}{prefix}{}", change.field);
    let Some(lines) = &change.lines else {
        return format!(
            "{name}: {} → {}\n",
            style.red(&value_text(change.a.as_ref())),
            style.green(&value_text(change.b.as_ref()))
        );
    };
    let mut text = format!("{name}:\n");
    let changed: Vec<&DiffLine> = lines
        .iter()
        .filter(|line| !matches!(line, DiffLine::Same(_)))
        .collect();
    for line in changed.iter().take(SHOWN_LINES) {
        let shown = match line {
            DiffLine::Removed(line) => {
                style.red(&format!("{indent}  - {}", output::one_line(line, CELL)))
            }
            DiffLine::Added(line) => {
                style.green(&format!("{indent}  + {}", output::one_line(line, CELL)))
            }
            DiffLine::Same(_) => continue,
        };
        text.push_str(&shown);
        text.push('\n');
    }
    if changed.len() > SHOWN_LINES {
        text.push_str(&style.dim(&format!(
            "{indent}  … {} more changed lines\n",
            changed.len() - SHOWN_LINES
        )));
    }
    text
}
