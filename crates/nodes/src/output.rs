//! `output`: marks the run's result.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepOutput};

/// Marks the run's result: a run's result is the value of the last `output` node that ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct OutputConfig {}

impl Kind for OutputConfig {
    const ID: &'static str = "output";
    const TITLE: &'static str = "Output";
    const SCHEDULING: Scheduling = Scheduling::Instant;
    const HANDLES: &'static [Handle] = &[];

    async fn run(&self, step: &Step<'_>, _env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        Ok(StepOutput::new(step.input.clone(), Handle::OUTPUT.id).as_result())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn passes_its_input_on_as_the_runs_result() {
        let output = OutputConfig::default()
            .run(&step("end", &Arc::new(json!("done"))), &FakeEnv::new())
            .await
            .expect("runs");
        assert!(output.is_result);
        assert_eq!(*output.value, json!("done"));
    }
}
