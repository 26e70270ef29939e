//! `join`: waits for every incoming branch that can still arrive, then runs once.

use serde::Deserialize;

use super::{HandleDescription, KindDescription, NodeKind};

use crate::run::{Step, StepError, StepOutput};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Waits for every incoming branch that can still arrive (branches that an `if`, `gate` or \
         `approval` upstream did not take are not waited for), then continues once. Its output is \
         `{ \"<source node id>\": <that branch's output>, ... }`."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct JoinConfig {}

/// The scheduler collects the arrivals and calls this once they are complete; the input is
/// already the object of arrivals.
pub(super) fn run(step: &Step<'_>) -> Result<StepOutput, StepError> {
    Ok(StepOutput::new(step.input.clone(), "output"))
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![HandleDescription::execution("output", "Output")],
        ..KindDescription::new(NodeKind::Join, "Join", help!(kind))
    }
}
