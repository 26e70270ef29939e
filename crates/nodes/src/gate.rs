//! `gate`: an LLM judges the previous output against criteria and routes by `pass` / `fail`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::agent::{ReasoningEffort, Turn, budget_pause, complete_structured, routes_for};
use super::{Handle, Kind, ModelUse, Scheduling};
use weft_event::EventType;
use weft_providers::{ChatMessage, ChatRequest};
use crate::mcp_tools::ToolApprovals;
use crate::step::{Step, StepEnv, StepError, StepOutput, Wait};
use weft_template::output_text;

/// A quality gate: a model judges the previous output against `criteria` and must answer pass
/// or fail with a reason (structured output). The run continues by `pass` or `fail`; the output
/// is the previous output, unchanged, so a `fail` branch can revise it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateConfig {
    /// What a passing output must satisfy (a template).
    #[serde(default)]
    #[schemars(
        extend("x-weft" = "template", "x-weft-empty" = "say what a passing output must satisfy"),
        length(min = 1)
    )]
    pub criteria: String,
    /// `provider/name` or a bare name; empty uses the default model.
    #[serde(default)]
    pub model: String,
    /// Models tried in order when the model's call fails for good (a rate limit, a server
    /// error, a timeout, a refused connection).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    /// How hard a reasoning model thinks.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
}

const PASS: Handle = Handle::execution("pass", "Pass");
const FAIL: Handle = Handle::execution("fail", "Fail");

const JUDGE_INSTRUCTIONS: &str = "You are a strict reviewer. Judge whether the text meets every criterion. \
Answer only with JSON: {\"pass\": true or false, \"reason\": \"one sentence\"}.";

impl Kind for GateConfig {
    const ID: &'static str = "gate";
    const TITLE: &'static str = "Gate";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[PASS, FAIL, Handle::ERROR];

    fn template(&self, field: &str) -> Option<&str> {
        (field == "criteria").then_some(self.criteria.as_str())
    }

    fn model(&self) -> Option<ModelUse<'_>> {
        Some(ModelUse {
            model: &self.model,
            fallbacks: &self.fallback_models,
            web_search: false,
        })
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let criteria = env.render(step.node_id, "criteria", step.input)?;
        let routes = routes_for(env, step.node_id, &self.model, &self.fallback_models, false)?;
        // A spent budget with `onExceed: approve` asks a person before the judge is asked, as
        // an agent does; the step runs again with the answer.
        let approvals = ToolApprovals::resumed(step.resume.as_ref(), None);
        let turn = Turn {
            env,
            visit: step.visit,
            approvals: &approvals,
        };
        if let Some(pause) = budget_pause(turn, step.node_id)? {
            return Ok(StepOutput::waiting(pause.input.clone(), Wait::Tool(pause)));
        }
        let schema = json!({
            "type": "object",
            "properties": {
                "pass": { "type": "boolean" },
                "reason": { "type": "string" },
            },
            "required": ["pass", "reason"],
        });
        let request = ChatRequest {
            reasoning_effort: self.reasoning_effort.map(|effort| effort.as_str().to_string()),
            ..ChatRequest::new(
                routes[0].model.clone(),
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
            complete_structured(env, step.node_id, step.visit, &routes, request, &schema).await?;
        let passed = verdict
            .get("pass")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let reason = verdict.get("reason").map(output_text).unwrap_or_default();
        let handle = if passed { PASS } else { FAIL };
        env.emit(
            step.node_id,
            EventType::LogicCheck,
            format!("{}: {reason}", handle.id),
            None,
        );
        Ok(StepOutput::new(step.input.clone(), handle.id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weft_scripted_llm::{Reply, Script, ScriptedLlm};

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn routes_by_the_models_verdict_and_passes_the_input_on() {
        let server = ScriptedLlm::start(Script::always(Reply::text(
            r#"{"pass": false, "reason": "too long"}"#,
        )))
        .await
        .expect("server");
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .template("check", "criteria", "At most {{ 5 }} words.");
        let config = GateConfig {
            criteria: "x".into(),
            model: "judge".into(),
            fallback_models: Vec::new(),
            reasoning_effort: None,
        };
        let draft = json!("a draft that goes on and on");
        let output = config.run(&step("check", &Arc::new(draft.clone())), &env).await.expect("judged");
        assert_eq!((output.handle.as_str(), Arc::unwrap_or_clone(output.value)), ("fail", draft));
        assert_eq!(env.contents(EventType::LogicCheck), ["fail: too long"]);
        let request = &server.requests()[0];
        let asked = request.last_user_text().unwrap_or_default();
        assert!(asked.starts_with("Criteria:\nAt most 5 words."), "{asked}");
        assert_eq!(request.body["response_format"]["type"], "json_schema");
    }
}
