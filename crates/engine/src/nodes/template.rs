//! `template`: renders text (or JSON) from a MiniJinja template, no LLM.

use serde::Deserialize;

use crate::run::{Step, StepError, StepOutput};

/// Renders a template (SPEC §3) without calling a model. With `parseJson`, the rendered text
/// must be JSON and the output is that value.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateConfig {
    /// The MiniJinja template.
    #[serde(default)]
    pub template: String,
    /// Parse the rendered text as JSON.
    #[serde(default)]
    pub parse_json: bool,
}

pub(super) fn run(config: &TemplateConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let text = step.render("template")?;
    let value = if config.parse_json {
        serde_json::from_str(&text).map_err(|error| {
            let excerpt: String = text.chars().take(120).collect();
            StepError::new(
                "template",
                format!("parseJson: the rendered text is not JSON ({error}): {excerpt}"),
            )
        })?
    } else {
        serde_json::Value::String(text)
    };
    Ok(StepOutput::new(value, "output"))
}
