//! `start`: the entry point of a run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Handle, Kind, Scheduling};
use weft_event::EventType;
use crate::step::{Step, StepEnv, StepError, StepOutput};
use weft_template::output_text;

/// The entry point; exactly one per flow. Its output is the run's input when one is given,
/// else `initialInput`, else the empty string.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig {
    /// The input used when a run is started without one (text, or any JSON value).
    #[serde(default)]
    pub initial_input: Option<Value>,
    /// A JSON Schema (an object) of the run's input: the arguments MCP clients give when the
    /// flow is served as a tool (`weft mcp`); without it, one text `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-weft" = "json"))]
    pub input_schema: Option<Value>,
}

impl Kind for StartConfig {
    const ID: &'static str = "start";
    const TITLE: &'static str = "Start";
    const SCHEDULING: Scheduling = Scheduling::Instant;
    const INPUTS: bool = false;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT];

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        // The run's input was resolved when the run began (run input, else initialInput).
        let value = env.initial().clone();
        env.emit(step.node_id, EventType::StartPrompt, output_text(&value), None);
        Ok(StepOutput::new(value, Handle::OUTPUT.id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn the_run_input_is_the_output_and_is_logged() {
        let env = FakeEnv::new().initial(json!({"ticket": 7}));
        let output = StartConfig::default()
            .run(&step("start", &Arc::new(Value::Null)), &env)
            .await
            .expect("runs");
        assert_eq!((Arc::unwrap_or_clone(output.value), output.handle.as_str()), (json!({"ticket": 7}), "output"));
        assert_eq!(env.contents(EventType::StartPrompt), [r#"{"ticket":7}"#]);
    }
}
