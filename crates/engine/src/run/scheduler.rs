//! The scheduler (docs/flows.md#running): runs steps concurrently, routes outputs along edges,
//! pauses where a
//! step waits for a person (with the queue semantics of seed 003), waits at joins, bounds loops,
//! and ends the run.
//!
//! One scheduler drives one run (or one nested run of a subflow / forEach item) in one
//! process. It knows node kinds only by how they are scheduled ([`Scheduling`]); what a step
//! does is its kind's business. Steps run as tokio tasks (instant kinds inline); the scheduler
//! alone owns the run's status, queue, visit counts and join arrivals, so no locks guard them.
//! Storing the run's end or pause is the caller's job: a nested run hands its pause up to its
//! parent step.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use super::context::RunContext;
use super::emitter::{now, now_shared};
use super::graph::{ByNode, GraphNode};
use super::llm_log::ReplayState;
use crate::breakpoints::{BreakWhen, Breakpoint};
use crate::pins::Pins;
use weft_event::{EventType, RunStatus};
use weft_nodes::step::{ChildPause, ChildResume, Step, StepError, StepErrorKind, StepOutput, Wait};
use weft_nodes::{
    Decision, DecisionChoice, FormField, NodeConfig, Quorum, Scheduling, seconds_text,
};
use weft_providers::ChatMessage;
use weft_store::{Checkpoint, QueuedStep, StoredStep};
use weft_template::output_text;

/// The largest value one step may give, as text (what is stored and shown): above what a
/// node makes (an HTTP body, a rendered template and a model's answer are each capped at 10
/// MiB or less), far below what would strain the store and the app.
pub const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;
/// What one run (each nested run on its own) may store of its steps' outputs: a loop that
/// grows its value at each visit stores the sum of all of them.
pub const MAX_RUN_OUTPUT_BYTES: u64 = 256 * 1024 * 1024;

/// State a paused run keeps beyond node outputs and the queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SavedState {
    pub next_seq: u64,
    /// A person let the run go on past its budget (`settings.budget`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_lifted: bool,
    /// The `traceparent` of the run's first span, which a resumed run's span links to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Counted on every step, so with the graph's faster hash ([`ByNode`]).
    #[serde(default)]
    pub visits: ByNode<u64>,
    #[serde(default)]
    pub approval: Option<Value>,
    #[serde(default)]
    pub histories: HashMap<String, Vec<ChatMessage>>,
    /// The last `output` node that ran: its output (in the run's outputs) is the run's result
    /// so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output_node: Option<String>,
    /// The last node that finished: its output is the run's result if no `output` node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_finished_node: Option<String>,
    /// The value of the last `output` node, as a Weft from before [`SavedState::last_output_node`]
    /// saved it: kept, in a run paused by such a Weft, until a node of the run replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output: Option<Value>,
    /// The last finished node's output, as such a Weft saved it (kept the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_finished: Option<Value>,
    /// The rendered message of the step being waited on (innermost, for nested runs).
    #[serde(default)]
    pub waiting_message: Option<String>,
    /// The form of the approval waited on (innermost, for nested runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_fields: Vec<FormField>,
    /// Who may decide the approval waited on (innermost), and how many must approve.
    #[serde(default, skip_serializing_if = "Quorum::is_default")]
    pub waiting_quorum: Quorum,
    /// When the approval waited on (innermost) began to wait, RFC 3339: its follow-ups count
    /// from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// What the approval waited on was given (innermost): the draft a person decides on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_input: Option<Value>,
    /// When the approval waited on times out (innermost), RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Set when the waiting step is a subflow whose child run paused.
    #[serde(default)]
    pub nested: Option<ChildPause>,
    /// Further subflows that paused while the run was already waiting; they wait their turn.
    #[serde(default)]
    pub parked: Vec<(QueuedStep, ChildPause)>,
    /// Outputs that arrived at each `join`, by source node, not yet joined.
    #[serde(default)]
    pub joins: HashMap<String, BTreeMap<String, Arc<Value>>>,
    /// "Run this node": the one node the run is about; nothing after it runs.
    #[serde(default)]
    pub only_node: Option<String>,
    /// A decision stored with the claim of a paused run ([`weft_store::Store::claim_paused`],
    /// field `store::DECIDED`) that no checkpoint has applied yet: the run was interrupted
    /// right after it was decided, and continues with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decision>,
    /// The run's pinned outputs ([`crate::pins`]) as a Weft from before the store kept them
    /// apart (`runs.pins_json`, written once) saved them: read, never written again.
    #[serde(default, skip_serializing)]
    pub pins: Pins,
    /// For a replay of another run: which run, and which nodes went live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayState>,
    /// The run's breakpoints ([`crate::breakpoints`]), kept for as long as the run goes on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakpoints: Vec<Breakpoint>,
    /// Set while the run is paused at a breakpoint (rather than at an approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakpoint: Option<BreakStop>,
}

/// Where a run stopped at a breakpoint; the waiting step's input holds the value there (the
/// node's input before it runs, its output after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BreakStop {
    pub when: BreakWhen,
    /// The node's visit the stop is at.
    pub visit: u64,
    /// After: the handle the output goes on by.
    #[serde(default)]
    pub handle: String,
    /// After: the output is the run's result (an `output` node), so a replacement is too.
    #[serde(default)]
    pub is_result: bool,
}

/// What the run is waiting for.
enum Waiting {
    Decision {
        item: QueuedStep,
        message: String,
        fields: Vec<FormField>,
        quorum: Quorum,
        /// When nobody deciding takes the `timeout` branch.
        deadline: Option<String>,
    },
    Child {
        item: QueuedStep,
        pause: ChildPause,
    },
    Breakpoint {
        item: QueuedStep,
        stop: BreakStop,
        message: String,
    },
}

impl Waiting {
    fn item(&self) -> &QueuedStep {
        match self {
            Waiting::Decision { item, .. }
            | Waiting::Child { item, .. }
            | Waiting::Breakpoint { item, .. } => item,
        }
    }
}

/// A paused run's parts, for the caller to store (or, nested, to hand up).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Paused {
    pub waiting: QueuedStep,
    pub queue: Vec<QueuedStep>,
    pub state: SavedState,
    /// Path of the node waited on (`review`, or `sub/review` inside a subflow).
    pub path: String,
    pub message: String,
    /// When the (innermost) approval waited on times out.
    pub deadline: Option<String>,
}

/// How a run ended this time (a paused run may go on later).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchedulerEnd {
    pub status: RunStatus,
    pub result: Option<Arc<Value>>,
    pub error: Option<String>,
    pub paused: Option<Paused>,
    pub state: SavedState,
}

/// A step the scheduler holds, with its key in the run's stored queue.
type Keyed = (u64, QueuedStep);

pub(crate) struct Scheduler {
    ctx: Arc<RunContext>,
    status: RunStatus,
    queue: VecDeque<Keyed>,
    /// An empty queue with room, swapped with `queue` when its steps start.
    spare_queue: VecDeque<Keyed>,
    /// Steps that were running when the run was last checkpointed, to run again as the same
    /// visit (a run continued after an interruption).
    rerun: Vec<(Keyed, u64)>,
    waiting: Option<Waiting>,
    parked: Vec<(QueuedStep, ChildPause)>,
    tasks: JoinSet<Result<StepOutput, StepError>>,
    running: HashMap<tokio::task::Id, (Keyed, u64)>,
    /// Keys of the steps in the run's stored queue, when this scheduler checkpoints (a
    /// top-level run); `None` for a nested run, whose step is re-run as a whole.
    stored: Option<HashSet<u64>>,
    next_key: u64,
    visits: ByNode<u64>,
    max_visits: u64,
    /// The text of the outputs this scheduler's steps gave, in bytes (see
    /// [`MAX_RUN_OUTPUT_BYTES`]).
    output_bytes: u64,
    joins: HashMap<String, BTreeMap<String, Arc<Value>>>,
    /// The last `output` node that ran and the last node that finished: their outputs (in
    /// `ctx.outputs`, which holds each node's latest) are the run's result.
    last_output: Option<String>,
    last_finished: Option<String>,
    /// Those outputs in a run paused by a Weft that kept the values rather than the nodes
    /// ([`SavedState::last_output`]), until a node of this run replaces them.
    earlier_output: Option<Arc<Value>>,
    earlier_finished: Option<Arc<Value>>,
    failure: Option<String>,
    only_node: Option<String>,
    breakpoints: Vec<Breakpoint>,
    /// Stepping from a breakpoint: steps queued with a key from this one on stop before they
    /// start (those already queued start).
    step_from: Option<u64>,
    /// Set by the person ([`crate::Engine::pause`]): no new step starts; the first ready one
    /// stops the run as a breakpoint before it.
    pause_request: Option<Arc<AtomicBool>>,
}

/// The steps of a queue that starts now, keyed in order.
fn numbered(queue: Vec<QueuedStep>) -> Vec<StoredStep> {
    queue
        .into_iter()
        .enumerate()
        .map(|(key, step)| StoredStep {
            key: key as u64,
            step,
            visit: None,
        })
        .collect()
}

impl Scheduler {
    /// A scheduler for a nested run (no checkpoints), starting with `queue`.
    pub(crate) fn new(
        ctx: Arc<RunContext>,
        queue: Vec<QueuedStep>,
        state: &SavedState,
    ) -> Scheduler {
        Scheduler::with_stored_queue(ctx, numbered(queue), state, None)
    }

    /// A scheduler for a new top-level run: nothing of it is stored yet, and it checkpoints
    /// as it goes.
    pub(crate) fn for_new_run(
        ctx: Arc<RunContext>,
        queue: Vec<QueuedStep>,
        state: &SavedState,
    ) -> Scheduler {
        Scheduler::checkpointing(ctx, numbered(queue), state, false)
    }

    /// A scheduler for a top-level run, which checkpoints as it goes: `queue` holds the steps
    /// to start and those to run again as the visit they were; `stored` says whether the store
    /// already holds them (a resumed or continued run) or not yet (a new one).
    pub(crate) fn checkpointing(
        ctx: Arc<RunContext>,
        queue: Vec<StoredStep>,
        state: &SavedState,
        stored: bool,
    ) -> Scheduler {
        let keys = if stored {
            queue.iter().map(|step| step.key).collect()
        } else {
            HashSet::new()
        };
        Scheduler::with_stored_queue(ctx, queue, state, Some(keys))
    }

    /// `stored`: the keys of the steps the store holds, for a scheduler that checkpoints.
    fn with_stored_queue(
        ctx: Arc<RunContext>,
        queue: Vec<StoredStep>,
        state: &SavedState,
        stored: Option<HashSet<u64>>,
    ) -> Scheduler {
        let max_visits = ctx.flow.max_node_visits();
        let next_key = queue.iter().map(|step| step.key + 1).max().unwrap_or(0);
        let mut waiting_steps = VecDeque::new();
        let mut rerun = Vec::new();
        for step in queue {
            match step.visit {
                Some(visit) => rerun.push(((step.key, step.step), visit)),
                None => waiting_steps.push_back((step.key, step.step)),
            }
        }
        // Room for every node: a long chain does not grow the map step by step.
        let mut visits = state.visits.clone();
        visits.reserve(ctx.graph.nodes.len().saturating_sub(visits.len()));
        Scheduler {
            ctx,
            status: RunStatus::Running,
            queue: waiting_steps,
            spare_queue: VecDeque::new(),
            rerun,
            waiting: None,
            parked: state.parked.clone(),
            tasks: JoinSet::new(),
            running: HashMap::new(),
            stored,
            next_key,
            visits,
            max_visits,
            output_bytes: 0,
            joins: state.joins.clone(),
            last_output: state.last_output_node.clone(),
            last_finished: state.last_finished_node.clone(),
            earlier_output: state.last_output.clone().map(Arc::new),
            earlier_finished: state.last_finished.clone().map(Arc::new),
            failure: None,
            only_node: state.only_node.clone(),
            breakpoints: state.breakpoints.clone(),
            step_from: None,
            pause_request: None,
        }
    }

    /// Continues the step the run was paused at with a person's decision: a waiting step goes
    /// on along the chosen handle; a subflow re-enters its child run, which applies it.
    pub(crate) fn resume(
        &mut self,
        waiting: QueuedStep,
        nested: Option<ChildPause>,
        decision: Decision,
    ) {
        match nested {
            None => self.apply_decision(waiting, &decision),
            Some(pause) => {
                let visits = self.visits.get(&*waiting.node_id).copied().unwrap_or(1);
                let resume = ChildResume {
                    pause,
                    answer: serde_json::to_value(&decision).unwrap_or_default(),
                };
                let keyed = self.keyed(waiting);
                self.spawn(keyed, visits, Some(resume));
            }
        }
    }

    /// Waits again where an interrupted run waited: at a subflow's paused child run (kept as
    /// it was), or at a person's decision, which the step asks again (or `answer` gives).
    pub(crate) fn wait_again(
        &mut self,
        waiting: QueuedStep,
        nested: Option<ChildPause>,
        answer: Option<Decision>,
    ) {
        match (nested, answer) {
            (Some(pause), Some(decision)) => {
                let visits = self.visits.get(&*waiting.node_id).copied().unwrap_or(1);
                let resume = ChildResume {
                    pause,
                    answer: serde_json::to_value(&decision).unwrap_or_default(),
                };
                let keyed = self.keyed(waiting);
                self.spawn(keyed, visits, Some(resume));
            }
            (Some(pause), None) => self.wait_child(waiting, pause),
            (None, Some(decision)) => self.apply_decision(waiting, &decision),
            (None, None) => {
                let visits = self.visits.get(&*waiting.node_id).copied().unwrap_or(1);
                let keyed = self.keyed(waiting);
                self.rerun.push((keyed, visits));
            }
        }
    }

    /// `step` with a new key in the run's stored queue.
    fn keyed(&mut self, step: QueuedStep) -> Keyed {
        let key = self.next_key;
        self.next_key += 1;
        (key, step)
    }

    /// Runs until the run completes, fails, is cancelled, or pauses with nothing left running.
    pub(crate) async fn run(mut self) -> SchedulerEnd {
        for (keyed, visit) in std::mem::take(&mut self.rerun) {
            self.launch(keyed, visit);
        }
        loop {
            while self.status == RunStatus::Running && !self.queue.is_empty() {
                // A store waiting for its database server to come back: no step starts (to
                // print or pay for what could not be kept) until what the run did is stored.
                if self.ctx.store().in_outage()
                    && let Err(error) = self.ctx.store().flushed().await
                {
                    self.fail_quietly(format!(
                        "the run stopped: the run store could not keep what it did ({error})"
                    ));
                    break;
                }
                // Everything queued became ready while the run was running, so it all starts,
                // as concurrent branches do; only a step that waits for a person, reached after
                // one has paused the run, waits in the queue (seed 003).
                // The queue and a spare take turns, so that a long chain allocates no queue
                // per step.
                let mut ready = std::mem::take(&mut self.spare_queue);
                std::mem::swap(&mut ready, &mut self.queue);
                for keyed in ready.drain(..) {
                    match self.status {
                        RunStatus::Running => self.start(keyed),
                        RunStatus::Paused if !self.may_pause(&keyed.1.node_id) => self.start(keyed),
                        RunStatus::Paused => self.queue.push_back(keyed),
                        _ => break,
                    }
                }
                self.spare_queue = ready;
            }
            if self.status == RunStatus::Running && self.fire_ready_joins() {
                continue;
            }
            if self.status == RunStatus::Running
                && self.tasks.is_empty()
                && self.queue.is_empty()
                && let Some((item, pause)) = self.parked.pop()
            {
                self.wait_child(item, pause);
            }
            if self.status == RunStatus::Failed || self.tasks.is_empty() {
                break;
            }
            // About to wait: what the run did since the last wait is stored first, so that a
            // process killed from here on leaves the run to be continued where it is.
            self.checkpoint();
            tokio::select! {
                biased;
                () = self.ctx.cancel.cancelled() => {
                    self.tasks.abort_all();
                    self.status = RunStatus::Cancelled;
                    break;
                }
                Some(joined) = self.tasks.join_next_with_id() => {
                    self.finished(joined);
                    // Steps that finished meanwhile are settled too before the next checkpoint.
                    while let Some(joined) = self.tasks.try_join_next_with_id() {
                        self.finished(joined);
                    }
                }
            }
        }
        if self.ctx.cancel.is_cancelled() && self.status != RunStatus::Failed {
            self.tasks.abort_all();
            self.status = RunStatus::Cancelled;
        }
        self.end()
    }

    /// Whether a step of `node_id` may stop the run for a person: reached while the run is
    /// paused, it waits in the queue.
    fn may_pause(&self, node_id: &str) -> bool {
        self.step_from.is_some()
            || self.pause_requested()
            || self.breakpoints.iter().any(|breakpoint| {
                breakpoint.node_id == node_id && breakpoint.when == BreakWhen::Before
            })
            || self
                .ctx
                .graph
                .nodes
                .get(node_id)
                .is_some_and(|node| node.kind.scheduling() == Scheduling::Pause)
    }

    fn start(&mut self, keyed: Keyed) {
        let item = &keyed.1;
        // The run's graph, held apart from `self` so that the node looked up here once serves
        // the whole step.
        let ctx = Arc::clone(&self.ctx);
        let Some(node) = ctx.graph.nodes.get(&*item.node_id) else {
            self.fail(
                &item.node_id,
                format!("node `{}` cannot run (its type is unknown)", item.node_id),
            );
            return;
        };
        match node.kind.scheduling() {
            Scheduling::Never => return,
            Scheduling::Join => {
                // A join records what arrives and runs once nothing more can arrive.
                let (_, item) = keyed;
                let source = item
                    .source_node_id
                    .as_deref()
                    .unwrap_or_default()
                    .to_string();
                self.joins
                    .entry(item.node_id.to_string())
                    .or_default()
                    .insert(source, item.input);
                return;
            }
            Scheduling::Instant | Scheduling::Pause | Scheduling::Task => {}
        }
        let Some(visits) = self.count_visit(&item.node_id) else {
            return;
        };
        // Both hold every step after the stop too (the run is stored paused with them queued).
        let stepped = self.step_from.is_some_and(|from| keyed.0 >= from);
        let stop = if self.pause_requested() {
            Some(" (paused by the person)".to_string())
        } else if stepped {
            Some(" (a step)".to_string())
        } else {
            self.breakpoint_hit(&item.node_id, BreakWhen::Before, visits, &item.input)
        };
        if let Some(why) = stop {
            let stop = BreakStop {
                when: BreakWhen::Before,
                visit: visits,
                handle: String::new(),
                is_result: false,
            };
            self.stop_at(keyed.1, stop, &why);
            return;
        }
        if let Some(pin) = self.ctx.pins.get(&*item.node_id).cloned() {
            self.use_pin(keyed.1, visits, pin);
            return;
        }
        self.launch_node(node, keyed, visits);
    }

    /// Lets the person pause this run through `requested` ([`crate::Engine::pause`]).
    pub(crate) fn pause_on(&mut self, requested: Arc<AtomicBool>) {
        self.pause_request = Some(requested);
    }

    fn pause_requested(&self) -> bool {
        self.pause_request
            .as_ref()
            .is_some_and(|requested| requested.load(Ordering::SeqCst))
    }

    /// Whether a breakpoint of `node_id` at `when` stops visit `visit` with `value`: `Some` with
    /// what to add to the message (its condition), `None` to go on. A condition that cannot be
    /// evaluated stops, saying why, rather than being passed silently.
    fn breakpoint_hit(
        &self,
        node_id: &str,
        when: BreakWhen,
        visit: u64,
        value: &Value,
    ) -> Option<String> {
        for breakpoint in self
            .breakpoints
            .iter()
            .filter(|breakpoint| breakpoint.node_id == node_id && breakpoint.when == when)
        {
            let Some(template) = breakpoint.condition_template(visit) else {
                return Some(String::new());
            };
            let condition = breakpoint.condition.as_deref().unwrap_or_default();
            match self.ctx.render_condition(&template, value) {
                Ok(text) if text == "stop" => return Some(format!(" ({condition})")),
                Ok(_) => {}
                Err(error) => {
                    return Some(format!(" (its condition `{condition}` failed: {error})"));
                }
            }
        }
        None
    }

    /// Pauses the run at a breakpoint: `item.input` is the value there.
    fn stop_at(&mut self, item: QueuedStep, stop: BreakStop, why: &str) {
        let value = output_text(&item.input);
        let value: String = if value.chars().count() > 200 {
            value.chars().take(200).chain("…".chars()).collect()
        } else {
            value
        };
        let message = format!(
            "breakpoint {} `{}` (visit {}){why}: its {} is {value}",
            stop.when.as_str(),
            item.node_id,
            stop.visit,
            match stop.when {
                BreakWhen::Before => "input",
                BreakWhen::After => "output",
                BreakWhen::Tool => "tool call's arguments",
            }
        );
        self.ctx
            .events
            .emit_held(EventType::WaitInput, Some(&item.node_id), message.clone());
        self.waiting = Some(Waiting::Breakpoint {
            item,
            stop,
            message,
        });
        self.status = RunStatus::Paused;
    }

    /// Goes on from the breakpoint the run stopped at, with `set` (checked by the caller) in
    /// place of the value there; with `step`, the steps that become ready from here on stop
    /// before they start.
    pub(crate) fn continue_from(
        &mut self,
        waiting: QueuedStep,
        stop: BreakStop,
        set: Option<Value>,
        step: bool,
    ) {
        let node_id = waiting.node_id.clone();
        let mut item = waiting;
        let replaced = set.is_some();
        if let Some(value) = set {
            self.ctx.emit(
                EventType::LogicCheck,
                Some(&node_id),
                format!(
                    "value at the breakpoint {} `{node_id}` replaced by the person: {}",
                    stop.when.as_str(),
                    value
                ),
            );
            item.input = Arc::new(value);
        }
        if step {
            self.step_from = Some(self.next_key);
        }
        match stop.when {
            BreakWhen::Before => match self.ctx.pins.get(&*node_id).cloned() {
                // A pinned node stopped before stays pinned.
                Some(pin) => self.use_pin(item, stop.visit, pin),
                None => {
                    let keyed = self.keyed(item);
                    self.launch(keyed, stop.visit);
                }
            },
            BreakWhen::After => {
                if replaced {
                    self.ctx.outputs.set(&node_id, Arc::clone(&item.input));
                    self.ctx.store().put_node_output(
                        Arc::clone(&self.ctx.run_id),
                        self.ctx.store_key(&node_id),
                        &item.input,
                        stop.visit,
                        now(),
                    );
                    remember(&mut self.last_finished, &node_id);
                    if stop.is_result {
                        remember(&mut self.last_output, &node_id);
                    }
                }
                self.route(&node_id, &stop.handle, &item.input);
            }
            // Continued by `continue_tool_call`; should one arrive here, the step runs again.
            BreakWhen::Tool => {
                let keyed = self.keyed(item);
                self.rerun.push((keyed, stop.visit));
            }
        }
    }

    /// Goes on from an agent stopped before a tool call: its step runs again (its answers so
    /// far from the run's record), the call made with `set` in place of its arguments.
    pub(crate) fn continue_tool_call(
        &mut self,
        waiting: QueuedStep,
        nested: Option<ChildPause>,
        set: Option<Value>,
    ) {
        let Some(pause) = nested else {
            // Nothing to go on from: the step runs again, and stops again.
            let visits = self.visits.get(&*waiting.node_id).copied().unwrap_or(1);
            let keyed = self.keyed(waiting);
            self.rerun.push((keyed, visits));
            return;
        };
        let visits = self.visits.get(&*waiting.node_id).copied().unwrap_or(1);
        let resume = ChildResume {
            pause,
            answer: serde_json::json!({ "continue": true, "set": set }),
        };
        let keyed = self.keyed(waiting);
        self.spawn(keyed, visits, Some(resume));
    }

    /// Stops again at the breakpoint an interrupted run was stopped at.
    pub(crate) fn stop_again(&mut self, waiting: QueuedStep, stop: BreakStop) {
        self.stop_at(waiting, stop, "");
    }

    /// A pinned node's step: shown as a step that ends at once with its pin, which goes on
    /// along `output`; the node itself does not run (no provider request, no code, no HTTP).
    fn use_pin(&mut self, item: QueuedStep, visits: u64, pin: Arc<Value>) {
        step_started(&self.ctx, &item);
        self.ctx.emit(
            EventType::LogicCheck,
            Some(&item.node_id),
            "pinned: its pinned output stands for it; it does not run".to_string(),
        );
        self.settle(item, visits, Ok(StepOutput::new(pin, "output")));
    }

    /// Runs a counted step as visit `visits` of its node: inline when its kind does not wait
    /// (and it has no retries), else as a task.
    fn launch(&mut self, keyed: Keyed, visits: u64) {
        let ctx = Arc::clone(&self.ctx);
        if let Some(node) = ctx.graph.nodes.get(&*keyed.1.node_id) {
            self.launch_node(node, keyed, visits);
        }
    }

    /// [`Scheduler::launch`] of a step of `node`, already looked up.
    fn launch_node(&mut self, node: &GraphNode, keyed: Keyed, visits: u64) {
        let instant = matches!(
            node.kind.scheduling(),
            Scheduling::Instant | Scheduling::Pause | Scheduling::Join
        );
        if instant && node.settings.max_attempts() <= 1 {
            let outcome = self.run_instant(node, &keyed.1, visits);
            self.settle(keyed.1, visits, outcome);
            return;
        }
        self.spawn(keyed, visits, None);
    }

    /// Counts a visit of `node_id`; `None` (and the run failed) past `maxNodeVisits`.
    fn count_visit(&mut self, node_id: &str) -> Option<u64> {
        // Looked up before inserting: a node visited again costs no new key.
        let visits = match self.visits.get_mut(node_id) {
            Some(visits) => {
                *visits += 1;
                *visits
            }
            None => {
                self.visits.insert(node_id.to_string(), 1);
                1
            }
        };
        if visits > self.max_visits {
            self.fail(
                node_id,
                format!(
                    "node `{node_id}` would run a {} time, more than settings.maxNodeVisits ({}) allows",
                    ordinal(visits),
                    self.max_visits
                ),
            );
            return None;
        }
        Some(visits)
    }

    /// Runs a step of a kind that does not wait on the scheduler's own thread.
    fn run_instant(
        &self,
        node: &GraphNode,
        item: &QueuedStep,
        visits: u64,
    ) -> Result<StepOutput, StepError> {
        let ctx = &*self.ctx;
        let internal = |message: String| Err(StepError::new(StepErrorKind::Internal, message));
        let step = Step {
            node_id: &item.node_id,
            input: &item.input,
            visit: visits,
            timeout: node.settings.timeout(node.kind.default_timeout_seconds()),
            resume: None,
            stop_before_tools: false,
        };
        step_started_as(ctx, item, node.label(&item.node_id));
        node.config.run_now(&step, ctx).unwrap_or_else(|| {
            internal(format!(
                "`{}` nodes are declared to finish at once, but this step waited (a bug in Weft)",
                node.kind
            ))
        })
    }

    fn spawn(&mut self, keyed: Keyed, visits: u64, resume: Option<ChildResume>) {
        if resume.is_none() {
            // Shown here rather than in the task, so that it comes before the checkpoint that
            // lists the step as running (a continued run counts visits by these events).
            step_started(&self.ctx, &keyed.1);
        }
        // The run may wait on this step (a model, the network): what it wrote is committed and
        // shown meanwhile.
        self.ctx.store().expect_wait();
        let ctx = self.ctx.clone();
        let task_item = keyed.1.clone();
        let stop_before_tools = self.breakpoints.iter().any(|breakpoint| {
            breakpoint.when == BreakWhen::Tool && *breakpoint.node_id == *keyed.1.node_id
        });
        let handle = self.tasks.spawn(async move {
            execute(&ctx, &task_item, visits, resume, stop_before_tools).await
        });
        self.running.insert(handle.id(), (keyed, visits));
    }

    /// Stores, in one write, what changed in the run since its last checkpoint: steps started
    /// and finished (the stored queue), the step waiting for a person, and the rest of the
    /// scheduler's state. Visit counts are not stored: they are the `step_start` events before
    /// the checkpoint, read back when the run is continued.
    pub(crate) fn checkpoint(&mut self) {
        if let Some(checkpoint) = self.take_checkpoint() {
            self.ctx
                .store()
                .save_checkpoint(&self.ctx.run_id, &checkpoint, &now());
        }
    }

    /// What changed since the last checkpoint, counted as stored from now on; `None` for a
    /// scheduler that does not checkpoint.
    pub(crate) fn take_checkpoint(&mut self) -> Option<Checkpoint> {
        let stored = self.stored.as_mut()?;
        let mut current: HashSet<u64> =
            HashSet::with_capacity(self.running.len() + self.queue.len());
        let mut added = Vec::new();
        let running = self
            .running
            .values()
            .map(|((key, step), visit)| (key, step, Some(*visit)));
        let queued = self.queue.iter().map(|(key, step)| (key, step, None));
        for (key, step, visit) in running.chain(queued) {
            current.insert(*key);
            if !stored.contains(key) {
                added.push(StoredStep {
                    key: *key,
                    step: step.clone(),
                    visit,
                });
            }
        }
        let removed: Vec<u64> = stored.difference(&current).copied().collect();
        *stored = current;
        let (waiting, nested) = match &self.waiting {
            Some(Waiting::Decision { item, .. } | Waiting::Breakpoint { item, .. }) => {
                (Some(item.clone()), None)
            }
            Some(Waiting::Child { item, pause }) => (Some(item.clone()), Some(pause.clone())),
            None => (None, None),
        };
        let state = SavedState {
            nested,
            ..self.saved_state()
        };
        Some(Checkpoint {
            added,
            removed,
            waiting,
            state: serde_json::to_value(&state).unwrap_or_default(),
        })
    }

    /// Joins whose every incoming branch has either arrived or can no longer arrive run now.
    /// Returns whether any did.
    fn fire_ready_joins(&mut self) -> bool {
        if self.joins.is_empty() {
            return false;
        }
        let ready: Vec<String> = self
            .joins
            .keys()
            .filter(|join| !self.waits_for_more(join))
            .cloned()
            .collect();
        for join in &ready {
            let arrived = self.joins.remove(join).unwrap_or_default();
            // Each arrived output is still the run's output of its node: copied into the
            // joined object.
            let input = Value::Object(
                arrived
                    .into_iter()
                    .map(|(source, value)| (source, Arc::unwrap_or_clone(value)))
                    .collect::<Map<String, Value>>(),
            );
            let Some(visits) = self.count_visit(join) else {
                return true;
            };
            let item = QueuedStep {
                node_id: join.as_str().into(),
                input: Arc::new(input),
                source_node_id: None,
            };
            let ctx = Arc::clone(&self.ctx);
            let outcome = match ctx.graph.nodes.get(join) {
                Some(node) => self.run_instant(node, &item, visits),
                None => Err(StepError::new(
                    StepErrorKind::Internal,
                    format!("node `{join}` is not in the flow"),
                )),
            };
            self.settle(item, visits, outcome);
        }
        !ready.is_empty()
    }

    /// Whether some incoming branch of `join` has not arrived yet but still can: its source
    /// is reachable from a step that is running, queued or waiting.
    fn waits_for_more(&self, join: &str) -> bool {
        let arrived = self.joins.get(join);
        let missing: HashSet<&str> = self
            .ctx
            .graph
            .sources_of(join)
            .filter(|source| arrived.is_none_or(|arrived| !arrived.contains_key(*source)))
            .collect();
        if missing.is_empty() {
            return false;
        }
        let active = self
            .running
            .values()
            .map(|((_, item), _)| item)
            .chain(self.queue.iter().map(|(_, item)| item))
            .chain(self.waiting.as_ref().map(Waiting::item))
            .chain(self.parked.iter().map(|(item, _)| item))
            .map(|item| &*item.node_id);
        // Walk forward from every active step, not through the join itself.
        let mut seen: HashSet<&str> = HashSet::new();
        let mut frontier: Vec<&str> = active.collect();
        while let Some(node) = frontier.pop() {
            if node == join || !seen.insert(node) {
                continue;
            }
            if missing.contains(node) {
                return true;
            }
            frontier.extend(self.ctx.graph.all_targets(node));
        }
        false
    }

    /// A step waits for a person's decision: answered in advance, or the run pauses (until the
    /// approval's `timeoutSeconds`, when it has one).
    fn wait_decision(
        &mut self,
        item: QueuedStep,
        message: String,
        fields: Vec<FormField>,
        quorum: Quorum,
    ) {
        let node_id = item.node_id.clone();
        if let Some(decision) = self.ctx.decisions.get(&*node_id).cloned() {
            self.ctx
                .emit(EventType::WaitInput, Some(&node_id), message.clone());
            self.apply_decision_given(item, &decision);
        } else {
            self.ctx
                .events
                .emit_held(EventType::WaitInput, Some(&node_id), message.clone());
            let deadline = self.wait_limit(&node_id).map(|seconds| {
                let limit = chrono::Duration::milliseconds((seconds * 1000.0) as i64);
                (chrono::Utc::now() + limit).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            });
            self.waiting = Some(Waiting::Decision {
                item,
                message,
                fields,
                quorum,
                deadline,
            });
            self.status = RunStatus::Paused;
        }
    }

    /// How long an approval waits for a person: its `timeoutSeconds`, if set.
    fn wait_limit(&self, node_id: &str) -> Option<f64> {
        self.ctx
            .graph
            .nodes
            .get(node_id)
            .and_then(|node| node.settings.timeout_seconds)
    }

    /// The form of the approval `node_id`.
    fn approval_fields(&self, node_id: &str) -> Vec<FormField> {
        match self.ctx.graph.nodes.get(node_id).map(|node| &node.config) {
            Some(NodeConfig::Approval(config)) => config.fields.clone(),
            _ => Vec::new(),
        }
    }

    fn wait_child(&mut self, item: QueuedStep, pause: ChildPause) {
        if self.waiting.is_some() {
            self.parked.push((item, pause));
        } else {
            self.waiting = Some(Waiting::Child { item, pause });
            self.status = RunStatus::Paused;
        }
    }

    /// A decision given in advance: applied, and kept in the chain of decisions as given by its
    /// person through the run's channel.
    fn apply_decision_given(&mut self, item: QueuedStep, decision: &Decision) {
        let fields = self.approval_fields(&item.node_id);
        if let (Some(channel), Ok(checked)) = (
            self.ctx.shared.decisions_through.clone(),
            decision.clone().checked(&fields, &item.input),
        ) {
            self.ctx
                .store()
                .keep_given_decision(weft_store::GivenDecision {
                    run_id: self.ctx.run_id.to_string(),
                    node_id: self.ctx.store_key(&item.node_id),
                    // The `input_received` event that says it was applied.
                    pause: self.ctx.events.next_seq(),
                    decision: checked.decision.handle().to_string(),
                    by: checked
                        .by
                        .clone()
                        .unwrap_or_else(|| weft_nodes::decision::UNKNOWN_DECIDER.to_string()),
                    channel: channel.to_string(),
                    note: checked.note.clone(),
                    fields: serde_json::to_value(&checked.fields).unwrap_or_default(),
                    at: now(),
                });
        }
        self.apply_decision(item, decision);
    }

    fn apply_decision(&mut self, item: QueuedStep, decision: &Decision) {
        let node_id = item.node_id.clone();
        let fields = self.approval_fields(&node_id);
        // Answers given in advance (`--decide`) meet the form here; a person's were checked
        // when the run was claimed.
        let mut decision = match decision.clone().checked(&fields, &item.input) {
            Ok(decision) => decision,
            Err(problem) => {
                self.fail(
                    &node_id,
                    format!("the decision for `{node_id}` does not fit its form: {problem}"),
                );
                return;
            }
        };
        let timed_out = decision.decision == DecisionChoice::Timeout;
        if timed_out && let Some(seconds) = self.wait_limit(&node_id) {
            decision.note = format!("nobody decided within {}", seconds_text(seconds));
        }
        let at = now();
        let value = decision.to_value_at(&at);
        self.ctx.emit(
            EventType::InputReceived,
            Some(&node_id),
            decision.event_content().to_string(),
        );
        self.ctx.set_approval(value.clone());
        self.ctx.store().put_node_approval(
            &self.ctx.run_id,
            &self.ctx.store_key(&node_id),
            &value,
            &at,
        );
        let visits = self.visits.get(&*node_id).copied().unwrap_or(1);
        let handle = decision.decision.handle();
        if timed_out && self.ctx.graph.targets(&node_id, handle).next().is_none() {
            self.fail(
                &node_id,
                format!(
                    "approval `{node_id}` timed out: {}, and it has no `timeout` edge",
                    decision.note
                ),
            );
            return;
        }
        let output = decision.output(&fields, &item.input);
        if self.finish_step(&node_id, &output, false, visits) {
            self.route(&node_id, handle, &output);
        }
    }

    fn route(&mut self, node_id: &Arc<str>, handle: &str, value: &Arc<Value>) {
        if self.only_node.as_deref() == Some(&**node_id) {
            return;
        }
        let ctx = Arc::clone(&self.ctx);
        for target in ctx.graph.targets(node_id, handle) {
            let keyed = self.keyed(QueuedStep {
                node_id: Arc::clone(target),
                input: Arc::clone(value),
                source_node_id: Some(Arc::clone(node_id)),
            });
            self.queue.push_back(keyed);
        }
    }

    /// A step finished with `value`: stored, shown (`step_end`), and remembered as a
    /// candidate for the run's result; or, when the value or all the run's outputs are
    /// larger than a run may keep, the run fails (false).
    fn finish_step(
        &mut self,
        node_id: &str,
        value: &Arc<Value>,
        is_result: bool,
        visits: u64,
    ) -> bool {
        let text = output_text(value);
        let mib = |bytes: u64| bytes.div_ceil(1024 * 1024);
        if text.len() > MAX_VALUE_BYTES {
            self.fail(
                node_id,
                format!(
                    "node `{node_id}` gave a value of {} MiB, more than the {} MiB one value may be",
                    mib(text.len() as u64),
                    MAX_VALUE_BYTES / 1024 / 1024
                ),
            );
            return false;
        }
        self.output_bytes += text.len() as u64;
        if self.output_bytes > MAX_RUN_OUTPUT_BYTES {
            self.fail(
                node_id,
                format!(
                    "the run's outputs came to {} MiB at node `{node_id}` (visit {visits}), more than the {} MiB one run may store: a loop whose value grows at each visit?",
                    mib(self.output_bytes),
                    MAX_RUN_OUTPUT_BYTES / 1024 / 1024
                ),
            );
            return false;
        }
        let ctx = &self.ctx;
        ctx.outputs.set(node_id, Arc::clone(value));
        // The text of anything but a string (or null) is its JSON: copied, not written again.
        let output_json = match &**value {
            Value::String(_) | Value::Null => weft_store::json_text(&**value),
            _ => text.clone(),
        };
        ctx.store().put_node_output_json(
            Arc::clone(&ctx.run_id),
            ctx.store_key(node_id),
            output_json,
            visits,
            now_shared(),
        );
        ctx.emit(EventType::StepEnd, Some(node_id), text);
        if is_result {
            remember(&mut self.last_output, node_id);
        }
        remember(&mut self.last_finished, node_id);
        true
    }

    fn finished(
        &mut self,
        joined: Result<(tokio::task::Id, Result<StepOutput, StepError>), tokio::task::JoinError>,
    ) {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(error) => {
                let message = if error.is_panic() {
                    "the step crashed (an internal error in Weft)"
                } else {
                    "the step was stopped"
                };
                (
                    error.id(),
                    Err(StepError::new(StepErrorKind::Internal, message)),
                )
            }
        };
        let Some(((_, item), visits)) = self.running.remove(&id) else {
            return;
        };
        self.settle(item, visits, outcome);
    }

    /// Routes a finished step's output, waits where it asks to, or sends its error along
    /// `error` edges, or fails the run.
    fn settle(&mut self, item: QueuedStep, visits: u64, outcome: Result<StepOutput, StepError>) {
        match outcome {
            Ok(StepOutput {
                value,
                wait: Some(wait),
                ..
            }) => match wait {
                Wait::Decision {
                    message,
                    fields,
                    quorum,
                } => {
                    let item = QueuedStep {
                        input: value,
                        ..item
                    };
                    self.wait_decision(item, message, fields, quorum);
                }
                Wait::Child(pause) => self.wait_child(item, pause),
                Wait::Tool(pause) => {
                    // Announced once stored, as an approval's wait is.
                    self.ctx.events.emit_held(
                        EventType::WaitInput,
                        Some(&item.node_id),
                        pause.message.clone(),
                    );
                    self.wait_child(item, pause);
                }
            },
            Ok(output) => {
                if !self.finish_step(&item.node_id, &output.value, output.is_result, visits) {
                    return;
                }
                // A run already paused elsewhere holds one stop at a time: the breakpoint is
                // passed then, and says so.
                if let Some(why) =
                    self.breakpoint_hit(&item.node_id, BreakWhen::After, visits, &output.value)
                {
                    if self.waiting.is_none() {
                        let stop = BreakStop {
                            when: BreakWhen::After,
                            visit: visits,
                            handle: output.handle,
                            is_result: output.is_result,
                        };
                        let item = QueuedStep {
                            input: output.value,
                            ..item
                        };
                        self.stop_at(item, stop, &why);
                        return;
                    }
                    self.ctx.emit(
                        EventType::LogicCheck,
                        Some(&item.node_id),
                        "breakpoint after it passed: the run is already paused elsewhere".into(),
                    );
                }
                self.route(&item.node_id, &output.handle, &output.value);
            }
            Err(error) if error.is_cancelled() => {}
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
                    self.route(&item.node_id, "error", &Arc::new(payload));
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
        self.parked.clear();
    }

    /// The scheduler's state as stored, without the visit counts: a checkpoint leaves them to
    /// the `step_start` events, and [`Scheduler::end`] hands its counts over whole.
    fn saved_state(&self) -> SavedState {
        SavedState {
            next_seq: self.ctx.events.next_seq(),
            budget_lifted: self
                .ctx
                .events
                .budget()
                .is_some_and(super::budget::BudgetTracker::lifted),
            trace: self
                .ctx
                .events
                .trace()
                .and_then(|trace| trace.traceparent()),
            visits: ByNode::default(),
            approval: self.ctx.approval().map(Arc::unwrap_or_clone),
            histories: self
                .ctx
                .histories
                .lock()
                .map(|map| map.clone())
                .unwrap_or_default(),
            last_output_node: self.last_output.clone(),
            last_finished_node: self.last_finished.clone(),
            // Only in a run an older Weft paused, and only until a node of it replaces them.
            last_output: earlier(&self.last_output, &self.earlier_output),
            last_finished: earlier(&self.last_finished, &self.earlier_finished),
            waiting_message: None,
            waiting_fields: Vec::new(),
            waiting_quorum: Quorum::default(),
            waiting_since: None,
            waiting_input: None,
            deadline: None,
            nested: None,
            parked: self.parked.clone(),
            joins: self.joins.clone(),
            only_node: self.only_node.clone(),
            decided: None,
            pins: Pins::new(),
            replay: self.ctx.shared.llm_log.replay_state(),
            breakpoints: self.breakpoints.clone(),
            breakpoint: match &self.waiting {
                Some(Waiting::Breakpoint { stop, .. }) => Some(stop.clone()),
                // An agent stopped before a tool call: continued by running its step again.
                Some(Waiting::Child { item, pause }) if pause.breakpoint => Some(BreakStop {
                    when: BreakWhen::Tool,
                    visit: self.visits.get(&*item.node_id).copied().unwrap_or(1),
                    handle: String::new(),
                    is_result: false,
                }),
                _ => None,
            },
        }
    }

    /// The run's result: the last `output` node's value, else the last finished node's.
    fn result(&self) -> Arc<Value> {
        let output_of = |node: &Option<String>| {
            node.as_deref()
                .and_then(|node_id| self.ctx.outputs.get(node_id))
        };
        output_of(&self.last_output)
            .or_else(|| self.earlier_output.clone())
            .or_else(|| output_of(&self.last_finished))
            .or_else(|| self.earlier_finished.clone())
            .unwrap_or_else(|| Arc::new(Value::Null))
    }

    fn end(mut self) -> SchedulerEnd {
        let mut state = SavedState {
            // Moved, not copied: a long run counted a visit for each of its nodes.
            visits: std::mem::take(&mut self.visits),
            ..self.saved_state()
        };
        if self.status == RunStatus::Paused
            && let Some(waiting) = self.waiting.take()
        {
            let (waiting, path, message) = match waiting {
                Waiting::Decision {
                    item,
                    message,
                    fields,
                    quorum,
                    deadline,
                } => {
                    let path = item.node_id.to_string();
                    state.waiting_fields = fields;
                    state.waiting_quorum = quorum;
                    state.waiting_since = Some(now_shared().to_string());
                    state.waiting_input = Some(Value::clone(&item.input));
                    state.deadline = deadline;
                    (item, path, message)
                }
                Waiting::Child { item, pause } => {
                    let path = format!("{}/{}", item.node_id, pause.path);
                    let message = pause.message.clone();
                    state.waiting_fields = pause.fields.clone();
                    state.waiting_quorum = Quorum::clone(&pause.quorum);
                    state.waiting_since = pause.since.clone();
                    state.waiting_input = Some(pause.input.clone());
                    state.deadline = pause.deadline.clone();
                    state.nested = Some(pause);
                    (item, path, message)
                }
                Waiting::Breakpoint { item, message, .. } => {
                    let path = item.node_id.to_string();
                    (item, path, message)
                }
            };
            state.waiting_message = Some(message.clone());
            return SchedulerEnd {
                status: RunStatus::Paused,
                result: None,
                error: None,
                paused: Some(Paused {
                    waiting,
                    queue: self.queue.drain(..).map(|(_, step)| step).collect(),
                    deadline: state.deadline.clone(),
                    state: state.clone(),
                    path,
                    message,
                }),
                state,
            };
        }
        let status = match self.status {
            RunStatus::Running | RunStatus::Paused => RunStatus::Completed,
            other => other,
        };
        let result = match status {
            RunStatus::Completed => Some(self.result()),
            _ => None,
        };
        let error = match status {
            RunStatus::Failed => self.failure.clone(),
            RunStatus::Cancelled => Some("the run was cancelled".to_string()),
            _ => None,
        };
        SchedulerEnd {
            status,
            result,
            error,
            paused: None,
            state,
        }
    }
}

/// The value an older Weft kept (`earlier`) while no node of this run has taken its place.
fn earlier(node: &Option<String>, earlier: &Option<Arc<Value>>) -> Option<Value> {
    match node {
        Some(_) => None,
        None => earlier.as_deref().cloned(),
    }
}

/// Keeps `node_id` in `slot`, in the text already there when it has room: the scheduler
/// notes the node of every step that finishes.
fn remember(slot: &mut Option<String>, node_id: &str) {
    match slot {
        Some(kept) => {
            kept.clear();
            kept.push_str(node_id);
        }
        None => *slot = Some(node_id.to_string()),
    }
}

/// Emits `step_start` for `item`, naming the node whose output started it.
fn step_started(ctx: &RunContext, item: &QueuedStep) {
    let label = ctx
        .graph
        .nodes
        .get(&*item.node_id)
        .map_or(&*item.node_id, |node| node.label(&item.node_id));
    step_started_as(ctx, item, label);
}

/// [`step_started`] for a node labelled `label`.
fn step_started_as(ctx: &RunContext, item: &QueuedStep, label: &str) {
    if ctx.shared.llm_log.replayed_run().is_some() {
        ctx.shared.llm_log.follows(
            &ctx.call_key(&item.node_id),
            item.source_node_id
                .as_deref()
                .map(|source| ctx.call_key(source))
                .as_deref(),
        );
    }
    ctx.events.emit_step_start(
        &item.node_id,
        label.to_string(),
        item.source_node_id.as_ref(),
    );
}

/// Runs one step as a task, with its timeout and retries.
async fn execute(
    ctx: &RunContext,
    item: &QueuedStep,
    visits: u64,
    mut resume: Option<ChildResume>,
    stop_before_tools: bool,
) -> Result<StepOutput, StepError> {
    let node_id = &*item.node_id;
    let Some(node) = ctx.graph.nodes.get(node_id) else {
        return Err(StepError::new(
            StepErrorKind::Internal,
            format!("node `{node_id}` is not in the flow"),
        ));
    };
    let timeout = node.settings.timeout(node.kind.default_timeout_seconds());
    let attempts = node.settings.max_attempts();
    let mut attempt = 1;
    loop {
        let step = Step {
            node_id,
            input: &item.input,
            visit: visits,
            timeout,
            resume: resume.take(),
            stop_before_tools,
        };
        let outcome = match tokio::time::timeout(timeout, node.config.run(&step, ctx)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StepError::new(
                StepErrorKind::Timeout,
                format!(
                    "timed out after {} s (timeoutSeconds)",
                    timeout.as_secs_f64()
                ),
            )),
        };
        match outcome {
            Ok(output) => return Ok(output),
            Err(error) if error.is_cancelled() || attempt >= attempts => return Err(error),
            Err(error) => {
                attempt += 1;
                let backoff = node.settings.backoff(attempt);
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
                    () = ctx.cancel.cancelled() => return Err(StepError::cancelled()),
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
