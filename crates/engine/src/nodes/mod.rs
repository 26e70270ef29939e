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
pub(crate) use subflow::child_flow_path;

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

// The help of the keys every node may carry, written once: each text is the doc comment of its
// field below and the `help` in [`common_fields`]. Each kind's file has a `help!` macro of the
// same form for its config. Why a macro: `#[doc = ...]` accepts only a literal or a macro that
// expands to one, so a `const` cannot be a doc comment; and a macro keyed by the name of the
// key in files (`help!(systemPrompt)`) keeps each text next to the item it documents, where
// `include_str!` of one file per text would scatter them.
macro_rules! common_help {
    (label) => {
        "The name shown on the canvas and in run logs; the node's id when empty."
    };
    (description) => {
        "A note about what this node is for."
    };
    (timeoutSeconds) => {
        "Seconds one attempt may take, more than 0 and at most 86400 (default 300, `code` 30)."
    };
    (retry) => {
        "Retry a failed attempt: `{ \"maxAttempts\": 3, \"backoffMs\": 1000 }`."
    };
    (maxAttempts) => {
        "Attempts in all, including the first (1–20)."
    };
    (backoffMs) => {
        "Milliseconds before the second attempt; doubled for each further one."
    };
}

/// Run settings every node may carry in its `data` (SPEC §4).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommonSettings {
    #[doc = common_help!(timeoutSeconds)]
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    #[doc = common_help!(retry)]
    #[serde(default)]
    pub retry: Option<RetrySettings>,
}

/// How often, and how far apart, a failing node is tried.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    #[doc = common_help!(maxAttempts)]
    #[serde(default = "one")]
    pub max_attempts: u32,
    #[doc = common_help!(backoffMs)]
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

/// What a canvas needs to draw a node kind and edit its `data`: one generic node component and
/// a schema-driven inspector draw every kind from this (EXAMPLES: "a node kind is one file on
/// each side"). Each kind's file builds its own with `describe()`; the help texts are the same
/// texts as the doc comments of its config.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindDescription {
    /// The `type` id in flow files (`agent`, `forEach`).
    pub id: &'static str,
    /// The kind's name as a person reads it (`Agent`, `For each`).
    pub title: &'static str,
    /// What the kind does: its config's doc comment.
    pub help: String,
    /// Whether the node has an `input` handle.
    pub inputs: bool,
    /// The handles edges may leave by, in the order they are drawn.
    pub handles: Vec<HandleDescription>,
    /// The kind's own keys of `data`; [`common_fields`] come on top of these, except where a
    /// kind describes one of them itself (agent's `description`), which then replaces it.
    pub fields: Vec<FieldDescription>,
}

impl KindDescription {
    /// A description of `kind` with no handles and no fields yet.
    pub(crate) fn new(kind: NodeKind, title: &'static str, help: &str) -> KindDescription {
        KindDescription {
            id: kind.id(),
            title,
            help: help.to_string(),
            inputs: kind.has_input(),
            handles: Vec::new(),
            fields: Vec::new(),
        }
    }
}

/// A handle edges leave a node by.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleDescription {
    /// The `sourceHandle` of edges leaving by it (`output`, `error`, `pass`). For a dynamic
    /// handle, a pattern where `{i}` stands for a row's index (`condition-{i}`).
    pub id: String,
    pub label: String,
    pub kind: HandleKind,
    /// For a handle repeated once per row of a list field rather than a fixed one: that
    /// field's name (`conditions` for `if`); `id` and `label` then hold `{i}`.
    pub rows: Option<&'static str>,
}

impl HandleDescription {
    /// A handle execution continues by.
    pub(crate) fn execution(id: &str, label: &str) -> HandleDescription {
        HandleDescription {
            id: id.to_string(),
            label: label.to_string(),
            kind: HandleKind::Execution,
            rows: None,
        }
    }

    /// The `error` handle: taken when the node fails (after its retries).
    pub(crate) fn error() -> HandleDescription {
        HandleDescription {
            kind: HandleKind::Error,
            ..HandleDescription::execution("error", "Error")
        }
    }
}

/// What an edge leaving by a handle means.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HandleKind {
    /// The run continues along it.
    Execution,
    /// It makes the target agent a tool of this one; nothing runs along it.
    Subagent,
    /// The run continues along it when the node fails.
    Error,
}

/// One key of a node's `data`, as the inspector edits it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldDescription {
    /// The key in `data`, spelled as in files (`systemPrompt`). A dotted name is a key of a
    /// nested object (`tools.web_search` is `data.tools.web_search`), the same path a
    /// validation problem names.
    pub name: &'static str,
    pub label: String,
    /// One sentence: its field's doc comment.
    pub help: String,
    pub field_type: FieldType,
    /// The value the engine uses when the key is absent (`null`: unset).
    pub default: Value,
    /// A node without a non-empty value here is invalid.
    pub required: bool,
}

impl FieldDescription {
    /// An optional field whose default is `null`.
    pub(crate) fn new(
        name: &'static str,
        label: &str,
        help: &str,
        field_type: FieldType,
    ) -> FieldDescription {
        FieldDescription {
            name,
            label: label.to_string(),
            help: help.to_string(),
            field_type,
            default: Value::Null,
            required: false,
        }
    }

    pub(crate) fn default(self, default: impl Into<Value>) -> FieldDescription {
        FieldDescription {
            default: default.into(),
            ..self
        }
    }

    pub(crate) fn required(self) -> FieldDescription {
        FieldDescription {
            required: true,
            ..self
        }
    }
}

/// How a field's value is edited, and what it may hold.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FieldType {
    /// Plain text.
    Text,
    /// A MiniJinja template (SPEC §3): the canvas offers the names a template can use.
    Template,
    /// A number within `min` and `max` when they are given (the help says when a bound is
    /// itself excluded).
    Number {
        #[serde(skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
    /// A whole number within `min` and `max` when they are given.
    Integer {
        #[serde(skip_serializing_if = "Option::is_none")]
        min: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max: Option<i64>,
    },
    Boolean,
    /// One of `options`, spelled as in files.
    Choice {
        options: Vec<&'static str>,
    },
    /// Python source (a `code` node's function body).
    Code,
    /// Any JSON value (`outputSchema`, `initialInput`).
    Json,
    /// `if`'s rows: `[{ "operator", "value", "field"? }]`, `operator` one of `operators`.
    Conditions {
        operators: Vec<&'static str>,
    },
    /// A list of text.
    StringList,
    /// Text keyed by text (HTTP headers).
    StringMap,
    /// A path to another flow file, relative to this flow's file.
    FlowPath,
}

impl NodeKind {
    /// What a canvas needs to draw this kind and edit its `data`.
    pub fn describe(self) -> KindDescription {
        match self {
            NodeKind::Start => start::describe(),
            NodeKind::Agent => agent::describe(),
            NodeKind::If => if_node::describe(),
            NodeKind::Approval => approval::describe(),
            NodeKind::Template => template::describe(),
            NodeKind::Output => output::describe(),
            NodeKind::Note => note::describe(),
            NodeKind::Code => code::describe(),
            NodeKind::Http => http::describe(),
            NodeKind::Join => join::describe(),
            NodeKind::ForEach => foreach::describe(),
            NodeKind::Subflow => subflow::describe(),
            NodeKind::Gate => gate::describe(),
        }
    }
}

/// Every kind's description, in [`NodeKind::ALL`] order.
pub fn all_kinds() -> Vec<KindDescription> {
    NodeKind::ALL.into_iter().map(NodeKind::describe).collect()
}

/// The keys every node's `data` may hold whatever its kind (SPEC §1, §4), described once.
pub fn common_fields() -> Vec<FieldDescription> {
    vec![
        FieldDescription::new("label", "Label", common_help!(label), FieldType::Text).default(""),
        FieldDescription::new(
            "description",
            "Description",
            common_help!(description),
            FieldType::Text,
        )
        .default(""),
        FieldDescription::new(
            "timeoutSeconds",
            "Timeout (seconds)",
            common_help!(timeoutSeconds),
            FieldType::Number {
                min: Some(0.0),
                max: Some(86_400.0),
            },
        ),
        FieldDescription::new(
            "retry.maxAttempts",
            "Attempts",
            common_help!(maxAttempts),
            FieldType::Integer {
                min: Some(1),
                max: Some(20),
            },
        )
        .default(one()),
        FieldDescription::new(
            "retry.backoffMs",
            "Backoff (ms)",
            common_help!(backoffMs),
            FieldType::Integer {
                min: Some(0),
                max: None,
            },
        )
        .default(default_backoff_ms()),
    ]
}

/// The names a type reads, asked of serde without any data: a struct's field names or an
/// enum's variant names, spelled as in files. Choices are listed from their enum this way, so
/// no option is written twice.
pub(crate) fn serde_names<T: DeserializeOwned>() -> Vec<&'static str> {
    let mut names = Vec::new();
    // The probe always refuses after noting the names; the refusal carries nothing.
    let _refused = T::deserialize(NameProbe(&mut names));
    names
}

/// A deserializer that only notes the names serde asks for.
struct NameProbe<'a>(&'a mut Vec<&'static str>);

impl<'de> serde::Deserializer<'de> for NameProbe<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("names only"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.extend_from_slice(fields);
        self.deserialize_any(visitor)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.extend_from_slice(variants);
        self.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The keys a kind's config reads at the top level of `data`, asked of serde.
    fn config_keys(kind: NodeKind) -> Vec<&'static str> {
        match kind {
            NodeKind::Start => serde_names::<StartConfig>(),
            NodeKind::Agent => serde_names::<AgentConfig>(),
            NodeKind::If => serde_names::<IfConfig>(),
            NodeKind::Approval => serde_names::<ApprovalConfig>(),
            NodeKind::Template => serde_names::<TemplateConfig>(),
            NodeKind::Output => serde_names::<OutputConfig>(),
            NodeKind::Note => serde_names::<NoteConfig>(),
            NodeKind::Code => serde_names::<CodeConfig>(),
            NodeKind::Http => serde_names::<HttpConfig>(),
            NodeKind::Join => serde_names::<JoinConfig>(),
            NodeKind::ForEach => serde_names::<ForEachConfig>(),
            NodeKind::Subflow => serde_names::<SubflowConfig>(),
            NodeKind::Gate => serde_names::<GateConfig>(),
        }
    }

    /// A value a required field's empty default is replaced with, so the config parses.
    fn example(field: &FieldDescription) -> Value {
        match field.name {
            "url" => json!("https://example.com/{{ PREVIOUS_OUTPUT }}"),
            "flow" => json!("child.json"),
            "criteria" => json!("The text is polite."),
            other => panic!("required field `{other}`: give it an example here"),
        }
    }

    /// Sets `data.<name>`, a dotted name being a path of nested objects.
    fn set(data: &mut Map<String, Value>, name: &str, value: Value) {
        match name.split_once('.') {
            Some((head, rest)) => {
                let inner = data
                    .entry(head)
                    .or_insert_with(|| Value::Object(Map::new()));
                if !inner.is_object() {
                    *inner = Value::Object(Map::new());
                }
                if let Value::Object(inner) = inner {
                    set(inner, rest, value);
                }
            }
            None => {
                data.insert(name.to_string(), value);
            }
        }
    }

    /// `data` holding every described field at its default (required ones at their example).
    fn defaults(fields: &[FieldDescription]) -> Map<String, Value> {
        let mut data = Map::new();
        for field in fields {
            let value = if field.required {
                example(field)
            } else {
                field.default.clone()
            };
            set(&mut data, field.name, value);
        }
        data
    }

    /// A value of the wrong type for `field`; `None` for a JSON field, which takes anything.
    fn wrong_value(field: &FieldDescription) -> Option<Value> {
        match field.field_type {
            FieldType::Text
            | FieldType::Template
            | FieldType::Code
            | FieldType::FlowPath
            | FieldType::Conditions { .. }
            | FieldType::StringList
            | FieldType::StringMap => Some(json!(42)),
            FieldType::Number { .. } | FieldType::Integer { .. } | FieldType::Boolean => {
                Some(json!("not a number or boolean"))
            }
            FieldType::Choice { .. } => Some(json!("not-an-option")),
            FieldType::Json => None,
        }
    }

    /// A valid value for `field` other than its default (or example).
    fn another_value(field: &FieldDescription) -> Value {
        let current = if field.required {
            example(field)
        } else {
            field.default.clone()
        };
        match &field.field_type {
            FieldType::Text | FieldType::Template => {
                json!(format!("{} changed", current.as_str().unwrap_or("")))
            }
            FieldType::FlowPath => json!("other.json"),
            FieldType::Code => json!("return 1"),
            FieldType::Number { min, max } => {
                let value = current.as_f64().unwrap_or(min.unwrap_or(0.0)) + 1.0;
                json!(max.map_or(value, |max| value.min(max)))
            }
            FieldType::Integer { min, max } => {
                let value = current.as_i64().unwrap_or(min.unwrap_or(0));
                json!(if max.is_none_or(|max| value < max) {
                    value + 1
                } else {
                    value - 1
                })
            }
            FieldType::Boolean => json!(!current.as_bool().unwrap_or(false)),
            FieldType::Choice { options } => json!(
                options
                    .iter()
                    .find(|option| current.as_str() != Some(**option))
                    .expect("a choice has another option")
            ),
            FieldType::Json => json!({ "type": "object" }),
            FieldType::Conditions { operators } => {
                json!([{ "operator": operators[0], "value": "x" }])
            }
            FieldType::StringList => json!(["a"]),
            FieldType::StringMap => json!({ "X-Test": "1" }),
        }
    }

    /// Values just below the minimum and just above the maximum of a number field.
    fn outside_bounds(field: &FieldDescription) -> Vec<Value> {
        match field.field_type {
            FieldType::Number { min, max } => [min.map(|min| min - 1.0), max.map(|max| max + 1.0)]
                .into_iter()
                .flatten()
                .map(Value::from)
                .collect(),
            FieldType::Integer { min, max } => [min.map(|min| min - 1), max.map(|max| max + 1)]
                .into_iter()
                .flatten()
                .map(Value::from)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn parse(kind: NodeKind, data: &Map<String, Value>) -> NodeConfig {
        NodeConfig::parse(kind, data)
            .unwrap_or_else(|error| panic!("{}: {data:?} is refused: {error}", kind.id()))
    }

    #[test]
    fn every_kind_is_described_once_in_order() {
        let kinds = all_kinds();
        let ids: Vec<&str> = kinds.iter().map(|kind| kind.id).collect();
        let expected: Vec<&str> = NodeKind::ALL.iter().map(|kind| kind.id()).collect();
        assert_eq!(ids, expected);
        for (kind, description) in NodeKind::ALL.into_iter().zip(&kinds) {
            assert_eq!(description.inputs, kind.has_input(), "{}", kind.id());
            assert!(!description.title.is_empty(), "{}", kind.id());
            assert!(description.help.ends_with('.'), "{}", kind.id());
            let mut names: Vec<&str> = description.fields.iter().map(|f| f.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), description.fields.len(), "{}", kind.id());
            for field in &description.fields {
                assert!(field.help.ends_with('.'), "{}.{}", kind.id(), field.name);
                assert!(!field.label.is_empty(), "{}.{}", kind.id(), field.name);
            }
        }
    }

    /// The described defaults are what the engine uses when a key is absent, and every
    /// described field is accepted with its default.
    #[test]
    fn described_defaults_parse_and_match_the_engine() {
        for kind in NodeKind::ALL {
            let description = kind.describe();
            let data = defaults(&description.fields);
            let mut required = Map::new();
            for field in description.fields.iter().filter(|field| field.required) {
                assert_eq!(field.default, json!(""), "{}.{}", kind.id(), field.name);
                set(&mut required, field.name, example(field));
                // Left at its default, a required field makes the node invalid.
                let mut empty = data.clone();
                set(&mut empty, field.name, field.default.clone());
                let error = NodeConfig::parse(kind, &empty).expect_err("required");
                assert_eq!(error.field, field.name, "{}", kind.id());
            }
            assert_eq!(
                parse(kind, &data),
                parse(kind, &required),
                "{}: a described default is not the engine's",
                kind.id()
            );
        }
    }

    /// Every key a config reads is described (a kind's own or a common field), and every
    /// described field is read: the wrong type is refused naming it, and another value changes
    /// the parsed config.
    #[test]
    fn descriptions_match_what_the_configs_read() {
        let common: Vec<&str> = common_fields().iter().map(|field| field.name).collect();
        for kind in NodeKind::ALL {
            let description = kind.describe();
            let described: Vec<&str> = description
                .fields
                .iter()
                .map(|field| field.name.split('.').next().unwrap_or(field.name))
                .collect();
            for key in config_keys(kind) {
                assert!(
                    described.contains(&key) || common.contains(&key),
                    "{}: `{key}` is read but not described",
                    kind.id()
                );
            }
            let data = defaults(&description.fields);
            let parsed = parse(kind, &data);
            for field in &description.fields {
                let context = format!("{}.{}", kind.id(), field.name);
                if let Some(wrong) = wrong_value(field) {
                    let mut bad = data.clone();
                    set(&mut bad, field.name, wrong);
                    let error = NodeConfig::parse(kind, &bad).expect_err(&context);
                    assert_eq!(error.field, field.name, "{context}: {error}");
                }
                let mut changed = data.clone();
                set(&mut changed, field.name, another_value(field));
                assert_ne!(parse(kind, &changed), parsed, "{context} is not read");
                if let FieldType::Choice { options } = &field.field_type {
                    for option in options {
                        let mut chosen = data.clone();
                        set(&mut chosen, field.name, json!(option));
                        parse(kind, &chosen);
                    }
                }
                if let FieldType::Conditions { operators } = &field.field_type {
                    for operator in operators {
                        let mut chosen = data.clone();
                        let rows = json!([{ "operator": operator, "value": "1" }]);
                        set(&mut chosen, field.name, rows);
                        parse(kind, &chosen);
                    }
                }
                for outside in outside_bounds(field) {
                    let mut bad = data.clone();
                    set(&mut bad, field.name, outside.clone());
                    let error =
                        NodeConfig::parse(kind, &bad).expect_err(&format!("{context} = {outside}"));
                    assert_eq!(error.field, field.name, "{context}: {error}");
                }
            }
        }
    }

    /// The fixed handles are the ones a node of the kind leaves by; `if`'s pattern expands to
    /// one handle per condition.
    #[test]
    fn described_handles_match_the_configs() {
        for kind in NodeKind::ALL {
            let description = kind.describe();
            let config = parse(kind, &defaults(&description.fields));
            let fixed: Vec<String> = description
                .handles
                .iter()
                .filter(|handle| handle.rows.is_none())
                .map(|handle| handle.id.clone())
                .collect();
            assert_eq!(config.handles(), fixed, "{}", kind.id());
            for handle in &description.handles {
                let expected = match handle.id.as_str() {
                    "error" => HandleKind::Error,
                    crate::flow::SUBAGENT_HANDLE => HandleKind::Subagent,
                    _ => HandleKind::Execution,
                };
                assert_eq!(handle.kind, expected, "{}.{}", kind.id(), handle.id);
                assert_eq!(
                    handle.rows.is_some(),
                    handle.id.contains("{i}"),
                    "{}",
                    handle.id
                );
                if let Some(rows) = handle.rows {
                    assert!(
                        description.fields.iter().any(|field| field.name == rows),
                        "{}: the rows of {} are a field of the kind",
                        kind.id(),
                        handle.id
                    );
                }
            }
        }
        let conditions = json!([
            { "operator": "contains", "value": "a" },
            { "operator": "is_empty" },
        ]);
        let mut data = Map::new();
        data.insert("conditions".into(), conditions);
        let expanded: Vec<String> = NodeKind::If
            .describe()
            .handles
            .iter()
            .flat_map(|handle| {
                if handle.rows.is_some() {
                    (0..2)
                        .map(|index| handle.id.replace("{i}", &index.to_string()))
                        .collect()
                } else {
                    vec![handle.id.clone()]
                }
            })
            .collect();
        assert_eq!(parse(NodeKind::If, &data).handles(), expanded);
    }

    /// The common fields are read by [`CommonSettings`] (or, `label` and `description`, by the
    /// canvas and [`crate::flow::Node::label`], which takes any value).
    #[test]
    fn common_fields_match_the_settings() {
        let fields = common_fields();
        let data = defaults(&fields);
        let settings = CommonSettings::parse(&data).expect("defaults parse");
        assert_eq!(settings.max_attempts(), 1);
        let read = serde_names::<CommonSettings>();
        for key in &read {
            assert!(
                fields
                    .iter()
                    .any(|field| field.name.split('.').next() == Some(key)),
                "`{key}` is read but not described"
            );
        }
        for field in &fields {
            let top = field.name.split('.').next().unwrap_or(field.name);
            if !read.contains(&top) {
                assert!(
                    matches!(field.name, "label" | "description"),
                    "{}",
                    field.name
                );
                continue;
            }
            let mut bad = data.clone();
            set(&mut bad, field.name, wrong_value(field).expect("typed"));
            let error = CommonSettings::parse(&bad).expect_err(field.name);
            assert_eq!(error.field, field.name);
            for outside in outside_bounds(field) {
                let mut bad = data.clone();
                set(&mut bad, field.name, outside.clone());
                let error = CommonSettings::parse(&bad).expect_err(&format!("{outside}"));
                assert_eq!(error.field, field.name);
            }
            let mut changed = data.clone();
            set(&mut changed, field.name, another_value(field));
            let changed = CommonSettings::parse(&changed).expect(field.name);
            assert_ne!(changed, settings, "{} is not read", field.name);
        }
        // The engine's own defaults: no timeout set, one attempt, 1000 ms between attempts.
        let absent = CommonSettings::parse(&Map::new()).expect("empty");
        assert_eq!(absent.timeout_seconds, None);
        let retry = json!({ "retry": {} });
        let retry = CommonSettings::parse(retry.as_object().expect("object")).expect("retry");
        assert_eq!(settings.retry, retry.retry);
    }

    #[test]
    fn choices_come_from_their_enums() {
        assert_eq!(serde_names::<ReasoningEffort>(), ["low", "medium", "high"]);
        assert_eq!(serde_names::<OnError>(), ["raise", "catch"]);
        assert_eq!(
            serde_names::<TemplateConfig>(),
            ["template", "parseJson"],
            "struct fields are listed as spelled in files"
        );
        let description = serde_json::to_value(NodeKind::Gate.describe()).expect("serializes");
        assert_eq!(description["handles"][2]["kind"], "error");
        assert_eq!(
            description["fields"][2]["fieldType"],
            json!({ "type": "choice", "options": ["low", "medium", "high"] })
        );
    }
}
