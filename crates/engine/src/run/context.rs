//! What every step of one run shares: the flow, parsed configs, compiled templates, the latest
//! outputs, the LLM clients, the event emitter and the cancellation token. It is the real
//! [`StepEnv`]: node kinds reach the outside world only through it.

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::emitter::{Emitter, now};
use super::graph::Graph;
use super::llm_log::{LlmLog, Recorded, request_hash};
use crate::event::EventType;
use crate::flow::{Flow, Node};
use crate::nodes::{Decision, NodeConfig};
use crate::pins::Pins;
use crate::providers::{
    ChatMessage, ChatRequest, ChatResponse, LazyClient, LlmClients, ModelRoute, ProviderError,
    Usage,
};
use crate::step::{ChildEnd, ChildRun, StepEnv, StepError, StepErrorKind};
use crate::store::RecordedCall;
use crate::store::Store;
use crate::template::{NodeOutputs, RenderLimits, Scope, Templates};

/// What a run uses from outside that its nested runs share: providers, HTTP, the sandbox, the
/// store.
#[derive(Clone)]
pub(crate) struct Services {
    pub llm: LlmClients,
    pub http: LazyClient,
    pub sandbox: weft_sandbox::Sandbox,
    pub store: Store,
}

/// What one run (with its nested runs) shares beyond the services: its LLM call log and its
/// compiled templates.
#[derive(Clone, Default)]
pub(crate) struct RunShared {
    pub llm_log: Arc<LlmLog>,
    pub templates: Arc<Templates>,
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
    vars: Arc<Value>,
    pub(crate) approval: RwLock<Option<Arc<Value>>>,
    pub(crate) histories: Mutex<HashMap<String, Vec<ChatMessage>>>,
    pub(crate) services: Services,
    pub(crate) shared: RunShared,
    pub(crate) events: Emitter,
    pub(crate) cancel: CancellationToken,
    /// `cancel`, as each template render watches it ([`RenderLimits`]).
    render_cancel: Arc<CancellationToken>,
    /// Approvals answered in advance, by node id (`sub/review` for one inside subflow `sub`).
    pub(crate) decisions: HashMap<String, Decision>,
    /// Pinned outputs by node id: these nodes do not run ([`crate::pins`]).
    pub(crate) pins: Pins,
}

/// What a run keeps between steps that a nested or resumed run starts from.
pub(crate) struct ContextSeed {
    pub initial: Value,
    pub outputs: HashMap<String, Value>,
    pub approval: Option<Value>,
    pub histories: HashMap<String, Vec<ChatMessage>>,
    /// Outputs that stand for their nodes, which then do not run ([`crate::pins`]).
    pub pins: Pins,
}

impl RunContext {
    /// Lets go of this finished run for a process about to end ([`crate::Engine::ending_with_process`]):
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
            initial: Arc::new(seed.initial),
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
    ) -> Result<String, crate::template::TemplateError> {
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

impl StepEnv for RunContext {
    fn emit(&self, node_id: &str, kind: EventType, content: String, usage: Option<Usage>) {
        self.events
            .emit_event(kind, Some(node_id), content, None, usage);
    }

    fn render(&self, node_id: &str, field: &str, input: &Value) -> Result<String, StepError> {
        let internal = |message: String| StepError::new(StepErrorKind::Internal, message);
        let graph_node = self
            .graph
            .nodes
            .get(node_id)
            .ok_or_else(|| internal(format!("node `{node_id}` is not in the flow")))?;
        let source = graph_node
            .config
            .template(field)
            .or_else(|| {
                let node = self.flow.nodes.get(graph_node.index)?;
                graph_node.kind.template_source(&node.data, field)
            })
            .ok_or_else(|| {
                internal(format!(
                    "`{field}` of node `{node_id}` is not a template (a bug in Weft)"
                ))
            })?;
        let approval = self.approval();
        let scope = Scope {
            input,
            initial: &self.initial,
            approval: approval.as_ref(),
            vars: &self.vars,
            nodes: &self.outputs,
        };
        // A render is part of its step, so it may take as long as the step's attempt.
        let timeout = graph_node
            .settings
            .timeout(graph_node.kind.default_timeout_seconds());
        // A long render holds the runtime's thread: the run's events are shown meanwhile by
        // the store's writer thread.
        self.shared
            .templates
            .render_telling(
                source,
                &scope,
                RenderLimits::within(timeout, &self.render_cancel),
                || self.store().expect_wait(),
            )
            .map_err(|error| StepError::from_template(field, error))
    }

    fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    fn initial(&self) -> &Value {
        &self.initial
    }

    fn llm(&self) -> &LlmClients {
        &self.services.llm
    }

    fn complete<'a>(
        &'a self,
        node_id: &'a str,
        visit: u64,
        route: &'a ModelRoute,
        request: &'a ChatRequest,
        on_delta: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        async move {
            let node_key = self.call_key(node_id);
            let log = &self.shared.llm_log;
            let call = log.next_call(&node_key, visit);
            let hash = request_hash(route, request);
            // Keeps an answer as this run's call `call` of the node in this visit.
            let record = |answer: &ChatResponse| {
                let recorded = RecordedCall {
                    node_key: node_key.clone(),
                    visit,
                    call,
                    request_hash: hash.clone(),
                    model: format!("{}/{}", route.provider.as_str(), route.model),
                    response: serde_json::to_value(answer).unwrap_or_default(),
                };
                self.store()
                    .record_llm_call(&self.run_id, &recorded, &now());
            };
            if let Some(recorded) = log.recorded(&node_key, visit, call, &hash) {
                let answer = match recorded {
                    // Its tokens were counted (and paid) when it was first asked.
                    Recorded::Own(answer) => ChatResponse {
                        usage: None,
                        ..answer
                    },
                    Recorded::Replayed(answer) => {
                        let answer = ChatResponse {
                            usage: None,
                            ..answer
                        };
                        // A replay keeps the call as its own, costing nothing, so that the run
                        // is complete in itself (to replay again, to compare).
                        let from_run = log.replayed_run().unwrap_or_default();
                        self.events.emit(
                            EventType::LogicCheck,
                            Some(node_id),
                            format!("replayed: the answer run {from_run} recorded for this request (no provider call)"),
                        );
                        record(&answer);
                        answer
                    }
                    // A flow test offline: the answer keeps the tokens it used when recorded,
                    // so a test's limits on tokens and cost hold as they would live.
                    Recorded::Given(answer) => {
                        self.events.emit(
                            EventType::LogicCheck,
                            Some(node_id),
                            "answered from the test's recording (no provider call)".to_string(),
                        );
                        record(&answer);
                        answer
                    }
                    Recorded::Missing(why) => return Err(ProviderError::NotRecorded(why)),
                };
                // Shown as one piece.
                if !answer.content.is_empty() {
                    on_delta(&answer.content);
                }
                return Ok(answer);
            }
            log.went_live(&node_key);
            let answer = self
                .services
                .llm
                .complete(route, request, on_delta, &self.cancel)
                .await?;
            record(&answer);
            Ok(answer)
        }
        .boxed()
    }

    fn http(&self) -> &reqwest::Client {
        self.services.http.get()
    }

    fn sandbox(&self) -> &weft_sandbox::Sandbox {
        &self.services.sandbox
    }

    fn history(&self, node_id: &str) -> Vec<ChatMessage> {
        self.histories
            .lock()
            .map(|map| map.get(node_id).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    fn set_history(&self, node_id: &str, messages: Vec<ChatMessage>) {
        if let Ok(mut map) = self.histories.lock() {
            map.insert(node_id.to_string(), messages);
        }
    }

    fn record_usage(&self, node_id: &str, usage: Usage) {
        self.events.add_usage(usage);
        self.store()
            .add_usage(&self.run_id, &self.store_key(node_id), usage, &now());
    }

    fn record_metadata(&self, node_id: &str, metadata: &Value) {
        self.store()
            .put_node_metadata(&self.run_id, &self.store_key(node_id), metadata, &now());
    }

    fn resolve_path(&self, path: &str) -> PathBuf {
        let base = self.flow_path.as_deref().and_then(std::path::Path::parent);
        match base {
            Some(base) => base.join(path),
            None => PathBuf::from(path),
        }
    }

    fn label(&self, node_id: &str) -> Option<&str> {
        self.node(node_id).map(Node::label)
    }

    fn config(&self, node_id: &str) -> Option<&dyn Any> {
        RunContext::config(self, node_id).map(NodeConfig::as_any)
    }

    fn subagents(&self, node_id: &str) -> &[String] {
        self.graph.subagents.get(node_id).map_or(&[], Vec::as_slice)
    }

    fn run_child<'a>(
        &'a self,
        node_id: &'a str,
        child: ChildRun<'a>,
    ) -> BoxFuture<'a, Result<ChildEnd, StepError>> {
        super::nested::run_child(self, node_id, child).boxed()
    }
}
