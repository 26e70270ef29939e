//! The scheduler (SPEC §4): runs steps concurrently, routes outputs along edges, pauses at
//! approvals with the queue semantics of seed 003, bounds loops, and ends the run.
//!
//! One scheduler drives one run in one process. Steps run as tokio tasks; the scheduler alone
//! owns the run's status, the queue and the visit counts, so no locks guard them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::context::{RunContext, Step, StepError, StepOutput, now};
use crate::event::{EventType, RunStatus};
use crate::nodes::{Decision, NodeConfig};
use crate::store::{PauseRecord, QueuedStep};
use crate::template::output_text;

/// State a paused run keeps in the store beyond outputs and the queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SavedState {
    pub next_seq: u64,
    #[serde(default)]
    pub visits: HashMap<String, u64>,
    #[serde(default)]
    pub approval: Option<Value>,
    #[serde(default)]
    pub histories: HashMap<String, Vec<crate::providers::ChatMessage>>,
    /// The value of the last `output` node that ran.
    #[serde(default)]
    pub last_output: Option<Value>,
    /// The output of the last node that finished.
    #[serde(default)]
    pub last_finished: Option<Value>,
    /// The rendered message of the approval being waited on.
    #[serde(default)]
    pub waiting_message: Option<String>,
}

/// How a run ended this time (a paused run may go on later).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchedulerEnd {
    pub status: RunStatus,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub waiting: Option<(String, String)>,
}

pub(crate) struct Scheduler {
    ctx: Arc<RunContext>,
    status: RunStatus,
    queue: VecDeque<QueuedStep>,
    waiting: Option<(QueuedStep, String)>,
    tasks: JoinSet<Result<StepOutput, StepError>>,
    running: HashMap<tokio::task::Id, QueuedStep>,
    visits: HashMap<String, u64>,
    max_visits: u64,
    decisions: HashMap<String, Decision>,
    last_output: Option<Value>,
    last_finished: Option<Value>,
    failure: Option<String>,
}

impl Scheduler {
    pub(crate) fn new(
        ctx: Arc<RunContext>,
        queue: Vec<QueuedStep>,
        state: &SavedState,
        decisions: HashMap<String, Decision>,
    ) -> Scheduler {
        let max_visits = ctx.flow.max_node_visits();
        Scheduler {
            ctx,
            status: RunStatus::Running,
            queue: queue.into(),
            waiting: None,
            tasks: JoinSet::new(),
            running: HashMap::new(),
            visits: state.visits.clone(),
            max_visits,
            decisions,
            last_output: state.last_output.clone(),
            last_finished: state.last_finished.clone(),
            failure: None,
        }
    }

    /// Applies a person's decision to the approval step the run was paused at.
    pub(crate) fn decide(&mut self, waiting: QueuedStep, decision: &Decision) {
        self.apply_decision(waiting, decision);
    }

    /// Runs until the run completes, fails, is cancelled, or pauses with nothing left running.
    pub(crate) async fn run(mut self) -> SchedulerEnd {
        loop {
            while self.status == RunStatus::Running && !self.queue.is_empty() {
                // Everything queued became ready while the run was running, so it all starts,
                // as concurrent branches do; only an approval reached after one has paused
                // the run waits in the queue (seed 003).
                let ready: Vec<QueuedStep> = self.queue.drain(..).collect();
                for item in ready {
                    match self.status {
                        RunStatus::Running => self.start(item),
                        RunStatus::Paused if !self.is_approval(&item.node_id) => self.start(item),
                        RunStatus::Paused => self.queue.push_back(item),
                        _ => break,
                    }
                }
            }
            if self.status == RunStatus::Failed || self.tasks.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                () = self.ctx.cancel.cancelled() => {
                    self.tasks.abort_all();
                    self.status = RunStatus::Cancelled;
                    break;
                }
                Some(joined) = self.tasks.join_next_with_id() => self.finished(joined),
            }
        }
        if self.ctx.cancel.is_cancelled() && self.status != RunStatus::Failed {
            self.tasks.abort_all();
            self.status = RunStatus::Cancelled;
        }
        self.end()
    }

    fn start(&mut self, item: QueuedStep) {
        let ctx = self.ctx.clone();
        let Some(config) = ctx.config(&item.node_id) else {
            self.fail(
                &item.node_id,
                format!("node `{}` cannot run (its type is unknown)", item.node_id),
            );
            return;
        };
        if matches!(config, NodeConfig::Note(_)) {
            return;
        }
        let visits = self.visits.entry(item.node_id.clone()).or_insert(0);
        *visits += 1;
        let visits = *visits;
        if visits > self.max_visits {
            self.fail(
                &item.node_id,
                format!(
                    "node `{}` would run a {} time, more than settings.maxNodeVisits ({}) allows",
                    item.node_id,
                    ordinal(visits),
                    self.max_visits
                ),
            );
            return;
        }
        if matches!(config, NodeConfig::Approval(_)) {
            self.reach_approval(item);
            return;
        }
        let retries = ctx
            .graph
            .settings
            .get(&item.node_id)
            .is_some_and(|settings| settings.max_attempts() > 1);
        if !retries && let Some(outcome) = execute_instant(&ctx, &item, visits) {
            self.settle(item, outcome);
            return;
        }
        let task_item = item.clone();
        let handle = self
            .tasks
            .spawn(async move { execute(&ctx, &task_item, visits).await });
        self.running.insert(handle.id(), item);
    }

    fn is_approval(&self, node_id: &str) -> bool {
        matches!(self.ctx.config(node_id), Some(NodeConfig::Approval(_)))
    }

    fn reach_approval(&mut self, item: QueuedStep) {
        let node_id = item.node_id.clone();
        self.ctx.emit(
            EventType::StepStart,
            Some(&node_id),
            self.step_label(&node_id),
        );
        let message = match self.ctx.render(&node_id, "message", &item.input) {
            Ok(message) => message,
            Err(error) => {
                self.fail(&node_id, error.message);
                return;
            }
        };
        self.ctx
            .emit(EventType::WaitInput, Some(&node_id), message.clone());
        if let Some(decision) = self.decisions.get(&node_id).cloned() {
            self.apply_decision(item, &decision);
        } else {
            self.waiting = Some((item, message));
            self.status = RunStatus::Paused;
        }
    }

    fn apply_decision(&mut self, item: QueuedStep, decision: &Decision) {
        let node_id = item.node_id.clone();
        let value = decision.to_value();
        self.ctx
            .emit(EventType::InputReceived, Some(&node_id), value.to_string());
        self.ctx.set_approval(value.clone());
        let at = now();
        self.ctx
            .store
            .put_node_approval(&self.ctx.run_id, &node_id, &value, &at);
        let visits = self.visits.get(&node_id).copied().unwrap_or(1);
        record_output(&self.ctx, &node_id, &item.input, visits);
        self.finished_value(&node_id, &item.input);
        self.route(&node_id, decision.decision.handle(), &item.input);
    }

    fn step_label(&self, node_id: &str) -> String {
        self.ctx
            .node(node_id)
            .map_or(node_id, |node| node.label())
            .to_string()
    }

    fn route(&mut self, node_id: &str, handle: &str, value: &Value) {
        let targets: Vec<String> = self.ctx.graph.targets(node_id, handle).cloned().collect();
        for target in targets {
            self.queue.push_back(QueuedStep {
                node_id: target,
                input: value.clone(),
                source_node_id: Some(node_id.to_string()),
            });
        }
    }

    fn finished_value(&mut self, node_id: &str, value: &Value) {
        if matches!(self.ctx.config(node_id), Some(NodeConfig::Output(_))) {
            self.last_output = Some(value.clone());
        }
        self.last_finished = Some(value.clone());
    }

    fn finished(
        &mut self,
        joined: Result<(tokio::task::Id, Result<StepOutput, StepError>), tokio::task::JoinError>,
    ) {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(error) => {
                let outcome = Err(StepError::new(
                    "internal",
                    if error.is_panic() {
                        "the step crashed (an internal error in Weft)".to_string()
                    } else {
                        "the step was stopped".to_string()
                    },
                ));
                (error.id(), outcome)
            }
        };
        let Some(item) = self.running.remove(&id) else {
            return;
        };
        self.settle(item, outcome);
    }

    /// Routes a finished step's output, or its error along `error` edges, or fails the run.
    fn settle(&mut self, item: QueuedStep, outcome: Result<StepOutput, StepError>) {
        match outcome {
            Ok(output) => {
                self.finished_value(&item.node_id, &output.value);
                self.route(&item.node_id, &output.handle, &output.value);
            }
            Err(error) if error.kind == "cancelled" => {}
            Err(error) => {
                let has_error_edge = self
                    .ctx
                    .graph
                    .targets(&item.node_id, "error")
                    .next()
                    .is_some();
                self.ctx
                    .emit(EventType::Error, Some(&item.node_id), error.message.clone());
                if has_error_edge {
                    let payload = json!({ "message": error.message, "nodeId": item.node_id, "kind": error.kind });
                    self.route(&item.node_id, "error", &payload);
                } else {
                    self.fail_quietly(format!("node `{}` failed: {}", item.node_id, error.message));
                }
            }
        }
    }

    /// Fails the run because of `node_id`, logging an `error` event for it.
    fn fail(&mut self, node_id: &str, message: String) {
        self.ctx
            .emit(EventType::Error, Some(node_id), message.clone());
        self.fail_quietly(message);
    }

    /// Fails the run (the error event was already logged) and stops its other branches.
    fn fail_quietly(&mut self, message: String) {
        if self.failure.is_none() {
            self.failure = Some(message);
        }
        self.status = RunStatus::Failed;
        self.tasks.abort_all();
        self.running.clear();
        self.queue.clear();
        self.waiting = None;
    }

    fn saved_state(&self) -> SavedState {
        SavedState {
            next_seq: self.ctx.events.next_seq(),
            visits: self.visits.clone(),
            approval: self
                .ctx
                .approval
                .read()
                .ok()
                .and_then(|guard| guard.clone()),
            histories: self
                .ctx
                .histories
                .lock()
                .map(|map| map.clone())
                .unwrap_or_default(),
            last_output: self.last_output.clone(),
            last_finished: self.last_finished.clone(),
            waiting_message: self.waiting.as_ref().map(|(_, message)| message.clone()),
        }
    }

    fn end(mut self) -> SchedulerEnd {
        let ctx = self.ctx.clone();
        let at = now();
        if self.status == RunStatus::Paused
            && let Some((waiting, message)) = self.waiting.take()
        {
            let mut state = self.saved_state();
            state.waiting_message = Some(message.clone());
            let pause = PauseRecord {
                waiting: waiting.clone(),
                queue: self.queue.drain(..).collect(),
                state: serde_json::to_value(&state).unwrap_or_default(),
            };
            ctx.store.save_pause(&ctx.run_id, &pause, &at);
            return SchedulerEnd {
                status: RunStatus::Paused,
                result: None,
                error: None,
                waiting: Some((waiting.node_id, message)),
            };
        }
        let status = match self.status {
            RunStatus::Running | RunStatus::Paused => RunStatus::Completed,
            other => other,
        };
        let result = match status {
            RunStatus::Completed => Some(
                self.last_output
                    .take()
                    .or(self.last_finished.take())
                    .unwrap_or(Value::Null),
            ),
            _ => None,
        };
        let error = match status {
            RunStatus::Failed => self.failure.clone(),
            RunStatus::Cancelled => Some("the run was cancelled".to_string()),
            _ => None,
        };
        let content = json!({ "status": status.as_str(), "result": result, "error": error });
        ctx.emit(EventType::RunEnd, None, content.to_string());
        ctx.store.set_state(
            &ctx.run_id,
            &serde_json::to_value(self.saved_state()).unwrap_or_default(),
            &at,
        );
        ctx.store
            .finish_run(&ctx.run_id, status, result.as_ref(), error.as_deref(), &at);
        SchedulerEnd {
            status,
            result,
            error,
            waiting: None,
        }
    }
}

fn record_output(ctx: &RunContext, node_id: &str, value: &Value, visits: u64) {
    ctx.outputs.set(node_id, value.clone());
    ctx.store
        .put_node_output(&ctx.run_id, node_id, value, visits, &now());
    ctx.emit(EventType::StepEnd, Some(node_id), output_text(value));
}

/// Runs a step of an instant kind (no I/O, bounded work) on the scheduler's own thread;
/// `None` when the node's kind must run as a task.
fn execute_instant(
    ctx: &RunContext,
    item: &QueuedStep,
    visits: u64,
) -> Option<Result<StepOutput, StepError>> {
    let node = ctx.node(&item.node_id)?;
    let config = ctx
        .config(&item.node_id)
        .filter(|config| config.is_instant())?;
    let step = Step {
        ctx,
        node,
        input: &item.input,
    };
    ctx.emit(
        EventType::StepStart,
        Some(&node.id),
        node.label().to_string(),
    );
    let outcome = config.run_instant(&step)?;
    if let Ok(output) = &outcome {
        record_output(ctx, &node.id, &output.value, visits);
    }
    Some(outcome)
}

/// Runs one step with its timeout and retries, then records its output.
async fn execute(
    ctx: &RunContext,
    item: &QueuedStep,
    visits: u64,
) -> Result<StepOutput, StepError> {
    let node_id = item.node_id.as_str();
    let (Some(node), Some(config)) = (ctx.node(node_id), ctx.config(node_id)) else {
        return Err(StepError::new(
            "internal",
            format!("node `{node_id}` is not in the flow"),
        ));
    };
    ctx.emit(
        EventType::StepStart,
        Some(node_id),
        node.label().to_string(),
    );
    let settings = ctx.graph.settings.get(node_id).cloned().unwrap_or_default();
    let attempts = settings.max_attempts();
    let step = Step {
        ctx,
        node,
        input: &item.input,
    };
    let mut attempt = 1;
    loop {
        let timeout = settings.timeout();
        let outcome = match tokio::time::timeout(timeout, config.run(&step)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StepError::new(
                "timeout",
                format!(
                    "timed out after {} s (timeoutSeconds)",
                    timeout.as_secs_f64()
                ),
            )),
        };
        match outcome {
            Ok(output) => {
                record_output(ctx, node_id, &output.value, visits);
                return Ok(output);
            }
            Err(error) if error.kind == "cancelled" || attempt >= attempts => return Err(error),
            Err(error) => {
                attempt += 1;
                let backoff = settings.backoff(attempt);
                ctx.emit(
                    EventType::Error,
                    Some(node_id),
                    format!(
                        "attempt {} of {attempts} failed: {}; trying again in {} ms",
                        attempt - 1,
                        error.message,
                        backoff.as_millis()
                    ),
                );
                tokio::select! {
                    () = ctx.cancel.cancelled() => return Err(StepError::new("cancelled", "the run was cancelled")),
                    () = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }
}

fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
