//! `code`: a Python function body run in the sandbox (SPEC §5).

use serde::Deserialize;
use weft_sandbox::{Limits, Sandbox, SandboxError};

use super::FieldError;
use crate::event::EventType;
use crate::run::{Step, StepError, StepOutput};

/// Runs Python in a sandbox: `code` is a function body (seed 000). Weft wraps it as
/// `def _block(initial, <field>, ...)`, one parameter per name in `inputFields` (taken from
/// the previous output object), or `def _block(initial, input)` when there are none, and
/// calls it. The return value (any JSON value) is the output. Builtins are limited to a safe
/// list plus `print` (shown in the run log); `import`, `eval`, `open`, names starting with `_`
/// and the like are refused before running. Default timeout 30 s.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeConfig {
    /// The function body.
    #[serde(default)]
    pub code: String,
    /// Fields of the previous output passed as parameters, in order.
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
