//! `code`: a Python function body run in the sandbox (docs/flows.md#python-in-code-nodes).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft_sandbox::{Limits, Sandbox, SandboxError};

use super::{FieldError, Handle, Kind, Scheduling};
use weft_event::EventType;
use crate::step::{Step, StepEnv, StepError, StepErrorKind, StepOutput};

/// Runs Python in a sandbox: `code` is a function body. Weft wraps it as
/// `def _block(initial, <field>, ...)`, one parameter per name in `inputFields` (taken from the
/// previous output object), or `def _block(initial, input)` when there are none, and calls it.
/// The return value (any JSON value) is the output. Builtins are limited to a safe list plus
/// `print` (shown in the run log); `import`, `eval`, `open`, names starting with `_` and the
/// like are refused before running. Default timeout 30 s.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeConfig {
    /// The function body.
    #[serde(default)]
    #[schemars(extend("x-weft" = "code"))]
    pub code: String,
    /// Fields of the previous output passed as parameters, in order.
    #[serde(default)]
    pub input_fields: Vec<String>,
}

impl Kind for CodeConfig {
    const ID: &'static str = "code";
    const TITLE: &'static str = "Code";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::ERROR];
    const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;

    fn check(&self) -> Result<(), FieldError> {
        match Sandbox::check(&self.code, &self.input_fields).into_iter().next() {
            // Line 0 is the wrapper's parameter list: the problem is a field name.
            Some(SandboxError::Refused { line: 0, message }) => {
                Err(FieldError::new("inputFields", message))
            }
            Some(problem) => Err(FieldError::new("code", problem.to_string())),
            None => Ok(()),
        }
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let sandbox = env.sandbox().clone();
        let code = self.code.clone();
        let fields = self.input_fields.clone();
        let initial = env.initial().clone();
        let input = step.input.clone();
        let limits = Limits {
            timeout: step.timeout,
            ..Limits::default()
        };
        // The interpreter runs on a blocking thread; its own watchdog enforces the timeout,
        // and stops the code as soon as this step is dropped (the run was cancelled, a sibling
        // branch failed, the step timed out), rather than at the code's own timeout.
        let stop = StopOnDrop::default();
        let cancel = stop.0.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            sandbox.run_until(&code, &fields, &initial, &input, &limits, &cancel)
        })
        .await
        .map_err(|error| {
            StepError::new(StepErrorKind::Code, format!("the sandbox stopped: {error}"))
        })?;
        match outcome {
            Ok(run) => {
                for line in &run.printed {
                    env.emit(step.node_id, EventType::LogicCheck, format!("print: {line}"), None);
                }
                Ok(StepOutput::new(run.value, Handle::OUTPUT.id))
            }
            Err(error) => Err(StepError::new(error_kind(&error), error.to_string())),
        }
    }
}

/// Sets its flag when dropped: the step's future is dropped when its run no longer needs it.
#[derive(Default)]
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn error_kind(error: &SandboxError) -> StepErrorKind {
    match error {
        SandboxError::Timeout { .. } => StepErrorKind::Timeout,
        SandboxError::Cancelled => StepErrorKind::Cancelled,
        _ => StepErrorKind::Code,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn runs_python_with_the_named_fields_and_logs_what_it_prints() {
        let config = CodeConfig {
            code: "print('total', a + b)\nreturn {'sum': a + b, 'first': initial['x']}".into(),
            input_fields: vec!["a".into(), "b".into()],
        };
        let env = FakeEnv::new().initial(json!({"x": "start"}));
        let output = config
            .run(&step("add", &Arc::new(json!({"a": 2, "b": 40}))), &env)
            .await
            .expect("runs");
        assert_eq!(*output.value, json!({"sum": 42, "first": "start"}));
        assert_eq!(env.contents(EventType::LogicCheck), ["print: total 42"]);
    }

    #[tokio::test]
    async fn a_step_timeout_stops_runaway_code_as_a_timeout() {
        let config = CodeConfig {
            code: "while True:\n    pass".into(),
            input_fields: Vec::new(),
        };
        let null = Arc::new(serde_json::Value::Null);
        let mut spin = step("spin", &null);
        spin.timeout = Duration::from_millis(300);
        let error = config.run(&spin, &FakeEnv::new()).await.expect_err("stopped");
        assert_eq!(error.kind, StepErrorKind::Timeout);
    }
}
