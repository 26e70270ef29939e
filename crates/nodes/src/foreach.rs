//! `forEach`: runs a flow once per item of a list, some at a time, outputs in item order.

use std::sync::Arc;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ChildFlowUse, Handle, Kind, Scheduling};
use crate::step::{
    ChildEnd, ChildFlow, ChildRun, Step, StepEnv, StepError, StepErrorKind, StepOutput,
};

/// Runs the flow file `flow` once per item of a list, with the item as that run's input.
/// `items` is a field path of the previous output (`urls`, `data.rows`), a template that renders
/// a JSON array, or empty for a previous output that is itself a list. At most `maxConcurrency`
/// items run at once (0: all). The output is the list of per-item results in item order; a
/// failed item's slot is `{ "error": "..." }`, unless `failFast` is set: then the first failure
/// stops the other items and fails the step. Events of an item carry its index (`item`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForEachConfig {
    /// Where the list is: a field path, a template, or empty for the previous output.
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub items: String,
    /// The flow file run per item, relative to this flow's file.
    #[serde(default)]
    #[schemars(
        extend("x-weft" = "flowPath", "x-weft-empty" = "name the flow file to run per item"),
        length(min = 1)
    )]
    pub flow: String,
    /// Items running at once; 0 runs them all at once.
    #[serde(default)]
    #[schemars(title = "At once")]
    pub max_concurrency: u32,
    /// Stop everything at the first failing item.
    #[serde(default)]
    pub fail_fast: bool,
}

impl Kind for ForEachConfig {
    const ID: &'static str = "forEach";
    const TITLE: &'static str = "For each";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::ERROR];

    fn template(&self, field: &str) -> Option<&str> {
        (field == "items").then_some(self.items.as_str())
    }

    fn child_flow(&self) -> Option<ChildFlowUse<'_>> {
        Some(ChildFlowUse {
            path: self.flow.trim(),
            may_pause: false,
        })
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        run_items(self, step, env).await
    }
}

impl ForEachConfig {
    /// Whether `items` is a template (rather than a field path).
    fn items_is_template(&self) -> bool {
        self.items.contains("{{") || self.items.contains("{%")
    }
}

/// The list to iterate over.
fn items(
    config: &ForEachConfig,
    step: &Step<'_>,
    env: &dyn StepEnv,
) -> Result<Vec<Value>, StepError> {
    let not_a_list = |what: String, value: &Value| {
        let excerpt: String = value.to_string().chars().take(80).collect();
        StepError::new(StepErrorKind::ForEach, format!("items: {what} is not a list: {excerpt}"))
    };
    let as_json = |value: &Value| match value {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    };
    let source = config.items.trim();
    let value = if config.items_is_template() {
        let text = env.render(step.node_id, "items", step.input)?;
        serde_json::from_str(&text)
            .map_err(|_| not_a_list("the rendered template".into(), &Value::String(text)))?
    } else if source.is_empty() {
        as_json(step.input)
    } else {
        let input = as_json(step.input);
        weft_flow::path::get(&input, source)
            .cloned().ok_or_else(|| {
            StepError::new(
                StepErrorKind::ForEach,
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

async fn run_items(
    config: &ForEachConfig,
    step: &Step<'_>,
    env: &dyn StepEnv,
) -> Result<StepOutput, StepError> {
    let list = items(config, step, env)?;
    let count = list.len();
    // Read once: every item runs the same flow.
    let child = ChildFlow::load(&env.resolve_path(config.flow.trim()))?;
    let limit = match config.max_concurrency {
        0 => count.max(1),
        n => n as usize,
    };
    // Cancelling this token stops the items still running (fail-fast or a cancelled run).
    let stop = env.cancel().child_token();
    let child = &child;
    let stop_ref = &stop;
    let mut runs = futures_util::stream::iter(list.into_iter().enumerate())
        .map(|(index, item)| async move {
            let end = env
                .run_child(
                    step.node_id,
                    ChildRun {
                        flow: child,
                        input: Arc::new(item),
                        item: Some(index as u64),
                        visit: step.visit,
                        resume: None,
                        cancel: stop_ref.clone(),
                    },
                )
                .await;
            (index, end)
        })
        .buffer_unordered(limit);
    let mut results = vec![Value::Null; count];
    while let Some((index, end)) = runs.next().await {
        let failure = match end {
            Ok(ChildEnd::Completed(value)) => {
                // The child's context is gone: its result is no longer shared.
                results[index] = Arc::unwrap_or_clone(value);
                continue;
            }
            Ok(ChildEnd::Failed(message)) => message,
            Ok(ChildEnd::Paused(_)) => {
                "an approval inside a forEach item cannot pause the run".to_string()
            }
            Ok(ChildEnd::Cancelled) if env.cancel().is_cancelled() => {
                return Err(StepError::cancelled());
            }
            Ok(ChildEnd::Cancelled) => "cancelled".to_string(),
            Err(error) if error.is_cancelled() => return Err(error),
            Err(error) => error.message,
        };
        if config.fail_fast {
            stop.cancel();
            return Err(StepError::new(
                StepErrorKind::ForEach,
                format!("item {index} failed: {failure}"),
            ));
        }
        results[index] = json!({ "error": failure });
    }
    Ok(StepOutput::new(Value::Array(results), Handle::OUTPUT.id))
}


#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    fn env(dir: &std::path::Path) -> FakeEnv {
        std::fs::write(dir.join("item.json"), r#"{"nodes": [], "edges": []}"#).expect("write");
        FakeEnv::new().folder(dir)
    }

    fn config(items: &str, fail_fast: bool) -> ForEachConfig {
        ForEachConfig {
            items: items.into(),
            flow: "item.json".into(),
            max_concurrency: 2,
            fail_fast,
        }
    }

    #[tokio::test]
    async fn runs_each_item_of_a_field_path_and_keeps_item_order() {
        let dir = tempfile::tempdir().expect("dir");
        let env = env(dir.path())
            .child_ends(json!("b"), || ChildEnd::Failed("b is bad".into()))
            .child_ends(Value::Null, || ChildEnd::Completed(json!("ok").into()));
        let input = json!({"data": {"rows": ["a", "b", "c"]}});
        let output = config("data.rows", false)
            .run(&step("each", &Arc::new(input.clone())), &env)
            .await
            .expect("runs");
        assert_eq!(*output.value, json!(["ok", {"error": "b is bad"}, "ok"]));
        let mut items: Vec<Option<u64>> = env.children.lock().expect("calls").iter().map(|call| call.item).collect();
        items.sort();
        assert_eq!(items, [Some(0), Some(1), Some(2)]);
    }

    #[tokio::test]
    async fn fail_fast_fails_the_step_naming_the_item() {
        let dir = tempfile::tempdir().expect("dir");
        let env = env(dir.path())
            .child_ends(json!(2), || ChildEnd::Failed("two".into()))
            .child_ends(Value::Null, || ChildEnd::Completed(json!("ok").into()));
        let error = config("", true)
            .run(&step("each", &Arc::new(json!([1, 2, 3]))), &env)
            .await
            .expect_err("fails fast");
        assert_eq!((error.kind, error.message.as_str()), (StepErrorKind::ForEach, "item 1 failed: two"));
    }

    #[tokio::test]
    async fn a_list_that_is_not_there_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let error = config("rows", false)
            .run(&step("each", &Arc::new(json!({"other": []}))), &env(dir.path()))
            .await
            .expect_err("no rows");
        assert_eq!(error.message, "items: the previous output has no field `rows`");
        let env = env(dir.path()).template("each", "items", "{{ 42 }}");
        let error = config("{{ 42 }}", false)
            .run(&step("each", &Arc::new(json!({}))), &env)
            .await
            .expect_err("not a list");
        assert_eq!(error.message, "items: `{{ 42 }}` is not a list: 42");
    }
}
