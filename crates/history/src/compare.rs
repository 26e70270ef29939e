//! Two runs side by side (docs/debugging.md, `weft diff` and the app's compare view): per node, its
//! status, visits, output (a line diff for text, the changed paths for JSON), time, tokens and
//! cost. Two runs are equal when every node has the same output in both (a node that ran in
//! one only differs).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cost::{Cost, Prices, RunCost, run_cost};
pub use crate::lines::DiffLine;
use crate::lines::line_diff;
use weft_event::{EventType, RunEvent, RunStatus};
use weft_store::{NodeOutputRecord, RunRecord, Store, StoreError};

/// Changes listed per node at most (a diff of two unrelated documents says no more).
const MAX_CHANGES: usize = 200;

/// What happened to a node in one run, from its events.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Completed,
    Failed,
    /// Waiting for a person (an approval, a breakpoint) when the run was last stored.
    Waiting,
    /// Started and never ended (the run was cancelled or interrupted meanwhile).
    Stopped,
    /// Started and still going (the run is going).
    Running,
    /// Not reached (a branch not taken, or the run ended before it).
    NotRun,
}

/// One node in one run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRun {
    pub status: NodeStatus,
    pub visits: u64,
    /// The latest output (`None` when it has none).
    pub output: Option<Value>,
    /// Time from each `step_start` to its end, over all visits.
    pub duration_ms: Option<u64>,
    pub cost: Cost,
}

/// One changed place in a JSON output: `$` for the whole value, `$.a.b[2]` inside it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathChange {
    pub path: String,
    pub a: Option<Value>,
    pub b: Option<Value>,
}

/// How two outputs differ.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum OutputDiff {
    /// Both outputs are text: the lines of both, marked.
    Text { lines: Vec<DiffLine> },
    /// Otherwise: the paths whose values differ (at most [`MAX_CHANGES`]; `truncated` if more).
    Json {
        changes: Vec<PathChange>,
        truncated: bool,
    },
}

/// One node in both runs.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeComparison {
    /// The node's key (`draft`, `research/draft` in a subflow, `each[2]/draft` in a forEach).
    pub node: String,
    pub a: NodeRun,
    pub b: NodeRun,
    pub same_output: bool,
    /// `None` when the outputs are the same.
    pub diff: Option<OutputDiff>,
}

/// One of the two runs, in brief.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSide {
    pub id: String,
    pub flow_name: String,
    pub status: RunStatus,
    pub duration_ms: Option<u64>,
    pub cost: Cost,
}

/// Two runs compared node by node.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunComparison {
    pub a: RunSide,
    pub b: RunSide,
    /// Nodes in the order they first ran in `a`, then those that ran only in `b`.
    pub nodes: Vec<NodeComparison>,
    /// Every node's output is the same in both runs.
    pub equal: bool,
    /// How the flow `b` ran differs from the one `a` ran; `None` when the two ran the same flow.
    pub flow_changes: Option<crate::flow_diff::FlowDiff>,
}

/// Compares the stored runs `a` and `b` (ids or unique prefixes), pricing calls at `prices`.
pub fn compare_runs(
    store: &Store,
    a: &str,
    b: &str,
    prices: &Prices,
) -> Result<RunComparison, StoreError> {
    let read = |id: &str| -> Result<
        (RunRecord, Vec<RunEvent>, RunCost, Vec<NodeOutputRecord>),
        StoreError,
    > {
        let id = store.resolve_run_id(id)?;
        let record = store.run(&id)?;
        let cost = run_cost(store, &record, prices)?;
        Ok((record, store.events(&id)?, cost, store.node_outputs(&id)?))
    };
    let (a, b) = (read(a)?, read(b)?);
    Ok(compare_parts(
        RunParts {
            record: &a.0,
            events: &a.1,
            cost: a.2,
            outputs: &a.3,
        },
        RunParts {
            record: &b.0,
            events: &b.1,
            cost: b.2,
            outputs: &b.3,
        },
    ))
}

/// What a run's store keeps of it, as compared: read from a store, or from a server's answer
/// (`GET /v1/runs/{id}`) when the desktop app compares a run of a team's server.
pub struct RunParts<'a> {
    pub record: &'a RunRecord,
    pub events: &'a [RunEvent],
    /// What its calls cost, priced where it is kept.
    pub cost: RunCost,
    pub outputs: &'a [NodeOutputRecord],
}

/// Compares two runs node by node from what is kept of them.
pub fn compare_parts(a: RunParts<'_>, b: RunParts<'_>) -> RunComparison {
    let (a, b) = (RunFacts::of(a), RunFacts::of(b));
    let mut seen: HashSet<&str> = HashSet::with_capacity(a.order.len());
    let keys: Vec<&str> = a
        .order
        .iter()
        .chain(&b.order)
        .map(String::as_str)
        .filter(|key| seen.insert(key))
        .collect();
    let nodes: Vec<NodeComparison> = keys
        .into_iter()
        .map(|key| {
            let (a, b) = (a.node(key), b.node(key));
            let same_output = a.output == b.output;
            let diff = (!same_output).then(|| output_diff(a.output.as_ref(), b.output.as_ref()));
            NodeComparison {
                node: key.to_string(),
                a,
                b,
                same_output,
                diff,
            }
        })
        .collect();
    // Each run keeps the flow it ran: the edits between them are what may explain the outputs.
    let flow_changes = match (&a.flow, &b.flow) {
        (Some(flow_a), Some(flow_b)) => {
            Some(crate::flow_diff::diff_flows(flow_a, flow_b)).filter(|diff| !diff.is_empty())
        }
        _ => None,
    };
    RunComparison {
        equal: nodes.iter().all(|node| node.same_output),
        a: a.side,
        b: b.side,
        nodes,
        flow_changes,
    }
}

/// What one run stored, gathered by node key.
struct RunFacts {
    side: RunSide,
    /// The flow it ran, as stored with it (`None` when it does not parse).
    flow: Option<weft_flow::Flow>,
    /// Node keys in the order they first appear in the events (then those with only an output).
    order: Vec<String>,
    outputs: HashMap<String, (Value, u64)>,
    timings: HashMap<String, Timing>,
    cost: RunCost,
}

#[derive(Default)]
struct Timing {
    status: Option<NodeStatus>,
    started: Option<DateTime<Utc>>,
    spent_ms: Option<u64>,
}

impl RunFacts {
    fn of(parts: RunParts<'_>) -> RunFacts {
        let RunParts {
            record,
            events,
            cost,
            outputs: stored_outputs,
        } = parts;
        let mut order: Vec<String> = Vec::new();
        let mut timings: HashMap<String, Timing> = HashMap::new();
        for event in events {
            let Some(key) = event_key(event) else {
                continue;
            };
            if !timings.contains_key(&key) {
                order.push(key.clone());
            }
            timings.entry(key).or_default().see(event);
        }
        let mut outputs = HashMap::new();
        for stored in stored_outputs {
            // Each node has one stored output: those without events come after the others.
            if !timings.contains_key(&stored.node_id) {
                order.push(stored.node_id.clone());
            }
            outputs.insert(
                stored.node_id.clone(),
                (stored.output.clone(), stored.visits),
            );
        }
        let run = &record.summary;
        let duration_ms = run
            .ended_at
            .as_deref()
            .and_then(|ended| millis_between(&run.started_at, ended));
        RunFacts {
            flow: weft_flow::Flow::parse(&record.flow_json, "the stored flow").ok(),
            side: RunSide {
                id: run.id.clone(),
                flow_name: run.flow_name.clone(),
                status: run.status,
                duration_ms,
                cost: cost.total.clone(),
            },
            order,
            outputs,
            timings,
            cost,
        }
    }

    fn node(&self, key: &str) -> NodeRun {
        let timing = self.timings.get(key);
        let (output, visits) = match self.outputs.get(key) {
            // An approval with no output yet stores `null`: that is no output.
            Some((Value::Null, visits)) => (None, *visits),
            Some((output, visits)) => (Some(output.clone()), *visits),
            None => (None, 0),
        };
        let status = match timing.and_then(|timing| timing.status) {
            Some(status) => status,
            None if output.is_some() => NodeStatus::Completed,
            None => NodeStatus::NotRun,
        };
        NodeRun {
            status,
            visits,
            output,
            duration_ms: timing.and_then(|timing| timing.spent_ms),
            cost: self.cost.node(key),
        }
    }
}

impl Timing {
    fn see(&mut self, event: &RunEvent) {
        let at = DateTime::parse_from_rfc3339(&event.ts)
            .ok()
            .map(|at| at.with_timezone(&Utc));
        match event.kind {
            EventType::StepStart => {
                self.status = Some(NodeStatus::Stopped);
                self.started = at;
            }
            EventType::StepEnd | EventType::Error => {
                self.status = Some(if event.kind == EventType::StepEnd {
                    NodeStatus::Completed
                } else {
                    NodeStatus::Failed
                });
                if let (Some(started), Some(at)) = (self.started.take(), at) {
                    let spent = u64::try_from((at - started).num_milliseconds()).unwrap_or(0);
                    *self.spent_ms.get_or_insert(0) += spent;
                }
            }
            EventType::WaitInput => self.status = Some(NodeStatus::Waiting),
            EventType::InputReceived => self.status = Some(NodeStatus::Stopped),
            _ => {}
        }
    }
}

/// The node an event is about, as the store keys it (`scope/node` in a nested run).
fn event_key(event: &RunEvent) -> Option<String> {
    let node = event.node_id.as_deref().filter(|node| !node.is_empty())?;
    Some(match &event.scope {
        Some(scope) => format!("{scope}/{node}"),
        None => node.to_string(),
    })
}

pub fn millis_between(from: &str, to: &str) -> Option<u64> {
    let from = DateTime::parse_from_rfc3339(from).ok()?;
    let to = DateTime::parse_from_rfc3339(to).ok()?;
    u64::try_from((to - from).num_milliseconds()).ok()
}

/// How output `a` differs from `b` (either may be missing).
fn output_diff(a: Option<&Value>, b: Option<&Value>) -> OutputDiff {
    match (a, b) {
        (Some(Value::String(a)), Some(Value::String(b))) => OutputDiff::Text {
            lines: line_diff(a, b),
        },
        _ => {
            let mut changes = Vec::new();
            let mut truncated = false;
            json_diff("$", a, b, &mut changes, &mut truncated);
            OutputDiff::Json { changes, truncated }
        }
    }
}

/// Appends the paths under `path` where `a` and `b` differ.
fn json_diff(
    path: &str,
    a: Option<&Value>,
    b: Option<&Value>,
    changes: &mut Vec<PathChange>,
    truncated: &mut bool,
) {
    if a == b {
        return;
    }
    if changes.len() >= MAX_CHANGES {
        *truncated = true;
        return;
    }
    match (a, b) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().collect();
            keys.extend(b.keys().filter(|key| !a.contains_key(*key)));
            for key in keys {
                let inner = if key.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    format!("{path}.{key}")
                } else {
                    format!("{path}[{}]", Value::String(key.clone()))
                };
                json_diff(&inner, a.get(key), b.get(key), changes, truncated);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for index in 0..a.len().max(b.len()) {
                let inner = format!("{path}[{index}]");
                json_diff(&inner, a.get(index), b.get(index), changes, truncated);
            }
        }
        _ => changes.push(PathChange {
            path: path.to_string(),
            a: a.cloned(),
            b: b.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_text_diff_marks_removed_and_added_lines() {
        let lines = line_diff("one\ntwo\nthree", "one\n2\nthree\nfour");
        assert_eq!(
            lines,
            vec![
                DiffLine::Same("one".into()),
                DiffLine::Removed("two".into()),
                DiffLine::Added("2".into()),
                DiffLine::Same("three".into()),
                DiffLine::Added("four".into()),
            ]
        );
    }

    #[test]
    fn a_json_diff_names_each_changed_path() {
        let a = json!({"label": "bug", "scores": [1, 2], "same": true, "odd key": 1});
        let b = json!({"label": "feature", "scores": [1, 3, 4], "same": true, "new": null});
        let OutputDiff::Json { changes, truncated } = output_diff(Some(&a), Some(&b)) else {
            panic!("a JSON diff");
        };
        assert!(!truncated);
        let mut paths: Vec<&str> = changes.iter().map(|change| change.path.as_str()).collect();
        paths.sort_unstable();
        let mut expected = [
            "$.label",
            "$[\"odd key\"]",
            "$.scores[1]",
            "$.scores[2]",
            "$.new",
        ];
        expected.sort_unstable();
        assert_eq!(paths, expected);
        let label = changes.iter().find(|c| c.path == "$.label").expect("label");
        assert_eq!(
            (label.a.clone(), label.b.clone()),
            (Some(json!("bug")), Some(json!("feature")))
        );
        let added = changes
            .iter()
            .find(|c| c.path == "$.scores[2]")
            .expect("added");
        assert_eq!((added.a.clone(), added.b.clone()), (None, Some(json!(4))));
        // A missing output differs from any output, as a whole.
        let OutputDiff::Json { changes, .. } = output_diff(None, Some(&json!(1))) else {
            panic!("a JSON diff");
        };
        assert_eq!(changes[0].path, "$");
    }

    #[test]
    fn a_long_json_diff_is_cut_and_says_so() {
        let a = Value::Array((0..500).map(|n| json!(n)).collect());
        let b = Value::Array((0..500).map(|n| json!(n + 1)).collect());
        let OutputDiff::Json { changes, truncated } = output_diff(Some(&a), Some(&b)) else {
            panic!("a JSON diff");
        };
        assert_eq!(changes.len(), MAX_CHANGES);
        assert!(truncated);
    }
}
