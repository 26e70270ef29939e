//! Running flows (SPEC §4): start a run, resume a paused one, cancel either.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use weft_engine::{Engine, Flow, RunOptions, Store, providers::{LlmClients, ProviderSettings}};
//! let engine = Engine::new(LlmClients::new(ProviderSettings::from_env()), Store::open("runs.db".as_ref())?);
//! let flow = Flow::load("flows/hello.json".as_ref())?;
//! let outcome = engine.start(flow, RunOptions::default()).await?;
//! println!("{} {:?}", outcome.status, outcome.result);
//! # Ok(()) }
//! ```

mod context;
mod nested;
mod scheduler;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use context::EventListener;
pub(crate) use context::MAX_DEPTH;
pub(crate) use context::{RunContext, Step, StepError, StepOutput};
pub(crate) use nested::{ChildFlow, NestedEnd, run_nested};

use crate::event::{EventType, RunStatus};
use crate::flow::Flow;
use crate::nodes::{Decision, NodeConfig};
use crate::providers::{LlmClients, Usage};
use crate::store::{NewRun, PauseRecord, QueuedStep, Store, StoreError};
use crate::template::output_text;
use crate::validate::{Problem, validate};
use context::{ContextSeed, Emitter, now};
use scheduler::{SavedState, Scheduler};

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
    /// The run's input text (a JSON object or array is read as JSON); else the start node's `initialInput`.
    pub input: Option<String>,
    /// Approvals answered in advance, by node id; used every time that node is reached in this process.
    pub decisions: HashMap<String, Decision>,
    /// The flow file, stored with the run for history.
    pub flow_path: Option<PathBuf>,
    pub on_event: Option<EventListener>,
    /// Cancelling it ends the run with status `cancelled`.
    pub cancel: CancellationToken,
    pub entry: Entry,
}

/// How to resume a paused run.
#[derive(Clone, Default)]
pub struct ResumeOptions {
    /// Further approvals answered in advance.
    pub decisions: HashMap<String, Decision>,
    pub on_event: Option<EventListener>,
    pub cancel: CancellationToken,
}

/// Where a run stands when [`Engine::start`] or [`Engine::resume`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub run_id: String,
    pub status: RunStatus,
    /// The run's result when it completed: the last `output` node's value, else the last finished node's.
    pub result: Option<Value>,
    pub error: Option<String>,
    /// The approval a paused run waits for: node id and the rendered message.
    pub waiting: Option<Waiting>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub node_id: String,
    pub message: String,
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
}

/// Runs flows. One engine serves many runs; it is cheap to clone.
#[derive(Clone)]
pub struct Engine {
    llm: LlmClients,
    http: reqwest::Client,
    sandbox: weft_sandbox::Sandbox,
    store: Store,
}

impl Engine {
    pub fn new(llm: LlmClients, store: Store) -> Engine {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            // Only fails when the TLS backend cannot initialize, which is a broken install.
            .unwrap_or_else(|_| reqwest::Client::new());
        Engine {
            llm,
            http,
            sandbox: weft_sandbox::Sandbox::new(),
            store,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Validates and runs `flow` until it completes, fails, is cancelled or pauses.
    pub async fn start(&self, flow: Flow, options: RunOptions) -> Result<RunOutcome, RunError> {
        let problems = validate(&flow, options.flow_path.as_deref());
        if problems.iter().any(Problem::is_error) {
            return Err(RunError::Invalid {
                problems: problems.into_iter().filter(Problem::is_error).collect(),
            });
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        let initial = initial_value(&flow, options.input.as_deref());
        let mut state = SavedState::default();
        let (queue, outputs) = match options.entry {
            Entry::Start => {
                let start = flow
                    .nodes
                    .iter()
                    .find(|node| node.kind == "start")
                    .map(|node| node.id.clone());
                let queue = start.map(|node_id| QueuedStep {
                    node_id,
                    input: initial.clone(),
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
                    node_id,
                    input,
                    source_node_id: None,
                };
                (vec![step], outputs)
            }
        };
        self.store.create_run(&NewRun {
            id: run_id.clone(),
            flow_name: flow.name.clone(),
            flow_path: options
                .flow_path
                .as_ref()
                .map(|path| path.display().to_string()),
            flow_json: flow.to_file_string(),
            input: initial.clone(),
            started_at: now(),
        });
        for (node_id, value) in &outputs {
            self.store
                .put_node_output(&run_id, node_id, value, 0, &now());
        }
        let seed = ContextSeed {
            initial,
            outputs,
            approval: None,
            histories: HashMap::new(),
        };
        let events = Emitter::new(
            run_id.clone(),
            self.store.clone(),
            options.on_event,
            1,
            Usage::default(),
        );
        let ctx = self.context(
            run_id,
            flow,
            options.flow_path,
            seed,
            events,
            options.cancel,
        )?;
        ctx.emit(EventType::RunStart, None, output_text(&ctx.initial));
        let scheduler = Scheduler::new(ctx.clone(), queue, &state, options.decisions);
        self.finish(ctx, scheduler).await
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
        let input = if node.kind == "start" {
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
    /// a subflow too). The run may have been paused by another process that has since exited.
    /// A finished run, or one that is running (being resumed elsewhere), is refused and left
    /// as it is.
    pub async fn resume(
        &self,
        run_id: &str,
        decision: Decision,
        options: ResumeOptions,
    ) -> Result<RunOutcome, RunError> {
        let wanted = run_id.to_string();
        let (run_id, record, stored_outputs) = self
            .blocking(move |store| {
                let run_id = store.resolve_run_id(&wanted)?;
                let record = store.claim_paused(&run_id, &now())?;
                let outputs = store.node_outputs(&run_id)?;
                Ok((run_id, record, outputs))
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
        let state: SavedState = serde_json::from_value(record.state.clone())
            .map_err(|error| corrupt(format!("run state: {error}")))?;
        let waiting = record
            .waiting
            .clone()
            .ok_or_else(|| corrupt("the run is paused but waits for no approval".into()))?;
        // Outputs of this flow's own nodes (nested runs keep theirs in their pause state).
        let outputs = stored_outputs
            .into_iter()
            .filter(|output| {
                flow.node(&output.node_id).is_some()
                    && (output.visits > 0 || !output.output.is_null())
            })
            .map(|output| (output.node_id, output.output))
            .collect();
        let seed = ContextSeed {
            initial: record.input.clone(),
            outputs,
            approval: state.approval.clone(),
            histories: state.histories.clone(),
        };
        let events = Emitter::new(
            run_id.clone(),
            self.store.clone(),
            options.on_event,
            state.next_seq.max(1),
            record.usage,
        );
        let flow_path = record.summary.flow_path.as_ref().map(PathBuf::from);
        let ctx = self.context(run_id, flow, flow_path, seed, events, options.cancel)?;
        let mut scheduler =
            Scheduler::new(ctx.clone(), record.queue.clone(), &state, options.decisions);
        scheduler.resume(waiting, state.nested.map(|pause| *pause), decision);
        self.finish(ctx, scheduler).await
    }

    /// Runs a blocking store call (SQLite, waiting for the writer) off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || call(&store))
            .await
            .unwrap_or_else(|error| {
                Err(StoreError::Sqlite(format!(
                    "the store call stopped: {error}"
                )))
            })
    }

    fn context(
        &self,
        run_id: String,
        flow: Flow,
        flow_path: Option<PathBuf>,
        seed: ContextSeed,
        events: Emitter,
        cancel: CancellationToken,
    ) -> Result<Arc<RunContext>, RunError> {
        RunContext::build(
            run_id,
            Arc::new(flow),
            flow_path,
            0,
            seed,
            self.llm.clone(),
            self.http.clone(),
            self.sandbox.clone(),
            events,
            self.store.clone(),
            cancel,
        )
        .map(Arc::new)
        .map_err(|problems| RunError::Invalid { problems })
    }

    /// Runs the scheduler, then stores how the run ended or where it paused.
    async fn finish(
        &self,
        ctx: Arc<RunContext>,
        scheduler: Scheduler,
    ) -> Result<RunOutcome, RunError> {
        let end = scheduler.run().await;
        let at = now();
        let waiting = match end.paused {
            Some(paused) => {
                let pause = PauseRecord {
                    waiting: paused.waiting,
                    queue: paused.queue,
                    state: serde_json::to_value(&paused.state).unwrap_or_default(),
                };
                ctx.store.save_pause(&ctx.run_id, &pause, &at);
                Some(Waiting {
                    node_id: paused.path,
                    message: paused.message,
                })
            }
            None => {
                let usage = ctx.events.total_usage();
                let content = json!({ "status": end.status.as_str(), "result": end.result, "error": end.error });
                ctx.events.emit_with_usage(
                    EventType::RunEnd,
                    None,
                    content.to_string(),
                    Some(usage),
                );
                let state = serde_json::to_value(&end.state).unwrap_or_default();
                ctx.store.set_state(&ctx.run_id, &state, &at);
                ctx.store.finish_run(
                    &ctx.run_id,
                    end.status,
                    end.result.as_ref(),
                    end.error.as_deref(),
                    &at,
                );
                None
            }
        };
        self.blocking(|store| store.flush()).await?;
        Ok(RunOutcome {
            run_id: ctx.run_id.clone(),
            status: end.status,
            result: end.result,
            error: end.error,
            waiting,
        })
    }
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
        .find(|node| node.kind == "start")
        .and_then(
            |node| match NodeConfig::parse(crate::nodes::NodeKind::Start, &node.data) {
                Ok(NodeConfig::Start(config)) => config.initial_input,
                _ => None,
            },
        )
        .unwrap_or(Value::String(String::new()))
}
