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
                    visit: step.visit,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::step::fake::{FakeEnv, step};
    use crate::step::{ChildPause, ChildResume};

    fn env_with_child(dir: &std::path::Path) -> FakeEnv {
        std::fs::write(dir.join("child.json"), r#"{"nodes": [], "edges": []}"#).expect("write");
        FakeEnv::new().folder(dir)
    }

    fn config(on_error: OnError) -> SubflowConfig {
        SubflowConfig {
            flow: "child.json".into(),
            on_error,
        }
    }

    #[tokio::test]
    async fn the_child_runs_with_the_input_and_its_result_is_the_output() {
        let dir = tempfile::tempdir().expect("dir");
        let env = env_with_child(dir.path()).child_ends(Value::Null, || ChildEnd::Completed(json!("child said hi").into()));
        let output = config(OnError::Raise)
            .run(&step("sub", &Arc::new(json!("hi"))), &env)
            .await
            .expect("runs");
        assert_eq!(*output.value, json!("child said hi"));
        let calls = env.children.lock().expect("calls").clone();
        assert_eq!((calls[0].node_id.as_str(), calls[0].input.clone()), ("sub", json!("hi")));
    }

    #[tokio::test]
    async fn a_failed_child_raises_or_is_caught_as_the_node_says() {
        let dir = tempfile::tempdir().expect("dir");
        let env = env_with_child(dir.path()).child_ends(Value::Null, || ChildEnd::Failed("boom".into()));
        let error = config(OnError::Raise)
            .run(&step("sub", &Arc::new(json!({}))), &env)
            .await
            .expect_err("raised");
        assert_eq!((error.kind, error.message.as_str()), (StepErrorKind::Subflow, "child.json: boom"));
        let caught = config(OnError::Catch)
            .run(&step("sub", &Arc::new(json!({}))), &env)
            .await
            .expect("caught");
        assert_eq!(*caught.value, json!({"error": {"message": "boom", "nodeId": "sub"}}));
    }

    #[tokio::test]
    async fn a_paused_child_pauses_the_step_and_is_handed_back_on_resume() {
        let dir = tempfile::tempdir().expect("dir");
        let pause = || ChildPause {
            breakpoint: false,
            path: "review".into(),
            message: "ok?".into(),
            fields: Vec::new(),
            quorum: Box::default(),
            since: None,
            deadline: None,
            input: Value::Null,
            state: json!({"kept": true}),
        };
        let env = env_with_child(dir.path()).child_ends(Value::Null, move || ChildEnd::Paused(pause()));
        let output = config(OnError::Raise)
            .run(&step("sub", &Arc::new(json!({}))), &env)
            .await
            .expect("paused");
        assert!(matches!(output.wait, Some(Wait::Child(ChildPause { ref path, .. })) if path == "review"));
        let null = Arc::new(Value::Null);
        let mut resumed = step("sub", &null);
        resumed.resume = Some(ChildResume {
            pause: pause(),
            answer: json!({"decision": "approve", "note": ""}),
        });
        config(OnError::Raise).run(&resumed, &env).await.expect("runs again");
        let calls = env.children.lock().expect("calls").clone();
        assert_eq!(calls.iter().map(|call| call.resumed).collect::<Vec<_>>(), [false, true]);
    }

    #[tokio::test]
    async fn a_missing_child_file_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let env = FakeEnv::new().folder(dir.path());
        let error = config(OnError::Catch)
            .run(&step("sub", &Arc::new(json!({}))), &env)
            .await
            .expect_err("no file");
        assert_eq!(error.kind, StepErrorKind::Subflow);
        assert!(error.message.contains("child.json"), "{error}");
    }
}
