//! What runs did, as every host shows it: `weft runs --json` and `GET /v1/runs` serialize
//! [`RunListing`]s, `weft show --json` and `GET /v1/runs/{id}` a [`RunDetail`], `GET
//! /v1/approvals` and the app's inbox [`PendingApproval`]s, `weft diff --json` and the app's
//! Compare a [`RunComparison`]. One type each, made here; the app's TypeScript types are
//! generated from them.
//!
//! Each view has a blocking function over a [`Store`] (for a command that needs no runtime)
//! and an async method of [`Weft`] that reads the store off the async workers.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::{Waiting, waiting_of};
use weft_event::RunEvent;
use weft_flow::Flow;
use weft_history::cost::{Cost, Prices, RunCost, run_cost, run_total};
use weft_history::visits::{NodeVisit, node_visits};
use weft_nodes::FormField;
use weft_store::{
    NodeOutputRecord, RunRecord, RunSummary, Store, StoreError, StoredDecision, StoredFollowUp,
};

pub use weft_history::compare::RunComparison;

use crate::approvals::{ApprovalProgress, check_decider, followed_up, progress};
use crate::hosts::blocking;
use crate::people::People;
use crate::{Error, Weft};

/// A run as History lists it: its summary and what its LLM calls cost.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunListing {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub cost: Cost,
    /// The team's server (Settings → Servers) that ran it, in the desktop app's History; absent
    /// for a run of this store (and always in a server's own answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// Everything about one run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunDetail {
    pub run: RunRecord,
    /// The flow as the run ran it (`run.flowJson`, read).
    pub flow: Flow,
    /// What a paused run waits for: the approval's message and form, or the breakpoint.
    pub waiting: Option<Waiting>,
    /// For a run waiting at an approval that names its approvers or needs several: who
    /// approved so far and who is still needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalProgress>,
    /// Every decision taken in the run, as the store's chain keeps them (`weft audit`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<StoredDecision>,
    /// What it cost: in total, per node, per LLM call.
    pub cost: RunCost,
    pub node_outputs: Vec<NodeOutputRecord>,
    /// Every visit of every node (loops, forEach items, steps inside subflows).
    pub visits: Vec<NodeVisit>,
    pub events: Vec<RunEvent>,
}

/// Every visit of every node of a run, with the run's cost per node and call.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunVisits {
    pub visits: Vec<NodeVisit>,
    pub cost: RunCost,
}

/// An approval waiting for a person, as an inbox lists it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub run_id: String,
    /// The approval (`sub/review` for one inside the subflow `sub`).
    pub node_id: String,
    /// The flow's file name without `.json` (what `weft serve` starts it by), else its name.
    pub flow: String,
    pub flow_name: String,
    pub flow_path: Option<String>,
    /// What the person is asked.
    pub message: String,
    /// The approval's form, answered with the decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FormField>,
    /// When it times out (RFC 3339, UTC), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// When it paused.
    pub since: String,
    /// For an approval that names its approvers or needs several: who approved so far and
    /// who is still needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalProgress>,
    /// The draft the person decides on: what the approval was given.
    pub input: Value,
    /// Why whoever asked (the app's user, the API token's name) may not decide it, as deciding
    /// would refuse them; absent when they may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The team's server (Settings → Servers) whose run waits here, in the desktop app's inbox;
    /// absent for a run of this store (and always in a server's own answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// A flow of the flows folder, as `GET /v1/flows` lists it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowListing {
    /// What `POST /v1/runs` and `GET /v1/flows/{name}` take: the file's name without `.json`.
    pub name: String,
    /// The flow's own `name`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The version of the file's content, as `weft versions` names it (SHA-256 of its
    /// canonical form); absent when the file does not load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why the file does not load, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One flow of the folder, as `GET /v1/flows/{name}` gives it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowDetail {
    pub name: String,
    /// The version of the file's content (see [`FlowListing::version`]).
    pub version: String,
    /// The flow in its canonical form (as the app saves it and `weft fmt` writes it).
    pub flow: Value,
}

/// The newest `limit` runs, newest first.
pub fn run_listings(
    store: &Store,
    limit: usize,
    prices: &Prices,
) -> Result<Vec<RunListing>, StoreError> {
    let summaries = store.list_runs(limit)?;
    let mut listed = Vec::with_capacity(summaries.len());
    for summary in summaries {
        let cost = run_total(store, &summary.id, prices)?;
        listed.push(RunListing {
            summary,
            cost,
            server: None,
        });
    }
    Ok(listed)
}

/// A page of runs: `limit` runs newest first (after run `after`, the last of the page before,
/// when given), each with its cost, and the id the next page starts after when more follow.
pub fn run_listing_page(
    store: &Store,
    limit: usize,
    after: Option<&str>,
    prices: &Prices,
) -> Result<(Vec<RunListing>, Option<String>), StoreError> {
    // One more than asked says whether another page follows.
    let mut summaries = match after {
        Some(after) => store.list_runs_after(limit + 1, after)?,
        None => store.list_runs(limit + 1)?,
    };
    let more = summaries.len() > limit;
    summaries.truncate(limit);
    let next = more
        .then(|| summaries.last().map(|summary| summary.id.clone()))
        .flatten();
    let mut listed = Vec::with_capacity(summaries.len());
    for summary in summaries {
        let cost = run_total(store, &summary.id, prices)?;
        listed.push(RunListing {
            summary,
            cost,
            server: None,
        });
    }
    Ok((listed, next))
}

/// Everything about run `run_id` (an id or a unique prefix).
pub fn run_detail(
    store: &Store,
    run_id: &str,
    prices: &Prices,
    people: &People,
) -> Result<RunDetail, StoreError> {
    let run_id = store.resolve_run_id(run_id.trim())?;
    let run = store.run(&run_id)?;
    let decisions = store.decisions(Some(&run_id))?;
    let node_outputs = store.node_outputs(&run_id)?;
    let events = store.events(&run_id)?;
    let cost = run_cost(store, &run, prices)?;
    let visits = node_visits(&run, &events, &node_outputs, &cost);
    let flow =
        Flow::parse(&run.flow_json, "the stored flow").map_err(|error| StoreError::Corrupt {
            run_id: run_id.clone(),
            message: error.to_string(),
        })?;
    let (waiting, follow_ups) = match waiting_of(&run) {
        Some(waiting) => {
            let (waiting, done) = followed_up(store, &run_id, waiting)?;
            (Some(waiting), done)
        }
        None => (None, Vec::new()),
    };
    let approval = waiting
        .as_ref()
        .and_then(|waiting| approval_progress(&run, waiting, people, &decisions, &follow_ups));
    Ok(RunDetail {
        waiting,
        approval,
        decisions,
        flow,
        run,
        cost,
        node_outputs,
        visits,
        events,
    })
}

/// Every visit of every node of run `run_id`.
pub fn run_visits(store: &Store, run_id: &str, prices: &Prices) -> Result<RunVisits, StoreError> {
    let run_id = store.resolve_run_id(run_id.trim())?;
    let record = store.run(&run_id)?;
    let events = store.events(&run_id)?;
    let outputs = store.node_outputs(&run_id)?;
    let cost = run_cost(store, &record, prices)?;
    let visits = node_visits(&record, &events, &outputs, &cost);
    Ok(RunVisits { visits, cost })
}

/// Every approval a person may decide now, across flows and runs (this process's, other
/// processes', a server's): paused runs not stopped at a breakpoint, oldest first; each saying
/// why `decider` may not decide it, if they may not.
pub fn pending_approvals(
    store: &Store,
    people: &People,
    decider: Option<&str>,
) -> Result<Vec<PendingApproval>, StoreError> {
    let records = store.paused_runs()?;
    let mut pending = Vec::with_capacity(records.len());
    for record in &records {
        let Some(waiting) = waiting_of(record).filter(|waiting| waiting.breakpoint.is_none())
        else {
            continue;
        };
        let (waiting, follow_ups) = followed_up(store, &record.summary.id, waiting)?;
        let (approval, refusal) = if waiting.quorum.is_anybody() {
            (None, None)
        } else {
            let kept = store.decisions_at(&record.summary.id, waiting.pause)?;
            let refusal = match kept
                .iter()
                .find(|decision| Some(decision.by.as_str()) == decider)
            {
                Some(earlier) => Some(format!(
                    "{} answered it already ({} at {})",
                    earlier.by, earlier.decision, earlier.at
                )),
                None => check_decider(record, &waiting, people, decider)
                    .err()
                    .map(|error| error.message),
            };
            (
                approval_progress(record, &waiting, people, &kept, &follow_ups),
                refusal,
            )
        };
        let summary = &record.summary;
        let flow = summary
            .flow_path
            .as_deref()
            .and_then(|path| Path::new(path).file_stem())
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| summary.flow_name.clone());
        pending.push(PendingApproval {
            run_id: summary.id.clone(),
            node_id: waiting.node_id,
            flow,
            flow_name: summary.flow_name.clone(),
            flow_path: summary.flow_path.clone(),
            message: waiting.message,
            fields: waiting.fields,
            deadline: waiting.deadline,
            since: summary.updated_at.clone(),
            approval,
            input: waiting.input,
            refusal,
            server: None,
        });
    }
    Ok(pending)
}

/// The progress of the approval `waiting`, for one that names its approvers or needs several.
fn approval_progress(
    record: &RunRecord,
    waiting: &Waiting,
    people: &People,
    kept: &[StoredDecision],
    follow_ups: &[StoredFollowUp],
) -> Option<ApprovalProgress> {
    if waiting.breakpoint.is_some() || waiting.quorum.is_anybody() {
        return None;
    }
    let at_pause: Vec<StoredDecision> = kept
        .iter()
        .filter(|decision| decision.pause == waiting.pause)
        .cloned()
        .collect();
    Some(progress(record, waiting, people, &at_pause, follow_ups))
}

/// Two runs (ids or unique prefixes) node by node.
pub fn comparison(
    store: &Store,
    a: &str,
    b: &str,
    prices: &Prices,
) -> Result<RunComparison, StoreError> {
    weft_history::compare::compare_runs(store, a.trim(), b.trim(), prices)
}

/// Two runs compared from their details, as a store or a team's server (`GET /v1/runs/{id}`)
/// gave them: how the desktop app compares a server's run with another.
pub fn compare_details(a: &RunDetail, b: &RunDetail) -> RunComparison {
    fn parts(detail: &RunDetail) -> weft_history::compare::RunParts<'_> {
        weft_history::compare::RunParts {
            record: &detail.run,
            events: &detail.events,
            cost: detail.cost.clone(),
            outputs: &detail.node_outputs,
        }
    }
    weft_history::compare::compare_parts(parts(a), parts(b))
}

impl Weft {
    /// [`run_listings`].
    pub async fn runs(&self, limit: usize) -> Result<Vec<RunListing>, Error> {
        let prices = self.prices.clone();
        blocking(self.store(), move |store| {
            run_listings(store, limit, &prices)
        })
        .await
    }

    /// [`run_listing_page`].
    pub async fn runs_page(
        &self,
        limit: usize,
        after: Option<&str>,
    ) -> Result<(Vec<RunListing>, Option<String>), Error> {
        let (prices, after) = (self.prices.clone(), after.map(str::to_string));
        blocking(self.store(), move |store| {
            run_listing_page(store, limit, after.as_deref(), &prices)
        })
        .await
    }

    /// [`run_detail`].
    pub async fn run(&self, run_id: &str) -> Result<RunDetail, Error> {
        let (prices, run_id) = (self.prices.clone(), run_id.to_string());
        let people = Arc::clone(&self.people);
        blocking(self.store(), move |store| {
            run_detail(store, &run_id, &prices, &people)
        })
        .await
    }

    /// [`run_visits`].
    pub async fn visits(&self, run_id: &str) -> Result<RunVisits, Error> {
        let (prices, run_id) = (self.prices.clone(), run_id.to_string());
        blocking(self.store(), move |store| {
            run_visits(store, &run_id, &prices)
        })
        .await
    }

    /// [`pending_approvals`], for `decider` (the app's user, a token's name).
    pub async fn pending_approvals(
        &self,
        decider: Option<String>,
    ) -> Result<Vec<PendingApproval>, Error> {
        let people = Arc::clone(&self.people);
        blocking(self.store(), move |store| {
            pending_approvals(store, &people, decider.as_deref())
        })
        .await
    }

    /// [`comparison`].
    pub async fn compare(&self, a: &str, b: &str) -> Result<RunComparison, Error> {
        let (prices, a, b) = (self.prices.clone(), a.to_string(), b.to_string());
        blocking(self.store(), move |store| {
            comparison(store, &a, &b, &prices)
        })
        .await
    }

    /// The total cost of run `run_id`.
    pub async fn cost(&self, run_id: &str) -> Result<Cost, Error> {
        let (prices, run_id) = (self.prices.clone(), run_id.to_string());
        blocking(self.store(), move |store| {
            run_total(store, &run_id, &prices)
        })
        .await
    }
}
