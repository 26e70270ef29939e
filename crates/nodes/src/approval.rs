//! `approval`: pauses the run until a person approves or rejects, optionally filling in a small
//! form, or until its `timeoutSeconds` pass with nobody deciding. The node renders its message
//! and asks the scheduler to wait; the scheduler owns pausing (the run's status and queue) and
//! applies the decision; the answer and its checks are [`crate::decision`]'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FieldError, Handle, Kind, Scheduling};
use crate::decision::{DecisionChoice, FormField, FormFieldKind};
use crate::step::{Step, StepEnv, StepError, StepOutput, Wait};

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

/// Names `{{ approval }}` has already.
const RESERVED: &[&str] = &["decision", "note", "by", "at"];

const APPROVE: Handle = Handle::execution(DecisionChoice::Approve.handle(), "Approve");
const REJECT: Handle = Handle::execution(DecisionChoice::Reject.handle(), "Reject");
/// Taken when `timeoutSeconds` passed with nobody deciding.
pub const TIMEOUT: Handle = Handle::execution(DecisionChoice::Timeout.handle(), "Timeout");

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
    use std::sync::Arc;

    use super::*;
    use crate::step::fake::{FakeEnv, step};
    use serde_json::json;

    #[tokio::test]
    async fn asks_the_scheduler_to_wait_with_the_rendered_message() {
        let env = FakeEnv::new().template("review", "message", "Send {{ PREVIOUS_OUTPUT }}?");
        let output = ApprovalConfig::default()
            .run(&step("review", &Arc::new(json!("the draft"))), &env)
            .await
            .expect("runs");
        assert_eq!(*output.value, json!("the draft"), "the draft is passed on unchanged");
        match output.wait {
            Some(Wait::Decision { message, .. }) => assert_eq!(message, "Send the draft?"),
            other => panic!("expected a decision to wait for, got {other:?}"),
        }
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
    fn a_form_is_checked_when_the_flow_is() {
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
