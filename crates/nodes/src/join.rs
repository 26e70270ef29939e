//! `join`: waits for every incoming branch that can still arrive, then runs once.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepOutput};

/// Waits for every incoming branch that can still arrive (branches that an `if`, `gate` or
/// `approval` upstream did not take are not waited for), then continues once. Its output is
/// `{ "<source node id>": <that branch's output>, ... }`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct JoinConfig {}

impl Kind for JoinConfig {
    const ID: &'static str = "join";
    const TITLE: &'static str = "Join";
    const SCHEDULING: Scheduling = Scheduling::Join;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT];

    /// The scheduler collects the arrivals; the input is already the object of them.
    async fn run(&self, step: &Step<'_>, _env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        Ok(StepOutput::new(step.input.clone(), Handle::OUTPUT.id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn passes_the_arrivals_on() {
        let arrived = json!({"left": 1, "right": 2});
        let output = JoinConfig::default()
            .run(&step("join", &Arc::new(arrived.clone())), &FakeEnv::new())
            .await
            .expect("runs");
        assert_eq!((Arc::unwrap_or_clone(output.value), output.handle.as_str()), (arrived, "output"));
    }
}
