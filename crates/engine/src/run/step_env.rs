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
use super::llm_log::{Attempt, Recorded, request_hash, tool_call_hash};
use weft_mcp::{McpError, McpErrorKind, ToolInfo, ToolOutcome};
use weft_nodes::step::ToolCallRequest;

/// What is kept of a call that failed for good before a fallback model was asked.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FailedCall {
    failed_for_good: String,
}

/// `provider/model`, as recordings and events name a model.
fn model_name(route: &ModelRoute) -> String {
    format!("{}/{}", route.provider.as_str(), route.model)
}

impl RunContext {
    /// One model's call for [`StepEnv::complete`]: its answer kept with the run (or one kept
    /// already given back), and with `falls_back`, a failure for good kept too, so that the
    /// same path is taken again without a call.
    async fn complete_one(
        &self,
        node_id: &str,
        visit: u64,
        route: &ModelRoute,
        request: &ChatRequest,
        on_delta: &(dyn Fn(&str) + Send + Sync),
        falls_back: bool,
    ) -> Result<ChatResponse, Attempt> {
        {
            let node_key = self.call_key(node_id);
            let log = &self.shared.llm_log;
            let call = log.next_call(&node_key, visit);
            let hash = request_hash(route, request);
            // Keeps an answer (or a failure a fallback followed) as this run's call `call` of the
            // node in this visit.
            let keep = |response: Value| {
                let recorded = RecordedCall {
                    node_key: node_key.clone(),
                    visit,
                    call,
                    request_hash: hash.clone(),
                    model: model_name(route),
                    response,
                    tool: None,
                };
                self.store()
                    .record_llm_call(&self.run_id, &recorded, &now());
                log.kept();
            };
            let record =
                |answer: &ChatResponse| keep(serde_json::to_value(answer).unwrap_or_default());
            match log.recorded::<FailedCall>(&node_key, visit, call, &hash) {
                Some(Recorded::Own(failed)) => {
                    return Err(Attempt::FailedWhenRecorded(failed.failed_for_good));
                }
                Some(Recorded::Replayed(failed) | Recorded::Given(failed)) => {
                    self.events.emit(
                        EventType::LogicCheck,
                        Some(node_id),
                        format!(
                            "`{}` failed for good when this call was recorded: {} (no provider call)",
                            model_name(route),
                            failed.failed_for_good
                        ),
                    );
                    keep(serde_json::to_value(&failed).unwrap_or_default());
                    return Err(Attempt::FailedWhenRecorded(failed.failed_for_good));
                }
                Some(Recorded::Missing(_)) | None => {}
            }
            if let Some(recorded) = log.recorded::<ChatResponse>(&node_key, visit, call, &hash) {
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
                    Recorded::Missing(why) => {
                        return Err(Attempt::Failed(ProviderError::NotRecorded(why)));
                    }
                };
                // Shown as one piece.
                if !answer.content.is_empty() {
                    on_delta(&answer.content);
                }
                return Ok(answer);
            }
            log.went_live(&node_key);
            self.stored_before_asking().await;
            match self
                .services
                .llm
                .complete(route, request, on_delta, &self.cancel)
                .await
            {
                Ok(answer) => {
                    record(&answer);
                    Ok(answer)
                }
                Err(error) => {
                    if falls_back && error.fails_for_good() {
                        let failed = FailedCall {
                            failed_for_good: error.to_string(),
                        };
                        keep(serde_json::to_value(&failed).unwrap_or_default());
                    }
                    Err(Attempt::Failed(error))
                }
            }
        }
    }

    /// The folder of this flow's file (what relative paths in it are relative to).
    fn flow_folder(&self) -> Option<&std::path::Path> {
        self.flow_path.as_deref().and_then(std::path::Path::parent)
    }

    /// The definition of MCP server `server` in this flow's `settings.mcpServers`.
    fn mcp_server(&self, server: &str) -> Result<weft_mcp::ServerDef, McpError> {
        let servers = weft_mcp::parse_servers(self.flow.settings.get("mcpServers"))
            .map_err(|problems| McpError::new(server, McpErrorKind::Config, problems.join("; ")))?;
        servers.get(server).cloned().ok_or_else(|| {
            let known: Vec<&str> = servers.keys().map(String::as_str).collect();
            McpError::new(
                server,
                McpErrorKind::Config,
                if known.is_empty() {
                    "the flow's settings.mcpServers defines no servers".to_string()
                } else {
                    format!(
                        "is not in the flow's settings.mcpServers (it has: {})",
                        known.join(", ")
                    )
                },
            )
        })
    }
}

impl RunContext {
    /// Waits until the answers this run was given so far are committed, before it asks a model
    /// or a tool for another: a process killed while that one is answered has kept every answer
    /// before it, so the run continued elsewhere asks again only for the one cut off. Only
    /// then: a run's first call does not wait for its events (on a busy server that wait cost a
    /// tenth of the runs per second). (A store that cannot commit fails the run at its end, with
    /// the error: the call goes on.)
    async fn stored_before_asking(&self) {
        let log = &self.shared.llm_log;
        let Some(kept) = log.unstored() else {
            return;
        };
        match self.store().committed().await {
            Ok(()) => log.committed_up_to(kept),
            Err(error) => tracing::warn!(
                "the run store could not keep what run {} did: {error}",
                self.run_id
            ),
        }
    }

    /// What an MCP server gave `node_id` in its visit `visit` (its tool list when `tool` is
    /// `None`, else the tool's result): what this run, the replayed run or the test's recording
    /// kept for the same request, else `live`'s answer, kept in turn. Numbered with the node's
    /// LLM calls: the order an agent makes them in is fixed (the calls of one answer start in
    /// the order the model listed them).
    async fn recorded_or_live<T, F, Fut>(
        &self,
        node_id: &str,
        visit: u64,
        server: &str,
        tool: Option<&str>,
        hash: String,
        live: F,
    ) -> Result<T, McpError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, McpError>>,
    {
        let node_key = self.call_key(node_id);
        let log = &self.shared.llm_log;
        let call = log.next_call(&node_key, visit);
        // `server` for its list of tools, `server/tool` for a call.
        let named = match tool {
            Some(tool) => format!("{server}/{tool}"),
            None => server.to_string(),
        };
        let what = match tool {
            Some(tool) => format!("the call of `{tool}`"),
            None => "the list of its tools".to_string(),
        };
        let record = |answer: &T| {
            let recorded = RecordedCall {
                node_key: node_key.clone(),
                visit,
                call,
                request_hash: hash.clone(),
                model: String::new(),
                response: serde_json::to_value(answer).unwrap_or_default(),
                tool: Some(named.clone()),
            };
            self.store()
                .record_llm_call(&self.run_id, &recorded, &now());
            log.kept();
        };
        if let Some(recorded) = log.recorded::<T>(&node_key, visit, call, &hash) {
            let answer = match recorded {
                Recorded::Own(answer) => answer,
                Recorded::Replayed(answer) => {
                    let from_run = log.replayed_run().unwrap_or_default();
                    self.events.emit(
                        EventType::LogicCheck,
                        Some(node_id),
                        format!("replayed: MCP server `{server}`: {what} as run {from_run} recorded it (the server was not asked)"),
                    );
                    record(&answer);
                    answer
                }
                Recorded::Given(answer) => {
                    self.events.emit(
                        EventType::LogicCheck,
                        Some(node_id),
                        format!("MCP server `{server}`: {what} answered from the test's recording (the server was not asked)"),
                    );
                    record(&answer);
                    answer
                }
                Recorded::Missing(why) => {
                    return Err(McpError::new(
                        server,
                        McpErrorKind::NotRecorded,
                        format!("{what} has no recorded result: {why}"),
                    ));
                }
            };
            return Ok(answer);
        }
        log.went_live(&node_key);
        self.stored_before_asking().await;
        let answer = live().await?;
        record(&answer);
        Ok(answer)
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
        routes: &'a [ModelRoute],
        request: &'a ChatRequest,
        on_delta: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<(ChatResponse, usize), ProviderError>> {
        async move {
            if let Some(stop) = self.over_budget() {
                return Err(ProviderError::OverBudget(stop.message));
            }
            for (index, route) in routes.iter().enumerate() {
                let next = routes.get(index + 1);
                let asked = ChatRequest {
                    model: route.model.clone(),
                    ..request.clone()
                };
                let attempt =
                    self.complete_one(node_id, visit, route, &asked, on_delta, next.is_some());
                let why = match super::trace::traced_llm_call(self, node_id, route, &asked, attempt)
                    .await
                {
                    Ok(answer) => {
                        if let (Some(budget), Some(usage)) = (self.events.budget(), answer.usage) {
                            budget.spent(&model_name(route), usage);
                        }
                        return Ok((answer, index));
                    }
                    Err(Attempt::Failed(error)) if next.is_some() && error.fails_for_good() => {
                        self.events
                            .emit(EventType::LlmError, Some(node_id), error.to_string());
                        error.to_string()
                    }
                    Err(Attempt::Failed(error)) => return Err(error),
                    Err(Attempt::FailedWhenRecorded(why)) if next.is_some() => why,
                    Err(Attempt::FailedWhenRecorded(why)) => {
                        return Err(ProviderError::NotRecorded(format!(
                            "`{}` failed for good when this call was recorded ({why}), and the node names no fallback model after it now",
                            model_name(route)
                        )));
                    }
                };
                if let Some(next) = next {
                    self.events.emit(
                        EventType::LogicCheck,
                        Some(node_id),
                        format!(
                            "`{}` failed for good ({why}); falling back to `{}`",
                            model_name(route),
                            model_name(next)
                        ),
                    );
                }
            }
            Err(ProviderError::NoModel)
        }
        .boxed()
    }

    fn over_budget(&self) -> Option<weft_nodes::budget::BudgetStop> {
        self.events.budget()?.reached(self.events.total_usage())
    }

    fn lift_budget(&self) {
        if let Some(budget) = self.events.budget() {
            budget.lift();
        }
    }

    fn emit_answer(
        &self,
        node_id: &str,
        content: String,
        usage: Option<Usage>,
        model: Option<String>,
    ) {
        self.events.emit_answer(node_id, content, usage, model);
    }

    fn mcp_tools<'a>(
        &'a self,
        node_id: &'a str,
        visit: u64,
        server: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ToolInfo>, McpError>> {
        async move {
            let hash = tool_call_hash(server, "", &weft_mcp::JsonObject::new());
            self.recorded_or_live(node_id, visit, server, None, hash, || async move {
                let def = self.mcp_server(server)?;
                self.services
                    .mcp
                    .tools(server, &def, self.flow_folder())
                    .await
            })
            .await
        }
        .boxed()
    }

    fn call_tool<'a>(
        &'a self,
        request: ToolCallRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolOutcome, McpError>> {
        async move {
            let ToolCallRequest {
                node_id,
                visit,
                server,
                tool,
                arguments,
            } = request;
            let hash = tool_call_hash(server, tool, arguments);
            self.recorded_or_live(node_id, visit, server, Some(tool), hash, || async move {
                let def = self.mcp_server(server)?;
                self.services
                    .mcp
                    .call(
                        server,
                        &def,
                        self.flow_folder(),
                        tool,
                        arguments.clone(),
                        &self.cancel,
                    )
                    .await
            })
            .await
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
