//! Node kinds (SPEC §2). Each kind is one file holding its config (whose doc comments are the
//! help a person sees), its handles and how it runs. [`NodeKind`] is the one list of kinds:
//! every `match` on it is exhaustive, so a new kind cannot be half-registered.

mod agent;
mod approval;
mod code;
mod foreach;
mod gate;
mod http;
#[path = "if.rs"]
mod if_node;
mod join;
mod note;
mod output;
mod start;
mod subflow;
mod template;

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use agent::{AgentConfig, AgentTools, ReasoningEffort};
pub use approval::{ApprovalConfig, Decision, DecisionChoice};
pub use code::CodeConfig;
pub use foreach::ForEachConfig;
pub use gate::GateConfig;
pub use http::HttpConfig;
pub use if_node::{Condition, IfConfig, Operator};
pub use join::JoinConfig;
pub use note::NoteConfig;
pub use output::OutputConfig;
pub use start::StartConfig;
pub use subflow::{OnError, SubflowConfig};
pub use template::TemplateConfig;

pub(crate) use agent::{complete_structured, route_for};
pub(crate) use subflow::child_flow_paths;

use std::collections::HashMap;

use crate::run::{Step, StepError, StepOutput};

/// Every node type Weft knows. The serialized form is the `type` id used in flow files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    Start,
    Agent,
    If,
    Approval,
    Template,
    Output,
    Note,
    Code,
    Http,
    Join,
    ForEach,
    Subflow,
    Gate,
}

impl NodeKind {
    pub const ALL: [NodeKind; 13] = [
        NodeKind::Start,
        NodeKind::Agent,
        NodeKind::If,
        NodeKind::Approval,
        NodeKind::Template,
        NodeKind::Output,
        NodeKind::Note,
        NodeKind::Code,
        NodeKind::Http,
        NodeKind::Join,
        NodeKind::ForEach,
        NodeKind::Subflow,
        NodeKind::Gate,
    ];

    /// The `type` id in flow files.
    pub fn id(self) -> &'static str {
        match self {
            NodeKind::Start => "start",
            NodeKind::Agent => "agent",
            NodeKind::If => "if",
            NodeKind::Approval => "approval",
            NodeKind::Template => "template",
            NodeKind::Output => "output",
            NodeKind::Note => "note",
            NodeKind::Code => "code",
            NodeKind::Http => "http",
            NodeKind::Join => "join",
            NodeKind::ForEach => "forEach",
            NodeKind::Subflow => "subflow",
            NodeKind::Gate => "gate",
        }
    }

    pub fn from_id(id: &str) -> Option<NodeKind> {
        NodeKind::ALL.into_iter().find(|kind| kind.id() == id)
    }

    /// Whether a node of this kind has an `input` handle (everything but `start` and `note`).
    pub fn has_input(self) -> bool {
        !matches!(self, NodeKind::Start | NodeKind::Note)
    }
}

/// A node's `data`, parsed for its kind.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeConfig {
    Start(StartConfig),
    Agent(AgentConfig),
    If(IfConfig),
    Approval(ApprovalConfig),
    Template(TemplateConfig),
    Output(OutputConfig),
    Note(NoteConfig),
    Code(CodeConfig),
    Http(HttpConfig),
    Join(JoinConfig),
    ForEach(ForEachConfig),
    Subflow(SubflowConfig),
    Gate(GateConfig),
}

/// A field of a node's `data` that has the wrong type or is out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Deserializes `data` into `T`, naming the offending field on error.
fn parse_fields<T: DeserializeOwned>(data: &Map<String, Value>) -> Result<T, FieldError> {
    let value = Value::Object(data.clone());
    serde_path_to_error::deserialize(value).map_err(|error| {
        let field = error.path().to_string();
        let message = error.into_inner().to_string();
        FieldError::new(if field == "." { "data".into() } else { field }, message)
    })
}

impl NodeConfig {
    /// Parses `data` for `kind`: field types and ranges.
    pub fn parse(kind: NodeKind, data: &Map<String, Value>) -> Result<NodeConfig, FieldError> {
        let config = match kind {
            NodeKind::Start => NodeConfig::Start(parse_fields(data)?),
            NodeKind::Agent => NodeConfig::Agent(parse_fields(data)?),
            NodeKind::If => NodeConfig::If(parse_fields(data)?),
            NodeKind::Approval => NodeConfig::Approval(parse_fields(data)?),
            NodeKind::Template => NodeConfig::Template(parse_fields(data)?),
            NodeKind::Output => NodeConfig::Output(parse_fields(data)?),
            NodeKind::Note => NodeConfig::Note(parse_fields(data)?),
            NodeKind::Code => NodeConfig::Code(parse_fields(data)?),
            NodeKind::Http => NodeConfig::Http(parse_fields(data)?),
            NodeKind::Join => NodeConfig::Join(parse_fields(data)?),
            NodeKind::ForEach => NodeConfig::ForEach(parse_fields(data)?),
            NodeKind::Subflow => NodeConfig::Subflow(parse_fields(data)?),
            NodeKind::Gate => NodeConfig::Gate(parse_fields(data)?),
        };
        config.check_ranges()?;
        Ok(config)
    }

    pub fn kind(&self) -> NodeKind {
        match self {
            NodeConfig::Start(_) => NodeKind::Start,
            NodeConfig::Agent(_) => NodeKind::Agent,
            NodeConfig::If(_) => NodeKind::If,
            NodeConfig::Approval(_) => NodeKind::Approval,
            NodeConfig::Template(_) => NodeKind::Template,
            NodeConfig::Output(_) => NodeKind::Output,
            NodeConfig::Note(_) => NodeKind::Note,
            NodeConfig::Code(_) => NodeKind::Code,
            NodeConfig::Http(_) => NodeKind::Http,
            NodeConfig::Join(_) => NodeKind::Join,
            NodeConfig::ForEach(_) => NodeKind::ForEach,
            NodeConfig::Subflow(_) => NodeKind::Subflow,
            NodeConfig::Gate(_) => NodeKind::Gate,
        }
    }

    fn check_ranges(&self) -> Result<(), FieldError> {
        match self {
            NodeConfig::Agent(config) => config.check_ranges(),
            NodeConfig::If(config) => config.check_ranges(),
            NodeConfig::Code(config) => config.check_ranges(),
            NodeConfig::Http(config) => config.check_ranges(),
            NodeConfig::ForEach(config) => config.check_ranges(),
            NodeConfig::Subflow(config) => config.check_ranges(),
            NodeConfig::Gate(config) => config.check_ranges(),
            NodeConfig::Start(_)
            | NodeConfig::Approval(_)
            | NodeConfig::Template(_)
            | NodeConfig::Output(_)
            | NodeConfig::Note(_)
            | NodeConfig::Join(_) => Ok(()),
        }
    }

    /// The handles execution edges may leave this node by (the subagent handle included for agents).
    pub fn handles(&self) -> Vec<String> {
        let fixed = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
        match self {
            NodeConfig::Start(_) => fixed(&["output"]),
            NodeConfig::Agent(_) => fixed(&["output", "subagent", "error"]),
            NodeConfig::If(config) => config.handles(),
            NodeConfig::Approval(_) => fixed(&["approve", "reject"]),
            NodeConfig::Template(_)
            | NodeConfig::Code(_)
            | NodeConfig::Http(_)
            | NodeConfig::ForEach(_)
            | NodeConfig::Subflow(_) => fixed(&["output", "error"]),
            NodeConfig::Join(_) => fixed(&["output"]),
            NodeConfig::Gate(_) => fixed(&["pass", "fail", "error"]),
            NodeConfig::Output(_) | NodeConfig::Note(_) => Vec::new(),
        }
    }

    /// The templated fields of this node: (field name, template source).
    pub fn templates(&self) -> Vec<(String, &str)> {
        fn field<'a>(name: &str, source: &'a str) -> (String, &'a str) {
            (name.to_string(), source)
        }
        match self {
            NodeConfig::Agent(config) => vec![
                field("systemPrompt", &config.system_prompt),
                field("userPrompt", &config.user_prompt),
            ],
            NodeConfig::Approval(config) => vec![field("message", &config.message)],
            NodeConfig::Template(config) => vec![field("template", &config.template)],
            NodeConfig::Http(config) => config.templates(),
            NodeConfig::ForEach(config) => config.templates(),
            NodeConfig::Gate(config) => vec![field("criteria", &config.criteria)],
            NodeConfig::Start(_)
            | NodeConfig::If(_)
            | NodeConfig::Output(_)
            | NodeConfig::Note(_)
            | NodeConfig::Code(_)
            | NodeConfig::Join(_)
            | NodeConfig::Subflow(_) => Vec::new(),
        }
    }

    /// Runs one step of a kind that finishes at once without I/O (`start`, `if`, `template`,
    /// `output`); `None` for kinds that wait on something. The scheduler runs these inline,
    /// saving a task spawn and a cross-thread wake-up per step.
    /// Whether [`NodeConfig::run_instant`] runs this kind (exhaustive, so a new kind must choose).
    pub(crate) fn is_instant(&self) -> bool {
        match self {
            NodeConfig::Start(_)
            | NodeConfig::If(_)
            | NodeConfig::Template(_)
            | NodeConfig::Output(_)
            | NodeConfig::Join(_) => true,
            NodeConfig::Agent(_)
            | NodeConfig::Approval(_)
            | NodeConfig::Note(_)
            | NodeConfig::Code(_)
            | NodeConfig::Http(_)
            | NodeConfig::ForEach(_)
            | NodeConfig::Subflow(_)
            | NodeConfig::Gate(_) => false,
        }
    }

    pub(crate) fn run_instant(&self, step: &Step<'_>) -> Option<Result<StepOutput, StepError>> {
        match self {
            NodeConfig::Start(config) => Some(start::run(config, step)),
            NodeConfig::If(config) => Some(if_node::run(config, step)),
            NodeConfig::Template(config) => Some(template::run(config, step)),
            NodeConfig::Output(_) => Some(output::run(step)),
            NodeConfig::Join(_) => Some(join::run(step)),
            NodeConfig::Agent(_)
            | NodeConfig::Approval(_)
            | NodeConfig::Note(_)
            | NodeConfig::Code(_)
            | NodeConfig::Http(_)
            | NodeConfig::ForEach(_)
            | NodeConfig::Subflow(_)
            | NodeConfig::Gate(_) => None,
        }
    }

    /// Runs one step of this node. `approval` and `note` are handled by the scheduler, which
    /// owns pausing; they never reach here.
    /// `decisions` are approvals answered in advance for a nested run (subflow).
    pub(crate) async fn run(
        &self,
        step: &Step<'_>,
        decisions: &HashMap<String, Decision>,
    ) -> Result<StepOutput, StepError> {
        match self {
            NodeConfig::Agent(config) => return agent::run(config, step).await,
            NodeConfig::Code(config) => return code::run(config, step).await,
            NodeConfig::Http(config) => return http::run(config, step).await,
            NodeConfig::ForEach(config) => return foreach::run(config, step).await,
            NodeConfig::Subflow(config) => return subflow::run(config, step, decisions).await,
            NodeConfig::Gate(config) => return gate::run(config, step).await,
            _ => {}
        }
        self.run_instant(step).unwrap_or_else(|| {
            Err(StepError::new(
                "internal",
                format!("`{}` nodes are run by the scheduler", self.kind().id()),
            ))
        })
    }
}

/// Run settings every node may carry in its `data` (SPEC §4).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommonSettings {
    /// Seconds one attempt of this node may take (default 300).
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Retry a failed attempt: `{ "maxAttempts": 3, "backoffMs": 1000 }`.
    #[serde(default)]
    pub retry: Option<RetrySettings>,
}

/// How often, and how far apart, a failing node is tried.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    /// Attempts in all, including the first (1–20).
    #[serde(default = "one")]
    pub max_attempts: u32,
    /// Wait before the second attempt; doubles for each further one.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
}

fn one() -> u32 {
    1
}

fn default_backoff_ms() -> u64 {
    1000
}

/// The timeout of a node when it does not set one.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 300.0;
/// The timeout of a `code` node when it does not set one.
pub const CODE_TIMEOUT_SECONDS: f64 = 30.0;

impl CommonSettings {
    pub fn parse(data: &Map<String, Value>) -> Result<CommonSettings, FieldError> {
        let settings: CommonSettings = parse_fields(data)?;
        if let Some(seconds) = settings.timeout_seconds
            && !(seconds > 0.0 && seconds <= 86_400.0)
        {
            return Err(FieldError::new(
                "timeoutSeconds",
                "must be more than 0 and at most 86400",
            ));
        }
        if let Some(retry) = &settings.retry
            && !(1..=20).contains(&retry.max_attempts)
        {
            return Err(FieldError::new(
                "retry.maxAttempts",
                "must be between 1 and 20",
            ));
        }
        Ok(settings)
    }

    /// The timeout of one attempt of a node of `kind` (SPEC §4: 300 s, `code` 30 s).
    pub fn timeout_for(&self, kind: NodeKind) -> Duration {
        let default = match kind {
            NodeKind::Code => CODE_TIMEOUT_SECONDS,
            _ => DEFAULT_TIMEOUT_SECONDS,
        };
        Duration::from_secs_f64(self.timeout_seconds.unwrap_or(default))
    }

    pub fn max_attempts(&self) -> u32 {
        self.retry.as_ref().map_or(1, |retry| retry.max_attempts)
    }

    /// Wait before attempt `attempt` (2, 3, ...).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self.retry.as_ref().map_or(0, |retry| retry.backoff_ms);
        Duration::from_millis(base.saturating_mul(1 << attempt.saturating_sub(2).min(16)))
    }
}
