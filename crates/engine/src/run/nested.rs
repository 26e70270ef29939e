//! Child runs: a `subflow` step, or one item of a `forEach`, runs another flow file inside the
//! same run. Its events go into the run's stream with a `scope`; its node outputs are stored
//! under that scope; an approval inside a subflow pauses the whole run, and the pause is handed
//! up to the parent step (as an opaque [`ChildPause`]) so the run can be resumed later, by
//! another process.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::context::{ContextSeed, RunContext};
use super::graph::Graph;
use super::scheduler::{SavedState, Scheduler};
use crate::pins::SharedPins;
use weft_event::RunStatus;
use weft_nodes::step::{
    ChildEnd, ChildFlow, ChildPause, ChildRun, MAX_CHILD_DEPTH, StepError, StepErrorKind,
};
use weft_nodes::{Decision, NodeKind};
use weft_store::QueuedStep;

/// The state of a paused child run: [`ChildPause::state`] as the scheduler reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildState {
    pub input: Arc<Value>,
    pub waiting: QueuedStep,
    pub queue: Vec<QueuedStep>,
    pub state: SavedState,
    pub outputs: HashMap<String, Arc<Value>>,
}

fn subflow_error(message: String) -> StepError {
    StepError::new(StepErrorKind::Subflow, message)
}

/// Records that `parent`'s run ran `child` in the version it is, once per run, file and
/// version (`weft versions` lists it among the file's uses).
fn record_version(parent: &RunContext, child: &ChildFlow) {
    let (version, path) = &*child.version;
    let first = parent
        .shared
        .subflow_versions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((path.clone(), version.hash.clone()));
    if first {
        parent.store().record_flow_version(
            &version.json,
            &weft_store::FlowVersionUse {
                path: path.clone(),
                hash: version.hash.clone(),
                at: crate::run::now(),
                kind: weft_store::VersionUseKind::Subflow,
                run_id: Some(parent.run_id.to_string()),
                by: None,
            },
        );
    }
}

/// Runs `child` nested in step `node_id` of `parent`, or continues it from `child.resume`.
pub(crate) async fn run_child(
    parent: &RunContext,
    node_id: &str,
    child: ChildRun<'_>,
) -> Result<ChildEnd, StepError> {
    let depth = parent.depth + 1;
    if depth > MAX_CHILD_DEPTH {
        return Err(subflow_error(format!(
            "subflows nest more than {MAX_CHILD_DEPTH} deep at `{node_id}`"
        )));
    }
    let (flow, path) = (&child.flow.flow, child.flow.path.as_path());
    let (seed, queue, state, waiting) = match child.resume {
        Some(resume) => {
            let saved: ChildState =
                serde_json::from_value(resume.pause.state).map_err(|error| {
                    subflow_error(format!("the paused subflow's state is damaged: {error}"))
                })?;
            let decision: Decision = serde_json::from_value(resume.answer)
                .map_err(|error| subflow_error(format!("the answer is not a decision: {error}")))?;
            let seed = ContextSeed {
                initial: saved.input,
                outputs: saved.outputs,
                approval: saved.state.approval.clone(),
                histories: saved.state.histories.clone(),
                // Pins are of the top-level flow's nodes.
                pins: SharedPins::new(),
                // The budget is the top-level run's.
                budget_lifted: false,
            };
            (
                seed,
                saved.queue,
                saved.state,
                Some((saved.waiting, decision)),
            )
        }
        None => {
            record_version(parent, child.flow);
            let start = flow
                .nodes
                .iter()
                .find(|node| NodeKind::of(node) == Some(NodeKind::Start))
                .map(|node| node.id.clone())
                .ok_or_else(|| subflow_error(format!("{} has no start node", path.display())))?;
            let queue = vec![QueuedStep {
                node_id: start.into(),
                input: child.input.clone(),
                source_node_id: None,
            }];
            let seed = ContextSeed {
                initial: child.input,
                outputs: HashMap::new(),
                approval: None,
                histories: HashMap::new(),
                pins: SharedPins::new(),
                budget_lifted: false,
            };
            (seed, queue, SavedState::default(), None)
        }
    };
    let initial = seed.initial.clone();
    let ctx = RunContext::build(
        parent.run_id.clone(),
        flow.clone(),
        Graph::build(flow),
        Some(path.to_path_buf()),
        depth,
        seed,
        parent.services.clone(),
        parent.shared.clone(),
        parent.events.nested(node_id, child.visit, child.item),
        child.cancel,
        parent.nested_decisions(node_id),
    );
    let ctx = Arc::new(ctx);
    let nested = state.nested.clone();
    let mut scheduler = Scheduler::new(ctx.clone(), queue, &state);
    if let Some((waiting, decision)) = waiting {
        scheduler.resume(waiting, nested, decision);
    }
    let end = scheduler.run().await;
    Ok(match end.status {
        RunStatus::Completed => {
            ChildEnd::Completed(end.result.unwrap_or_else(|| Arc::new(Value::Null)))
        }
        RunStatus::Cancelled => ChildEnd::Cancelled,
        RunStatus::Failed | RunStatus::Running | RunStatus::Interrupted => ChildEnd::Failed(
            end.error
                .unwrap_or_else(|| "the subflow failed".to_string()),
        ),
        RunStatus::Paused => match end.paused {
            Some(paused) => {
                let state = ChildState {
                    input: initial,
                    waiting: paused.waiting,
                    queue: paused.queue,
                    state: paused.state,
                    outputs: ctx.outputs.snapshot(),
                };
                ChildEnd::Paused(ChildPause {
                    path: paused.path,
                    message: paused.message,
                    fields: state.state.waiting_fields.clone(),
                    quorum: Box::new(state.state.waiting_quorum.clone()),
                    since: state.state.waiting_since.clone(),
                    // Breakpoints stop the top-level run only.
                    breakpoint: false,
                    deadline: paused.deadline,
                    input: state.state.waiting_input.clone().unwrap_or(Value::Null),
                    state: serde_json::to_value(&state).map_err(|error| {
                        subflow_error(format!("cannot keep the paused subflow's state: {error}"))
                    })?,
                })
            }
            None => ChildEnd::Failed("the subflow paused without a waiting step".to_string()),
        },
    })
}
