//! Who may decide an approval, and when enough have: an approval's `approvers` (names and
//! `group:NAME`, resolved through the [`People`]), `required` distinct people, `allowSelf`.
//! Every decision is kept in the store's chain of decisions (`weft audit`); an approval that
//! needs more than one person goes on once enough have approved, or at the first reject.

use serde::{Deserialize, Serialize};
use weft_engine::RunHandle;
use weft_engine::Waiting;
use weft_flow::Flow;
use weft_nodes::decision::GROUP_PREFIX;
use weft_nodes::{
    ApprovalConfig, Decision, DecisionChoice, FollowUpKind, FormField, FormFieldKind, Kind, Quorum,
};
use weft_store::{RunRecord, Store, StoreError, StoredDecision, StoredFollowUp};
use weft_template::output_text;

use crate::Error;
use crate::people::People;

/// How a decision reached Weft, kept with it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// The desktop app.
    App,
    /// `weft resume`, `weft run --decide`.
    Cli,
    /// `weft serve`'s HTTP API.
    Api,
    /// A link in an approval's email.
    Email,
    /// An MCP client of `weft serve`.
    Mcp,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::App => "app",
            Channel::Cli => "cli",
            Channel::Api => "api",
            Channel::Email => "email",
            Channel::Mcp => "mcp",
        }
    }
}

/// How far an approval that needs several people has got.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalProgress {
    /// Distinct people who must approve.
    pub required: u32,
    /// Who approved so far, in order.
    pub approved_by: Vec<String>,
    /// How many more approvals it needs.
    pub still_needed: u32,
    /// Who else may approve: the approvers not yet heard from (groups resolved through the
    /// people file); empty when anybody may.
    pub may_still_approve: Vec<String>,
    /// Whether whoever started the run may decide it.
    pub allow_self: bool,
    /// When those still needed were reminded (`remindAfterSeconds`), if they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminded_at: Option<String>,
    /// When `escalateTo` became approvers too (`escalateAfterSeconds`), if they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<String>,
}

/// A follow-up the keeper did: a reminder to those still needed, or approvers added.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FollowedUp {
    pub run_id: String,
    /// The approval (`sub/review` inside the subflow `sub`).
    pub node_id: String,
    /// `remind` or `escalate`.
    pub kind: String,
    /// Who was reminded, or who became approvers.
    pub to: Vec<String>,
    /// What the approval asks.
    pub message: String,
}

/// What a host does with a follow-up besides keeping it (a desktop notification, an email).
pub type FollowUpListener = std::sync::Arc<dyn Fn(&FollowedUp) + Send + Sync>;

/// `waiting` as its follow-ups left it (escalated: `escalateTo` decide too), with them.
pub fn followed_up(
    store: &Store,
    run_id: &str,
    mut waiting: Waiting,
) -> Result<(Waiting, Vec<StoredFollowUp>), StoreError> {
    if waiting.quorum.remind_after_seconds.is_none()
        && waiting.quorum.escalate_after_seconds.is_none()
    {
        return Ok((waiting, Vec::new()));
    }
    let done = store.follow_ups(run_id, waiting.pause)?;
    if done
        .iter()
        .any(|follow_up| follow_up.kind == FollowUpKind::Escalate.as_str())
    {
        waiting.quorum = waiting.quorum.escalated();
    }
    Ok((waiting, done))
}

/// What a decision did.
pub enum Decided {
    /// It settled the approval: the run is claimed and going on.
    GoingOn(RunHandle),
    /// It was kept, and the approval waits for more approvals.
    Counted {
        run_id: String,
        node_id: String,
        progress: ApprovalProgress,
    },
}

/// Refuses `by` deciding the approval `waiting` of `record`, as `approvers` and `allowSelf`
/// say, naming why.
pub fn check_decider(
    record: &RunRecord,
    waiting: &Waiting,
    people: &People,
    by: Option<&str>,
) -> Result<(), Error> {
    let quorum = &waiting.quorum;
    let node = &waiting.node_id;
    let run_id = &record.summary.id;
    if quorum.is_anybody() {
        return Ok(());
    }
    let Some(by) = by else {
        return Err(Error::forbidden(format!(
            "`{node}` takes decisions from named people: name yourself (--by, WEFT_USER, the app's Settings, a token's name)"
        )));
    };
    if !quorum.allow_self && started_by(record) == Some(by) {
        return Err(Error::forbidden(format!(
            "{by} started run {run_id}, and `{node}` does not let whoever started a run decide it (allowSelf: false)"
        )));
    }
    if quorum.approvers.is_empty() || quorum.names().any(|name| name == by) {
        return Ok(());
    }
    if quorum.groups().any(|group| people.in_group(by, group)) {
        return Ok(());
    }
    let unknown = if quorum.groups().next().is_some() && people.get(by).is_none() {
        format!(" ({by} is not in {})", people.source())
    } else {
        String::new()
    };
    Err(Error::forbidden(format!(
        "{by} may not decide `{node}`{unknown}: its approvers are {}",
        quorum.approvers.join(", ")
    )))
}

/// Who started the run, when a person or a token did.
pub fn started_by(record: &RunRecord) -> Option<&str> {
    record
        .summary
        .trigger
        .as_ref()
        .and_then(|trigger| trigger.by.as_deref())
}

/// Refuses approvals of `flow` that `people` cannot decide: a group nobody is in, a name not in
/// the people file, more approvals required than people who may give them (leaving out
/// `starter` where the approval does not let whoever started the run decide).
pub fn check_quorums(flow: &Flow, people: &People, starter: Option<&str>) -> Result<(), Error> {
    let mut problems = Vec::new();
    for node in &flow.nodes {
        if node.kind != ApprovalConfig::ID {
            continue;
        }
        let data = serde_json::Value::Object(node.data.clone());
        let Ok(config) = serde_json::from_value::<ApprovalConfig>(data) else {
            // The flow's validation names what is wrong with it.
            continue;
        };
        // Enough people may be there only once escalated; the groups it adds must exist.
        let quorum = config.quorum().escalated();
        if quorum.is_anybody() {
            continue;
        }
        if let Err(problem) = eligible(&quorum, people, starter).and_then(|eligible| {
            if (quorum.required as usize) > eligible.len() && !quorum.approvers.is_empty() {
                Err(format!(
                    "{} approvals are required, but only {} {} may approve{}{}",
                    quorum.required,
                    eligible.len(),
                    if eligible.len() == 1 {
                        "person"
                    } else {
                        "people"
                    },
                    if eligible.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", eligible.join(", "))
                    },
                    match starter {
                        Some(starter) if !quorum.allow_self => {
                            format!("; {starter} started the run and may not decide it")
                        }
                        _ => String::new(),
                    }
                ))
            } else {
                Ok(())
            }
        }) {
            problems.push(format!("approval `{}`: {problem}", node.id));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(problems.join("\n")))
    }
}

/// Refuses answers given in advance (`weft run --decide`, `decide` of `POST /v1/runs`) for an
/// approval that names who may decide it or needs several people: they are answered when the run
/// waits there, by the people it allows.
pub fn check_advance_decisions(
    flow: &Flow,
    decisions: &std::collections::HashMap<String, Decision>,
) -> Result<(), Error> {
    let mut named: Vec<&String> = decisions.keys().collect();
    named.sort();
    for node_id in named {
        let Some(node) = flow
            .node(node_id)
            .filter(|node| node.kind == ApprovalConfig::ID)
        else {
            continue;
        };
        let data = serde_json::Value::Object(node.data.clone());
        let Ok(config) = serde_json::from_value::<ApprovalConfig>(data) else {
            continue;
        };
        if !config.quorum().is_anybody() {
            return Err(Error::forbidden(format!(
                "`{node_id}` names who may decide it: answer it when the run waits there (weft resume, the inbox, the API), not in advance"
            )));
        }
    }
    Ok(())
}

/// The people who may approve under `quorum`, in order (names as given, then groups' members).
fn eligible(
    quorum: &Quorum,
    people: &People,
    starter: Option<&str>,
) -> Result<Vec<String>, String> {
    let mut eligible: Vec<String> = Vec::new();
    for entry in &quorum.approvers {
        let members: Vec<String> = match entry.strip_prefix(GROUP_PREFIX) {
            Some(group) => {
                if people.is_empty() {
                    return Err(format!(
                        "`{entry}` names a group, but no people file is set (--people FILE, {}, or the app's Settings → People)",
                        crate::people::PEOPLE_ENV
                    ));
                }
                let members: Vec<String> = people
                    .members(group)
                    .map(|person| person.name.clone())
                    .collect();
                if members.is_empty() {
                    return Err(format!(
                        "nobody is in group `{group}` ({})",
                        people.source()
                    ));
                }
                members
            }
            None => {
                if !people.is_empty() && people.get(entry).is_none() {
                    return Err(format!("`{entry}` is not in {}", people.source()));
                }
                vec![entry.clone()]
            }
        };
        for member in members {
            if !eligible.contains(&member) {
                eligible.push(member);
            }
        }
    }
    if !quorum.allow_self
        && let Some(starter) = starter
    {
        eligible.retain(|name| name != starter);
    }
    Ok(eligible)
}

/// The progress of the approval `waiting` after the decisions kept at it.
pub fn progress(
    record: &RunRecord,
    waiting: &Waiting,
    people: &People,
    kept: &[StoredDecision],
    follow_ups: &[StoredFollowUp],
) -> ApprovalProgress {
    let done = |kind: FollowUpKind| {
        follow_ups
            .iter()
            .find(|follow_up| follow_up.kind == kind.as_str())
            .map(|follow_up| follow_up.at.clone())
    };
    let quorum = &waiting.quorum;
    let mut approved_by: Vec<String> = Vec::new();
    for decision in kept {
        if decision.decision == DecisionChoice::Approve.handle()
            && !approved_by.contains(&decision.by)
        {
            approved_by.push(decision.by.clone());
        }
    }
    let starter = started_by(record);
    let may_still_approve = eligible(quorum, people, starter)
        .unwrap_or_else(|_| quorum.approvers.clone())
        .into_iter()
        .filter(|name| !approved_by.contains(name))
        .collect();
    ApprovalProgress {
        required: quorum.required,
        still_needed: quorum.required.saturating_sub(approved_by.len() as u32),
        approved_by,
        may_still_approve,
        allow_self: quorum.allow_self,
        reminded_at: done(FollowUpKind::Remind),
        escalated_at: done(FollowUpKind::Escalate),
    }
}

/// What a person's edit did to the draft of a form: `{before, after}` when they changed it.
pub fn draft_edit(
    fields: &[FormField],
    decision: &Decision,
    input: &serde_json::Value,
) -> Option<serde_json::Value> {
    let field = fields
        .iter()
        .find(|field| field.kind == FormFieldKind::Draft)?;
    let after = decision.fields.get(&field.name)?;
    let before = output_text(input);
    (output_text(after) != before).then(|| serde_json::json!({ "before": before, "after": after }))
}
