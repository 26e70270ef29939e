//! `code`: a Python function body run in the sandbox (SPEC §5).

use serde::Deserialize;
use weft_sandbox::{Limits, Sandbox, SandboxError};

use super::{
    FieldDescription, FieldError, FieldType, HandleDescription, KindDescription, NodeKind,
};
use crate::event::EventType;
use crate::run::{Step, StepError, StepOutput};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Runs Python in a sandbox: `code` is a function body. Weft wraps it as \
         `def _block(initial, <field>, ...)`, one parameter per name in `inputFields` (taken from \
         the previous output object), or `def _block(initial, input)` when there are none, and \
         calls it. The return value (any JSON value) is the output. Builtins are limited to a safe \
         list plus `print` (shown in the run log); `import`, `eval`, `open`, names starting with `_` \
         and the like are refused before running. Default timeout 30 s."
    };
    (code) => {
        "The function body."
    };
    (inputFields) => {
        "Fields of the previous output passed as parameters, in order."
    };
}

#[doc = help!(kind)]
///
/// From seed 000; the sandbox is SPEC §5.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeConfig {
    #[doc = help!(code)]
    #[serde(default)]
    pub code: String,
    #[doc = help!(inputFields)]
    #[serde(default)]
    pub input_fields: Vec<String>,
}

impl CodeConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if let Some(problem) = Sandbox::check(&self.code, &self.input_fields)
            .into_iter()
            .next()
        {
            return Err(FieldError::new("code", problem.to_string()));
        }
        Ok(())
    }
}

pub(super) async fn run(config: &CodeConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let sandbox = step.ctx.sandbox.clone();
    let code = config.code.clone();
    let fields = config.input_fields.clone();
    let initial = step.ctx.initial.clone();
    let input = step.input.clone();
    let settings = step
        .ctx
        .graph
        .settings
        .get(&step.node.id)
        .cloned()
        .unwrap_or_default();
    let limits = Limits {
        timeout: settings.timeout_for(super::NodeKind::Code),
        ..Limits::default()
    };
    // The interpreter runs on a blocking thread; its own watchdog enforces the timeout.
    let outcome =
        tokio::task::spawn_blocking(move || sandbox.run(&code, &fields, &initial, &input, &limits))
            .await
            .map_err(|error| StepError::new("code", format!("the sandbox stopped: {error}")))?;
    match outcome {
        Ok(run) => {
            for line in &run.printed {
                step.emit(EventType::LogicCheck, format!("print: {line}"));
            }
            Ok(StepOutput::new(run.value, "output"))
        }
        Err(error) => Err(StepError::new(error_kind(&error), error.to_string())),
    }
}

fn error_kind(error: &SandboxError) -> &'static str {
    match error {
        SandboxError::Timeout { .. } => "timeout",
        _ => "code",
    }
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new("code", "Code", help!(code), FieldType::Code).default(""),
            FieldDescription::new(
                "inputFields",
                "Input fields",
                help!(inputFields),
                FieldType::StringList,
            )
            .default(serde_json::json!([])),
        ],
        ..KindDescription::new(NodeKind::Code, "Code", help!(kind))
    }
}
