//! The run's context as node kinds see it: the engine's side of the step interface
//! ([`StepEnv`]). A step renders templates, asks the model (answered from a recording or a
//! replayed run when there is one, and kept for the next retry), keeps chat histories, usage
//! and metadata, and runs child flows through it.

use std::any::Any;
use std::path::PathBuf;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use weft_event::EventType;
use weft_flow::Node;
use weft_nodes::NodeConfig;
use weft_nodes::step::{ChildEnd, ChildRun, StepEnv, StepError, StepErrorKind};
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ModelRoute, ProviderError, Usage,
};
use weft_store::RecordedCall;
use weft_template::{RenderLimits, Scope};

use super::context::RunContext;
use super::emitter::now;
use super::llm_log::{Recorded, request_hash};

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
