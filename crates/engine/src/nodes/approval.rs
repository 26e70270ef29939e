//! `approval`: pauses the run until a person approves or rejects. The pausing itself is the
//! scheduler's (it owns the run's status and queue); this file holds the config and the
//! normalization of a person's answer.

use serde::{Deserialize, Serialize};

use super::{FieldDescription, FieldType, HandleDescription, KindDescription, NodeKind};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Pauses the run and shows `message` (a template) to a person, who approves or rejects. \
         The run continues along the `approve` or `reject` edges; the output is what the node was \
         given, so the next node works on the approved draft."
    };
    (message) => {
        "What the person is asked (a template; `{{PREVIOUS_OUTPUT}}` shows the draft)."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ApprovalConfig {
    #[doc = help!(message)]
    #[serde(default)]
    pub message: String,
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
            DecisionChoice::Approve => "approve",
            DecisionChoice::Reject => "reject",
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

    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({ "decision": self.decision.handle(), "note": self.note })
    }
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution(DecisionChoice::Approve.handle(), "Approve"),
            HandleDescription::execution(DecisionChoice::Reject.handle(), "Reject"),
        ],
        fields: vec![
            FieldDescription::new("message", "Message", help!(message), FieldType::Template)
                .default(""),
        ],
        ..KindDescription::new(NodeKind::Approval, "Approval", help!(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
