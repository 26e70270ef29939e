//! `note`: a comment on the canvas. It has no handles and never runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepErrorKind, StepOutput};

/// A comment on the canvas; it never runs and takes no edges.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct NoteConfig {
    /// The note's text.
    #[serde(default)]
    pub text: String,
}

impl Kind for NoteConfig {
    const ID: &'static str = "note";
    const TITLE: &'static str = "Note";
    const SCHEDULING: Scheduling = Scheduling::Never;
    const INPUTS: bool = false;
    const HANDLES: &'static [Handle] = &[];

    async fn run(&self, step: &Step<'_>, _env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        Err(StepError::new(
            StepErrorKind::Internal,
            format!("note `{}` was asked to run; notes never run", step.node_id),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn a_note_asked_to_run_says_it_never_runs() {
        let error = NoteConfig::default()
            .run(&step("hint", &Arc::new(Value::Null)), &FakeEnv::new())
            .await
            .expect_err("never runs");
        assert_eq!(error.kind, StepErrorKind::Internal);
        assert!(error.message.contains("notes never run"), "{error}");
    }
}
