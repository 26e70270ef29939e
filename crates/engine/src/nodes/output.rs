//! `output`: marks the run's result.

use serde::Deserialize;

use crate::run::{Step, StepError, StepOutput};

/// Marks the run's result: a run's result is the value of the last `output` node that ran.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct OutputConfig {}

pub(super) fn run(step: &Step<'_>) -> Result<StepOutput, StepError> {
    Ok(StepOutput::new(step.input.clone(), "output"))
}
