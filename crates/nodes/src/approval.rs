//! `approval`: pauses the run until a person approves or rejects, optionally filling in a small
//! form, or until its `timeoutSeconds` pass with nobody deciding. The node renders its message
//! and asks the scheduler to wait; the scheduler owns pausing (the run's status and queue) and
//! applies the decision; the answer and its checks are [`crate::decision`]'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FieldError, Handle, Kind, Scheduling};
use crate::decision::{DecisionChoice, FormField, FormFieldKind, GROUP_PREFIX, Quorum};
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
    /// Who may decide: names and `group:NAME` (the members of a group of the people file).
    /// Empty: anybody.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// How many distinct people must approve (one reject rejects). 1 when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<u32>,
    /// Whether whoever started the run may decide it. Yes when not set.
    #[serde(default, rename = "allowSelf", skip_serializing_if = "Option::is_none")]
    pub allow_self: Option<bool>,
    /// Seconds after the pause when the people still needed are reminded (an
    /// `approval_reminder` to the hosts: a desktop notification, a log line). At most 30 days.
    #[serde(default, rename = "remindAfterSeconds", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 2592000))]
    pub remind_after_seconds: Option<f64>,
    /// Seconds after the pause when `escalateTo` become approvers too. At most 30 days.
    #[serde(default, rename = "escalateAfterSeconds", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 2592000))]
    pub escalate_after_seconds: Option<f64>,
    /// Names and `group:NAME`s added to `approvers` at the escalation.
    #[serde(default, rename = "escalateTo", skip_serializing_if = "Vec::is_empty")]
    pub escalate_to: Vec<String>,
}

/// The longest a follow-up may wait: 30 days, as `timeoutSeconds`.
const MAX_FOLLOW_UP_SECONDS: f64 = 30.0 * 86_400.0;

impl ApprovalConfig {
    /// Who may decide, and how many must approve.
    pub fn quorum(&self) -> Quorum {
        Quorum {
            approvers: self
                .approvers
                .iter()
                .map(|entry| entry.trim().to_string())
                .collect(),
            required: self.required.unwrap_or(1),
            allow_self: self.allow_self.unwrap_or(true),
            remind_after_seconds: self.remind_after_seconds,
            escalate_after_seconds: self.escalate_after_seconds,
            escalate_to: self
                .escalate_to
                .iter()
                .map(|entry| entry.trim().to_string())
                .collect(),
        }
    }

    fn check_quorum(&self) -> Result<(), FieldError> {
        let quorum = self.quorum();
        for (index, entry) in quorum.approvers.iter().enumerate() {
            let at = format!("approvers[{index}]");
            let name = entry.strip_prefix(GROUP_PREFIX).unwrap_or(entry);
            if name.is_empty() {
                return Err(FieldError::new(
                    at,
                    "an approver is a person's name or group:NAME",
                ));
            }
            if quorum.approvers[..index].contains(entry) {
                return Err(FieldError::new(at, format!("`{entry}` is named twice")));
            }
        }
        if quorum.required == 0 {
            return Err(FieldError::new(
                "required",
                "at least one person must approve (required: 1 or more)",
            ));
        }
        for (field, seconds) in [
            ("remindAfterSeconds", quorum.remind_after_seconds),
            ("escalateAfterSeconds", quorum.escalate_after_seconds),
        ] {
            if let Some(seconds) = seconds
                && !(seconds > 0.0 && seconds <= MAX_FOLLOW_UP_SECONDS)
            {
                return Err(FieldError::new(
                    field,
                    "seconds after the pause: more than 0, at most 30 days (2592000)",
                ));
            }
        }
        for (index, entry) in quorum.escalate_to.iter().enumerate() {
            let name = entry.strip_prefix(GROUP_PREFIX).unwrap_or(entry);
            if name.is_empty() {
                return Err(FieldError::new(
                    format!("escalateTo[{index}]"),
                    "an approver is a person's name or group:NAME",
                ));
            }
        }
        match (
            quorum.escalate_after_seconds.is_some(),
            quorum.escalate_to.is_empty(),
        ) {
            (true, true) => {
                return Err(FieldError::new(
                    "escalateTo",
                    "escalateAfterSeconds adds approvers: name them in escalateTo",
                ));
            }
            (false, false) => {
                return Err(FieldError::new(
                    "escalateAfterSeconds",
                    "escalateTo needs escalateAfterSeconds: when to add them",
                ));
            }
            _ => {}
        }
        if !quorum.escalate_to.is_empty() && quorum.approvers.is_empty() {
            return Err(FieldError::new(
                "escalateTo",
                "anybody may decide an approval without approvers: escalateTo adds to approvers",
            ));
        }
        let names = quorum.names().count();
        if quorum.groups().next().is_none()
            && !quorum.approvers.is_empty()
            && quorum.required as usize > names
        {
            return Err(FieldError::new(
                "required",
                format!(
                    "{} approvals are required, but only {names} {} named in approvers",
                    quorum.required,
                    if names == 1 { "person is" } else { "people are" }
                ),
            ));
        }
        Ok(())
    }
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
        self.check_quorum()?;
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
                quorum: self.quorum(),
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
        let quorum = |approvers: &[&str], required: u32| ApprovalConfig {
            approvers: approvers.iter().map(|name| name.to_string()).collect(),
            required: Some(required),
            ..ApprovalConfig::default()
        };
        let problem = |config: ApprovalConfig| config.check().expect_err("refused").to_string();
        assert!(
            problem(quorum(&["ada"], 2))
                .contains("2 approvals are required, but only 1 person is named in approvers")
        );
        assert!(problem(quorum(&["ada", "ada"], 1)).contains("`ada` is named twice"));
        assert!(problem(quorum(&["group:"], 1)).contains("group:NAME"));
        assert!(problem(quorum(&[], 0)).contains("at least one person must approve"));
        assert!(quorum(&["ada", "group:finance"], 3).check().is_ok(), "a group may hold more");
        let follow_up = |remind: Option<f64>, escalate: Option<f64>, to: &[&str]| ApprovalConfig {
            remind_after_seconds: remind,
            escalate_after_seconds: escalate,
            escalate_to: to.iter().map(|name| name.to_string()).collect(),
            ..quorum(&["ada"], 1)
        };
        assert!(follow_up(Some(3600.0), Some(86_400.0), &["group:ops"]).check().is_ok());
        assert!(problem(follow_up(Some(0.0), None, &[])).contains("more than 0"));
        assert!(problem(follow_up(None, Some(31.0 * 86_400.0), &["bob"])).contains("at most 30 days"));
        assert!(problem(follow_up(None, Some(60.0), &[])).contains("name them in escalateTo"));
        assert!(problem(follow_up(None, None, &["bob"])).contains("escalateTo needs escalateAfterSeconds"));
        let anybody = ApprovalConfig {
            escalate_after_seconds: Some(60.0),
            escalate_to: vec!["bob".into()],
            ..ApprovalConfig::default()
        };
        assert!(problem(anybody).contains("escalateTo adds to approvers"));
        assert_eq!(seconds_text(90.0), "90 s");
        assert_eq!(seconds_text(3600.0), "60 min");
        assert_eq!(seconds_text(3.0 * 86_400.0), "3 days");
    }
}
