//! What every step of one run shares: the flow, parsed configs, compiled templates, the latest
//! outputs, the LLM clients, the event emitter and the cancellation token. It is the real
//! step interface (`step_env`): node kinds reach the outside world only through it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::emitter::Emitter;
use super::graph::Graph;
use super::llm_log::LlmLog;
use crate::pins::SharedPins;
use weft_event::EventType;
use weft_flow::{Flow, Node};
use weft_nodes::{Decision, NodeConfig};
use weft_providers::{ChatMessage, LazyClient, LlmClients};
use weft_store::Store;
use weft_template::{NodeOutputs, RenderLimits, Scope, Templates};

/// What a run uses from outside that its nested runs share: providers, HTTP, the sandbox, the
/// store.
#[derive(Clone)]
pub(crate) struct Services {
    pub llm: LlmClients,
    pub http: LazyClient,
    pub sandbox: weft_sandbox::Sandbox,
    pub store: Store,
    /// The MCP servers agents call, connected on first use and kept for later runs.
    pub mcp: Arc<weft_mcp::Hub>,
    /// Prices answers for runs with a budget in US dollars (none: tokens only).
    pub pricer: Option<super::budget::Pricer>,
    /// Told what runs do, when traces are exported ([`crate::trace`]).
    pub tracer: Option<Arc<dyn crate::trace::Tracer>>,
}

/// What one run (with its nested runs) shares beyond the services: its LLM call log and its
/// compiled templates.
#[derive(Clone, Default)]
pub(crate) struct RunShared {
    pub llm_log: Arc<LlmLog>,
    pub templates: Arc<Templates>,
    /// The subflow versions this run has recorded (`path` and hash): a forEach over a
    /// thousand items records its body's version once.
    pub subflow_versions: Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>,
    /// How the decisions given in advance reached Weft (`cli`, `api`, `mcp`): they are kept in
    /// the chain of decisions as they are applied. `None`: not kept (a flow test's answers).
    pub decisions_through: Option<Arc<str>>,
}

/// Shared by every step of one run (or of one nested run).
pub(crate) struct RunContext {
    /// Shared with the run's events and stored outputs (see [`RunEvent::run_id`]).
    pub(crate) run_id: Arc<str>,
    pub(crate) flow: Arc<Flow>,
    /// The flow's file, which `subflow` and `forEach` paths are relative to.
    pub(crate) flow_path: Option<PathBuf>,
    /// 0 for a run, 1 for a flow it runs as a subflow, and so on.
    pub(crate) depth: usize,
    pub(crate) graph: Graph,
    pub(crate) outputs: Arc<NodeOutputs>,
    /// The run's input as a value (`initial` in templates; the `start` node's output).
    pub(crate) initial: Arc<Value>,
    pub(super) vars: Arc<Value>,
    pub(crate) approval: RwLock<Option<Arc<Value>>>,
    pub(crate) histories: Mutex<HashMap<String, Vec<ChatMessage>>>,
    pub(crate) services: Services,
    pub(crate) shared: RunShared,
    pub(crate) events: Emitter,
    pub(crate) cancel: CancellationToken,
    /// `cancel`, as each template render watches it ([`RenderLimits`]).
    pub(super) render_cancel: Arc<CancellationToken>,
    /// Approvals answered in advance, by node id (`sub/review` for one inside subflow `sub`).
    pub(crate) decisions: HashMap<String, Decision>,
    /// Pinned outputs by node id: these nodes do not run ([`crate::pins`]).
    pub(crate) pins: SharedPins,
}

/// What a run keeps between steps that a nested or resumed run starts from.
pub(crate) struct ContextSeed {
    pub initial: Arc<Value>,
    pub outputs: HashMap<String, Arc<Value>>,
    pub approval: Option<Value>,
    pub histories: HashMap<String, Vec<ChatMessage>>,
    /// Outputs that stand for their nodes, which then do not run ([`crate::pins`]).
    pub pins: SharedPins,
    /// A person let the run go on past its budget.
    pub budget_lifted: bool,
}

impl RunContext {
    /// Lets go of this finished run for a process about to end
    /// ([`crate::Engine::ending_with_process`]):
    /// its flow, graph and outputs, the bulk of its memory, are not freed; everything else
    /// (the store, whose writer ends when the last handle goes) is dropped as usual.
    pub(crate) fn end_with_process(self) {
        let RunContext {
            flow,
            graph,
            outputs,
            ..
        } = self;
        std::mem::forget(flow);
        std::mem::forget(graph);
        std::mem::forget(outputs);
    }

    /// A run's context over `graph`, the parsed nodes of `flow` (templates are compiled as
    /// they are first rendered, see [`Templates`]).
    #[allow(clippy::too_many_arguments)] // the one constructor of a context, used by runs and nested runs
    pub(crate) fn build(
        run_id: Arc<str>,
        flow: Arc<Flow>,
        graph: Graph,
        flow_path: Option<PathBuf>,
        depth: usize,
        seed: ContextSeed,
        services: Services,
        shared: RunShared,
        events: Emitter,
        cancel: CancellationToken,
        decisions: HashMap<String, Decision>,
    ) -> RunContext {
        let vars = Arc::new(flow.vars());
        let nodes = flow.nodes.len();
        RunContext {
            run_id,
            flow,
            flow_path,
            depth,
            graph,
            outputs: Arc::new(NodeOutputs::with_room(seed.outputs, nodes)),
            initial: seed.initial,
            vars,
            approval: RwLock::new(seed.approval.map(Arc::new)),
            histories: Mutex::new(seed.histories),
            services,
            shared,
            events,
            render_cancel: Arc::new(cancel.clone()),
            cancel,
            decisions,
            pins: seed.pins,
        }
    }

    /// Renders `source` (a breakpoint's condition) with `input` as the step's input, within a
    /// few seconds.
    pub(crate) fn render_condition(
        &self,
        source: &str,
        input: &Value,
    ) -> Result<String, weft_template::TemplateError> {
        let approval = self.approval();
        let scope = Scope {
            input,
            initial: &self.initial,
            approval: approval.as_ref(),
            vars: &self.vars,
            nodes: &self.outputs,
        };
        self.shared.templates.render(
            source,
            &scope,
            RenderLimits::within(std::time::Duration::from_secs(5), &self.render_cancel),
        )
    }

    /// The key of `node_id` in the store's node outputs (nested runs prefix their scope).
    pub(crate) fn store_key(&self, node_id: &str) -> String {
        self.events.store_key(node_id)
    }

    /// `node_id` as its LLM calls are recorded (unique per visit of every enclosing step).
    pub(crate) fn call_key(&self, node_id: &str) -> String {
        self.events.call_key(node_id)
    }

    pub(crate) fn store(&self) -> &Store {
        &self.services.store
    }

    pub(crate) fn emit(&self, kind: EventType, node_id: Option<&str>, content: String) {
        self.events.emit(kind, node_id, content);
    }

    pub(crate) fn node(&self, node_id: &str) -> Option<&Node> {
        let index = self.graph.nodes.get(node_id)?.index;
        self.flow.nodes.get(index)
    }

    pub(crate) fn config(&self, node_id: &str) -> Option<&NodeConfig> {
        self.graph.nodes.get(node_id).map(|node| &node.config)
    }

    pub(crate) fn set_approval(&self, value: Value) {
        if let Ok(mut guard) = self.approval.write() {
            *guard = Some(Arc::new(value));
        }
    }

    /// The latest decision (`approval` in templates), if any.
    pub(crate) fn approval(&self) -> Option<Arc<Value>> {
        self.approval.read().ok().and_then(|guard| guard.clone())
    }

    /// Advance decisions meant for approvals inside the subflow run by `node_id`
    /// (`--decide node/approval=...`), with that prefix taken off.
    pub(crate) fn nested_decisions(&self, node_id: &str) -> HashMap<String, Decision> {
        let prefix = format!("{node_id}/");
        self.decisions
            .iter()
            .filter_map(|(key, decision)| {
                key.strip_prefix(&prefix)
                    .map(|rest| (rest.to_string(), decision.clone()))
            })
            .collect()
    }
}
