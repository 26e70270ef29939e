//! A person's answer at an approval node, and the form it may fill in: one type for a decision
//! wherever it comes from (the app, `weft resume`, `weft run --decide`, the HTTP API, a tests
//! file) and wherever it goes (the run, the store, a Restate workflow).

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_template::output_text;

/// What `{{ approval.by }}` reads when nobody is known to have decided.
pub const UNKNOWN_DECIDER: &str = "unknown";

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

/// Who may decide an approval and how many must approve: `approvers` (names, and `group:NAME`
/// for the members of a group of the people file), `required` distinct people, and whether
/// whoever started the run may be one of them; and what happens while nobody does: a reminder
/// to those still needed, approvers added. The default is today's approval: anybody, one
/// answer, no follow-ups.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quorum {
    /// Empty: anybody may decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Distinct people who must approve; one reject rejects.
    #[serde(default = "one")]
    pub required: u32,
    /// Whoever started the run may decide it.
    #[serde(default = "yes")]
    pub allow_self: bool,
    /// Seconds after the pause when those still needed are reminded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after_seconds: Option<f64>,
    /// Seconds after the pause when `escalate_to` become approvers too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after_seconds: Option<f64>,
    /// Names and `group:NAME`s added to `approvers` at the escalation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate_to: Vec<String>,
}

/// A follow-up of an approval nobody settled in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUpKind {
    /// Those still needed are reminded.
    Remind,
    /// `escalateTo` become approvers too.
    Escalate,
}

impl FollowUpKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            FollowUpKind::Remind => "remind",
            FollowUpKind::Escalate => "escalate",
        }
    }
}

/// What `group:NAME` in `approvers` starts with.
pub const GROUP_PREFIX: &str = "group:";

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

impl Default for Quorum {
    fn default() -> Quorum {
        Quorum {
            approvers: Vec::new(),
            required: 1,
            allow_self: true,
            remind_after_seconds: None,
            escalate_after_seconds: None,
            escalate_to: Vec::new(),
        }
    }
}

impl Quorum {
    /// Anybody may decide, alone (whatever the follow-ups).
    pub fn is_anybody(&self) -> bool {
        self.approvers.is_empty() && self.required == 1 && self.allow_self
    }

    /// No approvers, quorum or follow-ups: an approval as it was before them.
    pub fn is_default(&self) -> bool {
        *self == Quorum::default()
    }

    /// The groups `approvers` names (`group:finance` → `finance`).
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.approvers
            .iter()
            .filter_map(|entry| entry.strip_prefix(GROUP_PREFIX))
    }

    /// The people `approvers` names directly.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.approvers
            .iter()
            .map(String::as_str)
            .filter(|entry| !entry.starts_with(GROUP_PREFIX))
    }

    /// The same quorum once escalated: `escalate_to` are approvers too.
    pub fn escalated(&self) -> Quorum {
        let mut quorum = self.clone();
        for entry in &self.escalate_to {
            if !quorum.approvers.contains(entry) {
                quorum.approvers.push(entry.clone());
            }
        }
        quorum
    }

    /// The follow-ups of a pause that began at `since`, each with when it is due, earliest
    /// first.
    pub fn follow_ups(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(FollowUpKind, chrono::DateTime<chrono::Utc>)> {
        let after =
            |seconds: f64| since + chrono::Duration::milliseconds((seconds * 1000.0) as i64);
        let mut due: Vec<_> = [
            (FollowUpKind::Remind, self.remind_after_seconds),
            (FollowUpKind::Escalate, self.escalate_after_seconds),
        ]
        .into_iter()
        .filter_map(|(kind, seconds)| Some((kind, after(seconds?))))
        .collect();
        due.sort_by_key(|(_, at)| *at);
        due
    }
}

#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionChoice {
    Approve,
    Reject,
    /// Nobody decided within the approval's `timeoutSeconds` (taken by Weft, never a person).
    Timeout,
}

impl DecisionChoice {
    /// The handle the run continues by.
    pub const fn handle(self) -> &'static str {
        match self {
            DecisionChoice::Approve => "approve",
            DecisionChoice::Reject => "reject",
            DecisionChoice::Timeout => "timeout",
        }
    }
}

/// An answer at an approval node: `{{ approval }}` is `{decision, note, by, at}` and the form's
/// answers by field name.
///
/// Read from `{"decision": "approve", "note": "…", "fields": {…}}` (the decision also as
/// `approved`, `yes`, `true` / `rejected`, `no`, `false`, any case), or from the short text
/// `"approve"`, `"reject"` or `"reject: a note"`, as tests files and API callers write it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub decision: DecisionChoice,
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
            _ => return Err(not_a_decision(answer)),
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

    /// Reads the short text form: `approve`, `reject`, `reject: a note`.
    pub fn parse_text(text: &str) -> Result<Decision, String> {
        let (answer, note) = text.split_once(':').unwrap_or((text, ""));
        Decision::parse(answer, note.trim())
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
        // Named even when nobody is known (no name in Settings, no WEFT_USER or USER): a
        // template reads "unknown", never a null printed as `None`.
        value.insert(
            "by".into(),
            Value::String(
                self.by
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_DECIDER.to_string()),
            ),
        );
        value.insert("at".into(), Value::from(at));
        Value::Object(value)
    }

    /// The decision as its `input_received` event says it: what `{{ approval }}` has but the
    /// time (the event's own) and an unknown decider's stand-in name.
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
            let answer = self
                .fields
                .remove(&field.name)
                .filter(|answer| !answer.is_null());
            let answer =
                match (answer, field.kind) {
                    (None, FormFieldKind::Draft) => Some(Value::String(output_text(draft))),
                    // Required answers are what approving needs; a rejection needs none.
                    (None, _) if field.required && self.decision == DecisionChoice::Approve => {
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
                        return Err(format!(
                            "`{}` takes one of its options, not {answer}",
                            field.name
                        ));
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
    pub fn output(&self, fields: &[FormField], input: &Arc<Value>) -> Arc<Value> {
        fields
            .iter()
            .find(|field| field.kind == FormFieldKind::Draft)
            .and_then(|field| self.fields.get(&field.name))
            .map(|draft| Arc::new(draft.clone()))
            .unwrap_or_else(|| Arc::clone(input))
    }
}

impl JsonSchema for Decision {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Decision".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A person's answer at an approval: the short text `approve`, `reject` or `reject: a note`, or the whole answer with the form's fields.",
            "oneOf": [
                { "type": "string", "examples": ["approve", "reject: too long"] },
                {
                    "type": "object",
                    "properties": {
                        "decision": {
                            "type": "string",
                            "description": "approve or reject (also approved, yes, true / rejected, no, false; any case)"
                        },
                        "note": { "type": "string" },
                        "fields": {
                            "type": "object",
                            "description": "The form's answers, by field name.",
                            "additionalProperties": true
                        },
                        "by": {
                            "type": ["string", "null"],
                            "description": "Who decided; a host sets it (the token's name, the app's user), whatever is sent."
                        }
                    },
                    "required": ["decision"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

fn not_a_decision(answer: &str) -> String {
    format!(
        "`{}` is not a decision: answer approve or reject (also accepted: approved, yes, true / rejected, no, false)",
        answer.trim()
    )
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Decision, D::Error> {
        use serde::de::Error as _;
        let value = Value::deserialize(deserializer)?;
        let object = match value {
            Value::String(text) => return Decision::parse_text(&text).map_err(D::Error::custom),
            Value::Object(object) => object,
            other => {
                return Err(D::Error::custom(format!(
                    "a decision is a text (\"approve\", \"reject: a note\") or an object \
                     {{\"decision\", \"note\", \"fields\"}}, not {other}"
                )));
            }
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !["decision", "note", "fields", "by"].contains(&key.as_str()))
        {
            return Err(D::Error::custom(format!(
                "a decision has no field `{unknown}` (it has decision, note, fields)"
            )));
        }
        let text = |name: &str| -> Result<Option<String>, D::Error> {
            match object.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(other) => Err(D::Error::custom(format!(
                    "a decision's `{name}` is a text, not {other}"
                ))),
            }
        };
        let word = text("decision")?
            .ok_or_else(|| D::Error::custom("a decision needs `decision`: approve or reject"))?;
        let decision = if word.trim().eq_ignore_ascii_case("timeout") {
            DecisionChoice::Timeout
        } else {
            Decision::parse(&word, "")
                .map_err(D::Error::custom)?
                .decision
        };
        let fields = match object.get("fields") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(fields)) => fields
                .iter()
                .map(|(name, answer)| (name.clone(), answer.clone()))
                .collect(),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "a decision's `fields` are an object of answers by field name, not {other}"
                )));
            }
        };
        Ok(Decision {
            decision,
            note: text("note")?.unwrap_or_default(),
            fields,
            by: text("by")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn a_rejection_needs_no_required_answer_and_an_unknown_decider_is_named() {
        let fields = vec![FormField {
            name: "tone".into(),
            kind: FormFieldKind::Choice,
            options: vec!["warm".into(), "formal".into()],
            required: true,
            ..FormField::default()
        }];
        let draft = json!("Dear Ada, ...");
        let rejected = Decision::parse("reject", "not now")
            .expect("ok")
            .checked(&fields, &draft)
            .expect("a rejection leaves required fields empty");
        let value = rejected.to_value_at("2026-11-27T10:00:00.000Z");
        assert_eq!(value["decision"], "reject");
        assert_eq!(value["tone"], "");
        assert_eq!(value["by"], "unknown");
        let error = Decision::parse("approve", "")
            .expect("ok")
            .checked(&fields, &draft)
            .expect_err("approving needs it");
        assert!(error.contains("`tone` needs an answer"), "{error}");
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
        assert_eq!(
            decided.fields["reply"], draft,
            "an untouched draft is the input"
        );
        let edited = answer(json!({"amount": 40, "reply": "Dear Ada, sorry."}))
            .checked(&fields, &draft)
            .expect("fits");
        assert_eq!(
            *edited.output(&fields, &Arc::new(draft.clone())),
            json!("Dear Ada, sorry.")
        );
        let value = edited.to_value_at("2026-11-24T10:00:00.000Z");
        assert_eq!(value["decision"], "approve");
        assert_eq!(value["amount"], json!(40));
        assert_eq!(value["at"], "2026-11-24T10:00:00.000Z");
        for (answers, wanted) in [
            (json!({}), "`amount` needs an answer"),
            (json!({"amount": "lots"}), "`amount` takes a number"),
            (
                json!({"amount": 1, "tone": "rude"}),
                "`tone` is one of warm, formal, not `rude`",
            ),
            (
                json!({"amount": 1, "mood": "x"}),
                "the form has no field `mood`",
            ),
        ] {
            let error = answer(answers)
                .checked(&fields, &draft)
                .expect_err("refused");
            assert!(error.contains(wanted), "{error}");
        }
    }
}
