//! `template`: renders text (or JSON) from a MiniJinja template, no LLM.

use serde::Deserialize;

use super::{FieldDescription, FieldType, HandleDescription, KindDescription, NodeKind};

use crate::run::{Step, StepError, StepOutput};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Renders a template without calling a model. With `parseJson`, the rendered text \
         must be JSON and the output is that value."
    };
    (template) => {
        "The MiniJinja template."
    };
    (parseJson) => {
        "Parse the rendered text as JSON."
    };
}

#[doc = help!(kind)]
///
/// Templates: SPEC §3.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateConfig {
    #[doc = help!(template)]
    #[serde(default)]
    pub template: String,
    #[doc = help!(parseJson)]
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

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new("template", "Template", help!(template), FieldType::Template)
                .default(""),
            FieldDescription::new(
                "parseJson",
                "Parse as JSON",
                help!(parseJson),
                FieldType::Boolean,
            )
            .default(false),
        ],
        ..KindDescription::new(NodeKind::Template, "Template", help!(kind))
    }
}
