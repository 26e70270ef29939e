//! An approval as the people it asks by email see it: whether a link signed for one person and
//! one pause may still answer it, and whom each owed email (asking, reminding, escalating) goes
//! to. The links themselves (signing, the page) are the server's; the policy is here, the same
//! as [`Weft::decide`]'s.

use serde_json::Value;
use weft_engine::{Waiting, waiting_of};
use weft_nodes::FormField;
use weft_nodes::decision::GROUP_PREFIX;
use weft_store::{RunRecord, StoredDecision};

use crate::approvals::{ApprovalProgress, check_decider, followed_up, progress};
use crate::hosts::blocking;
use crate::{Error, Weft};

/// An approval a run still waits at, at a given pause.
#[derive(Debug, Clone)]
pub struct Asked {
    pub run_id: String,
    pub flow_name: String,
    /// The approval (`sub/review` inside the subflow `sub`).
    pub node_id: String,
    pub message: String,
    pub fields: Vec<FormField>,
    /// What the node waited at was given: the draft a person decides on.
    pub input: Value,
    pub pause: u64,
    /// When it times out (RFC 3339, UTC), if it does.
    pub deadline: Option<String>,
    pub progress: ApprovalProgress,
    /// The decisions kept at this pause so far.
    pub decisions: Vec<StoredDecision>,
    /// The whole approval as the engine keeps it (who may decide, after any escalation).
    pub waiting: Waiting,
    pub record: RunRecord,
}

impl Weft {
    /// The approval run `run_id` waits at, as long as it still waits at pause `pause`: refused
    /// naming what the run is doing otherwise (decided, timed out, ended, at a later pause).
    pub async fn asked(&self, run_id: &str, pause: u64) -> Result<Asked, Error> {
        let record = self.record(run_id).await?;
        let run_id = record.summary.id.clone();
        let status = record.summary.status;
        let Some(waiting) = waiting_of(&record).filter(|waiting| waiting.breakpoint.is_none())
        else {
            return Err(Error::conflict(format!(
                "this approval is no longer waiting: run {run_id} is {status}"
            )));
        };
        if waiting.pause != pause {
            return Err(Error::conflict(format!(
                "this approval is no longer waiting: run {run_id} went on and waits at `{}` now",
                waiting.node_id
            )));
        }
        let people = std::sync::Arc::clone(&self.people);
        blocking(self.store(), move |store| {
            let (waiting, follow_ups) = followed_up(store, &run_id, waiting)?;
            let decisions = store.decisions_at(&run_id, pause)?;
            let progress = progress(&record, &waiting, &people, &decisions, &follow_ups);
            Ok(Asked {
                flow_name: flow_title(&record),
                node_id: waiting.node_id.clone(),
                message: waiting.message.clone(),
                fields: waiting.fields.clone(),
                input: waiting.input.clone(),
                deadline: waiting.deadline.clone(),
                run_id,
                pause,
                progress,
                decisions,
                waiting,
                record,
            })
        })
        .await
    }

    /// [`Weft::asked`], for `person` to answer: refused when they answered this pause already
    /// (a link is used once) or may not decide it (as [`Weft::decide`] would refuse them).
    pub async fn asked_of(&self, run_id: &str, pause: u64, person: &str) -> Result<Asked, Error> {
        let asked = self.asked(run_id, pause).await?;
        if let Some(earlier) = asked.decisions.iter().find(|kept| kept.by == person) {
            return Err(Error::conflict(format!(
                "this link was used already: {person} answered `{}` ({} at {})",
                asked.node_id, earlier.decision, earlier.at
            )));
        }
        check_decider(&asked.record, &asked.waiting, &self.people, Some(person))?;
        Ok(asked)
    }

    /// Whom the email of `kind` owed for pause `pause` of run `run_id` goes to, with their
    /// addresses from the people file (`None`: it has none for them): those who may still
    /// approve for "ask", those the reminder was for who still may for "remind", those of them `escalateTo` names (groups resolved) for
    /// "escalate". `None` when the run no longer waits there.
    pub async fn mail_to(
        &self,
        run_id: &str,
        pause: u64,
        kind: &str,
    ) -> Result<Option<(Asked, Vec<(String, Option<String>)>)>, Error> {
        let asked = match self.asked(run_id, pause).await {
            Ok(asked) => asked,
            Err(error) if error.kind == crate::ErrorKind::Conflict => return Ok(None),
            Err(error) => return Err(error),
        };
        let names: Vec<String> = match kind {
            "escalate" => {
                let mut names = Vec::new();
                for entry in &asked.waiting.quorum.escalate_to {
                    let members: Vec<String> = match entry.strip_prefix(GROUP_PREFIX) {
                        Some(group) => self
                            .people
                            .members(group)
                            .map(|person| person.name.clone())
                            .collect(),
                        None => vec![entry.clone()],
                    };
                    // Those it added who may decide: not whoever started the run where
                    // allowSelf is false, nor someone who approved already.
                    for name in members {
                        if !names.contains(&name)
                            && asked.progress.may_still_approve.contains(&name)
                        {
                            names.push(name);
                        }
                    }
                }
                names
            }
            // Those the reminder was for when it was done (before any escalation), who may
            // still approve.
            "remind" => {
                let (id, store) = (asked.run_id.clone(), self.store().clone());
                let done = blocking(&store, move |store| store.follow_ups(&id, pause)).await?;
                done.into_iter()
                    .find(|follow_up| follow_up.kind == kind)
                    .map(|follow_up| follow_up.to)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|name| asked.progress.may_still_approve.contains(name))
                    .collect()
            }
            _ => asked.progress.may_still_approve.clone(),
        };
        let to = names
            .into_iter()
            .map(|name| {
                let email = self
                    .people
                    .get(&name)
                    .and_then(|person| person.email.clone());
                (name, email)
            })
            .collect();
        Ok(Some((asked, to)))
    }
}

/// What a person calls the run's flow: its name, else its file's name.
fn flow_title(record: &RunRecord) -> String {
    let summary = &record.summary;
    if !summary.flow_name.trim().is_empty() {
        return summary.flow_name.clone();
    }
    summary
        .flow_path
        .as_deref()
        .and_then(|path| std::path::Path::new(path).file_stem())
        .map_or_else(
            || "a flow".to_string(),
            |stem| stem.to_string_lossy().into_owned(),
        )
}
