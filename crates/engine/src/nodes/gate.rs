//! `gate`: an LLM judges the previous output against criteria and routes by `pass` / `fail`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::agent::ReasoningEffort;
use super::{
    FieldDescription, FieldError, FieldType, HandleDescription, KindDescription, NodeKind,
    serde_names,
};
use crate::event::EventType;
use crate::providers::{ChatMessage, ChatRequest};
use crate::run::{Step, StepError, StepOutput};
use crate::template::output_text;

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "A quality gate: a model judges the previous output against `criteria` and must \
         answer pass or fail with a reason (structured output). The run continues by `pass` or \
         `fail`; the output is the previous output, unchanged, so a `fail` branch can revise it."
    };
    (criteria) => {
        "What a passing output must satisfy (a template)."
    };
    (model) => {
        "`provider/name` or a bare name; empty uses the default model."
    };
    (reasoningEffort) => {
        "How hard a reasoning model thinks: `low`, `medium` or `high`."
    };
}

#[doc = help!(kind)]
///
/// From seed 001.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateConfig {
    #[doc = help!(criteria)]
    #[serde(default)]
    pub criteria: String,
    #[doc = help!(model)]
    #[serde(default)]
    pub model: String,
    #[doc = help!(reasoningEffort)]
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

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("pass", "Pass"),
            HandleDescription::execution("fail", "Fail"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new("criteria", "Criteria", help!(criteria), FieldType::Template)
                .default("")
                .required(),
            FieldDescription::new("model", "Model", help!(model), FieldType::Text).default(""),
            FieldDescription::new(
                "reasoningEffort",
                "Reasoning effort",
                help!(reasoningEffort),
                FieldType::Choice {
                    options: serde_names::<ReasoningEffort>(),
                },
            ),
        ],
        ..KindDescription::new(NodeKind::Gate, "Gate", help!(kind))
    }
}
