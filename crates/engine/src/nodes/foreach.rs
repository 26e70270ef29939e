//! `forEach`: runs a flow once per item of a list, some at a time, outputs in item order.

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    FieldDescription, FieldError, FieldType, HandleDescription, KindDescription, NodeKind,
};
use crate::run::{ChildFlow, NestedEnd, Step, StepError, StepOutput, run_nested};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Runs the flow file `flow` once per item of a list, with the item as that run's input. \
         `items` is a field path of the previous output (`urls`, `data.rows`), a template that \
         renders a JSON array, or empty for a previous output that is itself a list. At most \
         `maxConcurrency` items run at once (0: all). The output is the list of per-item results \
         in item order; a failed item's slot is `{ \"error\": \"...\" }`, unless `failFast` is \
         set: then the first failure stops the other items and fails the step. Events of an item \
         carry its index (`item`)."
    };
    (items) => {
        "Where the list is: a field path, a template, or empty for the previous output."
    };
    (flow) => {
        "The flow file run per item, relative to this flow's file."
    };
    (maxConcurrency) => {
        "Items running at once; 0 runs them all at once."
    };
    (failFast) => {
        "Stop everything at the first failing item."
    };
}

#[doc = help!(kind)]
///
/// From seeds 000 (loop), 002 (dynamic_parallel) and 004 (forEach).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForEachConfig {
    #[doc = help!(items)]
    #[serde(default)]
    pub items: String,
    #[doc = help!(flow)]
    #[serde(default)]
    pub flow: String,
    #[doc = help!(maxConcurrency)]
    #[serde(default)]
    pub max_concurrency: u32,
    #[doc = help!(failFast)]
    #[serde(default)]
    pub fail_fast: bool,
}

impl ForEachConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if self.flow.trim().is_empty() {
            return Err(FieldError::new(
                "flow",
                "is empty: name the flow file to run per item",
            ));
        }
        Ok(())
    }

    pub(super) fn templates(&self) -> Vec<(String, &str)> {
        if self.items.contains("{{") || self.items.contains("{%") {
            vec![("items".to_string(), self.items.as_str())]
        } else {
            Vec::new()
        }
    }
}

/// The list to iterate over.
fn items(config: &ForEachConfig, step: &Step<'_>) -> Result<Vec<Value>, StepError> {
    let not_a_list = |what: String, value: &Value| {
        let excerpt: String = value.to_string().chars().take(80).collect();
        StepError::new("forEach", format!("items: {what} is not a list: {excerpt}"))
    };
    let as_json = |value: &Value| match value {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    };
    let source = config.items.trim();
    let value = if !config.templates().is_empty() {
        let text = step.render("items")?;
        serde_json::from_str(&text)
            .map_err(|_| not_a_list("the rendered template".into(), &Value::String(text)))?
    } else if source.is_empty() {
        as_json(step.input)
    } else {
        let input = as_json(step.input);
        let found = source
            .split('.')
            .try_fold(&input, |current, part| match current {
                Value::Object(map) => map.get(part),
                Value::Array(list) => part.parse::<usize>().ok().and_then(|index| list.get(index)),
                _ => None,
            });
        found.cloned().ok_or_else(|| {
            StepError::new(
                "forEach",
                format!("items: the previous output has no field `{source}`"),
            )
        })?
    };
    match value {
        Value::Array(list) => Ok(list),
        other => Err(not_a_list(
            if source.is_empty() {
                "the previous output".into()
            } else {
                format!("`{source}`")
            },
            &other,
        )),
    }
}

pub(super) async fn run(config: &ForEachConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let list = items(config, step)?;
    let count = list.len();
    // Read once: every item runs the same flow.
    let child = ChildFlow::load(&step.ctx.resolve_path(config.flow.trim()))?;
    let limit = match config.max_concurrency {
        0 => count.max(1),
        n => n as usize,
    };
    // Cancelling this token stops the items still running (fail-fast or a cancelled run).
    let stop = step.ctx.cancel.child_token();
    let child = &child;
    let stop_ref = &stop;
    let mut runs = futures_util::stream::iter(list.into_iter().enumerate())
        .map(|(index, item)| async move {
            let end = run_nested(
                step.ctx,
                &step.node.id,
                Some(index as u64),
                child,
                item,
                None,
                Default::default(),
                stop_ref.clone(),
            )
            .await;
            (index, end)
        })
        .buffer_unordered(limit);
    let mut results = vec![Value::Null; count];
    while let Some((index, end)) = runs.next().await {
        let failure = match end {
            Ok(NestedEnd::Completed(value)) => {
                results[index] = value;
                continue;
            }
            Ok(NestedEnd::Failed(message)) => message,
            Ok(NestedEnd::Paused(_)) => {
                "an approval inside a forEach item cannot pause the run".to_string()
            }
            Ok(NestedEnd::Cancelled) if step.ctx.cancel.is_cancelled() => {
                return Err(StepError::new("cancelled", "the run was cancelled"));
            }
            Ok(NestedEnd::Cancelled) => "cancelled".to_string(),
            Err(error) if error.kind == "cancelled" => return Err(error),
            Err(error) => error.message,
        };
        if config.fail_fast {
            stop.cancel();
            return Err(StepError::new(
                "forEach",
                format!("item {index} failed: {failure}"),
            ));
        }
        results[index] = json!({ "error": failure });
    }
    Ok(StepOutput::new(Value::Array(results), "output"))
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new("items", "Items", help!(items), FieldType::Template).default(""),
            FieldDescription::new("flow", "Flow", help!(flow), FieldType::FlowPath)
                .default("")
                .required(),
            FieldDescription::new(
                "maxConcurrency",
                "At once",
                help!(maxConcurrency),
                FieldType::Integer {
                    min: Some(0),
                    max: None,
                },
            )
            .default(0),
            FieldDescription::new("failFast", "Fail fast", help!(failFast), FieldType::Boolean)
                .default(false),
        ],
        ..KindDescription::new(NodeKind::ForEach, "For each", help!(kind))
    }
}
