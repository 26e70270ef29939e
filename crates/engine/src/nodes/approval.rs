//! `approval`: pauses the run until a person approves or rejects. The node renders its message
//! and asks the scheduler to wait; the scheduler owns pausing (the run's status and queue) and
//! applies the decision. This file also holds the normalization of a person's answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepOutput, Wait};

/// Pauses the run and shows `message` (a template) to a person, who approves or rejects. The
/// run continues along the `approve` or `reject` edges; the output is what the node was given,
/// so the next node works on the approved draft.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalConfig {
    /// What the person is asked (a template; `{{PREVIOUS_OUTPUT}}` shows the draft).
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub message: String,
}

const APPROVE: Handle = Handle::execution("approve", "Approve");
const REJECT: Handle = Handle::execution("reject", "Reject");

impl Kind for ApprovalConfig {
    const ID: &'static str = "approval";
    const TITLE: &'static str = "Approval";
    const SCHEDULING: Scheduling = Scheduling::Pause;
    const HANDLES: &'static [Handle] = &[APPROVE, REJECT];

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let message = env.render(step.node_id, "message", step.input)?;
        Ok(StepOutput::waiting(
            step.input.clone(),
            Wait::Decision { message },
        ))
    }
}

#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionChoice {
    Approve,
    Reject,
}

impl DecisionChoice {
    /// The handle the run continues by.
    pub fn handle(self) -> &'static str {
        match self {
            DecisionChoice::Approve => APPROVE.id,
            DecisionChoice::Reject => REJECT.id,
        }
    }
}

/// A person's answer at an approval node, normalized to `{ "decision", "note" }`.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub decision: DecisionChoice,
    #[serde(default)]
    pub note: String,
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
        })
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

    /// The decision as `{{ approval }}` sees it and the store keeps it.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({ "decision": self.decision.handle(), "note": self.note })
    }
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
            Some(Wait::Decision { message }) => assert_eq!(message, "Send the draft?"),
            other => panic!("expected a decision to wait for, got {other:?}"),
        }
        assert_eq!(DecisionChoice::Approve.handle(), "approve");
        assert_eq!(
            ApprovalConfig::HANDLES.iter().map(|handle| handle.id).collect::<Vec<_>>(),
            [DecisionChoice::Approve.handle(), DecisionChoice::Reject.handle()]
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
}
