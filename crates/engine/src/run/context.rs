//! What every step of one run shares: the flow, parsed configs, compiled templates, the
//! latest outputs, the LLM clients, the event emitter and the cancellation token. Nodes reach
//! the outside world only through this.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent};
use crate::flow::{Flow, Node};
use crate::nodes::{CommonSettings, NodeConfig, NodeKind};
use crate::providers::{ChatMessage, LlmClients};
use crate::store::Store;
use crate::template::{NodeOutputs, Scope, Templates};

/// Called with every event of a run, in `seq` order.
pub type EventListener = Arc<dyn Fn(&RunEvent) + Send + Sync>;

/// The current time as stored in events and the store (RFC 3339, milliseconds, UTC).
pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Numbers events and hands each to the store and the host, one at a time, so every
/// consumer sees the same order.
pub(crate) struct Emitter {
    run_id: String,
    store: Store,
    listener: Option<EventListener>,
    next_seq: Mutex<u64>,
}

impl Emitter {
    pub(crate) fn new(
        run_id: String,
        store: Store,
        listener: Option<EventListener>,
        next_seq: u64,
    ) -> Emitter {
        Emitter {
            run_id,
            store,
            listener,
            next_seq: Mutex::new(next_seq),
        }
    }

    pub(crate) fn emit(&self, kind: EventType, node_id: Option<&str>, content: String) {
        // A poisoned lock only means another step panicked mid-emit; numbering is still sound.
        let mut next_seq = self
            .next_seq
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let event = RunEvent {
            seq: *next_seq,
            run_id: self.run_id.clone(),
            ts: now(),
            kind,
            node_id: node_id.map(str::to_string),
            content,
        };
        *next_seq += 1;
        self.store.append_event(&event);
        if let Some(listener) = &self.listener {
            listener(&event);
        }
    }

    pub(crate) fn next_seq(&self) -> u64 {
        *self
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
        for edge in &flow.edges {
            if edge.is_subagent() {
                subagents
                    .entry(edge.source.clone())
                    .or_default()
                    .push(edge.target.clone());
            } else {
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
        }
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
    pub(crate) graph: Graph,
    pub(crate) templates: Templates,
    pub(crate) outputs: Arc<NodeOutputs>,
    /// The run's input as a value (`initial` in templates; the `start` node's output).
    pub(crate) initial: Value,
    pub(crate) vars: Value,
    pub(crate) approval: RwLock<Option<Value>>,
    pub(crate) histories: Mutex<HashMap<String, Vec<ChatMessage>>>,
    pub(crate) llm: LlmClients,
    pub(crate) events: Emitter,
    pub(crate) store: Store,
    pub(crate) cancel: CancellationToken,
}

impl RunContext {
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
}

impl StepOutput {
    pub(crate) fn new(value: Value, handle: impl Into<String>) -> StepOutput {
        StepOutput {
            value,
            handle: handle.into(),
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
