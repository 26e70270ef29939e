//! Run events (SPEC §6): the one ordered stream that the store, the CLI and the canvas all see.

use serde::{Deserialize, Serialize};

use crate::providers::Usage;

/// What happened. Serialized in snake_case (`run_start`, `llm_delta`, ...).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    StepEnd,
    Error,
    RunEnd,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::RunStart => "run_start",
            EventType::StepStart => "step_start",
            EventType::StartPrompt => "start_prompt",
            EventType::LogicCheck => "logic_check",
            EventType::WaitInput => "wait_input",
            EventType::InputReceived => "input_received",
            EventType::LlmDelta => "llm_delta",
            EventType::LlmResponse => "llm_response",
            EventType::LlmError => "llm_error",
            EventType::SubagentCallStart => "subagent_call_start",
            EventType::SubagentCallEnd => "subagent_call_end",
            EventType::SubagentCallError => "subagent_call_error",
            EventType::StepEnd => "step_end",
            EventType::Error => "error",
            EventType::RunEnd => "run_end",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event of a run. `seq` starts at 1 and has no gaps within a run, across pauses and resumes.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub seq: u64,
    pub run_id: String,
    /// RFC 3339 with milliseconds, UTC.
    pub ts: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    pub content: String,
    /// For events of a nested run (a `subflow`, or one item of a `forEach`): the path of the
    /// node that runs it, e.g. `research` or `outer/inner`. `node_id` is then a node of the child flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// For events of one `forEach` item: the item's index in the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u64>,
    /// Tokens used, on `llm_response` events (and the run's total on `run_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A run's status (SPEC §4).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Paused,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
    }

    /// Completed, failed and cancelled runs never change again.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
