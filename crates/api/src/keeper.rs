//! The duties of a process that lives on (the app, `weft serve`, a Restate worker), done by one
//! background task: an approval whose `timeoutSeconds` ran out goes on along its `timeout` edge
//! (or fails naming the timeout) as the deadline passes, and at start for those that passed
//! while no process ran; a run left `running` by a process that died is marked interrupted, so
//! that it can be continued. A command that ends in a moment settles what is due once instead
//! ([`Weft::settle_deadlines`]).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weft_engine::RunHandle;
use weft_event::EventListener;

use crate::hosts::blocking;
use crate::{Error, Weft};

/// How often the keeper looks for passed deadlines and dead processes' runs.
const EVERY: Duration = Duration::from_secs(1);

/// The keeper of one process; it stops when dropped or [`Keeper::stop`]ped.
pub struct Keeper {
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Weft {
    /// Starts the keeper on the current tokio runtime; the runs it continues send their events
    /// to `on_event`.
    pub fn keep(&self, on_event: Option<EventListener>) -> Keeper {
        let stop = CancellationToken::new();
        let weft = self.clone();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            while !stopped.is_cancelled() {
                if let Err(error) = weft.settle_deadlines(on_event.clone()).await {
                    tracing::warn!("timed-out approvals could not be settled: {error}");
                }
                let store = weft.store().clone();
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

    /// Whether a paused run of this store had a deadline when the store was opened: a command
    /// with nothing to settle need not start anything to find out.
    pub fn has_deadlines(&self) -> bool {
        self.store().deadline_at_open().is_some()
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
