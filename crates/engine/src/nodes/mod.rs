//! Node kinds (SPEC §2). Each kind is one file holding its config (whose doc comments are the
//! help a person sees), its handles and how it runs. [`NodeKind`] is the one list of kinds:
//! every `match` on it is exhaustive, so a new kind cannot be half-registered.

mod agent;
mod approval;
#[path = "if.rs"]
mod if_node;
mod note;
mod output;
mod start;
mod template;

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use agent::{AgentConfig, AgentTools, ReasoningEffort};
pub use approval::{ApprovalConfig, Decision, DecisionChoice};
pub use if_node::{Condition, IfConfig, Operator};
pub use note::NoteConfig;
pub use output::OutputConfig;
pub use start::StartConfig;
pub use template::TemplateConfig;

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
}

impl NodeKind {
    pub const ALL: [NodeKind; 7] = [
        NodeKind::Start,
        NodeKind::Agent,
        NodeKind::If,
        NodeKind::Approval,
        NodeKind::Template,
        NodeKind::Output,
        NodeKind::Note,
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
        }
    }

    fn check_ranges(&self) -> Result<(), FieldError> {
        match self {
            NodeConfig::Agent(config) => config.check_ranges(),
            NodeConfig::If(config) => config.check_ranges(),
            NodeConfig::Start(_)
            | NodeConfig::Approval(_)
            | NodeConfig::Template(_)
            | NodeConfig::Output(_)
            | NodeConfig::Note(_) => Ok(()),
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
            NodeConfig::Template(_) => fixed(&["output", "error"]),
            NodeConfig::Output(_) | NodeConfig::Note(_) => Vec::new(),
        }
    }

    /// The templated fields of this node: (field name, template source).
    pub fn templates(&self) -> Vec<(&'static str, &str)> {
        match self {
            NodeConfig::Agent(config) => vec![
                ("systemPrompt", config.system_prompt.as_str()),
                ("userPrompt", config.user_prompt.as_str()),
            ],
            NodeConfig::Approval(config) => vec![("message", config.message.as_str())],
            NodeConfig::Template(config) => vec![("template", config.template.as_str())],
            NodeConfig::Start(_)
            | NodeConfig::If(_)
            | NodeConfig::Output(_)
            | NodeConfig::Note(_) => Vec::new(),
        }
    }

    /// Runs one step of a kind that finishes at once without I/O (`start`, `if`, `template`,
    /// `output`); `None` for kinds that wait on something. The scheduler runs these inline,
    /// saving a task spawn and a cross-thread wake-up per step.
    pub(crate) fn is_instant(&self) -> bool {
        matches!(
            self,
            NodeConfig::Start(_)
                | NodeConfig::If(_)
                | NodeConfig::Template(_)
                | NodeConfig::Output(_)
        )
    }

    pub(crate) fn run_instant(&self, step: &Step<'_>) -> Option<Result<StepOutput, StepError>> {
        match self {
            NodeConfig::Start(config) => Some(start::run(config, step)),
            NodeConfig::If(config) => Some(if_node::run(config, step)),
            NodeConfig::Template(config) => Some(template::run(config, step)),
            NodeConfig::Output(_) => Some(output::run(step)),
            NodeConfig::Agent(_) | NodeConfig::Approval(_) | NodeConfig::Note(_) => None,
        }
    }

    /// Runs one step of this node. `approval` and `note` are handled by the scheduler, which
    /// owns pausing; they never reach here.
    pub(crate) async fn run(&self, step: &Step<'_>) -> Result<StepOutput, StepError> {
        if let NodeConfig::Agent(config) = self {
            return agent::run(config, step).await;
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

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS))
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
