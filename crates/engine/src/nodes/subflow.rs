//! `subflow`: runs another flow file as one step.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    Decision, FieldDescription, FieldError, FieldType, HandleDescription, KindDescription,
    NodeKind, serde_names,
};
use crate::run::{ChildFlow, NestedEnd, Step, StepError, StepOutput, run_nested};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Runs another flow file (`flow`, a path relative to this flow's file) with the previous \
         output as its input; the output is the child run's result. Subflows nest at most 10 deep \
         and a cycle of files is refused. An approval inside pauses the whole run. `onError`: \
         `raise` (the step fails) or `catch` (the output is \
         `{ \"error\": { \"message\", \"nodeId\" } }`)."
    };
    (flow) => {
        "The flow file to run, relative to this flow's file."
    };
    (onError) => {
        "`raise`: the step fails; `catch`: the output is `{ \"error\": { \"message\", \"nodeId\" } }`."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubflowConfig {
    #[doc = help!(flow)]
    #[serde(default)]
    pub flow: String,
    #[doc = help!(onError)]
    #[serde(default)]
    pub on_error: OnError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    #[default]
    Raise,
    Catch,
}

impl SubflowConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if self.flow.trim().is_empty() {
            return Err(FieldError::new(
                "flow",
                "is empty: name the flow file to run",
            ));
        }
        Ok(())
    }
}

/// The flow file a `subflow` or `forEach` node runs, resolved against `base` (its flow's file).
pub(crate) fn child_flow_path(config: &super::NodeConfig, base: Option<&Path>) -> Option<PathBuf> {
    let relative = match config {
        super::NodeConfig::Subflow(config) => &config.flow,
        super::NodeConfig::ForEach(config) => &config.flow,
        _ => return None,
    };
    let folder = base.and_then(Path::parent).unwrap_or(Path::new(""));
    Some(folder.join(relative.trim()))
}

pub(super) async fn run(
    config: &SubflowConfig,
    step: &Step<'_>,
    decisions: &HashMap<String, Decision>,
) -> Result<StepOutput, StepError> {
    let path = step.ctx.resolve_path(config.flow.trim());
    let child = ChildFlow::load(&path)?;
    let end = run_nested(
        step.ctx,
        &step.node.id,
        None,
        &child,
        step.input.clone(),
        step.resume.clone(),
        decisions.clone(),
        step.ctx.cancel.clone(),
    )
    .await?;
    match end {
        NestedEnd::Completed(value) => Ok(StepOutput::new(value, "output")),
        NestedEnd::Paused(pause) => Ok(StepOutput {
            paused: Some(pause),
            ..StepOutput::new(serde_json::Value::Null, "output")
        }),
        NestedEnd::Cancelled => Err(StepError::new("cancelled", "the run was cancelled")),
        NestedEnd::Failed(message) => match config.on_error {
            OnError::Raise => Err(StepError::new(
                "subflow",
                format!("{}: {message}", config.flow),
            )),
            OnError::Catch => Ok(StepOutput::new(
                json!({ "error": { "message": message, "nodeId": step.node.id } }),
                "output",
            )),
        },
    }
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new("flow", "Flow", help!(flow), FieldType::FlowPath)
                .default("")
                .required(),
            FieldDescription::new(
                "onError",
                "On error",
                help!(onError),
                FieldType::Choice {
                    options: serde_names::<OnError>(),
                },
            )
            .default("raise"),
        ],
        ..KindDescription::new(NodeKind::Subflow, "Subflow", help!(kind))
    }
}
