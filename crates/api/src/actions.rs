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
    Continue, Entry, PauseAnswer, ResumeOptions, RunHandle, RunOptions, check_decisions, waiting_of,
};
use weft_event::{EventListener, RunStatus};
use weft_flow::Flow;
use weft_nodes::{Decision, DecisionChoice, FlowToRun};
use weft_store::RunRecord;

use crate::hosts::{HostedAction, blocking, foreign_host};
use crate::{Error, Weft};

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
        let options = RunOptions {
            input: request.input,
            decisions: request.decisions,
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
    /// `by`; returns once the run is claimed and going on (its events to `options.on_event`).
    /// Refused, leaving the run as it was:
    /// a run that is not waiting for a decision (decided already, finished, going, stopped at
    /// a breakpoint), an answer that does not fit the approval's form, a `timeout` (Weft's own
    /// answer). An interrupted run that was waiting goes on with this decision.
    pub async fn decide(
        &self,
        run_id: &str,
        decision: Decision,
        by: Option<String>,
        options: ResumeOptions,
    ) -> Result<RunHandle, Error> {
        if decision.decision == DecisionChoice::Timeout {
            return Err(Error::invalid(
                "`timeout` is Weft's own answer once an approval's time has run out; answer approve or reject",
            ));
        }
        let decision = decision.by(by);
        let record = self.record(run_id).await?;
        let run_id = record.summary.id.clone();
        if let Some(host) = foreign_host(self.engine.host(), &record) {
            let answer = PauseAnswer::Decision(decision);
            return self
                .hosts
                .answer(self.store(), host, &record, &answer)
                .await;
        }
        if record.summary.status == RunStatus::Paused
            && let Some(waiting) = waiting_of(&record)
            && waiting.breakpoint.is_some()
        {
            return Err(Error::conflict(format!(
                "run {run_id} is paused at a breakpoint at `{}`, not at an approval: continue it instead of deciding",
                waiting.node_id
            )));
        }
        Ok(self.engine.spawn_resume(&run_id, decision, options).await?)
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
