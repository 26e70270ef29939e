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
