//! `subflow`: runs another flow file as one step.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{ChildFlowUse, Handle, Kind, Scheduling};
use crate::step::{
    ChildEnd, ChildFlow, ChildRun, Step, StepEnv, StepError, StepErrorKind, StepOutput, Wait,
};

/// Runs another flow file (`flow`, a path relative to this flow's file) with the previous output
/// as its input; the output is the child run's result. Subflows nest at most 10 deep and a
/// cycle of files is refused. An approval inside pauses the whole run. `onError`: `raise` (the
/// step fails) or `catch` (the output is `{ "error": { "message", "nodeId" } }`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubflowConfig {
    /// The flow file to run, relative to this flow's file.
    #[serde(default)]
    #[schemars(
        extend("x-weft" = "flowPath", "x-weft-empty" = "name the flow file to run"),
        length(min = 1)
    )]
    pub flow: String,
    /// `raise`: the step fails; `catch`: the output is `{ "error": { "message", "nodeId" } }`.
    #[serde(default)]
    pub on_error: OnError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    #[default]
    Raise,
    Catch,
}

impl Kind for SubflowConfig {
    const ID: &'static str = "subflow";
    const TITLE: &'static str = "Subflow";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::ERROR];

    fn child_flow(&self) -> Option<ChildFlowUse<'_>> {
        Some(ChildFlowUse {
            path: self.flow.trim(),
            may_pause: true,
        })
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let child = ChildFlow::load(&env.resolve_path(self.flow.trim()))?;
        let resume = step.resume.clone();
        let end = env
            .run_child(
                step.node_id,
                ChildRun {
                    flow: &child,
                    input: step.input.clone(),
                    item: None,
                    resume,
                    cancel: env.cancel().clone(),
                },
            )
            .await?;
        match end {
            ChildEnd::Completed(value) => Ok(StepOutput::new(value, Handle::OUTPUT.id)),
            ChildEnd::Paused(pause) => Ok(StepOutput::waiting(
                serde_json::Value::Null,
                Wait::Child(pause),
            )),
            ChildEnd::Cancelled => Err(StepError::cancelled()),
            ChildEnd::Failed(message) => match self.on_error {
                OnError::Raise => Err(StepError::new(
                    StepErrorKind::Subflow,
                    format!("{}: {message}", self.flow),
                )),
                OnError::Catch => Ok(StepOutput::new(
                    json!({ "error": { "message": message, "nodeId": step.node_id } }),
                    Handle::OUTPUT.id,
                )),
            },
        }
    }
}
