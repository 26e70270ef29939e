//! `gate`: an LLM judges the previous output against criteria and routes by `pass` / `fail`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::FieldError;
use super::agent::ReasoningEffort;
use crate::event::EventType;
use crate::providers::{ChatMessage, ChatRequest};
use crate::run::{Step, StepError, StepOutput};
use crate::template::output_text;

/// A quality gate (seed 001): a model judges the previous output against `criteria` and must
/// answer pass or fail with a reason (structured output). The run continues by `pass` or
/// `fail`; the output is the previous output, unchanged, so a `fail` branch can revise it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateConfig {
    /// What a passing output must satisfy (a template).
    #[serde(default)]
    pub criteria: String,
    /// `provider/name` or a bare name; empty uses the default model.
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
}

impl GateConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if self.criteria.trim().is_empty() {
            return Err(FieldError::new(
                "criteria",
                "is empty: say what a passing output must satisfy",
            ));
        }
        Ok(())
    }
}

const JUDGE_INSTRUCTIONS: &str = "You are a strict reviewer. Judge whether the text meets every criterion. \
Answer only with JSON: {\"pass\": true or false, \"reason\": \"one sentence\"}.";

pub(super) async fn run(config: &GateConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let criteria = step.render("criteria")?;
    let route = super::route_for(step.ctx, &step.node.id, &config.model, false)?;
    let schema = json!({
        "type": "object",
        "properties": {
            "pass": { "type": "boolean" },
            "reason": { "type": "string" },
        },
        "required": ["pass", "reason"],
    });
    let request = ChatRequest {
        reasoning_effort: config
            .reasoning_effort
            .map(|effort| effort.as_str().to_string()),
        ..ChatRequest::new(
            route.model.clone(),
            vec![
                ChatMessage::System {
                    content: JUDGE_INSTRUCTIONS.into(),
                },
                ChatMessage::User {
                    content: format!(
                        "Criteria:\n{criteria}\n\nText:\n{}",
                        output_text(step.input)
                    ),
                },
            ],
        )
    };
    let verdict =
        super::complete_structured(step.ctx, &step.node.id, &route, request, &schema).await?;
    let passed = verdict
        .get("pass")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let reason = verdict.get("reason").map(output_text).unwrap_or_default();
    let handle = if passed { "pass" } else { "fail" };
    step.emit(EventType::LogicCheck, format!("{handle}: {reason}"));
    Ok(StepOutput::new(step.input.clone(), handle))
}
