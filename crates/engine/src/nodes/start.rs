//! `start`: the entry point of a run.

use serde::Deserialize;
use serde_json::Value;

use super::{FieldDescription, FieldType, HandleDescription, KindDescription, NodeKind};
use crate::event::EventType;
use crate::run::{Step, StepError, StepOutput};
use crate::template::output_text;

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "The entry point; exactly one per flow. Its output is the run's input when one is given, \
         else `initialInput`, else the empty string."
    };
    (initialInput) => {
        "The input used when a run is started without one (text, or any JSON value)."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig {
    #[doc = help!(initialInput)]
    #[serde(default)]
    pub initial_input: Option<Value>,
}

pub(super) fn run(_config: &StartConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    // The run's input was resolved when the run began (run input, else initialInput).
    let value = step.ctx.initial.clone();
    step.emit(EventType::StartPrompt, output_text(&value));
    Ok(StepOutput::new(value, "output"))
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![HandleDescription::execution("output", "Output")],
        fields: vec![FieldDescription::new(
            "initialInput",
            "Initial input",
            help!(initialInput),
            FieldType::Json,
        )],
        ..KindDescription::new(NodeKind::Start, "Start", help!(kind))
    }
}
