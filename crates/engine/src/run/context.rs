//! What every step of one run shares: the flow, parsed configs, compiled templates, the
//! latest outputs, the LLM clients, the event emitter and the cancellation token. Nodes reach
//! the outside world only through this.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent};
use crate::flow::{Flow, Node};
use crate::nodes::{CommonSettings, NodeConfig, NodeKind};
use crate::providers::{ChatMessage, LlmClients, Usage};
use crate::store::Store;
use crate::template::{NodeOutputs, Scope, Templates};
use crate::validate::Problem;

/// Called with every event of a run, in `seq` order.
pub type EventListener = Arc<dyn Fn(&RunEvent) + Send + Sync>;

/// The current time as stored in events and the store (RFC 3339, milliseconds, UTC).
pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Numbers events and hands each to the store and the host, one at a time, so every
/// consumer sees the same order. Shared by a run and all its nested runs.
struct EventLog {
    run_id: String,
    store: Store,
    listener: Option<EventListener>,
    next_seq: Mutex<u64>,
    /// Tokens used by the whole run so far (nested runs included).
    usage: Mutex<Usage>,
}

/// Emits the events of one (possibly nested) run into its run's log.
#[derive(Clone)]
pub(crate) struct Emitter {
    log: Arc<EventLog>,
    /// Path of the subflow / forEach step this emitter's run belongs to (`None` at the top).
    scope: Option<String>,
    item: Option<u64>,
}

impl Emitter {
    pub(crate) fn new(
        run_id: String,
        store: Store,
        listener: Option<EventListener>,
        next_seq: u64,
        usage: Usage,
    ) -> Emitter {
        Emitter {
            log: Arc::new(EventLog {
                run_id,
                store,
                listener,
                next_seq: Mutex::new(next_seq),
                usage: Mutex::new(usage),
            }),
            scope: None,
            item: None,
        }
    }

    /// The emitter of a run nested in step `node_id` of this one (item `item` of a forEach).
    pub(crate) fn nested(&self, node_id: &str, item: Option<u64>) -> Emitter {
        let segment = match item {
            Some(index) => format!("{node_id}[{index}]"),
            None => node_id.to_string(),
        };
        Emitter {
            log: self.log.clone(),
            scope: Some(match &self.scope {
                Some(scope) => format!("{scope}/{segment}"),
                None => segment,
            }),
            item: item.or(self.item),
        }
    }

    /// The prefix that makes this run's node ids unique in the store (`""` at the top).
    pub(crate) fn store_prefix(&self) -> String {
        self.scope
            .as_ref()
            .map(|scope| format!("{scope}/"))
            .unwrap_or_default()
    }

    pub(crate) fn emit(&self, kind: EventType, node_id: Option<&str>, content: String) {
        self.emit_with_usage(kind, node_id, content, None);
    }

    pub(crate) fn emit_with_usage(
        &self,
        kind: EventType,
        node_id: Option<&str>,
        content: String,
        usage: Option<Usage>,
    ) {
        // A poisoned lock only means another step panicked mid-emit; numbering is still sound.
        let mut next_seq = self
            .log
            .next_seq
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let event = RunEvent {
            seq: *next_seq,
            run_id: self.log.run_id.clone(),
            ts: now(),
            kind,
            node_id: node_id.map(str::to_string),
            content,
            scope: self.scope.clone(),
            item: self.item,
            usage,
        };
        *next_seq += 1;
        self.log.store.append_event(&event);
        if let Some(listener) = &self.log.listener {
            listener(&event);
        }
    }

    pub(crate) fn add_usage(&self, usage: Usage) {
        *self
            .log
            .usage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) += usage;
    }

    pub(crate) fn total_usage(&self) -> Usage {
        *self
            .log
            .usage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn next_seq(&self) -> u64 {
        *self
            .log
            .next_seq
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The parts of a flow a run looks up on every step, built once.
pub(crate) struct Graph {
    /// Position of each node in `flow.nodes`, so a step finds its node without a scan.
    pub index: HashMap<String, usize>,
    pub configs: HashMap<String, NodeConfig>,
    pub settings: HashMap<String, CommonSettings>,
    /// Execution edges by source node: (source handle, target node).
    pub outgoing: HashMap<String, Vec<(String, String)>>,
    /// Subagent children by parent agent, in edge order.
    pub subagents: HashMap<String, Vec<String>>,
    /// Sources of the execution edges arriving at each node (each once).
    pub incoming: HashMap<String, Vec<String>>,
}

impl Graph {
    /// Builds the graph of a flow the validator accepted. Nodes whose config does not parse
    /// are left out (validation has already refused such flows).
    pub(crate) fn build(flow: &Flow) -> Graph {
        let mut configs = HashMap::new();
        let mut settings = HashMap::new();
        let mut index = HashMap::new();
        for (position, node) in flow.nodes.iter().enumerate() {
            index.entry(node.id.clone()).or_insert(position);
            let Some(kind) = NodeKind::from_id(&node.kind) else {
                continue;
            };
            if let Ok(config) = NodeConfig::parse(kind, &node.data) {
                configs.insert(node.id.clone(), config);
            }
            settings.insert(
                node.id.clone(),
                CommonSettings::parse(&node.data).unwrap_or_default(),
            );
        }
        let mut outgoing: HashMap<String, Vec<(String, String)>> = HashMap::new();
        let mut subagents: HashMap<String, Vec<String>> = HashMap::new();
        let mut incoming: HashMap<String, Vec<String>> = HashMap::new();
        for edge in &flow.edges {
            if edge.is_subagent() {
                subagents
                    .entry(edge.source.clone())
                    .or_default()
                    .push(edge.target.clone());
            } else {
                let sources = incoming.entry(edge.target.clone()).or_default();
                if !sources.contains(&edge.source) {
                    sources.push(edge.source.clone());
                }
                outgoing
                    .entry(edge.source.clone())
                    .or_default()
                    .push((edge.source_handle().to_string(), edge.target.clone()));
            }
        }
        Graph {
            index,
            configs,
            settings,
            outgoing,
            subagents,
            incoming,
        }
    }

    /// Sources of the execution edges arriving at `node_id`.
    pub(crate) fn sources_of<'a>(&'a self, node_id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.incoming
            .get(node_id)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Targets of every execution edge leaving `node_id`, whatever the handle.
    pub(crate) fn all_targets<'a>(&'a self, node_id: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.outgoing
            .get(node_id)
            .into_iter()
            .flatten()
            .map(|(_, target)| target.as_str())
    }

    /// Targets of the execution edges leaving `node_id` by `handle`.
    pub(crate) fn targets<'a>(
        &'a self,
        node_id: &str,
        handle: &'a str,
    ) -> impl Iterator<Item = &'a String> + 'a {
        self.outgoing
            .get(node_id)
            .into_iter()
            .flatten()
            .filter(move |(edge_handle, _)| edge_handle == handle)
            .map(|(_, target)| target)
    }
}

/// Shared by every step of one run.
pub struct RunContext {
    pub(crate) run_id: String,
    pub(crate) flow: Arc<Flow>,
    /// The flow's file, which `subflow` and `forEach` paths are relative to.
    pub(crate) flow_path: Option<PathBuf>,
    /// 0 for a run, 1 for a flow it runs as a subflow, and so on (at most [`MAX_DEPTH`]).
    pub(crate) depth: usize,
    pub(crate) graph: Graph,
    pub(crate) templates: Templates,
    pub(crate) outputs: Arc<NodeOutputs>,
    /// The run's input as a value (`initial` in templates; the `start` node's output).
    pub(crate) initial: Value,
    pub(crate) vars: Value,
    pub(crate) approval: RwLock<Option<Value>>,
    pub(crate) histories: Mutex<HashMap<String, Vec<ChatMessage>>>,
    pub(crate) llm: LlmClients,
    /// For `http` nodes.
    pub(crate) http: reqwest::Client,
    /// For `code` nodes.
    pub(crate) sandbox: weft_sandbox::Sandbox,
    pub(crate) events: Emitter,
    pub(crate) store: Store,
    pub(crate) cancel: CancellationToken,
}

/// How deep subflows may nest (SPEC §2).
pub(crate) const MAX_DEPTH: usize = 10;

/// What a run keeps between steps that a nested or resumed run starts from.
pub(crate) struct ContextSeed {
    pub initial: Value,
    pub outputs: HashMap<String, Value>,
    pub approval: Option<Value>,
    pub histories: HashMap<String, Vec<ChatMessage>>,
}

impl RunContext {
    /// A run's context: parses node configs, compiles every template once.
    #[allow(clippy::too_many_arguments)] // the one constructor of a context, used by runs and nested runs
    pub(crate) fn build(
        run_id: String,
        flow: Arc<Flow>,
        flow_path: Option<PathBuf>,
        depth: usize,
        seed: ContextSeed,
        llm: LlmClients,
        http: reqwest::Client,
        sandbox: weft_sandbox::Sandbox,
        events: Emitter,
        store: Store,
        cancel: CancellationToken,
    ) -> Result<RunContext, Vec<Problem>> {
        let graph = Graph::build(&flow);
        let mut templates = Templates::new();
        let mut problems = Vec::new();
        for node in &flow.nodes {
            let Some(config) = graph.configs.get(&node.id) else {
                continue;
            };
            for (field, source) in config.templates() {
                if let Err(error) = templates.add(&node.id, &field, source) {
                    problems.push(Problem::node_error(
                        &node.id,
                        "template",
                        format!("{field}: {error}"),
                    ));
                }
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let vars = flow.vars();
        Ok(RunContext {
            run_id,
            flow,
            flow_path,
            depth,
            graph,
            templates,
            outputs: Arc::new(NodeOutputs::from_map(seed.outputs)),
            initial: seed.initial,
            vars,
            approval: RwLock::new(seed.approval),
            histories: Mutex::new(seed.histories),
            llm,
            http,
            sandbox,
            events,
            store,
            cancel,
        })
    }

    /// The key of `node_id` in the store's node outputs (nested runs prefix their scope).
    pub(crate) fn store_key(&self, node_id: &str) -> String {
        format!("{}{node_id}", self.events.store_prefix())
    }

    /// Records the tokens an LLM call of `node_id` used, in the store (per node and run).
    pub(crate) fn record_usage(&self, node_id: &str, usage: Usage) {
        self.events.add_usage(usage);
        self.store
            .add_usage(&self.run_id, &self.store_key(node_id), usage, &now());
    }

    /// Records metadata about `node_id`'s latest output (the web pages a search used).
    pub(crate) fn record_metadata(&self, node_id: &str, metadata: &Value) {
        self.store
            .put_node_metadata(&self.run_id, &self.store_key(node_id), metadata, &now());
    }

    /// Resolves `path` (as written in a node) against this flow's folder.
    pub(crate) fn resolve_path(&self, path: &str) -> PathBuf {
        let base = self.flow_path.as_deref().and_then(std::path::Path::parent);
        match base {
            Some(base) => base.join(path),
            None => PathBuf::from(path),
        }
    }

    pub(crate) fn emit(&self, kind: EventType, node_id: Option<&str>, content: String) {
        self.events.emit(kind, node_id, content);
    }

    pub(crate) fn node(&self, node_id: &str) -> Option<&Node> {
        self.graph
            .index
            .get(node_id)
            .and_then(|position| self.flow.nodes.get(*position))
    }

    pub(crate) fn config(&self, node_id: &str) -> Option<&NodeConfig> {
        self.graph.configs.get(node_id)
    }

    pub(crate) fn subagents_of(&self, node_id: &str) -> &[String] {
        self.graph.subagents.get(node_id).map_or(&[], Vec::as_slice)
    }

    /// Renders `field` of `node_id` with `input` as the previous output.
    pub(crate) fn render(
        &self,
        node_id: &str,
        field: &str,
        input: &Value,
    ) -> Result<String, StepError> {
        let approval = self.approval.read().ok().and_then(|guard| guard.clone());
        let scope = Scope {
            input,
            initial: &self.initial,
            approval: approval.as_ref(),
            vars: &self.vars,
            nodes: &self.outputs,
        };
        self.templates
            .render(node_id, field, &scope)
            .map_err(|error| StepError::new("template", format!("{field}: {error}")))
    }

    pub(crate) fn history(&self, node_id: &str) -> Vec<ChatMessage> {
        self.histories
            .lock()
            .map(|map| map.get(node_id).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    pub(crate) fn set_history(&self, node_id: &str, messages: Vec<ChatMessage>) {
        if let Ok(mut map) = self.histories.lock() {
            map.insert(node_id.to_string(), messages);
        }
    }

    pub(crate) fn set_approval(&self, value: Value) {
        if let Ok(mut guard) = self.approval.write() {
            *guard = Some(value);
        }
    }
}

/// One visit of one node.
pub(crate) struct Step<'a> {
    pub ctx: &'a RunContext,
    pub node: &'a Node,
    pub input: &'a Value,
    /// For a `subflow` step re-entered on resume: where its nested run paused, and the decision.
    pub resume: Option<NestedResume>,
}

/// A nested run that paused, and the decision that lets it go on.
#[derive(Debug, Clone)]
pub(crate) struct NestedResume {
    pub pause: super::scheduler::NestedPause,
    pub decision: crate::nodes::Decision,
}

impl Step<'_> {
    pub(crate) fn emit(&self, kind: EventType, content: String) {
        self.ctx.emit(kind, Some(&self.node.id), content);
    }

    /// Renders one of this node's templated fields.
    pub(crate) fn render(&self, field: &str) -> Result<String, StepError> {
        self.ctx.render(&self.node.id, field, self.input)
    }
}

/// What a step produced and the handle the run continues by.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepOutput {
    pub value: Value,
    pub handle: String,
    /// Set when a nested run (a subflow) paused at an approval: the step is not finished.
    pub paused: Option<Box<super::scheduler::NestedPause>>,
}

impl StepOutput {
    pub(crate) fn new(value: Value, handle: impl Into<String>) -> StepOutput {
        StepOutput {
            value,
            handle: handle.into(),
            paused: None,
        }
    }
}

/// Why a step failed. `kind` is a short machine-readable class (`template`, `provider`,
/// `timeout`, ...) that travels in the error payload of `error` edges.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepError {
    pub kind: &'static str,
    pub message: String,
}

impl StepError {
    pub(crate) fn new(kind: &'static str, message: impl Into<String>) -> StepError {
        StepError {
            kind,
            message: message.into(),
        }
    }
}
