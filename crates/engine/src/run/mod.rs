//! Running flows (docs/flows.md#running): the [`Engine`] that `weft-api` drives for every host
//! starts a run, resumes a paused one, goes on from a breakpoint, continues an interrupted one,
//! cancels one, and shuts down.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use weft_engine::{Engine, RunOptions};
//! use weft_flow::Flow;
//! use weft_providers::{LlmClients, ProviderSettings};
//! use weft_store::Store;
//! let engine = Engine::new(LlmClients::new(ProviderSettings::from_env()),
//! Store::open("runs.db".as_ref())?);
//! let flow = Flow::load("flows/hello.json".as_ref())?;
//! let outcome = engine.start(flow, RunOptions::default()).await?;
//! println!("{} {:?}", outcome.status, outcome.result);
//! # Ok(()) }
//! ```

mod budget;
pub use budget::Pricer;
mod context;
mod emitter;
mod graph;
mod hosted;
mod llm_log;
mod nested;
mod scheduler;
pub use scheduler::{MAX_RUN_OUTPUT_BYTES, MAX_VALUE_BYTES};
mod step_env;
mod trace;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use emitter::EventListener;
pub use llm_log::RecordedAnswers;

use crate::breakpoints::{BreakWhen, Breakpoint, check_breakpoints};
use crate::pins::{self, Pins, check_pins};
use crate::trace::{RunTrace, TraceStart, Tracer};
use context::{ContextSeed, RunContext, RunShared, Services};
use emitter::{Emitter, now};
use graph::Graph;
use llm_log::{LlmLog, ReplayState};
use weft_event::{EventType, RunStatus};
use weft_flow::Flow;
use weft_flow::output_schema::OutputSchema;
use weft_nodes::validate::{FlowToRun, Problem, check_flow};
use weft_nodes::{Decision, DecisionChoice, FormField, NodeConfig, NodeKind, Quorum, StartConfig};
use weft_providers::{LazyClient, LlmClients, Usage};
use weft_store::{NewRun, NodeOutputRecord, PauseRecord, QueuedStep, RunRecord, Store, StoreError};
use weft_template::output_text;

use scheduler::{BreakStop, SavedState, Scheduler};

/// Where a run begins.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Entry {
    /// At the `start` node (a normal run).
    #[default]
    Start,
    /// At `node_id` with `input` as its previous output, as if the nodes before it had
    /// produced `outputs` (their latest outputs, for `nodes.<id>` in templates). This is how
    /// "run from here" re-runs part of a flow. With `only`, nothing after the node runs
    /// ("run this node"). [`Engine::entry_after`] builds one from an earlier run.
    Node {
        node_id: String,
        input: Value,
        outputs: HashMap<String, Value>,
        only: bool,
    },
}

/// How to start a run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The run's input text (a JSON object or array is read as JSON); else the start node's
    /// `initialInput`.
    pub input: Option<String>,
    /// Approvals answered in advance, by node id (`sub/review` for one inside the subflow
    /// `sub`); used every time that node is reached in this process. Checked by
    /// [`check_decisions`] before the run starts.
    pub decisions: HashMap<String, Decision>,
    /// How `decisions` reached Weft (`cli`, `api`, `mcp`): each is kept in the store's chain of
    /// decisions (`weft audit`) as it is applied. `None` keeps them only in the run's events.
    pub decisions_through: Option<String>,
    /// The flow file, stored with the run for history.
    pub flow_path: Option<PathBuf>,
    pub on_event: Option<EventListener>,
    /// Cancelling it ends the run with status `cancelled` (as [`Engine::cancel`] does).
    pub cancel: CancellationToken,
    pub entry: Entry,
    /// Pinned outputs by node id ([`crate::pins`]): these nodes do not run, their pin is their
    /// output, for the whole run (a resumed run keeps them). Checked by
    /// [`crate::pins::check_pins`] before the run starts.
    pub pins: Pins,
    /// A past run (id or unique prefix) whose recorded LLM answers this run gets for identical
    /// requests (same node, visit and request), with no provider call; a request that differs,
    /// and every node after it on its branch, goes live.
    pub replay: Option<String>,
    /// Where the run stops for the person ([`crate::breakpoints`]), kept for the whole run.
    /// Checked by [`crate::breakpoints::check_breakpoints`] before the run starts.
    pub breakpoints: Vec<Breakpoint>,
    /// Answers recorded outside the store (a flow test offline): every LLM request is answered
    /// from them, and one they do not have fails its node instead of reaching the provider.
    pub recorded: Option<RecordedAnswers>,
    /// The id to give the run (a host that names runs itself: a Restate workflow's key); a
    /// new UUID when `None`. An id already in the store is refused by the store.
    pub run_id: Option<String>,
    /// What started the run (kept with it: `weft runs`, History, the API).
    pub trigger: Option<weft_store::Trigger>,
    /// A W3C `traceparent` (an HTTP request's header, `TRACEPARENT`): the run's span is its
    /// child when the engine has a tracer ([`Engine::with_tracer`]).
    pub traceparent: Option<String>,
}

/// How to resume a paused run.
#[derive(Clone, Default)]
pub struct ResumeOptions {
    /// Further approvals answered in advance.
    pub decisions: HashMap<String, Decision>,
    pub on_event: Option<EventListener>,
    pub cancel: CancellationToken,
    /// As [`RunOptions::traceparent`]; without one, the resumed run continues its trace.
    pub traceparent: Option<String>,
}

/// Where a run stands when it ended or paused.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOutcome {
    pub run_id: String,
    pub status: RunStatus,
    /// The run's result when it completed: the last `output` node's value, else the last finished
    /// node's. Shared with the run's outputs: a large result is not copied to be handed over.
    pub result: Option<Arc<Value>>,
    pub error: Option<String>,
    /// What a paused run waits for.
    pub waiting: Option<Waiting>,
}

/// What a paused run waits for: the node (a path such as `sub/review` for one inside a
/// subflow) and the message shown to the person.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub node_id: String,
    pub message: String,
    /// Set when the run stopped at a breakpoint (before or after the node) rather than at an
    /// approval: it is continued, not decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakpoint: Option<BreakWhen>,
    /// The approval's form, answered with the decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FormField>,
    /// Who may decide the approval, and how many must approve.
    #[serde(default, skip_serializing_if = "Quorum::is_default")]
    pub quorum: Quorum,
    /// Which pause of the run this is: a number that stays while the run waits here and is
    /// another at its next pause (decisions are kept by it).
    #[serde(default)]
    pub pause: u64,
    /// When the approval began to wait (RFC 3339), which its follow-ups count from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the approval times out (RFC 3339, UTC), if it has `timeoutSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// What the node waited at was given: the draft a person decides on.
    #[serde(default)]
    pub input: Value,
}

/// Why a run could not start or resume. Failures *during* a run are not errors here: the run
/// ends with status `failed` and the outcome says why.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the flow is not valid:\n{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid { problems: Vec<Problem> },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("cannot start at `{0}`: there is no such node")]
    NoSuchEntry(String),
    #[error(
        "cannot start at `{node_id}`: no node before it has an output in run {run_id}; run the flow up to it first"
    )]
    NoEarlierOutput { node_id: String, run_id: String },
    #[error("{0}")]
    Decide(#[from] DecideError),
    /// Pins or breakpoints that cannot apply to the flow, one message each.
    #[error("{}", problems.join("\n"))]
    Debugging { problems: Vec<String> },
    /// The run's task stopped without an outcome (a bug: a panic in the engine).
    #[error("run {0} stopped without an outcome (an internal error in Weft)")]
    Lost(String),
}

/// A decision given in advance (`weft run --decide NODE=...`) that cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--decide {target}: {problem}")]
pub struct DecideError {
    /// The target as given (`review`, `sub/review`).
    pub target: String,
    pub problem: String,
}

/// Checks decisions given in advance against `flow`: each must name an approval, or (as
/// `sub/review`) a node inside a subflow of this flow.
pub fn check_decisions(
    flow: &Flow,
    decisions: &HashMap<String, Decision>,
) -> Result<(), DecideError> {
    let mut targets: Vec<&String> = decisions.keys().collect();
    targets.sort();
    for target in targets {
        let refused = |problem: String| DecideError {
            target: target.clone(),
            problem,
        };
        let (head, nested) = match target.split_once('/') {
            Some((head, _)) => (head, true),
            None => (target.as_str(), false),
        };
        let Some(node) = flow.node(head) else {
            return Err(refused(format!("the flow has no node `{head}`")));
        };
        let kind = NodeKind::of(node);
        if nested && kind != Some(NodeKind::Subflow) {
            return Err(refused(format!(
                "node `{head}` is a {} node, not a subflow",
                node.kind
            )));
        }
        if !nested && kind != Some(NodeKind::Approval) {
            return Err(refused(format!(
                "node `{head}` is a {} node, not an approval",
                node.kind
            )));
        }
    }
    Ok(())
}

/// A run going in this process. Its outcome also arrives as the `run_end` event (a pause as
/// `wait_input`).
pub struct RunHandle {
    pub run_id: String,
    task: JoinHandle<Result<RunOutcome, RunError>>,
}

impl RunHandle {
    /// A handle on a run `task` drives to its end or next pause (a host following a run
    /// another host drives makes one).
    pub fn new(run_id: String, task: JoinHandle<Result<RunOutcome, RunError>>) -> RunHandle {
        RunHandle { run_id, task }
    }

    /// Waits until the run ends or pauses. An error here means the store could not keep
    /// how it ended.
    pub async fn outcome(self) -> Result<RunOutcome, RunError> {
        self.task.await.map_err(|_| RunError::Lost(self.run_id))?
    }
}

/// The runs going in this process, so a host can cancel one by id and shut down cleanly.
#[derive(Default)]
struct ActiveRuns {
    tokens: Mutex<HashMap<String, CancellationToken>>,
    /// Per run going: set when the person asks it to pause ([`Engine::pause`]).
    pauses: Mutex<HashMap<String, Arc<AtomicBool>>>,
    tracker: TaskTracker,
}

impl ActiveRuns {
    fn tokens(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn pauses(&self) -> MutexGuard<'_, HashMap<String, Arc<AtomicBool>>> {
        self.pauses
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs flows. One engine serves many runs; it is cheap to clone, and clones share the runs
/// going (so any clone can cancel them).
#[derive(Clone)]
pub struct Engine {
    services: Services,
    active: Arc<ActiveRuns>,
    /// Who this engine is when it drives runs for another host (a Restate worker:
    /// `restate INGRESS-URL`); its new runs are stored with it, and a paused run hosted
    /// elsewhere is decided through its host ([`hosted`]).
    host: Option<String>,
    /// Set by a command whose process ends with its runs ([`Engine::ending_with_process`]).
    ends_with_process: bool,
}

impl Engine {
    pub fn new(llm: LlmClients, store: Store) -> Engine {
        let http = LazyClient::new(Duration::from_secs(10), None);
        Engine {
            services: Services {
                llm,
                http,
                sandbox: weft_sandbox::Sandbox::new(),
                store,
                mcp: Arc::default(),
                pricer: None,
                tracer: None,
            },
            active: Arc::default(),
            host: None,
            ends_with_process: false,
        }
    }

    /// The same engine, for a process that ends once its runs end (`weft run`): the memory a
    /// finished run held for its flow, graph and outputs is left for the system to reclaim
    /// with the process, instead of being freed piece by piece first (milliseconds for a large
    /// flow), and so are the store's connections once its writes are committed (see
    /// [`Store::end_with_process`]).
    pub fn ending_with_process(mut self) -> Engine {
        self.ends_with_process = true;
        self.store().end_with_process();
        self
    }

    /// The same engine, driving runs as `host` (see [`NewRun::host`]): the runs it starts are
    /// that host's, and it may claim them.
    pub fn hosted_by(mut self, host: impl Into<String>) -> Engine {
        self.host = Some(host.into());
        self
    }

    /// The same engine with other providers (new settings); runs going keep theirs, and stay
    /// known to both engines.
    pub fn with_llm(&self, llm: LlmClients) -> Engine {
        Engine {
            services: Services {
                llm,
                ..self.services.clone()
            },
            active: self.active.clone(),
            host: self.host.clone(),
            ends_with_process: self.ends_with_process,
        }
    }

    /// The same engine, reaching MCP servers through `hub` (the app's, which reads `${NAME}`s
    /// from its settings too).
    pub fn with_mcp(mut self, hub: Arc<weft_mcp::Hub>) -> Engine {
        self.services.mcp = hub;
        self
    }

    /// The same engine, costing the answers of runs with a budget (`settings.budget`) with
    /// `pricer`; without one, only `maxTokens` can be reached.
    pub fn with_pricer(mut self, pricer: Pricer) -> Engine {
        self.services.pricer = Some(pricer);
        self
    }

    /// The same engine, telling `tracer` what its runs do ([`crate::trace`]).
    pub fn with_tracer(mut self, tracer: Arc<dyn Tracer>) -> Engine {
        self.services.tracer = Some(tracer);
        self
    }

    /// The trace of a run's segment starting here, when this engine has a tracer.
    fn trace(
        &self,
        run_id: &str,
        flow_name: &str,
        parent: Option<&str>,
        earlier: Option<&str>,
    ) -> Option<Arc<dyn RunTrace>> {
        let tracer = self.services.tracer.as_ref()?;
        Some(tracer.run(TraceStart {
            run_id,
            flow_name,
            parent,
            earlier,
        }))
    }

    /// The MCP servers this engine's runs use.
    pub fn mcp(&self) -> &Arc<weft_mcp::Hub> {
        &self.services.mcp
    }

    pub fn store(&self) -> &Store {
        &self.services.store
    }

    /// The host this engine drives runs as ([`Engine::hosted_by`]), if any.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    pub fn llm(&self) -> &LlmClients {
        &self.services.llm
    }

    /// Every problem of `flow` that stops it running here: the validator's, plus warnings for
    /// models this engine's providers cannot serve. What `weft validate` and the canvas show.
    pub fn check(&self, flow: &Flow, flow_path: Option<&Path>) -> Vec<Problem> {
        check_flow(flow, flow_path, self.services.llm.settings())
    }

    /// Validates and runs `flow` until it completes, fails, is cancelled or pauses.
    pub async fn start(
        &self,
        flow: impl Into<FlowToRun>,
        options: RunOptions,
    ) -> Result<RunOutcome, RunError> {
        self.spawn(flow, options).await?.outcome().await
    }

    /// Validates `flow` (unless it is a [`crate::CheckedFlow`]), stores the new run and starts it
    /// in
    /// the background; the handle has the run's id at once. Must be called within a tokio
    /// runtime.
    pub async fn spawn(
        &self,
        flow: impl Into<FlowToRun>,
        options: RunOptions,
    ) -> Result<RunHandle, RunError> {
        let (flow, parsed) = match flow.into() {
            FlowToRun::Checked(checked) => checked.into_parts(),
            FlowToRun::Unchecked(flow) => {
                let (problems, parsed) =
                    weft_nodes::validate::validate_parsing(&flow, options.flow_path.as_deref());
                if problems.iter().any(Problem::is_error) {
                    return Err(RunError::Invalid {
                        problems: problems.into_iter().filter(Problem::is_error).collect(),
                    });
                }
                (flow, parsed)
            }
        };
        check_decisions(&flow, &options.decisions)?;
        let mut problems = check_pins(&flow, &options.pins);
        problems.extend(check_breakpoints(&flow, &options.breakpoints));
        if !problems.is_empty() {
            return Err(RunError::Debugging { problems });
        }
        let replay = match options.replay.clone() {
            Some(wanted) => Some(ReplayState {
                from_run: self
                    .blocking(move |store| store.resolve_run_id(&wanted))
                    .await?,
                live: BTreeSet::new(),
            }),
            None => None,
        };
        let shared = match (options.recorded, replay) {
            (Some(_), Some(_)) => {
                return Err(RunError::Debugging {
                    problems: vec![
                        "a run is answered from a past run (--replay) or from a recording, not both"
                            .into(),
                    ],
                });
            }
            (Some(answers), None) => RunShared {
                llm_log: Arc::new(LlmLog::given(answers)),
                ..RunShared::default()
            },
            (None, replay) => self.shared_replaying(replay).await?,
        };
        let shared = RunShared {
            decisions_through: options.decisions_through.as_deref().map(Arc::from),
            ..shared
        };
        let run_id = options
            .run_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let initial = Arc::new(initial_value(&flow, options.input.as_deref()));
        let mut state = SavedState {
            breakpoints: options.breakpoints,
            ..SavedState::default()
        };
        let (queue, outputs) = match options.entry {
            Entry::Start => {
                let start = flow
                    .nodes
                    .iter()
                    .find(|node| NodeKind::of(node) == Some(NodeKind::Start))
                    .map(|node| node.id.clone());
                let queue = start.map(|node_id| QueuedStep {
                    node_id: node_id.into(),
                    input: Arc::clone(&initial),
                    source_node_id: None,
                });
                (queue.into_iter().collect(), HashMap::new())
            }
            Entry::Node {
                node_id,
                input,
                outputs,
                only,
            } => {
                if flow.node(&node_id).is_none() {
                    return Err(RunError::NoSuchEntry(node_id));
                }
                if only {
                    state.only_node = Some(node_id.clone());
                }
                let step = QueuedStep {
                    node_id: node_id.into(),
                    input: Arc::new(input),
                    source_node_id: None,
                };
                (vec![step], outputs)
            }
        };
        let store = self.store();
        let version = flow.version();
        // Kept once with the run, not in its state: a checkpoint would write them again.
        let pins_json = (!options.pins.is_empty()).then(|| weft_store::json_text(&options.pins));
        let new_run = NewRun {
            id: run_id.clone(),
            flow_name: flow.name.clone(),
            flow_path: options
                .flow_path
                .as_ref()
                .map(|path| path.display().to_string()),
            // Compact: the stored flow is read back by Weft, never by a person, and a large
            // flow's pretty text takes several times as long to write.
            flow_json: version.json,
            flow_version: version.hash,
            version_path: options.flow_path.as_deref().map(weft_flow::version_path),
            pins_json,
            input: Value::clone(&initial),
            started_at: now(),
            host: self.host.clone(),
            trigger: options.trigger.clone(),
        };
        let outputs: HashMap<String, Arc<Value>> = outputs
            .into_iter()
            .map(|(node_id, value)| (node_id, Arc::new(value)))
            .collect();
        // Stored with the run; shared with its context, not copied.
        let seeded = outputs.clone();
        let seed = ContextSeed {
            initial,
            outputs,
            approval: None,
            histories: HashMap::new(),
            pins: pins::shared(options.pins),
            budget_lifted: false,
        };
        let events = Emitter::new(
            Arc::from(run_id.as_str()),
            store.clone(),
            options.on_event,
            1,
            Usage::default(),
            self.trace(&run_id, &flow.name, options.traceparent.as_deref(), None),
        );
        let cancel = self.track(&run_id, &options.cancel);
        let graph = Graph::from_parsed(&flow, parsed);
        let ctx = self.context(
            flow,
            graph,
            options.flow_path,
            seed,
            events,
            cancel,
            options.decisions,
            shared,
        );
        let mut scheduler = Scheduler::for_new_run(ctx.clone(), queue, &state);
        // The run is stored with its first checkpoint in one transaction, before anything is
        // shown: a run killed at any moment after it exists can be continued.
        let first = scheduler
            .take_checkpoint()
            .expect("a new run's scheduler checkpoints");
        store.create_run_with(
            new_run,
            seeded
                .iter()
                .map(|(node_id, output)| (node_id.as_str(), &**output)),
            &first,
        );
        ctx.emit(EventType::RunStart, None, output_text(&ctx.initial));
        Ok(self.launch(ctx, scheduler))
    }

    /// Where to start "run from here" (`only == false`) or "run this node" (`only == true`)
    /// at `node_id` of `flow`, using what the earlier run `run_id` left: every node's latest
    /// output is seeded (for `nodes.<id>` in templates), and the node's input is the latest
    /// output among the nodes with an execution edge into it. The start node takes the earlier
    /// run's input. Refused, naming the node, when no node before it has an output yet.
    pub async fn entry_after(
        &self,
        run_id: &str,
        flow: &Flow,
        node_id: &str,
        only: bool,
    ) -> Result<Entry, RunError> {
        let node = flow
            .node(node_id)
            .ok_or_else(|| RunError::NoSuchEntry(node_id.to_string()))?;
        let wanted = run_id.to_string();
        let (record, stored) = self
            .blocking(move |store| {
                let run_id = store.resolve_run_id(&wanted)?;
                Ok((store.run(&run_id)?, store.node_outputs(&run_id)?))
            })
            .await?;
        let input = if NodeKind::of(node) == Some(NodeKind::Start) {
            Some(record.input.clone())
        } else {
            flow.edges
                .iter()
                .filter(|edge| edge.target == node_id && !edge.is_subagent())
                .filter_map(|edge| stored.iter().find(|out| out.node_id == edge.source))
                .filter(|out| !out.output.is_null())
                .max_by(|a, b| a.updated_at.cmp(&b.updated_at))
                .map(|out| out.output.clone())
        };
        let input = input.ok_or_else(|| RunError::NoEarlierOutput {
            node_id: node_id.to_string(),
            run_id: record.summary.id.clone(),
        })?;
        let outputs = stored
            .into_iter()
            .filter(|out| !out.output.is_null())
            .map(|out| (out.node_id, out.output))
            .collect();
        Ok(Entry::Node {
            node_id: node_id.to_string(),
            input,
            outputs,
            only,
        })
    }

    /// Resumes a paused run with a person's `decision` for the approval it waits at (inside
    /// a subflow too) and waits until it ends or pauses again.
    pub async fn resume(
        &self,
        run_id: &str,
        decision: Decision,
        options: ResumeOptions,
    ) -> Result<RunOutcome, RunError> {
        self.spawn_resume(run_id, decision, options)
            .await?
            .outcome()
            .await
    }

    /// Claims a paused run (it may have been paused by another process that has since exited)
    /// and continues it in the background with `decision`. A finished run, or one that is
    /// running (being resumed elsewhere), is refused and left as it is; so is a run paused at a
    /// breakpoint (it is continued, [`Engine::spawn_continue`]). An interrupted run that was
    /// waiting for a decision is continued with this one ([`Engine::spawn_retry`]).
    pub async fn spawn_resume(
        &self,
        run_id: &str,
        decision: Decision,
        options: ResumeOptions,
    ) -> Result<RunHandle, RunError> {
        self.spawn_from_pause(run_id, PauseAnswer::Decision(decision), options)
            .await
    }

    /// Goes on from the breakpoint the paused run `run_id` stopped at ([`crate::breakpoints`]):
    /// with `how.set` in place of the value there (the node's input before it runs, its output
    /// after; an output is checked against the node's `outputSchema`), and with `how.step`
    /// stopping again before the steps that become ready next. A run paused at an approval, or a
    /// value that does not fit, is refused and the run stays paused. Waits until the run ends or
    /// pauses again.
    pub async fn continue_run(
        &self,
        run_id: &str,
        how: Continue,
        options: ResumeOptions,
    ) -> Result<RunOutcome, RunError> {
        self.spawn_continue(run_id, how, options)
            .await?
            .outcome()
            .await
    }

    /// Whether `answer` fits what the paused run `run_id` waits at (a decision an approval and
    /// its form, a continue a breakpoint), without claiming it: for a host that takes the
    /// answer now and hands it to the run later (a Restate workflow's promise).
    ///
    /// Errors: [`StoreError::Refused`] saying why the answer does not fit, and the store's
    /// refusals of a run that is not paused.
    pub async fn check_answer(&self, run_id: &str, answer: &PauseAnswer) -> Result<(), RunError> {
        let wanted = run_id.to_string();
        let answer = answer.clone();
        self.blocking(move |store| {
            let record = store.run(&wanted)?;
            if record.summary.status != RunStatus::Paused {
                return Err(StoreError::NotPaused {
                    run_id: wanted,
                    status: record.summary.status,
                });
            }
            answer
                .accepts(&wanted, &record)
                .map_err(|message| StoreError::Refused { message })
        })
        .await?;
        Ok(())
    }

    /// [`Engine::continue_run`], returning once the run is claimed and going.
    pub async fn spawn_continue(
        &self,
        run_id: &str,
        how: Continue,
        options: ResumeOptions,
    ) -> Result<RunHandle, RunError> {
        self.spawn_from_pause(run_id, PauseAnswer::Continue(how), options)
            .await
    }

    async fn spawn_from_pause(
        &self,
        run_id: &str,
        answer: PauseAnswer,
        options: ResumeOptions,
    ) -> Result<RunHandle, RunError> {
        let doing = match &answer {
            PauseAnswer::Decision(_) => "be decided",
            PauseAnswer::Continue(_) => "be continued",
        };
        hosted::refuse_if_hosted(self, run_id, doing).await?;
        let wanted = run_id.to_string();
        let decided = match &answer {
            PauseAnswer::Decision(decision) => {
                Some(serde_json::to_value(decision).unwrap_or_default())
            }
            PauseAnswer::Continue(_) => None,
        };
        let check = answer.clone();
        let claimed = self
            .blocking(move |store| {
                let run_id = store.resolve_run_id(&wanted)?;
                let record =
                    store.claim_paused_if(&run_id, &now(), decided.as_ref(), |record| {
                        check.accepts(&run_id, record)
                    })?;
                let outputs = store.node_outputs(&run_id)?;
                // A step that paused in its middle (an agent's tool approval) runs again, and
                // gets the answers it had.
                let calls = store.llm_calls(&run_id)?;
                // Read once claimed: events a keeper added while it waited (a reminder) are in.
                let last_seq = store.last_seq(&run_id)?;
                Ok((run_id, record, (outputs, calls, last_seq)))
            })
            .await;
        let (run_id, record, (stored_outputs, calls, last_seq)) = match (claimed, answer.clone()) {
            (
                Err(StoreError::NotPaused {
                    run_id,
                    status: RunStatus::Interrupted,
                }),
                PauseAnswer::Decision(decision),
            ) => return self.spawn_retry(&run_id, Some(decision), options).await,
            (other, _) => other?,
        };
        let corrupt = |message: String| {
            RunError::Store(StoreError::Corrupt {
                run_id: run_id.clone(),
                message,
            })
        };
        let flow = Flow::parse(&record.flow_json, "the stored flow")
            .map_err(|error| corrupt(error.to_string()))?;
        let state: SavedState = serde_json::from_value(record.state.clone())
            .map_err(|error| corrupt(format!("run state: {error}")))?;
        // A paused replay replays on after the decision.
        let shared = self
            .shared_replaying_with_own(state.replay.clone(), calls)
            .await?;
        let waiting = record
            .waiting
            .clone()
            .ok_or_else(|| corrupt("the run is paused but waits for nothing".into()))?;
        let seed = ContextSeed {
            initial: Arc::new(record.input.clone()),
            outputs: own_outputs(&flow, stored_outputs),
            approval: state.approval.clone(),
            histories: state.histories.clone(),
            pins: pins::shared(run_pins(self.store(), &record, &state)?),
            budget_lifted: state.budget_lifted,
        };
        let events = Emitter::new(
            Arc::from(run_id.as_str()),
            self.store().clone(),
            options.on_event,
            state.next_seq.max(last_seq + 1),
            record.usage,
            self.trace(
                &run_id,
                &flow.name,
                options.traceparent.as_deref(),
                state.trace.as_deref(),
            ),
        );
        let flow_path = record.summary.flow_path.as_ref().map(PathBuf::from);
        let cancel = self.track(&run_id, &options.cancel);
        let graph = Graph::build(&flow);
        let ctx = self.context(
            flow,
            graph,
            flow_path,
            seed,
            events,
            cancel,
            options.decisions,
            shared,
        );
        let mut scheduler =
            Scheduler::checkpointing(ctx.clone(), record.queue.clone(), &state, true);
        match (answer, state.breakpoint.clone()) {
            (PauseAnswer::Decision(decision), _) => {
                scheduler.resume(waiting, state.nested.clone(), decision);
            }
            (PauseAnswer::Continue(how), Some(stop)) if stop.when == BreakWhen::Tool => {
                scheduler.continue_tool_call(waiting, state.nested.clone(), how.set);
            }
            (PauseAnswer::Continue(how), Some(stop)) => {
                scheduler.continue_from(waiting, stop, how.set, how.step);
            }
            // The claim's own check refuses this; should it ever pass, the run waits where it was.
            (PauseAnswer::Continue(_), None) => scheduler.wait_again(waiting, None, None),
        }
        Ok(self.launch(ctx, scheduler))
    }

    /// Continues an interrupted run (its process stopped before it ended) from its last
    /// checkpoint: what had finished stays finished, the steps that were running run again as
    /// the same visits, and LLM calls they had already made get their recorded answers instead
    /// of being sent again. A run that was waiting for a decision waits again, or takes
    /// `answer`. Waits until it ends or pauses again.
    pub async fn retry(
        &self,
        run_id: &str,
        answer: Option<Decision>,
        options: ResumeOptions,
    ) -> Result<RunOutcome, RunError> {
        self.spawn_retry(run_id, answer, options)
            .await?
            .outcome()
            .await
    }

    /// [`Engine::retry`], returning once the run is claimed and going.
    pub async fn spawn_retry(
        &self,
        run_id: &str,
        answer: Option<Decision>,
        options: ResumeOptions,
    ) -> Result<RunHandle, RunError> {
        hosted::refuse_if_hosted(self, run_id, "be retried").await?;
        let wanted = run_id.to_string();
        let decided = answer
            .as_ref()
            .map(|answer| serde_json::to_value(answer).unwrap_or_default());
        let (run_id, record, stored_outputs, events, calls, last_seq) = self
            .blocking(move |store| {
                let run_id = store.resolve_run_id(&wanted)?;
                let record = store.claim_interrupted_if(
                    &run_id,
                    &now(),
                    decided.as_ref(),
                    |record| match (&decided, breakpoint_of(record)) {
                        (Some(_), Some(_)) => Err(at_breakpoint(&run_id, record)),
                        _ => Ok(()),
                    },
                )?;
                Ok((
                    run_id.clone(),
                    record,
                    store.node_outputs(&run_id)?,
                    store.events(&run_id)?,
                    store.llm_calls(&run_id)?,
                    store.last_seq(&run_id)?,
                ))
            })
            .await?;
        let corrupt = |message: String| {
            RunError::Store(StoreError::Corrupt {
                run_id: run_id.clone(),
                message,
            })
        };
        let flow = Flow::parse(&record.flow_json, "the stored flow")
            .map_err(|error| corrupt(error.to_string()))?;
        let mut state: SavedState = serde_json::from_value(record.state.clone())
            .map_err(|error| corrupt(format!("run state: {error}")))?;
        if state.visits.is_empty() {
            // A checkpoint leaves visit counts to the events: one `step_start` per visit.
            for event in events.iter().filter(|event| {
                event.kind == EventType::StepStart
                    && event.scope.is_none()
                    && event.seq < state.next_seq
            }) {
                if let Some(node) = &event.node_id {
                    *state.visits.entry(node.to_string()).or_insert(0) += 1;
                }
            }
        }
        // A decision taken by a resume that was interrupted before it went on is not asked again.
        let taken_before = state.decided.take().filter(|_| answer.is_none());
        let answer = answer.or_else(|| taken_before.clone());
        let seed = ContextSeed {
            initial: Arc::new(record.input.clone()),
            outputs: own_outputs(&flow, stored_outputs),
            approval: state.approval.clone(),
            histories: state.histories.clone(),
            pins: pins::shared(run_pins(self.store(), &record, &state)?),
            budget_lifted: state.budget_lifted,
        };
        let events = Emitter::new(
            Arc::from(run_id.as_str()),
            self.store().clone(),
            options.on_event,
            last_seq + 1,
            record.usage,
            self.trace(
                &run_id,
                &flow.name,
                options.traceparent.as_deref(),
                state.trace.as_deref(),
            ),
        );
        let flow_path = record.summary.flow_path.as_ref().map(PathBuf::from);
        let cancel = self.track(&run_id, &options.cancel);
        // A replay goes on replaying: the answers this run already had come first, then the
        // replayed run's for the steps it had not reached.
        let llm_log = match state.replay.clone() {
            Some(replay) => {
                let from_run = replay.from_run.clone();
                let recorded = self
                    .blocking(move |store| store.llm_calls(&from_run))
                    .await?;
                LlmLog::replay(replay, recorded).with_own(calls)
            }
            None => LlmLog::replaying(calls),
        };
        let shared = RunShared {
            llm_log: Arc::new(llm_log),
            ..RunShared::default()
        };
        let graph = Graph::build(&flow);
        let ctx = self.context(
            flow,
            graph,
            flow_path,
            seed,
            events,
            cancel,
            options.decisions,
            shared,
        );
        let again: Vec<&str> = record
            .queue
            .iter()
            .filter(|stored| stored.visit.is_some())
            .map(|stored| &*stored.step.node_id)
            .collect();
        let mut message = "continuing after an interruption".to_string();
        if let (Some(decision), Some(waiting)) = (&taken_before, &record.waiting) {
            message.push_str(&format!(
                "; going on with the decision already taken at `{}` ({})",
                waiting.node_id,
                decision.decision.handle()
            ));
        }
        if !again.is_empty() {
            message.push_str(&format!(
                "; running again what was running: {} (LLM answers it already had are reused)",
                again.join(", ")
            ));
        }
        ctx.emit(EventType::LogicCheck, None, message);
        let mut scheduler =
            Scheduler::checkpointing(ctx.clone(), record.queue.clone(), &state, true);
        if let Some(waiting) = record.waiting.clone() {
            match state.breakpoint.clone() {
                // An agent stopped before a tool call waits there again.
                Some(stop) if stop.when == BreakWhen::Tool => {
                    scheduler.wait_again(waiting, state.nested.clone(), None)
                }
                Some(stop) => scheduler.stop_again(waiting, stop),
                None => scheduler.wait_again(waiting, state.nested.clone(), answer),
            }
        }
        Ok(self.launch(ctx, scheduler))
    }

    /// Decides for nobody: every paused run whose approval's `timeoutSeconds` ran out goes on
    /// along its `timeout` edge, or fails naming the timeout when it has none. Each goes on in
    /// the background in this process (its events to `on_event`); a run another process claimed
    /// meanwhile (a person decided just in time) is left to it. `weft-api`'s keeper calls this
    /// as deadlines pass, and a short command once before its own work.
    pub async fn settle_timeouts(
        &self,
        on_event: Option<EventListener>,
    ) -> Result<Vec<RunHandle>, RunError> {
        let due = self.blocking(|store| store.due_approvals(&now())).await?;
        let mut handles = Vec::with_capacity(due.len());
        for run_id in due {
            let options = ResumeOptions {
                on_event: on_event.clone(),
                ..ResumeOptions::default()
            };
            match self
                .spawn_resume(&run_id, Decision::timeout(), options)
                .await
            {
                Ok(handle) => handles.push(handle),
                Err(RunError::Store(
                    StoreError::NotPaused { .. } | StoreError::Finished { .. },
                )) => {}
                Err(error) => tracing::warn!("the timed-out run {run_id} could not go on: {error}"),
            }
        }
        Ok(handles)
    }

    /// What the paused run `run_id` (an id or a unique prefix) waits for; `None` when it is not
    /// paused.
    pub async fn waiting(&self, run_id: &str) -> Result<Option<Waiting>, RunError> {
        let wanted = run_id.to_string();
        let record = self
            .blocking(move |store| store.run(&store.resolve_run_id(&wanted)?))
            .await?;
        Ok(waiting_of(&record))
    }

    /// Cancels the run `run_id` if it is going in this process; it then ends as `cancelled`.
    /// Returns whether it was going.
    pub fn cancel(&self, run_id: &str) -> bool {
        match self.active.tokens().get(run_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels the paused run `run_id` (waiting for a person, in any process): it is claimed
    /// like a decision would claim it, then ends as `cancelled` with a `run_end` event. A run
    /// that is not paused is refused and left as it is (cancel a run going in this process
    /// with [`Engine::cancel`]).
    pub async fn cancel_paused(
        &self,
        run_id: &str,
        on_event: Option<EventListener>,
    ) -> Result<RunOutcome, RunError> {
        hosted::refuse_if_hosted(self, run_id, "be cancelled").await?;
        let wanted = run_id.to_string();
        let claimed = self
            .blocking(move |store| {
                let run_id = store.resolve_run_id(&wanted)?;
                let record = store.claim_paused(&run_id, &now(), None)?;
                let last_seq = store.last_seq(&run_id)?;
                Ok((run_id, record, last_seq))
            })
            .await?;
        let (run_id, record, last_seq) = claimed;
        let state: SavedState = serde_json::from_value(record.state.clone()).unwrap_or_default();
        let events = Emitter::new(
            Arc::from(run_id.as_str()),
            self.store().clone(),
            on_event,
            state.next_seq.max(last_seq + 1),
            record.usage,
            None,
        );
        let error = "the run was cancelled while it waited for a person".to_string();
        let content =
            json!({ "status": RunStatus::Cancelled.as_str(), "result": null, "error": error });
        events.emit_event(
            EventType::RunEnd,
            None,
            content.to_string(),
            None,
            Some(events.total_usage()),
        );
        let store = self.store();
        store.finish_run(&run_id, RunStatus::Cancelled, None, Some(&error), &now());
        self.store().flushed().await?;
        Ok(RunOutcome {
            run_id,
            status: RunStatus::Cancelled,
            result: None,
            error: Some(error),
            waiting: None,
        })
    }

    /// Asks the run `run_id`, going in this process, to pause: it starts no new step, and once
    /// the steps running have ended it pauses before the next one, as at a breakpoint (stored,
    /// continued with [`Engine::continue_run`]). Returns whether the run was going.
    pub fn pause(&self, run_id: &str) -> bool {
        match self.active.pauses().get(run_id) {
            Some(requested) => {
                requested.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// The ids of the runs going in this process.
    pub fn active_runs(&self) -> Vec<String> {
        self.active.tokens().keys().cloned().collect()
    }

    /// Cancels every run going in this process and waits up to `grace` until each has been
    /// stored as cancelled, then flushes the store. Paused runs are not going: they stay
    /// paused. Returns whether every run was stored in time.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        for token in self.active.tokens().values() {
            token.cancel();
        }
        self.active.tracker.close();
        let stopped = tokio::time::timeout(grace, self.active.tracker.wait())
            .await
            .is_ok();
        self.active.tracker.reopen();
        if let Err(error) = self.store().flushed().await {
            tracing::warn!("the run store could not be flushed at shutdown: {error}");
        }
        stopped
    }

    /// A cancellation token for the run `run_id` (a child of the host's `cancel`), known to
    /// [`Engine::cancel`] until the run ends.
    fn track(&self, run_id: &str, cancel: &CancellationToken) -> CancellationToken {
        let token = cancel.child_token();
        self.active
            .tokens()
            .insert(run_id.to_string(), token.clone());
        token
    }

    /// Runs the scheduler in a tracked task that stores how the run ended or where it paused.
    fn launch(&self, ctx: Arc<RunContext>, mut scheduler: Scheduler) -> RunHandle {
        let run_id = ctx.run_id.to_string();
        let pause = Arc::new(AtomicBool::new(false));
        self.active.pauses().insert(run_id.clone(), pause.clone());
        scheduler.pause_on(pause);
        let engine = self.clone();
        // Boxed: the run's future is large, and tokio's spawn passes it by value through
        // several calls, each with a stack frame of that size to touch.
        let task = self.active.tracker.spawn(Box::pin(async move {
            let outcome = engine.finish(&ctx, scheduler).await;
            if let Some(trace) = ctx.events.trace() {
                let status = outcome.as_ref().ok().map(|outcome| outcome.status);
                trace.end(status);
            }
            engine.active.tokens().remove(&*ctx.run_id);
            engine.active.pauses().remove(&*ctx.run_id);
            if engine.ends_with_process
                && let Ok(ctx) = Arc::try_unwrap(ctx)
            {
                ctx.end_with_process();
            }
            outcome
        }));
        RunHandle { run_id, task }
    }

    /// What a run shares with its nested runs: for a replay, the answers the replayed run
    /// recorded and which nodes went live so far.
    /// [`Engine::shared_replaying`], also giving the run's `own` answers again (a run resumed
    /// from a pause: a step that paused in its middle runs again).
    async fn shared_replaying_with_own(
        &self,
        replay: Option<ReplayState>,
        own: Vec<weft_store::RecordedCall>,
    ) -> Result<RunShared, RunError> {
        let log = match replay {
            Some(replay) => {
                let from_run = replay.from_run.clone();
                let calls = self
                    .blocking(move |store| store.llm_calls(&from_run))
                    .await?;
                LlmLog::replay(replay, calls).with_own(own)
            }
            None => LlmLog::replaying(own),
        };
        Ok(RunShared {
            llm_log: Arc::new(log),
            ..RunShared::default()
        })
    }

    async fn shared_replaying(&self, replay: Option<ReplayState>) -> Result<RunShared, RunError> {
        self.shared_replaying_with_own(replay, Vec::new()).await
    }

    /// Runs a blocking store call (SQLite, waiting for the writer) off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.store().clone();
        tokio::task::spawn_blocking(move || call(&store))
            .await
            .unwrap_or_else(|error| {
                tracing::error!("a store call stopped: {error}");
                Err(StoreError::WriterStopped)
            })
    }

    #[allow(clippy::too_many_arguments)] // everything a top-level run is made of
    fn context(
        &self,
        flow: Flow,
        graph: Graph,
        flow_path: Option<PathBuf>,
        seed: ContextSeed,
        events: Emitter,
        cancel: CancellationToken,
        decisions: HashMap<String, Decision>,
        shared: RunShared,
    ) -> Arc<RunContext> {
        // The run's own flow says what the run, nested runs included, may spend. A budget that
        // does not parse was refused before the run (`check_for_run`); one edited into a
        // stored flow since is ignored rather than stopping the run.
        if events.is_root()
            && let Ok(Some(budget)) = weft_nodes::budget::parse_budget(flow.settings.get("budget"))
        {
            events.arm_budget(budget::BudgetTracker::new(
                budget,
                self.services.pricer.clone(),
                &self.services.store,
                events.run_id(),
                events.next_seq() > 1,
                seed.budget_lifted,
            ));
        }
        Arc::new(RunContext::build(
            Arc::clone(events.run_id()),
            Arc::new(flow),
            graph,
            flow_path,
            0,
            seed,
            self.services.clone(),
            shared,
            events,
            cancel,
            decisions,
        ))
    }

    /// Runs the scheduler, then stores how the run ended or where it paused.
    async fn finish(&self, ctx: &RunContext, scheduler: Scheduler) -> Result<RunOutcome, RunError> {
        let end = scheduler.run().await;
        let at = now();
        let store = ctx.store();
        let waiting = match end.paused {
            Some(paused) => {
                let input = paused
                    .state
                    .waiting_input
                    .clone()
                    .unwrap_or_else(|| Value::clone(&paused.waiting.input));
                let pause = PauseRecord {
                    waiting: paused.waiting,
                    queue: paused.queue,
                    state: serde_json::to_value(&paused.state).unwrap_or_default(),
                    deadline: paused.deadline.clone(),
                    follow_up: first_follow_up(
                        &paused.state.waiting_quorum,
                        paused.state.waiting_since.as_deref(),
                    ),
                    ask_by_mail: (paused.state.breakpoint.is_none()
                        && !paused.state.waiting_quorum.approvers.is_empty())
                    .then_some(paused.state.next_seq),
                };
                store.save_pause(&ctx.run_id, &pause, &at);
                ctx.events.release_held();
                Some(Waiting {
                    node_id: paused.path,
                    message: paused.message,
                    breakpoint: paused.state.breakpoint.map(|stop| stop.when),
                    fields: paused.state.waiting_fields.clone(),
                    quorum: paused.state.waiting_quorum.clone(),
                    pause: paused.state.next_seq,
                    since: paused.state.waiting_since.clone(),
                    deadline: paused.deadline,
                    input,
                })
            }
            None => {
                ctx.events.release_held();
                let usage = ctx.events.total_usage();
                // Written out from the result in place (a large result is not copied into a
                // `Value` first); the fields in the order `json!` gave them.
                #[derive(Serialize)]
                struct RunEndContent<'a> {
                    error: Option<&'a str>,
                    result: Option<&'a Value>,
                    status: &'a str,
                }
                let content = weft_store::json_text(&RunEndContent {
                    error: end.error.as_deref(),
                    result: end.result.as_deref(),
                    status: end.status.as_str(),
                });
                ctx.events
                    .emit_event(EventType::RunEnd, None, content, None, Some(usage));
                store.set_state(&ctx.run_id, &end.state, &at);
                store.finish_run(
                    &ctx.run_id,
                    end.status,
                    end.result.as_deref(),
                    end.error.as_deref(),
                    &at,
                );
                None
            }
        };
        self.store().flushed().await?;
        Ok(RunOutcome {
            run_id: ctx.run_id.to_string(),
            status: end.status,
            result: end.result,
            error: end.error,
            waiting,
        })
    }
}

/// The stored outputs of `flow`'s own nodes (nested runs keep theirs in their state), as a
/// resumed or continued run starts from them.
/// The outputs pinned for a stored run: kept apart by the store, or in the state of a run an
/// older Weft stored, which are then kept apart too (the state this run saves has them no more).
fn run_pins(store: &Store, record: &RunRecord, state: &SavedState) -> Result<Pins, RunError> {
    match &record.pins {
        Some(pins) => serde_json::from_value(pins.clone()).map_err(|error| {
            RunError::Store(StoreError::Corrupt {
                run_id: record.summary.id.clone(),
                message: format!("pinned outputs: {error}"),
            })
        }),
        None => {
            if !state.pins.is_empty() {
                store.keep_pins(&record.summary.id, weft_store::json_text(&state.pins));
            }
            Ok(state.pins.clone())
        }
    }
}

fn own_outputs(flow: &Flow, stored: Vec<NodeOutputRecord>) -> HashMap<String, Arc<Value>> {
    stored
        .into_iter()
        .filter(|output| {
            flow.node(&output.node_id).is_some() && (output.visits > 0 || !output.output.is_null())
        })
        .map(|output| (output.node_id, Arc::new(output.output)))
        .collect()
}

/// What the stored run `record` waits for, when it is paused.
/// Going on from a breakpoint ([`Engine::continue_run`]).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Continue {
    /// Stop again before the steps that become ready next.
    #[serde(default)]
    pub step: bool,
    /// The value to go on with instead of the one at the breakpoint.
    #[serde(default)]
    pub set: Option<Value>,
}

/// How a person goes on from a pause: a decision at an approval, or going on from a
/// breakpoint. As JSON: `{"decision": {...}}` or `{"continue": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PauseAnswer {
    Decision(Decision),
    Continue(Continue),
}

impl PauseAnswer {
    /// Whether this answer fits what the paused run `record` waits at: a decision an approval,
    /// a continue a breakpoint (and a replacing output the node's `outputSchema`).
    fn accepts(&self, run_id: &str, record: &RunRecord) -> Result<(), String> {
        let node = record
            .waiting
            .as_ref()
            .map_or("?", |waiting| &*waiting.node_id);
        match (self, breakpoint_of(record)) {
            (PauseAnswer::Decision(_), Some(_)) => Err(at_breakpoint(run_id, record)),
            (PauseAnswer::Decision(decision), None) => {
                let state: SavedState =
                    serde_json::from_value(record.state.clone()).unwrap_or_default();
                if decision.decision == DecisionChoice::Timeout {
                    // Weft's own answer, once the approval's time has run out.
                    return match &state.deadline {
                        Some(deadline) if deadline.as_str() <= now().as_str() => Ok(()),
                        Some(deadline) => Err(format!(
                            "run {run_id} waits at `{node}` until {deadline}; it has not timed out"
                        )),
                        None => Err(format!(
                            "the approval `{node}` of run {run_id} has no timeout; answer it with approve or reject"
                        )),
                    };
                }
                let input = state
                    .waiting_input
                    .as_ref()
                    .or_else(|| record.waiting.as_ref().map(|step| &*step.input))
                    .unwrap_or(&Value::Null);
                decision
                    .clone()
                    .checked(&state.waiting_fields, input)
                    .map(|_| ())
                    .map_err(|problem| {
                        format!("the answer for `{node}` does not fit its form: {problem}; run {run_id} stays paused")
                    })
            }
            (PauseAnswer::Continue(_), None) => Err(format!(
                "run {run_id} waits at the approval `{node}`, not at a breakpoint; answer it with a decision (approve or reject)"
            )),
            (PauseAnswer::Continue(how), Some(stop)) => match (&how.set, stop.when) {
                (Some(value), BreakWhen::Tool) if !value.is_object() => Err(format!(
                    "the arguments for the tool call at `{node}` must be a JSON object, not {value}; run {run_id} stays paused"
                )),
                (Some(value), BreakWhen::After) => {
                    let problems = output_schema_problems(record, node, value);
                    if problems.is_empty() {
                        Ok(())
                    } else {
                        Err(format!(
                            "the value for `{node}` does not match its outputSchema: {}; run {run_id} stays paused",
                            problems.join("; ")
                        ))
                    }
                }
                _ => Ok(()),
            },
        }
    }
}

/// Where the paused run `record` stopped at a breakpoint, if it did.
fn breakpoint_of(record: &RunRecord) -> Option<BreakStop> {
    record
        .state
        .get("breakpoint")
        .and_then(|stop| serde_json::from_value(stop.clone()).ok())
}

fn at_breakpoint(run_id: &str, record: &RunRecord) -> String {
    let node = record
        .waiting
        .as_ref()
        .map_or("?", |waiting| &*waiting.node_id);
    format!(
        "run {run_id} is paused at a breakpoint at `{node}`, not at an approval: continue it instead of deciding"
    )
}

/// What is wrong with `value` as the output of `node` of the run's flow, by its `outputSchema`.
fn output_schema_problems(record: &RunRecord, node: &str, value: &Value) -> Vec<String> {
    let Ok(flow) = Flow::parse(&record.flow_json, "the stored flow") else {
        return Vec::new();
    };
    let schema = flow
        .node(node)
        .and_then(|node| node.data.get("outputSchema"))
        .filter(|schema| !schema.is_null());
    match schema.map(OutputSchema::compile) {
        Some(Ok(schema)) => schema.problems(value),
        _ => Vec::new(),
    }
}

pub fn waiting_of(record: &RunRecord) -> Option<Waiting> {
    if record.summary.status != RunStatus::Paused {
        return None;
    }
    let waiting = record.waiting.as_ref()?;
    let state: SavedState = serde_json::from_value(record.state.clone()).unwrap_or_default();
    let node_id = match &state.nested {
        Some(pause) => format!("{}/{}", waiting.node_id, pause.path),
        None => waiting.node_id.to_string(),
    };
    Some(Waiting {
        node_id,
        message: state.waiting_message.unwrap_or_default(),
        breakpoint: state.breakpoint.map(|stop| stop.when),
        fields: state.waiting_fields,
        pause: state.next_seq,
        since: state.waiting_since.clone(),
        quorum: state.waiting_quorum,
        deadline: state.deadline,
        input: state
            .waiting_input
            .unwrap_or_else(|| Value::clone(&waiting.input)),
    })
}

/// When the first follow-up (a reminder, an escalation) of an approval that began to wait at
/// `since` is due, RFC 3339.
fn first_follow_up(quorum: &Quorum, since: Option<&str>) -> Option<String> {
    let since = chrono::DateTime::parse_from_rfc3339(since?).ok()?;
    quorum
        .follow_ups(since.with_timezone(&chrono::Utc))
        .first()
        .map(|(_, at)| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The run's input as a value: the given text (JSON objects and arrays parsed), else the start
/// node's `initialInput`, else `""`.
fn initial_value(flow: &Flow, input: Option<&str>) -> Value {
    if let Some(text) = input {
        let trimmed = text.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(value) = serde_json::from_str::<Value>(text)
        {
            return value;
        }
        return Value::String(text.to_string());
    }
    flow.nodes
        .iter()
        .find(|node| NodeKind::of(node) == Some(NodeKind::Start))
        .and_then(
            |node| match NodeConfig::parse(NodeKind::Start, &node.data) {
                Ok(NodeConfig::Start(StartConfig { initial_input, .. })) => initial_input,
                _ => None,
            },
        )
        .unwrap_or(Value::String(String::new()))
}
