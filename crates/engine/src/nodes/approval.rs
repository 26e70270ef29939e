//! `approval`: pauses the run until a person approves or rejects, optionally filling in a small
//! form, or until its `timeoutSeconds` pass with nobody deciding. The node renders its message
//! and asks the scheduler to wait; the scheduler owns pausing (the run's status and queue) and
//! applies the decision. This file also holds a person's answer and its checks.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FieldError, Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepOutput, Wait};
use crate::template::output_text;

/// Pauses the run and shows `message` (a template) to a person, who approves or rejects (and
/// fills in `fields`, if any). The run continues along the `approve` or `reject` edges; the
/// output is what the node was given (or the draft as the person edited it), so the next node
/// works on the approved draft. With `timeoutSeconds`, a run nobody decided in time goes on
/// along `timeout`, or fails naming the timeout when that handle has no edge.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalConfig {
    /// What the person is asked (a template; `{{PREVIOUS_OUTPUT}}` shows the draft).
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub message: String,
    /// A small form answered with the decision, each answer in `{{ approval.<name> }}`:
    /// `[{"name": "reason", "type": "text"}, {"name": "tone", "type": "choice", "options":
    /// ["formal", "warm"]}, {"name": "amount", "type": "number", "required": true},
    /// {"name": "reply", "type": "draft"}]`. A `draft` field starts as the node's input and,
    /// edited, is what goes on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-weft" = "json"))]
    pub fields: Vec<FormField>,
}

/// One question of an approval's form.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FormField {
    /// Its answer is `{{ approval.<name> }}`.
    pub name: String,
    /// What the person reads (the name when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    #[serde(rename = "type", default)]
    pub kind: FormFieldKind,
    /// The choices of a `choice` field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Deciding needs an answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// What a form field takes.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FormFieldKind {
    #[default]
    Text,
    /// One of `options`.
    Choice,
    Number,
    /// The node's input, to edit: the edited text goes on instead.
    Draft,
}

/// Names `{{ approval }}` has already.
const RESERVED: &[&str] = &["decision", "note", "by", "at"];

const APPROVE: Handle = Handle::execution("approve", "Approve");
const REJECT: Handle = Handle::execution("reject", "Reject");
/// Taken when `timeoutSeconds` passed with nobody deciding.
pub const TIMEOUT: Handle = Handle::execution("timeout", "Timeout");

impl Kind for ApprovalConfig {
    const ID: &'static str = "approval";
    const TITLE: &'static str = "Approval";
    const SCHEDULING: Scheduling = Scheduling::Pause;
    const HANDLES: &'static [Handle] = &[APPROVE, REJECT, TIMEOUT];

    fn template(&self, field: &str) -> Option<&str> {
        (field == "message").then_some(self.message.as_str())
    }

    fn check(&self) -> Result<(), FieldError> {
        let mut drafts = 0;
        for (index, field) in self.fields.iter().enumerate() {
            let at = |part: &str| format!("fields[{index}]{part}");
            let name = field.name.trim();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|character| character.is_alphanumeric() || character == '_')
            {
                return Err(FieldError::new(
                    at(".name"),
                    "a field needs a name of letters, digits and _ (its answer is {{ approval.<name> }})",
                ));
            }
            if RESERVED.contains(&name) {
                return Err(FieldError::new(
                    at(".name"),
                    format!("`{name}` is taken: approval.{name} is already the decision's"),
                ));
            }
            if self.fields[..index].iter().any(|other| other.name == field.name) {
                return Err(FieldError::new(at(".name"), format!("two fields are named `{name}`")));
            }
            if field.kind == FormFieldKind::Choice && field.options.is_empty() {
                return Err(FieldError::new(at(".options"), "a choice needs options"));
            }
            if field.kind == FormFieldKind::Draft {
                drafts += 1;
                if drafts > 1 {
                    return Err(FieldError::new(at(".type"), "one draft field at most"));
                }
            }
        }
        Ok(())
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let message = env.render(step.node_id, "message", step.input)?;
        Ok(StepOutput::waiting(
            step.input.clone(),
            Wait::Decision {
                message,
                fields: self.fields.clone(),
            },
        ))
    }
}

#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionChoice {
    Approve,
    Reject,
    /// Nobody decided within the approval's `timeoutSeconds` (taken by Weft, never a person).
    Timeout,
}

impl DecisionChoice {
    /// The handle the run continues by.
    pub fn handle(self) -> &'static str {
        match self {
            DecisionChoice::Approve => APPROVE.id,
            DecisionChoice::Reject => REJECT.id,
            DecisionChoice::Timeout => TIMEOUT.id,
        }
    }
}

/// An answer at an approval node: `{{ approval }}` is `{decision, note, by, at}` and the form's
/// answers by field name.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub decision: DecisionChoice,
    #[serde(default)]
    pub note: String,
    /// The form's answers, by field name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, Value>,
    /// Who decided (a name from the app's settings, an API token's name, `--by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl Decision {
    /// Reads `approve`/`approved`/`yes`/`true` or `reject`/`rejected`/`no`/`false`, any case.
    pub fn parse(answer: &str, note: impl Into<String>) -> Result<Decision, String> {
        let decision = match answer.trim().to_lowercase().as_str() {
            "approve" | "approved" | "yes" | "true" => DecisionChoice::Approve,
            "reject" | "rejected" | "no" | "false" => DecisionChoice::Reject,
            _ => {
                return Err(format!(
                    "`{}` is not a decision: answer approve or reject (also accepted: approved, yes, true / rejected, no, false)",
                    answer.trim()
                ));
            }
        };
        Ok(Decision {
            decision,
            note: note.into(),
            fields: BTreeMap::new(),
            by: None,
        })
    }

    /// What Weft decides when an approval's time ran out (the run says how long it waited).
    pub fn timeout() -> Decision {
        Decision {
            decision: DecisionChoice::Timeout,
            note: "nobody decided in time".into(),
            fields: BTreeMap::new(),
            by: Some("weft".into()),
        }
    }

    /// The same decision, made by `by`.
    pub fn by(mut self, by: Option<String>) -> Decision {
        self.by = by.filter(|name| !name.trim().is_empty());
        self
    }

    /// Reads the `NODE=approve|reject[:NOTE]` form of `weft run --decide`.
    pub fn parse_for_node(text: &str) -> Result<(String, Decision), String> {
        let (node, answer) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}` should look like NODE=approve or NODE=reject:NOTE"))?;
        let (answer, note) = answer.split_once(':').unwrap_or((answer, ""));
        let node = node.trim();
        if node.is_empty() {
            return Err(format!("`{text}` names no node (NODE=approve)"));
        }
        Ok((node.to_string(), Decision::parse(answer, note)?))
    }

    /// The decision as `{{ approval }}` sees it and the store keeps it, made at `at`.
    pub fn to_value_at(&self, at: &str) -> Value {
        let mut value = serde_json::Map::new();
        for (name, answer) in &self.fields {
            value.insert(name.clone(), answer.clone());
        }
        value.insert("decision".into(), Value::from(self.decision.handle()));
        value.insert("note".into(), Value::from(self.note.clone()));
        value.insert(
            "by".into(),
            self.by.clone().map_or(Value::Null, Value::String),
        );
        value.insert("at".into(), Value::from(at));
        Value::Object(value)
    }

    /// The decision as its `input_received` event says it: what `{{ approval }}` has but the
    /// time (the event's own) and an unknown decider.
    pub fn event_content(&self) -> Value {
        let mut value = self.to_value_at("");
        if let Value::Object(fields) = &mut value {
            fields.remove("at");
            if self.by.is_none() {
                fields.remove("by");
            }
        }
        value
    }

    /// Checks the form's answers against `fields` and fills in what a person left out (a draft
    /// not edited keeps `draft`, the node's input); a person's answer never takes the timeout
    /// branch. Returns the decision as applied, or what is wrong, naming the field.
    pub fn checked(mut self, fields: &[FormField], draft: &Value) -> Result<Decision, String> {
        if self.decision == DecisionChoice::Timeout {
            // Weft's own: no form to fill.
            return Ok(self);
        }
        if let Some(unknown) = self
            .fields
            .keys()
            .find(|name| !fields.iter().any(|field| &field.name == *name))
        {
            let known: Vec<&str> = fields.iter().map(|field| field.name.as_str()).collect();
            return Err(if known.is_empty() {
                format!("the approval has no form, so no `{unknown}` to answer")
            } else {
                format!(
                    "the form has no field `{unknown}` (its fields: {})",
                    known.join(", ")
                )
            });
        }
        for field in fields {
            let answer = self.fields.remove(&field.name).filter(|answer| !answer.is_null());
            let answer = match (answer, field.kind) {
                (None, FormFieldKind::Draft) => Some(Value::String(output_text(draft))),
                (None, _) if field.required => {
                    return Err(format!("`{}` needs an answer", field.name));
                }
                // Unanswered, it is still a name templates can use.
                (None, _) => Some(Value::String(String::new())),
                (Some(answer), FormFieldKind::Number) => {
                    let number = match &answer {
                        Value::Number(_) => Some(answer.clone()),
                        Value::String(text) => {
                            let text = text.trim();
                            text.parse::<i64>().map(Value::from).ok().or_else(|| {
                                text.parse::<f64>()
                                    .ok()
                                    .and_then(serde_json::Number::from_f64)
                                    .map(Value::Number)
                            })
                        }
                        _ => None,
                    };
                    Some(number.ok_or_else(|| {
                        format!("`{}` takes a number, not {answer}", field.name)
                    })?)
                }
                (Some(Value::String(text)), FormFieldKind::Choice) => {
                    if !field.options.contains(&text) {
                        return Err(format!(
                            "`{}` is one of {}, not `{text}`",
                            field.name,
                            field.options.join(", ")
                        ));
                    }
                    Some(Value::String(text))
                }
                (Some(answer), FormFieldKind::Text | FormFieldKind::Draft) => {
                    Some(Value::String(output_text(&answer)))
                }
                (Some(answer), FormFieldKind::Choice) => {
                    return Err(format!("`{}` takes one of its options, not {answer}", field.name));
                }
            };
            if let Some(answer) = answer {
                self.fields.insert(field.name.clone(), answer);
            }
        }
        Ok(self)
    }

    /// What goes on after this decision at an approval given `input`: the edited draft when
    /// the form has one, else the input unchanged.
    pub fn output(&self, fields: &[FormField], input: &Value) -> Value {
        fields
            .iter()
            .find(|field| field.kind == FormFieldKind::Draft)
            .and_then(|field| self.fields.get(&field.name))
            .cloned()
            .unwrap_or_else(|| input.clone())
    }
}

/// `90 s`, `5 min`, `2 h`, `3 days`.
pub fn seconds_text(seconds: f64) -> String {
    let whole = seconds.round() as u64;
    if seconds < 120.0 {
        format!("{} s", trim_number(seconds))
    } else if whole < 2 * 3600 {
        format!("{} min", trim_number(seconds / 60.0))
    } else if whole < 2 * 86_400 {
        format!("{} h", trim_number(seconds / 3600.0))
    } else {
        format!("{} days", trim_number(seconds / 86_400.0))
    }
}

fn trim_number(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::fake::{FakeEnv, step};
    use serde_json::json;

    #[tokio::test]
    async fn asks_the_scheduler_to_wait_with_the_rendered_message() {
        let env = FakeEnv::new().template("review", "message", "Send {{ PREVIOUS_OUTPUT }}?");
        let output = ApprovalConfig::default()
            .run(&step("review", &json!("the draft")), &env)
            .await
            .expect("runs");
        assert_eq!(output.value, json!("the draft"), "the draft is passed on unchanged");
        match output.wait {
            Some(Wait::Decision { message, .. }) => assert_eq!(message, "Send the draft?"),
            other => panic!("expected a decision to wait for, got {other:?}"),
        }
        assert_eq!(DecisionChoice::Approve.handle(), "approve");
        assert_eq!(
            ApprovalConfig::HANDLES.iter().map(|handle| handle.id).collect::<Vec<_>>(),
            [
                DecisionChoice::Approve.handle(),
                DecisionChoice::Reject.handle(),
                DecisionChoice::Timeout.handle()
            ]
        );
    }

    #[test]
    fn answers_normalize() {
        for answer in ["approve", "Approved", " YES ", "true"] {
            assert_eq!(
                Decision::parse(answer, "").expect("ok").decision,
                DecisionChoice::Approve
            );
        }
        for answer in ["reject", "REJECTED", "no", "False"] {
            assert_eq!(
                Decision::parse(answer, "").expect("ok").decision,
                DecisionChoice::Reject
            );
        }
        let error = Decision::parse("maybe", "").expect_err("bad");
        assert!(error.starts_with("`maybe` is not a decision"), "{error}");
    }

    #[test]
    fn decide_form() {
        let (node, decision) =
            Decision::parse_for_node("review=reject:too long: cut it").expect("ok");
        assert_eq!(node, "review");
        assert_eq!(decision.decision, DecisionChoice::Reject);
        assert_eq!(decision.note, "too long: cut it");
        assert!(Decision::parse_for_node("review").is_err());
        assert!(Decision::parse_for_node("=approve").is_err());
    }

    #[test]
    fn form_answers_are_checked_and_a_draft_goes_on() {
        let fields = vec![
            FormField {
                name: "tone".into(),
                kind: FormFieldKind::Choice,
                options: vec!["warm".into(), "formal".into()],
                ..FormField::default()
            },
            FormField {
                name: "amount".into(),
                kind: FormFieldKind::Number,
                required: true,
                ..FormField::default()
            },
            FormField {
                name: "reply".into(),
                kind: FormFieldKind::Draft,
                ..FormField::default()
            },
        ];
        let draft = json!("Dear Ada, ...");
        let answer = |fields: Value| Decision {
            fields: serde_json::from_value(fields).expect("answers"),
            ..Decision::parse("approve", "").expect("ok")
        };
        let decided = answer(json!({"tone": "warm", "amount": "40"}))
            .checked(&fields, &draft)
            .expect("fits");
        assert_eq!(decided.fields["amount"], json!(40));
        assert_eq!(decided.fields["reply"], draft, "an untouched draft is the input");
        let edited = answer(json!({"amount": 40, "reply": "Dear Ada, sorry."}))
            .checked(&fields, &draft)
            .expect("fits");
        assert_eq!(edited.output(&fields, &draft), json!("Dear Ada, sorry."));
        let value = edited.to_value_at("2026-11-24T10:00:00.000Z");
        assert_eq!(value["decision"], "approve");
        assert_eq!(value["amount"], json!(40));
        assert_eq!(value["at"], "2026-11-24T10:00:00.000Z");
        for (answers, wanted) in [
            (json!({}), "`amount` needs an answer"),
            (json!({"amount": "lots"}), "`amount` takes a number"),
            (json!({"amount": 1, "tone": "rude"}), "`tone` is one of warm, formal, not `rude`"),
            (json!({"amount": 1, "mood": "x"}), "the form has no field `mood`"),
        ] {
            let error = answer(answers).checked(&fields, &draft).expect_err("refused");
            assert!(error.contains(wanted), "{error}");
        }
        let config = ApprovalConfig {
            fields: vec![FormField {
                name: "note".into(),
                ..FormField::default()
            }],
            ..ApprovalConfig::default()
        };
        assert!(config.check().is_err(), "`note` is the decision's");
        assert_eq!(seconds_text(90.0), "90 s");
        assert_eq!(seconds_text(3600.0), "60 min");
        assert_eq!(seconds_text(3.0 * 86_400.0), "3 days");
    }
}
