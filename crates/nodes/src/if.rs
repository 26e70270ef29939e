//! `if`: routes by testing the previous output; the first matching condition wins.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

use super::{FieldError, Handle, Kind, Scheduling};
use weft_event::EventType;
use crate::step::{Step, StepEnv, StepError, StepOutput};
use weft_template::output_text;

/// Tests the previous output against each condition in turn and leaves by the handle of the
/// first that holds (`condition-<i>`), or by `false` when none does. The output is the
/// previous output, unchanged.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct IfConfig {
    /// The conditions, tested in order.
    #[serde(default)]
    #[schemars(extend("x-weft" = "conditions"))]
    pub conditions: Vec<Condition>,
}

/// One test. Text is compared trimmed and lowercased on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Condition {
    pub operator: Operator,
    /// What to compare with (text or a number; unused by `is_empty` / `is_not_empty`).
    #[serde(default)]
    pub value: Value,
    /// A dotted path (`verdict`, `scores.0`) into a JSON previous output; the whole output when
    /// absent.
    #[serde(default)]
    pub field: Option<String>,
    #[serde(skip)]
    #[schemars(skip)]
    prepared: Prepared,
}

impl Condition {
    pub fn new(operator: Operator, value: Value, field: Option<String>) -> Condition {
        Condition {
            operator,
            value,
            field,
            prepared: Prepared::default(),
        }
    }

    /// The text `value` is compared as, and the compiled expression of a `regex` condition.
    fn test(&self) -> &(String, Option<regex::Regex>) {
        self.prepared.test.get_or_init(|| {
            let wanted = value_text(&self.value).into_owned();
            let regex = match self.operator {
                Operator::Regex => case_insensitive_regex(&wanted).ok(),
                _ => None,
            };
            (wanted, regex)
        })
    }

    /// The handle taken when this condition, row `index`, holds, and the `logic_check` text
    /// saying so.
    fn taken(&self, index: usize) -> &(String, String) {
        self.prepared.taken.get_or_init(|| {
            let handle = CONDITION.row(index);
            let operator: &str = self.operator.into();
            // Put together piece by piece: made at a condition's first visit, which on a
            // long chain of `if` nodes is every step, and `format!` with the value's `Display`
            // cost more than the rest of the step. The value is written as compact JSON, as its
            // `Display` writes it.
            let value = serde_json::to_string(&self.value).unwrap_or_default();
            let mut description = String::with_capacity(48 + value.len() + handle.len());
            description.push_str("condition ");
            description.push_str(itoa::Buffer::new().format(index));
            description.push_str(" (");
            if let Some(field) = &self.field {
                description.push_str(field);
                description.push(' ');
            }
            description.push_str(operator);
            description.push(' ');
            description.push_str(&value);
            description.push_str(") is true: taking ");
            description.push_str(&handle);
            (handle, description)
        })
    }
}

/// What testing a condition needs, derived at its first test and kept: a flow's conditions are
/// parsed once and tested at every visit (a `regex` condition was compiled at each).
#[derive(Debug, Clone, Default)]
struct Prepared {
    test: std::sync::OnceLock<(String, Option<regex::Regex>)>,
    taken: std::sync::OnceLock<(String, String)>,
}

/// Derived from the condition, so never a difference between two.
impl PartialEq for Prepared {
    fn eq(&self, _: &Prepared) -> bool {
        true
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Operator {
    Equal,
    Contains,
    NotEqual,
    NotContains,
    StartsWith,
    EndsWith,
    Regex,
    IsEmpty,
    IsNotEmpty,
    Gt,
    Lt,
}

/// The handle of the condition that held; one per row of `conditions`.
const CONDITION: Handle = Handle::per_row("condition-{i}", "Condition {i}", "conditions");
/// The handle taken when no condition holds.
const OTHERWISE: Handle = Handle::execution("false", "Otherwise");

impl Kind for IfConfig {
    const ID: &'static str = "if";
    const TITLE: &'static str = "If";
    const SCHEDULING: Scheduling = Scheduling::Instant;
    const HANDLES: &'static [Handle] = &[CONDITION, OTHERWISE];

    fn check(&self) -> Result<(), FieldError> {
        for (index, condition) in self.conditions.iter().enumerate() {
            if !matches!(
                condition.value,
                Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null
            ) {
                return Err(FieldError::new(
                    format!("conditions[{index}].value"),
                    "must be text or a number",
                ));
            }
            if condition.operator == Operator::Regex
                && let Err(error) = case_insensitive_regex(&value_text(&condition.value))
            {
                return Err(FieldError::new(
                    format!("conditions[{index}].value"),
                    format!(
                        "not a valid regular expression: {}",
                        regex_error_summary(&error)
                    ),
                ));
            }
        }
        Ok(())
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let matched = self
            .conditions
            .iter()
            .position(|condition| holds(condition, step.input));
        let (handle, description) = match matched {
            Some(index) => self.conditions[index].taken(index).clone(),
            None => (
                OTHERWISE.id.to_string(),
                format!("no condition is true: taking {}", OTHERWISE.id),
            ),
        };
        env.emit(step.node_id, EventType::LogicCheck, description, None);
        Ok(StepOutput::new(step.input.clone(), handle))
    }
}

/// The last line of a regex error (the full message draws a caret diagram over several lines).
fn regex_error_summary(error: &regex::Error) -> String {
    let text = error.to_string();
    let last = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    last.trim().trim_start_matches("error: ").to_string()
}

fn case_insensitive_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
}

/// `value` as conditions compare it: its text, trimmed and lowercased. Text already in that
/// form is borrowed, not copied (an `if` tests its input at every visit).
fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(text) => lowercased(text.trim()),
        other => Cow::Owned(lowercased(output_text(other).trim()).into_owned()),
    }
}

fn lowercased(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|byte| byte.is_ascii() && !byte.is_ascii_uppercase()) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.to_lowercase())
    }
}

/// Whether `condition` holds for `input`.
pub(crate) fn holds(condition: &Condition, input: &Value) -> bool {
    let subject = match &condition.field {
        Some(path) => {
            // A JSON previous output may arrive as text (an agent's answer): read it as JSON.
            let parsed;
            let value = match input {
                Value::String(text) => {
                    parsed = serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
                    &parsed
                }
                other => other,
            };
            weft_flow::path::get(value, path)
                .map(|value| Cow::Owned(value_text(value).into_owned()))
                .unwrap_or_default()
        }
        None => value_text(input),
    };
    let (wanted, regex) = condition.test();
    let number = |text: &str| text.parse::<f64>().ok();
    match condition.operator {
        Operator::Equal => *subject == **wanted,
        Operator::NotEqual => *subject != **wanted,
        Operator::Contains => subject.contains(wanted.as_str()),
        Operator::NotContains => !subject.contains(wanted.as_str()),
        Operator::StartsWith => subject.starts_with(wanted.as_str()),
        Operator::EndsWith => subject.ends_with(wanted.as_str()),
        // An expression that does not compile never matches (`check` refuses it in a flow).
        Operator::Regex => regex.as_ref().is_some_and(|regex| regex.is_match(&subject)),
        Operator::IsEmpty => subject.is_empty(),
        Operator::IsNotEmpty => !subject.is_empty(),
        Operator::Gt => matches!((number(&subject), number(wanted)), (Some(a), Some(b)) if a > b),
        Operator::Lt => matches!((number(&subject), number(wanted)), (Some(a), Some(b)) if a < b),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::step::fake::{FakeEnv, step};
    use serde_json::json;

    #[tokio::test]
    async fn leaves_by_the_first_condition_that_holds_and_says_why() {
        let config = IfConfig {
            conditions: vec![
                condition(Operator::Contains, json!("cancel"), None),
                condition(Operator::Gt, json!(5), Some("score")),
            ],
        };
        let env = FakeEnv::new();
        let input = json!({"score": 7});
        let output = config.run(&step("route", &Arc::new(input.clone())), &env).await.expect("runs");
        assert_eq!((output.handle.as_str(), Arc::unwrap_or_clone(output.value)), ("condition-1", input));
        let output = config
            .run(&step("route", &Arc::new(json!({"score": 1}))), &env)
            .await
            .expect("runs");
        assert_eq!(output.handle, "false");
        let output = config
            .run(&step("route", &Arc::new(json!("Please CANCEL it"))), &env)
            .await
            .expect("runs");
        assert_eq!(output.handle, "condition-0");
        assert_eq!(
            env.contents(EventType::LogicCheck),
            [
                "condition 1 (score gt 5) is true: taking condition-1",
                "no condition is true: taking false",
                r#"condition 0 (contains "cancel") is true: taking condition-0"#,
            ]
        );
    }

    fn condition(operator: Operator, value: Value, field: Option<&str>) -> Condition {
        Condition::new(operator, value, field.map(str::to_string))
    }

    #[test]
    fn operators_compare_trimmed_lowercased_text() {
        let input = json!("  Refund please ");
        assert!(holds(
            &condition(Operator::Contains, json!("REFUND"), None),
            &input
        ));
        assert!(holds(
            &condition(Operator::Equal, json!("refund please"), None),
            &input
        ));
        assert!(holds(
            &condition(Operator::StartsWith, json!("ref"), None),
            &input
        ));
        assert!(holds(
            &condition(Operator::EndsWith, json!("please"), None),
            &input
        ));
        assert!(holds(
            &condition(Operator::NotContains, json!("cancel"), None),
            &input
        ));
        assert!(holds(
            &condition(Operator::Regex, json!("^ref.*SE$"), None),
            &input
        ));
        assert!(!holds(
            &condition(Operator::IsEmpty, Value::Null, None),
            &input
        ));
        assert!(holds(
            &condition(Operator::IsEmpty, Value::Null, None),
            &json!("   ")
        ));
        // Beyond ASCII, lowercased too (on both sides).
        assert!(holds(
            &condition(Operator::Equal, json!("ÉCOLE Ǆ"), None),
            &json!("  école ǆ ")
        ));
        assert!(holds(
            &condition(Operator::StartsWith, json!("straße"), None),
            &json!("STRAßE 5")
        ));
    }

    #[test]
    fn a_condition_tested_again_compares_each_input_afresh() {
        // What a condition derives from its value at the first test is kept, not the input.
        let regex = condition(Operator::Regex, json!("^ref.*SE$"), None);
        assert!(holds(&regex, &json!("Refund, please")));
        assert!(!holds(&regex, &json!("cancel")));
        assert!(holds(&regex, &json!("REF case")));
        let equal = condition(Operator::Equal, json!(" Yes "), Some("verdict"));
        assert!(holds(&equal, &json!({"verdict": "yes"})));
        assert!(!holds(&equal, &json!({"verdict": "no"})));
    }

    #[test]
    fn numbers_and_fields() {
        let input = json!({"score": 7, "tags": ["a", "b"], "verdict": "Yes"});
        assert!(holds(
            &condition(Operator::Gt, json!(5), Some("score")),
            &input
        ));
        assert!(!holds(
            &condition(Operator::Lt, json!("5"), Some("score")),
            &input
        ));
        assert!(holds(
            &condition(Operator::Equal, json!("b"), Some("tags.1")),
            &input
        ));
        assert!(holds(
            &condition(Operator::Equal, json!("yes"), Some("verdict")),
            &input
        ));
        // An agent's JSON answer arrives as text and is read as JSON for `field`.
        assert!(holds(
            &condition(Operator::Equal, json!("yes"), Some("verdict")),
            &json!(r#"{"verdict":"yes"}"#)
        ));
        assert!(!holds(
            &condition(Operator::Gt, json!(1), Some("missing")),
            &input
        ));
        assert!(!holds(
            &condition(Operator::Gt, json!(1), None),
            &json!("not a number")
        ));
    }
}
