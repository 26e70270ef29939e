//! `join`: waits for every incoming branch that can still arrive, then runs once.

use serde::Deserialize;

use crate::run::{Step, StepError, StepOutput};

/// Waits for every incoming branch that can still arrive (branches that an `if`, `gate` or
/// `approval` upstream did not take are not waited for), then continues once. Its output is
/// `{ "<source node id>": <that branch's output>, ... }`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct JoinConfig {}

/// The scheduler collects the arrivals and calls this once they are complete; the input is
/// already the object of arrivals.
pub(super) fn run(step: &Step<'_>) -> Result<StepOutput, StepError> {
    Ok(StepOutput::new(step.input.clone(), "output"))
}
