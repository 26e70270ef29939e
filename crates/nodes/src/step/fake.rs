//! A [`StepEnv`] for node kinds' unit tests: it records what a step emits and keeps, renders
//! templates it is given, and answers child runs with what the test scripted. The model, HTTP
//! and the sandbox are the real ones (a kind's test points the model at the scripted LLM
//! server on loopback).

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ChildEnd, ChildRun, Step, StepEnv, StepError, StepErrorKind};
use weft_event::EventType;
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ModelRoute, ProviderError,
    ProviderSettings, Secret, Usage,
};
use weft_template::{NodeOutputs, RenderLimits, Scope, Templates};

/// One child run a step asked for: its input and item index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildCall {
    pub node_id: String,
    pub input: Value,
    pub item: Option<u64>,
    pub resumed: bool,
}

/// How a scripted child run ends.
type ChildAnswer = Arc<dyn Fn() -> ChildEnd + Send + Sync>;

pub(crate) struct FakeEnv {
    pub emitted: Mutex<Vec<(String, EventType, String)>>,
    pub usage: Mutex<Vec<(String, Usage)>>,
    pub metadata: Mutex<Vec<(String, Value)>>,
    pub children: Mutex<Vec<ChildCall>>,
    histories: Mutex<HashMap<String, Vec<ChatMessage>>>,
    templates: Templates,
    /// Template sources by (node id, field).
    sources: HashMap<(String, String), String>,
    /// Other nodes of the run: label and parsed config (a kind's config type).
    configs: HashMap<String, (String, Box<dyn Any + Send + Sync>)>,
    subagents: HashMap<String, Vec<String>>,
    /// What each child run answers, by input (`Value::Null` matches any input).
    child_ends: Mutex<Vec<(Value, ChildAnswer)>>,
    initial: Value,
    folder: PathBuf,
    llm: LlmClients,
    http: reqwest::Client,
    sandbox: weft_sandbox::Sandbox,
    mcp: weft_mcp::Hub,
    mcp_servers: weft_mcp::Servers,
    pub cancel: CancellationToken,
}

impl FakeEnv {
    pub(crate) fn new() -> FakeEnv {
        FakeEnv {
            emitted: Mutex::default(),
            usage: Mutex::default(),
            metadata: Mutex::default(),
            children: Mutex::default(),
            histories: Mutex::default(),
            templates: Templates::new(),
            sources: HashMap::new(),
            configs: HashMap::new(),
            subagents: HashMap::new(),
            child_ends: Mutex::default(),
            initial: Value::Null,
            folder: PathBuf::from("/flows"),
            llm: LlmClients::new(ProviderSettings::default()),
            http: reqwest::Client::new(),
            sandbox: weft_sandbox::Sandbox::new(),
            mcp: weft_mcp::Hub::default(),
            mcp_servers: weft_mcp::Servers::new(),
            cancel: CancellationToken::new(),
        }
    }

    /// The run's input.
    pub(crate) fn initial(mut self, value: Value) -> FakeEnv {
        self.initial = value;
        self
    }

    /// `source` as the template of `field` of `node_id` (it must compile).
    pub(crate) fn template(mut self, node_id: &str, field: &str, source: &str) -> FakeEnv {
        self.templates
            .compile(source)
            .unwrap_or_else(|error| panic!("{node_id}.{field}: {error}"));
        self.sources
            .insert((node_id.to_string(), field.to_string()), source.to_string());
        self
    }

    /// Another node of the run, with its label and config.
    pub(crate) fn node(
        mut self,
        node_id: &str,
        label: &str,
        config: impl Any + Send + Sync,
    ) -> FakeEnv {
        self.configs
            .insert(node_id.to_string(), (label.to_string(), Box::new(config)));
        self
    }

    /// An MCP server of the flow's settings.
    pub(crate) fn mcp_server(mut self, name: &str, def: weft_mcp::ServerDef) -> FakeEnv {
        self.mcp_servers.insert(name.to_string(), def);
        self
    }

    pub(crate) fn subagent(mut self, parent: &str, child: &str) -> FakeEnv {
        self.subagents
            .entry(parent.to_string())
            .or_default()
            .push(child.to_string());
        self
    }

    /// The folder of the flow's file (child flow paths are relative to it).
    pub(crate) fn folder(mut self, folder: &std::path::Path) -> FakeEnv {
        self.folder = folder.to_path_buf();
        self
    }

    /// The model at `base_url` (the scripted LLM server's).
    pub(crate) fn model_at(mut self, base_url: String) -> FakeEnv {
        self.llm = LlmClients::new(ProviderSettings {
            openai_base_url: base_url,
            openai_api_key: Some(Secret::new("sk-fake-env")),
            max_attempts: 1,
            read_timeout: Duration::from_secs(10),
            ..ProviderSettings::default()
        });
        self
    }

    /// Child runs given `input` (any input for `Value::Null`) end as `end` makes them.
    pub(crate) fn child_ends(
        self,
        input: Value,
        end: impl Fn() -> ChildEnd + Send + Sync + 'static,
    ) -> FakeEnv {
        self.child_ends
            .lock()
            .expect("not poisoned")
            .push((input, Arc::new(end)));
        self
    }

    /// The events emitted so far: (node, type, content).
    pub(crate) fn events(&self) -> Vec<(String, EventType, String)> {
        self.emitted.lock().expect("not poisoned").clone()
    }

    /// The content of the events of `kind` emitted so far.
    pub(crate) fn contents(&self, kind: EventType) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|(_, emitted, _)| *emitted == kind)
            .map(|(_, _, content)| content)
            .collect()
    }
}

/// A step of `node_id` with `input`, its first visit, a 30 s timeout.
pub(crate) fn step<'a>(node_id: &'a str, input: &'a Arc<Value>) -> Step<'a> {
    Step {
        stop_before_tools: false,
        node_id,
        input,
        visit: 1,
        timeout: Duration::from_secs(30),
        resume: None,
    }
}

impl FakeEnv {
    fn mcp_server_def(&self, server: &str) -> Result<weft_mcp::ServerDef, weft_mcp::McpError> {
        self.mcp_servers.get(server).cloned().ok_or_else(|| {
            weft_mcp::McpError::new(
                server,
                weft_mcp::McpErrorKind::Config,
                "is not in the flow's settings.mcpServers".into(),
            )
        })
    }
}

impl StepEnv for FakeEnv {
    fn emit(&self, node_id: &str, kind: EventType, content: String, usage: Option<Usage>) {
        self.emitted
            .lock()
            .expect("not poisoned")
            .push((node_id.to_string(), kind, content));
        if let Some(usage) = usage {
            self.usage
                .lock()
                .expect("not poisoned")
                .push((format!("event:{node_id}"), usage));
        }
    }

    fn render(&self, node_id: &str, field: &str, input: &Value) -> Result<String, StepError> {
        let source = self
            .sources
            .get(&(node_id.to_string(), field.to_string()))
            .ok_or_else(|| {
                StepError::new(
                    StepErrorKind::Internal,
                    format!("no template for {node_id}.{field}"),
                )
            })?;
        let nodes = Arc::new(NodeOutputs::default());
        let vars = Arc::new(Value::Object(Default::default()));
        let initial = Arc::new(self.initial.clone());
        let scope = Scope {
            input,
            initial: &initial,
            approval: None,
            vars: &vars,
            nodes: &nodes,
        };
        self.templates
            .render(
                source,
                &scope,
                RenderLimits::within(
                    std::time::Duration::from_secs(60),
                    &Arc::new(self.cancel.clone()),
                ),
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
        &self.llm
    }

    fn complete<'a>(
        &'a self,
        _node_id: &'a str,
        _visit: u64,
        routes: &'a [ModelRoute],
        request: &'a ChatRequest,
        on_delta: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<(ChatResponse, usize), ProviderError>> {
        async move {
            let mut index = 0;
            loop {
                let route = &routes[index];
                let asked = ChatRequest {
                    model: route.model.clone(),
                    ..request.clone()
                };
                match self
                    .llm
                    .complete(route, &asked, on_delta, &self.cancel)
                    .await
                {
                    Ok(answer) => return Ok((answer, index)),
                    Err(error) if error.fails_for_good() && index + 1 < routes.len() => index += 1,
                    Err(error) => return Err(error),
                }
            }
        }
        .boxed()
    }

    fn mcp_tools<'a>(
        &'a self,
        _node_id: &'a str,
        _visit: u64,
        server: &'a str,
    ) -> BoxFuture<'a, Result<Vec<weft_mcp::ToolInfo>, weft_mcp::McpError>> {
        async move {
            let def = self.mcp_server_def(server)?;
            self.mcp.tools(server, &def, Some(&self.folder)).await
        }
        .boxed()
    }

    fn call_tool<'a>(
        &'a self,
        call: super::ToolCallRequest<'a>,
    ) -> BoxFuture<'a, Result<weft_mcp::ToolOutcome, weft_mcp::McpError>> {
        async move {
            let def = self.mcp_server_def(call.server)?;
            self.mcp
                .call(
                    call.server,
                    &def,
                    Some(&self.folder),
                    call.tool,
                    call.arguments.clone(),
                    &self.cancel,
                )
                .await
        }
        .boxed()
    }

    fn http(&self) -> &reqwest::Client {
        &self.http
    }

    fn sandbox(&self) -> &weft_sandbox::Sandbox {
        &self.sandbox
    }

    fn history(&self, node_id: &str) -> Vec<ChatMessage> {
        self.histories
            .lock()
            .expect("not poisoned")
            .get(node_id)
            .cloned()
            .unwrap_or_default()
    }

    fn set_history(&self, node_id: &str, messages: Vec<ChatMessage>) {
        self.histories
            .lock()
            .expect("not poisoned")
            .insert(node_id.to_string(), messages);
    }

    fn record_usage(&self, node_id: &str, usage: Usage) {
        self.usage
            .lock()
            .expect("not poisoned")
            .push((node_id.to_string(), usage));
    }

    fn record_metadata(&self, node_id: &str, metadata: &Value) {
        self.metadata
            .lock()
            .expect("not poisoned")
            .push((node_id.to_string(), metadata.clone()));
    }

    fn resolve_path(&self, path: &str) -> PathBuf {
        self.folder.join(path)
    }

    fn label(&self, node_id: &str) -> Option<&str> {
        self.configs.get(node_id).map(|(label, _)| label.as_str())
    }

    fn config(&self, node_id: &str) -> Option<&dyn Any> {
        self.configs
            .get(node_id)
            .map(|(_, config)| config.as_ref() as &dyn Any)
    }

    fn subagents(&self, node_id: &str) -> &[String] {
        self.subagents.get(node_id).map_or(&[], Vec::as_slice)
    }

    fn run_child<'a>(
        &'a self,
        node_id: &'a str,
        child: ChildRun<'a>,
    ) -> BoxFuture<'a, Result<ChildEnd, StepError>> {
        self.children.lock().expect("not poisoned").push(ChildCall {
            node_id: node_id.to_string(),
            input: (*child.input).clone(),
            item: child.item,
            resumed: child.resume.is_some(),
        });
        let end = self
            .child_ends
            .lock()
            .expect("not poisoned")
            .iter()
            .find(|(input, _)| input.is_null() || *input == *child.input)
            .map(|(_, end)| end());
        async move {
            end.ok_or_else(|| {
                StepError::new(
                    StepErrorKind::Internal,
                    format!("the test scripted no child run for {}", child.input),
                )
            })
        }
        .boxed()
    }
}
