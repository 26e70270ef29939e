//! The step interface: what one node kind sees of a run while one of its nodes runs.
//!
//! A kind's `run` gets the [`Step`] (which node, its input, which visit) and a [`StepEnv`]: every
//! effect on the outside world (events, templates, the model, HTTP, the Python sandbox, chat
//! history, token usage, files next to the flow, child flows) goes through that trait. The
//! scheduler implements it for real runs; unit tests of a kind implement it with a fake. Node
//! kinds never see the run's internals, so the import graph reads `run → nodes → step`.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use weft_event::EventType;
use weft_flow::{Flow, FlowVersion};
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ModelRoute, ProviderError, Usage,
};
use weft_template::TemplateError;

/// One visit of one node: what the kind's `run` works on.
#[derive(Debug)]
pub struct Step<'a> {
    pub node_id: &'a str,
    /// The previous output (for a `join`, the object of arrived outputs), shared: a kind that
    /// passes its input on gives the same value, not a copy.
    pub input: &'a Arc<Value>,
    /// 1 on the node's first run in this run, 2 on its second, ...
    pub visit: u64,
    /// How long one attempt may take (the node's `timeoutSeconds`, else its kind's default).
    pub timeout: Duration,
    /// For a step re-entered on resume (a `subflow`, an agent that waited at a tool call):
    /// where it paused, and the answer.
    pub resume: Option<ChildResume>,
    /// A tool breakpoint is on this node (`--break NODE:tool`): an agent stops before each of
    /// its MCP tool calls.
    pub stop_before_tools: bool,
}

/// What a step produced and the handle the run continues by.
#[derive(Debug)]
pub struct StepOutput {
    /// Shared with the run's outputs, the steps it goes on to, and the run's result.
    pub value: Arc<Value>,
    pub handle: String,
    /// This value is the run's result unless a later step sets another (the `output` kind).
    pub is_result: bool,
    /// The step waits for a person before the run goes on along one of its handles.
    pub wait: Option<Wait>,
}

impl StepOutput {
    pub fn new(value: impl Into<Arc<Value>>, handle: impl Into<String>) -> StepOutput {
        StepOutput {
            value: value.into(),
            handle: handle.into(),
            is_result: false,
            wait: None,
        }
    }

    /// Marks the value as the run's result.
    pub fn as_result(self) -> StepOutput {
        StepOutput {
            is_result: true,
            ..self
        }
    }

    /// The step does not finish yet: the run waits (pauses) for `wait`.
    pub fn waiting(value: impl Into<Arc<Value>>, wait: Wait) -> StepOutput {
        StepOutput {
            wait: Some(wait),
            ..StepOutput::new(value, String::new())
        }
    }
}

/// What a step waits for before the run can go on.
#[derive(Debug)]
pub enum Wait {
    /// A person's decision at this node (an `approval`), shown `message`, with a form.
    Decision {
        message: String,
        fields: Vec<crate::decision::FormField>,
        /// Who may decide, and how many must approve.
        quorum: crate::decision::Quorum,
    },
    /// A child run (a `subflow`) paused at a decision deeper down.
    Child(ChildPause),
    /// An agent's tool call waits for a person's approval (`approveTools`): the step runs
    /// again with the decision in [`Step::resume`] (its LLM calls and tool results given back
    /// from the run's record), the pause's `state` being the agent's own.
    Tool(ChildPause),
}

/// Why a step failed: the class travels in the error payload of `error` edges (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum StepErrorKind {
    /// A template failed to render (an unknown name, a filter error, a limit).
    Template,
    /// The model's provider refused or failed, or no model or key is configured.
    Provider,
    /// The model's answer does not match `outputSchema` after the repair try.
    OutputSchema,
    /// The attempt took longer than `timeoutSeconds`.
    Timeout,
    /// The run was cancelled while the step ran.
    Cancelled,
    /// Python code failed or was refused.
    Code,
    /// An HTTP request failed or answered an error status.
    Http,
    /// A child flow could not run or failed.
    Subflow,
    /// A `forEach` could not find its list, or an item failed with `failFast`.
    ForEach,
    /// An MCP server an agent's `tools.mcp` names could not be reached or has no such tool.
    Tool,
    // The run had spent its budget (`settings.budget`) before an LLM call.
    Budget,
    /// Weft itself went wrong (a bug); the message says where.
    Internal,
}

impl StepErrorKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepError {
    pub kind: StepErrorKind,
    pub message: String,
}

impl StepError {
    pub fn new(kind: StepErrorKind, message: impl Into<String>) -> StepError {
        StepError {
            kind,
            message: message.into(),
        }
    }

    pub fn cancelled() -> StepError {
        StepError::new(StepErrorKind::Cancelled, "the run was cancelled")
    }

    pub fn is_cancelled(&self) -> bool {
        self.kind == StepErrorKind::Cancelled
    }

    /// A template of `field` failed: a timeout or a cancellation as such, anything else as a
    /// template error.
    pub fn from_template(field: &str, error: TemplateError) -> StepError {
        let kind = match error {
            TemplateError::TimedOut => StepErrorKind::Timeout,
            TemplateError::Cancelled => StepErrorKind::Cancelled,
            _ => StepErrorKind::Template,
        };
        StepError::new(kind, format!("{field}: {error}"))
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A child run that paused: opaque to node kinds, which hand it on (in their output) and get it
/// back (in [`Step::resume`]) when the run goes on. Kept in a paused run's stored state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildPause {
    /// Path of the node waited on, from the child flow down (`review`, `inner/review`).
    pub path: String,
    pub message: String,
    /// The innermost approval's form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<crate::decision::FormField>,
    /// Who may decide the innermost approval.
    #[serde(default, skip_serializing_if = "no_quorum")]
    pub quorum: Box<crate::decision::Quorum>,
    /// When the innermost approval began to wait (RFC 3339), which its follow-ups count from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// A breakpoint (an agent stopped before a tool call), continued rather than decided.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub breakpoint: bool,
    /// When the innermost approval times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// What the innermost approval was given (the draft a person decides on).
    #[serde(default)]
    pub input: Value,
    /// The child run's saved state, as the scheduler keeps it (`child` in runs paused by
    /// Weft before this field had its name).
    #[serde(alias = "child")]
    pub state: Value,
}

/// Whether a pause's quorum is the default one (not written into a paused run's state).
// Boxed in `ChildPause` (which every step's outcome may carry), so serde hands the box over.
#[allow(clippy::borrowed_box)]
fn no_quorum(quorum: &Box<crate::decision::Quorum>) -> bool {
    quorum.is_default()
}

/// A paused child run and the answer that lets it go on.
#[derive(Debug, Clone)]
pub struct ChildResume {
    pub pause: ChildPause,
    /// The scheduler's answer for the innermost waiting node.
    pub answer: Value,
}

/// A flow file a `subflow` or `forEach` step runs, read once per step.
#[derive(Debug, Clone)]
pub struct ChildFlow {
    pub flow: Arc<Flow>,
    pub path: PathBuf,
    /// The flow's version and the name its file's uses are recorded under, worked out once
    /// when the file is read (a forEach runs it for every item).
    pub version: Arc<(FlowVersion, String)>,
}

impl ChildFlow {
    /// Reads the flow file at `path` (already resolved against the parent flow's folder).
    pub fn load(path: &std::path::Path) -> Result<ChildFlow, StepError> {
        let flow = Flow::load(path)
            .map_err(|error| StepError::new(StepErrorKind::Subflow, error.to_string()))?;
        Ok(ChildFlow {
            version: Arc::new((flow.version(), weft_flow::version_path(path))),
            flow: Arc::new(flow),
            path: path.to_path_buf(),
        })
    }
}

/// How deep child flows (`subflow`, `forEach`) may nest (docs/kinds.md).
pub const MAX_CHILD_DEPTH: usize = 10;

/// How a child run ended.
#[derive(Debug)]
pub enum ChildEnd {
    Completed(Arc<Value>),
    Failed(String),
    Cancelled,
    Paused(ChildPause),
}

/// One child run to start (or continue).
pub struct ChildRun<'a> {
    pub flow: &'a ChildFlow,
    pub input: Arc<Value>,
    /// For a `forEach` item: its index (events carry it).
    pub item: Option<u64>,
    /// The visit of the step that runs it (its nested LLM calls are recorded per visit).
    pub visit: u64,
    pub resume: Option<ChildResume>,
    /// Stops this child run (a `forEach` cancels the rest on a fail-fast failure).
    pub cancel: CancellationToken,
}

/// One call of an MCP tool by an agent.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallRequest<'a> {
    pub node_id: &'a str,
    pub visit: u64,
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: &'a weft_mcp::JsonObject,
}

/// Everything a step may touch outside itself. Node ids are the current flow's.
pub trait StepEnv: Send + Sync {
    /// Logs an event about `node_id`, with the tokens an LLM call used when it is an
    /// `llm_response`.
    fn emit(&self, node_id: &str, kind: EventType, content: String, usage: Option<Usage>);

    /// Renders the templated field `field` of `node_id` with `input` as the previous output.
    fn render(&self, node_id: &str, field: &str, input: &Value) -> Result<String, StepError>;

    /// Cancelled when the run is (or, in a child run, when the parent stops it).
    fn cancel(&self) -> &CancellationToken;

    /// The run's input (`initial` in templates; the `start` node's output).
    fn initial(&self) -> &Value;

    fn llm(&self) -> &LlmClients;

    /// Sends `request` for `node_id` (in its visit `visit`) to the provider `routes[0]` names,
    /// passing streamed text to `on_delta`; when that call fails for good
    /// ([`ProviderError::fails_for_good`]), to the next route's model, and so on. Returns the
    /// answer and the index of the route that gave it. Answers are kept with the run, and so
    /// is a failure a fallback followed, so that a run continued after an interruption, a
    /// replay or an offline test takes the same path without a call.
    fn complete<'a>(
        &'a self,
        node_id: &'a str,
        visit: u64,
        routes: &'a [ModelRoute],
        request: &'a ChatRequest,
        on_delta: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<(ChatResponse, usize), ProviderError>>;

    /// The budget stop the run has reached (`settings.budget` spent and not lifted by a
    /// person), if any.
    fn over_budget(&self) -> Option<crate::budget::BudgetStop> {
        None
    }

    /// A person approved going on past the budget: the run has no limit from now on.
    fn lift_budget(&self) {}

    /// Emits a model's answer (`llm_response`) with its tokens and the model that answered
    /// (`provider/model`).
    fn emit_answer(
        &self,
        node_id: &str,
        content: String,
        usage: Option<Usage>,
        model: Option<String>,
    ) {
        let _ = model;
        self.emit(node_id, EventType::LlmResponse, content, usage);
    }

    /// The tools MCP server `server` (of the flow's `settings.mcpServers`) lists, for
    /// `node_id` in its visit `visit`, starting or connecting to it when needed. Kept with the
    /// run like a tool's result, so that a replay or a flow test offline needs no server.
    fn mcp_tools<'a>(
        &'a self,
        node_id: &'a str,
        visit: u64,
        server: &'a str,
    ) -> BoxFuture<'a, Result<Vec<weft_mcp::ToolInfo>, weft_mcp::McpError>>;

    /// Calls a tool for `node_id`: a run continued after an interruption (or a replay, or a
    /// flow test offline) gets the result it recorded for the same call without calling again;
    /// the result is kept with the run.
    fn call_tool<'a>(
        &'a self,
        call: ToolCallRequest<'a>,
    ) -> BoxFuture<'a, Result<weft_mcp::ToolOutcome, weft_mcp::McpError>>;

    /// The HTTP client of `http` nodes.
    fn http(&self) -> &reqwest::Client;

    /// The Python sandbox of `code` nodes.
    fn sandbox(&self) -> &weft_sandbox::Sandbox;

    /// The conversation `node_id` had on its previous visit (`keepHistory`).
    fn history(&self, node_id: &str) -> Vec<ChatMessage>;
    fn set_history(&self, node_id: &str, messages: Vec<ChatMessage>);

    /// Adds tokens an LLM call of `node_id` used to its and the run's totals.
    fn record_usage(&self, node_id: &str, usage: Usage);
    /// Keeps metadata about `node_id`'s latest output (the pages a web search used).
    fn record_metadata(&self, node_id: &str, metadata: &Value);

    /// `path` as written in a node, resolved against the folder of this flow's file.
    fn resolve_path(&self, path: &str) -> PathBuf;

    /// `node_id`'s label (its id when it has none); `None` for a node not in the flow.
    fn label(&self, node_id: &str) -> Option<&str>;
    /// `node_id`'s parsed config, for a kind to read another node of its own kind (an agent's
    /// subagents): downcast it to the config type.
    fn config(&self, node_id: &str) -> Option<&dyn Any>;
    /// The agents connected to `node_id` by subagent edges, in edge order.
    fn subagents(&self, node_id: &str) -> &[String];

    /// Runs a child flow nested in the current step of `node_id` (its events carry a scope).
    fn run_child<'a>(
        &'a self,
        node_id: &'a str,
        child: ChildRun<'a>,
    ) -> BoxFuture<'a, Result<ChildEnd, StepError>>;
}

#[cfg(test)]
pub(crate) mod fake;
