//! `output`: marks the run's result.

use serde::Deserialize;

use super::{KindDescription, NodeKind};

use crate::run::{Step, StepError, StepOutput};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Marks the run's result: a run's result is the value of the last `output` node that ran."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct OutputConfig {}

pub(super) fn run(step: &Step<'_>) -> Result<StepOutput, StepError> {
    Ok(StepOutput::new(step.input.clone(), "output"))
}

pub(super) fn describe() -> KindDescription {
    KindDescription::new(NodeKind::Output, "Output", help!(kind))
}
