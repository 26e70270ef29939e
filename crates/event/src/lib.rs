//! Run events (docs/flows.md#events): the one ordered stream that the store, the CLI and the
//! canvas all see.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod json;

use weft_providers::Usage;

/// Receives every event of a run, in `seq` order, once the event is committed to the store (so
/// what a person was shown is never lost). Events arrive one committed batch at a time, and
/// [`EventSink::flush`] follows the last event of each batch: a sink may hold events until
/// then (the CLI prints a batch of NDJSON lines with one write). Any `Fn(&RunEvent)` is a sink.
pub trait EventSink: Send + Sync {
    fn event(&self, event: &RunEvent);

    /// The batch of events just handed over is complete.
    fn flush(&self) {}
}

impl<F: Fn(&RunEvent) + Send + Sync> EventSink for F {
    fn event(&self, event: &RunEvent) {
        self(event);
    }
}

/// Where a run's events go: see [`EventSink`].
pub type EventListener = Arc<dyn EventSink>;

/// What happened. Serialized in snake_case (`run_start`, `llm_delta`, ...).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::EnumIter,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EventType {
    RunStart,
    StepStart,
    StartPrompt,
    LogicCheck,
    WaitInput,
    InputReceived,
    LlmDelta,
    LlmResponse,
    LlmError,
    SubagentCallStart,
    SubagentCallEnd,
    SubagentCallError,
    // An agent calls an MCP tool: `{server, tool, arguments, callId}` as JSON text. (Plain
    // comments on these three: documented variants would make the schema a `oneOf`.)
    ToolCall,
    // The tool's result: `{callId, content, isError, durationMs}` (content cut at 64 KiB).
    ToolResult,
    // The call could not be made or answered (the server failed to start, stopped, timed out):
    // `{server, tool, callId, error, durationMs}`.
    ToolError,
    StepEnd,
    Error,
    RunEnd,
    // While the run waits at an approval (`node_id`, the path of one in a subflow): those still
    // needed were reminded (`remindAfterSeconds`); the content names them.
    ApprovalReminder,
    // While it waits: `escalateTo` became approvers too (`escalateAfterSeconds`).
    ApprovalEscalated,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One event of a run. `seq` starts at 1 and has no gaps within a run, across pauses and resumes.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub seq: u64,
    // Shared by all the run's events (and `ts` by all events of one millisecond): a step emits
    // two events, and each of these texts was an allocation of its own.
    pub run_id: Arc<str>,
    /// RFC 3339 with milliseconds, UTC.
    pub ts: Arc<str>,
    #[serde(rename = "type")]
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<Arc<str>>,
    pub content: String,
    /// For events of a nested run (a `subflow`, or one item of a `forEach`): the path of the
    /// node that runs it, e.g. `research` or `outer/inner`. `node_id` is then a node of the child
    /// flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// For events of one `forEach` item: the item's index in the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u64>,
    /// On `step_start`: the node whose output started this step (absent for `start`, for the
    /// node a partial run begins at, and for a `join`, whose input comes from several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Arc<str>>,
    /// Tokens used, on `llm_response` events (and the run's total on `run_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// On `llm_response` events: the model that answered, as `provider/model` (a fallback
    /// model when the node's own failed for good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A run's status (docs/flows.md#running).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RunStatus {
    Running,
    Paused,
    Completed,
    Failed,
    Cancelled,
    /// The process running it stopped before it ended (killed, crashed, powered off); it can
    /// be continued from its last finished steps (`weft resume RUN --retry`).
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Completed, failed and cancelled runs never change again.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

/// A scope segment (`research`, `each[2]`) as LLM call keys name it in visit `visit` of its
/// step: unchanged on the first visit, `research@2` on the second.
pub fn call_segment(segment: &str, visit: u64) -> String {
    if visit > 1 {
        format!("{segment}@{visit}")
    } else {
        segment.to_string()
    }
}
