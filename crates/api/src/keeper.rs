//! The duties of a process that lives on (the app, `weft serve`, a Restate worker), done by one
//! background task: an approval whose `timeoutSeconds` ran out goes on along its `timeout` edge
//! (or fails naming the timeout) as the deadline passes, and at start for those that passed
//! while no process ran; an approval's follow-ups (a reminder to those still needed, approvers
//! added) are done once across processes as they come due; a run left `running` by a process
//! that died is marked interrupted, so that it can be continued. A command that ends in a moment settles what is due once instead
//! ([`Weft::settle_deadlines`]).

use std::time::Duration;

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weft_engine::{RunHandle, waiting_of};
use weft_event::{EventListener, EventType, RunEvent};
use weft_nodes::FollowUpKind;
use weft_store::FollowUp;

use crate::approvals::{FollowedUp, followed_up, progress};
use crate::hosts::blocking;
use crate::{Error, Weft};

/// How often the keeper looks for passed deadlines and dead processes' runs.
const EVERY: Duration = Duration::from_secs(1);

/// The keeper of one process; it stops when dropped or [`Keeper::stop`]ped.
pub struct Keeper {
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// What a keeper does each round.
enum Duties {
    /// Deadlines, follow-ups and runs of dead processes; the runs it continues send their
    /// events to the listener.
    Every(Option<EventListener>),
    /// Follow-ups only.
    FollowUps,
}

impl Weft {
    /// Starts the keeper on the current tokio runtime; the runs it continues send their events
    /// to `on_event`.
    pub fn keep(&self, on_event: Option<EventListener>) -> Keeper {
        self.start_keeper(Duties::Every(on_event))
    }

    /// Starts a keeper that does approvals' follow-ups only (reminders, escalations): for a
    /// host whose runs' deadlines and lost processes are seen to elsewhere (a Restate worker:
    /// durable timers, Restate's own retries).
    pub fn keep_following_up(&self) -> Keeper {
        self.start_keeper(Duties::FollowUps)
    }

    fn start_keeper(&self, duties: Duties) -> Keeper {
        let stop = CancellationToken::new();
        let weft = self.clone();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            while !stopped.is_cancelled() {
                if let Duties::Every(on_event) = &duties
                    && let Err(error) = weft.settle_deadlines(on_event.clone()).await
                {
                    tracing::warn!("timed-out approvals could not be settled: {error}");
                }
                if let Err(error) = weft.settle_follow_ups().await {
                    tracing::warn!("reminders and escalations could not be done: {error}");
                }
                if let Duties::Every(_) = duties {
                    weft.interrupt_abandoned().await;
                }
                tokio::select! {
                    () = tokio::time::sleep(EVERY) => {}
                    () = stopped.cancelled() => {}
                }
            }
        });
        Keeper {
            stop,
            task: Some(task),
        }
    }

    /// Marks the runs left running by processes that stopped as interrupted, logging each.
    async fn interrupt_abandoned(&self) {
        let store = self.store().clone();
        match blocking(&store, |store| store.interrupt_abandoned()).await {
            Ok(runs) => {
                for run in runs {
                    tracing::info!(
                        "run {run} was left running by a process that stopped; it is interrupted now"
                    );
                }
            }
            Err(error) => {
                tracing::warn!("runs of stopped processes could not be marked: {error}")
            }
        }
    }

    /// Every paused run whose approval's deadline has passed goes on along its `timeout` edge
    /// (or fails naming the timeout), in the background in this process; returns their
    /// handles. A run another process claimed meanwhile (a person decided just in time) is left
    /// to it.
    pub async fn settle_deadlines(
        &self,
        on_event: Option<EventListener>,
    ) -> Result<Vec<RunHandle>, Error> {
        Ok(self.engine.settle_timeouts(on_event).await?)
    }

    /// Does the follow-ups of paused approvals that are due (reminders to those still needed,
    /// `escalateTo` added to the approvers), each once whatever the processes doing it: kept in
    /// the store, logged, and handed to the listener of [`Weft::on_follow_up`]. Returns them.
    pub async fn settle_follow_ups(&self) -> Result<Vec<FollowedUp>, Error> {
        let people = Arc::clone(&self.people);
        let done = blocking(self.store(), move |store| {
            let now = chrono::Utc::now();
            let now_text = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let mut done = Vec::new();
            for run_id in store.due_follow_ups(&now_text)? {
                let record = store.run(&run_id)?;
                let Some(waiting) =
                    waiting_of(&record).filter(|waiting| waiting.breakpoint.is_none())
                else {
                    store.set_follow_up(&run_id, None)?;
                    continue;
                };
                let since = waiting
                    .since
                    .as_deref()
                    .and_then(|since| chrono::DateTime::parse_from_rfc3339(since).ok())
                    .map(|since| since.with_timezone(&chrono::Utc))
                    .unwrap_or(now);
                let mut next = None;
                for (kind, at) in waiting.quorum.follow_ups(since) {
                    let (waiting, kept) = followed_up(store, &run_id, waiting.clone())?;
                    if kept.iter().any(|follow_up| follow_up.kind == kind.as_str()) {
                        continue;
                    }
                    if at > now {
                        next = Some(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                        break;
                    }
                    let to = match kind {
                        FollowUpKind::Remind => {
                            let decisions = store.decisions_at(&run_id, waiting.pause)?;
                            progress(&record, &waiting, &people, &decisions, &kept)
                                .may_still_approve
                        }
                        FollowUpKind::Escalate => waiting.quorum.escalate_to.clone(),
                    };
                    let claimed = store.claim_follow_up(&FollowUp {
                        run_id: &run_id,
                        pause: waiting.pause,
                        kind: kind.as_str(),
                        at: &now_text,
                        to: &to,
                    })?;
                    if claimed {
                        store.append_to_paused(follow_up_event(
                            &run_id,
                            &waiting.node_id,
                            kind,
                            &to,
                            &now_text,
                        ))?;
                        if !to.is_empty() {
                            // Emailed by whichever process has a mailer (`weft serve --smtp`).
                            store.queue_mail(&run_id, waiting.pause, kind.as_str(), &now_text)?;
                        }
                        done.push(FollowedUp {
                            run_id: run_id.clone(),
                            node_id: waiting.node_id.clone(),
                            kind: kind.as_str().to_string(),
                            to,
                            message: waiting.message.clone(),
                        });
                    }
                }
                store.set_follow_up(&run_id, next.as_deref())?;
            }
            Ok(done)
        })
        .await?;
        for follow_up in &done {
            let who = if follow_up.to.is_empty() {
                "anybody who may decide".to_string()
            } else {
                follow_up.to.join(", ")
            };
            match follow_up.kind.as_str() {
                "escalate" => tracing::info!(
                    "run {} waits at `{}`: escalated, {who} may decide it now",
                    follow_up.run_id,
                    follow_up.node_id
                ),
                _ => tracing::info!(
                    "run {} waits at `{}`: reminded {who}",
                    follow_up.run_id,
                    follow_up.node_id
                ),
            }
            if let Some(listener) = &self.follow_up_listener {
                listener(follow_up);
            }
        }
        Ok(done)
    }

    /// Whether a paused run of this store had a deadline when the store was opened: a command
    /// with nothing to settle need not start anything to find out.
    pub fn has_deadlines(&self) -> bool {
        self.store().deadline_at_open().is_some()
    }
}

/// The event a follow-up adds to the run's log while it waits (`approval_reminder`,
/// `approval_escalated`), at the approval `path` (`sub/review`: node `review` of scope `sub`).
fn follow_up_event(
    run_id: &str,
    path: &str,
    kind: FollowUpKind,
    to: &[String],
    at: &str,
) -> RunEvent {
    let who = if to.is_empty() {
        "anybody who may decide".to_string()
    } else {
        to.join(", ")
    };
    let (kind, content) = match kind {
        FollowUpKind::Remind => (EventType::ApprovalReminder, format!("reminded {who}")),
        FollowUpKind::Escalate => (
            EventType::ApprovalEscalated,
            format!("escalated: {who} may decide it now"),
        ),
    };
    let (scope, node) = match path.rsplit_once('/') {
        Some((scope, node)) => (Some(scope.to_string()), node),
        None => (None, path),
    };
    RunEvent {
        seq: 0,
        run_id: Arc::from(run_id),
        ts: Arc::from(at),
        kind,
        node_id: Some(node.into()),
        content,
        scope,
        item: None,
        from: None,
        usage: None,
        model: None,
    }
}

impl Keeper {
    /// Stops the keeper and waits for its current round to end.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
