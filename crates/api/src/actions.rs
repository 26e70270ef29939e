//! What a person (or a token) does to runs, with one policy whatever the host: start one,
//! decide an approval, go on from a breakpoint, continue a run whose process died, cancel,
//! pause. Each refusal is an [`Error`] whose message is the same in the app, on the command
//! line and over HTTP.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use weft_engine::breakpoints::{Breakpoint, check_breakpoints};
use weft_engine::pins::{Pins, check_pins};
use weft_engine::{
    Continue, Entry, PauseAnswer, ResumeOptions, RunHandle, RunOptions, Waiting, check_decisions,
    waiting_of,
};
use weft_event::{EventListener, RunStatus};
use weft_flow::Flow;
use weft_nodes::{Decision, DecisionChoice, FlowToRun};
use weft_store::{NewDecision, Recorded, RunRecord, StoredDecision, TriggerKind};

use crate::approvals::{
    Channel, Decided, check_advance_decisions, check_decider, check_quorums, draft_edit,
    followed_up, progress,
};
use crate::hosts::{HostedAction, blocking, foreign_host};
use crate::{Error, ErrorKind, Weft};

/// "Run from here" or "run this node": where a partial run starts and which earlier run's
/// outputs it uses.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunFrom {
    /// The earlier run whose latest outputs feed the node and the templates.
    pub run_id: String,
    pub node_id: String,
    /// Only this node runs, not what follows it.
    #[serde(default)]
    pub only: bool,
}

/// What to start.
#[derive(Clone, Default)]
pub struct StartRequest {
    /// The run's input (a JSON object or array is read as JSON); else the start node's
    /// `initialInput`.
    pub input: Option<String>,
    /// Approvals answered in advance, by node (`sub/review` inside the subflow `sub`).
    pub decisions: HashMap<String, Decision>,
    /// The flow's file: kept with the run, and where its subflows are found.
    pub flow_path: Option<PathBuf>,
    pub from: Option<RunFrom>,
    /// Outputs that stand for their nodes, which then do not run.
    pub pins: Pins,
    /// A past run whose recorded LLM answers identical requests get.
    pub replay: Option<String>,
    /// Where the run stops for the person.
    pub breakpoints: Vec<Breakpoint>,
    /// Where the run's events go as they are stored.
    pub on_event: Option<EventListener>,
    /// Cancelling it cancels the run.
    pub cancel: CancellationToken,
    /// What starts the run (kept with it).
    pub trigger: Option<weft_store::Trigger>,
    /// A W3C `traceparent` the request came with: the run's span is its child when traces are
    /// exported (docs/traces.md).
    pub traceparent: Option<String>,
}

/// Refuses what a run of `flow` could not start with, before anything is stored: an advance
/// decision for a node that is not an approval, pins or breakpoints that do not fit the flow.
pub fn check_start(flow: &Flow, request: &StartRequest) -> Result<(), Error> {
    check_decisions(flow, &request.decisions).map_err(|error| Error::invalid(error.to_string()))?;
    let mut problems = check_pins(flow, &request.pins);
    problems.extend(check_breakpoints(flow, &request.breakpoints));
    if !problems.is_empty() {
        return Err(Error::invalid(problems.join("\n")));
    }
    Ok(())
}

/// What a cancel did.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled {
    pub run_id: String,
    /// `cancelled` (a run going in this process is stored so as soon as its steps stop).
    pub status: RunStatus,
}

impl Weft {
    /// Validates (unless `flow` was checked already) and starts a run; returns once it is
    /// stored and going.
    pub async fn start(
        &self,
        flow: impl Into<FlowToRun>,
        request: StartRequest,
    ) -> Result<RunHandle, Error> {
        let flow = flow.into();
        let starter = request
            .trigger
            .as_ref()
            .and_then(|trigger| trigger.by.as_deref());
        check_quorums(
            match &flow {
                FlowToRun::Checked(checked) => checked.flow(),
                FlowToRun::Unchecked(flow) => flow,
            },
            &self.people,
            starter,
        )?;
        check_advance_decisions(
            match &flow {
                FlowToRun::Checked(checked) => checked.flow(),
                FlowToRun::Unchecked(flow) => flow,
            },
            &request.decisions,
        )?;
        let entry = match &request.from {
            Some(from) => {
                let flow = match &flow {
                    FlowToRun::Checked(checked) => checked.flow(),
                    FlowToRun::Unchecked(flow) => flow,
                };
                self.engine
                    .entry_after(&from.run_id, flow, &from.node_id, from.only)
                    .await?
            }
            None => Entry::Start,
        };
        // Answers given in advance are kept in the audit as the channel that started the run.
        let decisions_through = request
            .trigger
            .as_ref()
            .and_then(|trigger| match trigger.kind {
                TriggerKind::Manual => Some(Channel::Cli),
                TriggerKind::Api | TriggerKind::Hook => Some(Channel::Api),
                TriggerKind::Mcp => Some(Channel::Mcp),
                TriggerKind::Schedule => None,
            })
            .filter(|_| !request.decisions.is_empty())
            .map(|channel| channel.as_str().to_string());
        let options = RunOptions {
            input: request.input,
            decisions: request.decisions,
            decisions_through,
            flow_path: request.flow_path,
            on_event: request.on_event,
            cancel: request.cancel,
            entry,
            pins: request.pins,
            replay: request.replay.map(|run| run.trim().to_string()),
            breakpoints: request.breakpoints,
            trigger: request.trigger,
            traceparent: request.traceparent,
            ..RunOptions::default()
        };
        Ok(self.engine.spawn(flow, options).await?)
    }

    /// Decides the approval the paused run `run_id` (an id or a unique prefix) waits at, as
    /// `by`, through `channel`. The decision is kept in the store's chain of decisions; the run
    /// goes on (returning once it is claimed, its events to `options.on_event`) when it settles
    /// the approval: a reject, or the approval's `required` approvals reached. Otherwise it is
    /// counted and the approval waits on ([`Decided::Counted`]).
    ///
    /// Refused, leaving the run as it was: a run that is not waiting for a decision (decided
    /// already, finished, going, stopped at a breakpoint), a person the approval's `approvers`
    /// or `allowSelf` do not let decide (forbidden), a person who answered this pause already
    /// otherwise, an answer that does not fit the approval's form, a `timeout` (Weft's own
    /// answer). An interrupted run that was waiting goes on with this decision.
    pub async fn decide(
        &self,
        run_id: &str,
        decision: Decision,
        by: Option<String>,
        channel: Channel,
        options: ResumeOptions,
    ) -> Result<Decided, Error> {
        if decision.decision == DecisionChoice::Timeout {
            return Err(Error::invalid(
                "`timeout` is Weft's own answer once an approval's time has run out; answer approve or reject",
            ));
        }
        let decision = decision.by(by);
        let record = self.record(run_id).await?;
        let run_id = record.summary.id.clone();
        let waiting = match waiting_of(&record) {
            Some(waiting) => {
                let (id, store) = (run_id.clone(), self.store().clone());
                Some(
                    blocking(&store, move |store| followed_up(store, &id, waiting))
                        .await?
                        .0,
                )
            }
            None => None,
        };
        if let Some(waiting) = &waiting
            && waiting.breakpoint.is_some()
        {
            return Err(Error::conflict(format!(
                "run {run_id} is paused at a breakpoint at `{}`, not at an approval: continue it instead of deciding",
                waiting.node_id
            )));
        }
        if let Some(waiting) = &waiting {
            check_decider(&record, waiting, &self.people, decision.by.as_deref())?;
            let checked = decision
                .clone()
                .checked(&waiting.fields, &waiting.input)
                .map_err(|problem| {
                    Error::invalid(format!(
                        "the answer for `{}` does not fit its form: {problem}; run {run_id} stays paused",
                        waiting.node_id
                    ))
                })?;
            let kept = self
                .keep_decision(&record, waiting, &checked, channel)
                .await?;
            let approved = progress(&record, waiting, &self.people, &kept, &[]);
            if decision.decision == DecisionChoice::Approve && approved.still_needed > 0 {
                return Ok(Decided::Counted {
                    run_id,
                    node_id: waiting.node_id.clone(),
                    progress: approved,
                });
            }
        }
        if let Some(host) = foreign_host(self.engine.host(), &record) {
            let answer = PauseAnswer::Decision(decision);
            return self
                .hosts
                .answer(self.store(), host, &record, &answer)
                .await
                .map(Decided::GoingOn);
        }
        match self.engine.spawn_resume(&run_id, decision, options).await {
            Ok(handle) => Ok(Decided::GoingOn(handle)),
            Err(error) => Err(self.naming_who_decided(&run_id, error.into()).await),
        }
    }

    /// `error`, when it says the run no longer waits (decided, ended), with who decided it
    /// last: of two people deciding at once, the one refused sees who won.
    async fn naming_who_decided(&self, run_id: &str, error: Error) -> Error {
        if error.kind != ErrorKind::Conflict {
            return error;
        }
        let id = run_id.to_string();
        let last = blocking(self.store(), move |store| store.decisions(Some(&id)))
            .await
            .ok()
            .and_then(|decisions| decisions.into_iter().last());
        match last {
            Some(last) => Error::conflict(format!(
                "{}; {} decided `{}` already ({} at {}, through {})",
                error.message, last.by, last.node_id, last.decision, last.at, last.channel
            )),
            None => error,
        }
    }

    /// Keeps `decision` at the approval `waiting` and returns every decision kept there. A
    /// person's second answer keeps nothing: the same answer again counts once, another answer
    /// is refused.
    async fn keep_decision(
        &self,
        record: &RunRecord,
        waiting: &Waiting,
        decision: &Decision,
        channel: Channel,
    ) -> Result<Vec<StoredDecision>, Error> {
        let run_id = record.summary.id.clone();
        let node_id = waiting.node_id.clone();
        let pause = waiting.pause;
        let choice = decision.decision.handle();
        let by = decision
            .by
            .clone()
            .unwrap_or_else(|| weft_nodes::decision::UNKNOWN_DECIDER.to_string());
        let note = decision.note.clone();
        let fields = serde_json::to_value(&decision.fields).unwrap_or_default();
        let edit = draft_edit(&waiting.fields, decision, &waiting.input);
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let recorded = blocking(self.store(), move |store| {
            let recorded = store.record_decision(&NewDecision {
                run_id: &run_id,
                node_id: &node_id,
                pause,
                decision: choice,
                by: &by,
                channel: channel.as_str(),
                note: &note,
                fields: &fields,
                draft_edit: edit.as_ref(),
                at: &at,
            })?;
            let kept = store.decisions_at(&run_id, pause)?;
            Ok((recorded, kept))
        })
        .await?;
        match recorded {
            (Recorded::Repeated(earlier), _) if channel == Channel::Email => {
                Err(Error::conflict(format!(
                    "this link was used already: {} answered `{}` of run {} ({} at {})",
                    earlier.by, earlier.node_id, earlier.run_id, earlier.decision, earlier.at
                )))
            }
            (Recorded::Repeated(earlier), _) if earlier.decision != choice => {
                Err(Error::conflict(format!(
                    "{} already answered `{}` of run {} ({} at {}); a person answers an approval once",
                    earlier.by, earlier.node_id, earlier.run_id, earlier.decision, earlier.at
                )))
            }
            (_, kept) => Ok(kept),
        }
    }

    /// Goes on from the breakpoint the paused run `run_id` stopped at (`how.step` stops again
    /// before the next steps; `how.set` replaces the value there). Refused for a run waiting
    /// at an approval, or a value that does not fit the node's `outputSchema`.
    pub async fn go_on(
        &self,
        run_id: &str,
        how: Continue,
        options: ResumeOptions,
    ) -> Result<RunHandle, Error> {
        let record = self.record(run_id).await?;
        let run_id = record.summary.id.clone();
        if let Some(host) = foreign_host(self.engine.host(), &record) {
            let answer = PauseAnswer::Continue(how);
            return self
                .hosts
                .answer(self.store(), host, &record, &answer)
                .await;
        }
        Ok(self.engine.spawn_continue(&run_id, how, options).await?)
    }

    /// Continues the interrupted run `run_id` (its process stopped before it ended) from its
    /// last finished steps; a run that was waiting for a decision waits again, or takes
    /// `decision`.
    pub async fn retry(
        &self,
        run_id: &str,
        decision: Option<Decision>,
        by: Option<String>,
        options: ResumeOptions,
    ) -> Result<RunHandle, Error> {
        let record = self.record(run_id).await?;
        self.hosts
            .refuse(self.engine.host(), &record, HostedAction::Retry)?;
        let decision = decision.map(|decision| decision.by(by));
        Ok(self
            .engine
            .spawn_retry(&record.summary.id, decision, options)
            .await?)
    }

    /// Cancels the run `run_id`: one going in this process is cancelled at once (its steps stop
    /// and it is stored as cancelled), one paused for a person (in any process) is claimed and
    /// ended as cancelled. Refused for a run going in another process (cancel it there) and for
    /// a finished or interrupted one.
    pub async fn cancel(
        &self,
        run_id: &str,
        on_event: Option<EventListener>,
    ) -> Result<Cancelled, Error> {
        let record = self.record(run_id).await?;
        let run_id = record.summary.id.clone();
        if self.engine.cancel(&run_id) {
            return Ok(Cancelled {
                run_id,
                status: RunStatus::Cancelled,
            });
        }
        match record.summary.status {
            RunStatus::Paused => {
                self.hosts
                    .refuse(self.engine.host(), &record, HostedAction::Cancel)?;
                let outcome = self.engine.cancel_paused(&run_id, on_event).await?;
                Ok(Cancelled {
                    run_id,
                    status: outcome.status,
                })
            }
            RunStatus::Running => Err(Error::conflict(format!(
                "run {run_id} is going in another process; cancel it there"
            ))),
            status => Err(Error::conflict(format!(
                "run {run_id} is {status}: there is nothing to cancel"
            ))),
        }
    }

    /// Asks the run `run_id`, going in this process, to pause before its next step (as at a
    /// breakpoint). Refused for a run not going here.
    pub fn pause(&self, run_id: &str) -> Result<(), Error> {
        if self.engine.pause(run_id) {
            Ok(())
        } else {
            Err(Error::conflict(format!(
                "run {run_id} is not going in this process; only a run going here can be paused"
            )))
        }
    }

    /// The stored run `run_id` names (an id or a unique prefix).
    pub(crate) async fn record(&self, run_id: &str) -> Result<RunRecord, Error> {
        let wanted = run_id.trim().to_string();
        blocking(self.store(), move |store| {
            store.run(&store.resolve_run_id(&wanted)?)
        })
        .await
    }
}
