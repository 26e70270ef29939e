//! Nested runs: a `subflow` step, or one item of a `forEach`, runs another flow file inside
//! the same run. Its events go into the run's stream with a `scope`; its node outputs are
//! stored under that scope; an approval inside a subflow pauses the whole run, and the pause
//! is handed up to the parent step so the run can be resumed later, by another process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::{ContextSeed, MAX_DEPTH, NestedResume, RunContext, StepError};
use super::scheduler::{NestedPause, NestedState, SavedState, Scheduler};
use crate::event::RunStatus;
use crate::flow::Flow;
use crate::nodes::Decision;
use crate::store::QueuedStep;

/// How a nested run ended.
#[derive(Debug)]
pub(crate) enum NestedEnd {
    Completed(Value),
    Failed(String),
    Cancelled,
    Paused(Box<NestedPause>),
}

/// A flow file a `subflow` or `forEach` step runs, read once per step (a forEach runs it for
/// every item).
pub(crate) struct ChildFlow {
    pub flow: Arc<Flow>,
    pub path: PathBuf,
}

impl ChildFlow {
    pub(crate) fn load(path: &Path) -> Result<ChildFlow, StepError> {
        let flow =
            Flow::load(path).map_err(|error| StepError::new("subflow", error.to_string()))?;
        Ok(ChildFlow {
            flow: Arc::new(flow),
            path: path.to_path_buf(),
        })
    }
}

/// Runs `child` nested in step `node_id` of `parent` (item `item` of a forEach),
/// or continues it from `resume`.
#[allow(clippy::too_many_arguments)] // the parent step's whole situation; called from two node kinds
pub(crate) async fn run_nested(
    parent: &RunContext,
    node_id: &str,
    item: Option<u64>,
    child: &ChildFlow,
    input: Value,
    resume: Option<NestedResume>,
    decisions: HashMap<String, Decision>,
    cancel: CancellationToken,
) -> Result<NestedEnd, StepError> {
    let depth = parent.depth + 1;
    if depth > MAX_DEPTH {
        return Err(StepError::new(
            "subflow",
            format!("subflows nest more than {MAX_DEPTH} deep at `{node_id}`"),
        ));
    }
    let (flow, path) = (&child.flow, child.path.as_path());
    let (seed, queue, state, waiting) = match resume {
        Some(NestedResume { pause, decision }) => {
            let child = pause.child;
            let seed = ContextSeed {
                initial: child.input,
                outputs: child.outputs,
                approval: child.state.approval.clone(),
                histories: child.state.histories.clone(),
            };
            (
                seed,
                child.queue,
                child.state,
                Some((child.waiting, decision)),
            )
        }
        None => {
            let start = flow
                .nodes
                .iter()
                .find(|node| node.kind == "start")
                .map(|node| node.id.clone())
                .ok_or_else(|| {
                    StepError::new("subflow", format!("{} has no start node", path.display()))
                })?;
            let queue = vec![QueuedStep {
                node_id: start,
                input: input.clone(),
                source_node_id: None,
            }];
            let seed = ContextSeed {
                initial: input,
                outputs: HashMap::new(),
                approval: None,
                histories: HashMap::new(),
            };
            (seed, queue, SavedState::default(), None)
        }
    };
    let initial = seed.initial.clone();
    let ctx = RunContext::build(
        parent.run_id.clone(),
        flow.clone(),
        Some(path.to_path_buf()),
        depth,
        seed,
        parent.llm.clone(),
        parent.http.clone(),
        parent.sandbox.clone(),
        parent.events.nested(node_id, item),
        parent.store.clone(),
        cancel,
    )
    .map_err(|problems| {
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        StepError::new(
            "subflow",
            format!("{} is not valid: {}", path.display(), problems.join("; ")),
        )
    })?;
    let ctx = Arc::new(ctx);
    let nested = state.nested.clone();
    let mut scheduler = Scheduler::new(ctx.clone(), queue, &state, decisions);
    if let Some((waiting, decision)) = waiting {
        scheduler.resume(waiting, nested.map(|pause| *pause), decision);
    }
    let end = scheduler.run().await;
    Ok(match end.status {
        RunStatus::Completed => NestedEnd::Completed(end.result.unwrap_or(Value::Null)),
        RunStatus::Cancelled => NestedEnd::Cancelled,
        RunStatus::Failed | RunStatus::Running => NestedEnd::Failed(
            end.error
                .unwrap_or_else(|| "the subflow failed".to_string()),
        ),
        RunStatus::Paused => match end.paused {
            Some(paused) => NestedEnd::Paused(Box::new(NestedPause {
                path: paused.path,
                message: paused.message,
                child: NestedState {
                    input: initial,
                    waiting: paused.waiting,
                    queue: paused.queue,
                    state: paused.state,
                    outputs: ctx.outputs.snapshot(),
                },
            })),
            None => NestedEnd::Failed("the subflow paused without a waiting step".to_string()),
        },
    })
}
