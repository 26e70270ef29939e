//! `template`: renders text (or JSON) from a MiniJinja template, no LLM.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepErrorKind, StepOutput};

/// Renders a template without calling a model. With `parseJson`, the rendered text must be
/// JSON and the output is that value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateConfig {
    /// The MiniJinja template.
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub template: String,
    /// Parse the rendered text as JSON.
    #[serde(default)]
    #[schemars(title = "Parse as JSON")]
    pub parse_json: bool,
}

impl Kind for TemplateConfig {
    const ID: &'static str = "template";
    const TITLE: &'static str = "Template";
    const SCHEDULING: Scheduling = Scheduling::Instant;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::ERROR];

    fn template(&self, field: &str) -> Option<&str> {
        (field == "template").then_some(self.template.as_str())
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let text = env.render(step.node_id, "template", step.input)?;
        let value = if self.parse_json {
            serde_json::from_str(&text).map_err(|error| {
                let excerpt: String = text.chars().take(120).collect();
                StepError::new(
                    StepErrorKind::Template,
                    format!("parseJson: the rendered text is not JSON ({error}): {excerpt}"),
                )
            })?
        } else {
            serde_json::Value::String(text)
        };
        Ok(StepOutput::new(value, Handle::OUTPUT.id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    #[tokio::test]
    async fn renders_text_or_json_and_names_what_is_not_json() {
        let env = FakeEnv::new()
            .template("t", "template", r#"{"n": {{ n * 2 }}}"#)
            .template("bad", "template", "not json");
        let text = TemplateConfig::default()
            .run(&step("t", &Arc::new(json!({"n": 21}))), &env)
            .await
            .expect("renders");
        assert_eq!(*text.value, json!(r#"{"n": 42}"#));
        let parsed = TemplateConfig {
            parse_json: true,
            ..TemplateConfig::default()
        };
        let value = parsed.run(&step("t", &Arc::new(json!({"n": 21}))), &env).await.expect("parses");
        assert_eq!(*value.value, json!({"n": 42}));
        let error = parsed.run(&step("bad", &Arc::new(json!({}))), &env).await.expect_err("not json");
        assert_eq!(error.kind, StepErrorKind::Template);
        assert!(error.message.starts_with("parseJson: the rendered text is not JSON"), "{error}");
        let unknown = TemplateConfig::default()
            .run(&step("t", &Arc::new(json!("no n here"))), &env)
            .await
            .expect_err("n is not defined");
        assert!(unknown.message.contains("`n`"), "{unknown}");
    }
}
