//! Runs another host drives: a run that is a Restate workflow (`weft restate`) is continued by
//! its workflow, not by whichever process a person answers in. An answer given anywhere else
//! (`weft resume`, `weft serve`, the app) is handed to that host through a [`RunHost`], and the
//! process follows the run in the shared store until it ends or pauses again. The engine knows
//! only that such a run is not its own to claim.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use weft_engine::{PauseAnswer, RunError, RunHandle, RunOutcome, waiting_of};
use weft_event::{EventType, RunStatus};
use weft_store::{RunRecord, Store, StoreError};

use crate::Error;

/// How often the store is read while following a run driven elsewhere.
const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// What this process would have done to a run another host drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostedAction {
    /// Continue it after its process died (`--retry`).
    Retry,
    /// Cancel it while it waits for a person.
    Cancel,
}

/// A kind of host that drives runs of the shared store (a Restate deployment): it takes the
/// answers for its paused runs.
pub trait RunHost: Send + Sync {
    /// Whether the runs stored as driven by `host` (see `weft_store::NewRun::host`) are this
    /// kind's.
    fn drives(&self, host: &str) -> bool;

    /// Hands `answer` for the paused run `run_id` to its host `host`; refused with the host's
    /// own words when it does not take it.
    fn answer<'a>(
        &'a self,
        host: &'a str,
        run_id: &'a str,
        answer: &'a PauseAnswer,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// Why this process does not do `action` to such a run itself, and what to do instead.
    fn refusal(&self, action: HostedAction) -> String;
}

/// The hosts a process can hand answers to.
#[derive(Clone, Default)]
pub(crate) struct Hosts(Vec<Arc<dyn RunHost>>);

impl Hosts {
    pub(crate) fn add(&mut self, host: Arc<dyn RunHost>) {
        self.0.push(host);
    }

    fn find(&self, host: &str) -> Option<&Arc<dyn RunHost>> {
        self.0.iter().find(|known| known.drives(host))
    }

    /// Hands `answer` to the host that drives `record` and follows the run until it ends or
    /// pauses again.
    pub(crate) async fn answer(
        &self,
        store: &Store,
        host: &str,
        record: &RunRecord,
        answer: &PauseAnswer,
    ) -> Result<RunHandle, Error> {
        let run_id = record.summary.id.clone();
        let driver = self
            .find(host)
            .ok_or_else(|| unreachable_host(&run_id, host))?;
        match record.summary.status {
            RunStatus::Paused => {}
            status if status.is_finished() => {
                return Err(StoreError::Finished { run_id, status }.into());
            }
            // Running, or interrupted while a worker takes it over: its host goes on with it.
            status => return Err(StoreError::NotPaused { run_id, status }.into()),
        }
        let before = blocking(store, {
            let run_id = run_id.clone();
            move |store| store.last_seq(&run_id)
        })
        .await?;
        driver.answer(host, &run_id, answer).await?;
        let store = store.clone();
        let followed = run_id.clone();
        let task = tokio::spawn(async move { follow(&store, &followed, before).await });
        Ok(RunHandle::new(run_id, task))
    }

    /// Refuses `action` on `record` when another host drives it.
    pub(crate) fn refuse(
        &self,
        own: Option<&str>,
        record: &RunRecord,
        action: HostedAction,
    ) -> Result<(), Error> {
        let Some(host) = foreign_host(own, record) else {
            return Ok(());
        };
        let run_id = &record.summary.id;
        let why = match self.find(host) {
            Some(driver) => driver.refusal(action),
            None => "this version of Weft cannot reach it".to_string(),
        };
        // Refused like an answer that does not fit (400 over HTTP, as it always was).
        Err(Error::invalid(format!(
            "run {run_id} is driven by `{host}`: {why}"
        )))
    }
}

/// The host that drives `record`, when it is not this process's own (`own`).
pub(crate) fn foreign_host<'a>(own: Option<&str>, record: &'a RunRecord) -> Option<&'a str> {
    record.host.as_deref().filter(|host| Some(*host) != own)
}

fn unreachable_host(run_id: &str, host: &str) -> Error {
    Error::invalid(format!(
        "run {run_id} is driven by `{host}`, which this version of Weft cannot reach"
    ))
}

/// Reads run `run_id` until it ends, or pauses again after event `before`.
async fn follow(store: &Store, run_id: &str, before: u64) -> Result<RunOutcome, RunError> {
    loop {
        let id = run_id.to_string();
        let (record, waits_again) = blocking(store, move |store| {
            let record = store.run(&id)?;
            // Paused again: a new wait after the answer. The host may store that it took the
            // answer (`input_received`) before the run's status leaves the old pause.
            let waits_again = record.summary.status == RunStatus::Paused
                && store
                    .events_after(&id, before)?
                    .iter()
                    .any(|event| event.kind == EventType::WaitInput);
            Ok((record, waits_again))
        })
        .await
        .map_err(|error| {
            RunError::Store(StoreError::Refused {
                message: error.message,
            })
        })?;
        let status = record.summary.status;
        if status.is_finished() || waits_again {
            return Ok(RunOutcome {
                run_id: record.summary.id.clone(),
                status,
                result: record.result.clone().map(Arc::new),
                error: record.error.clone(),
                waiting: waiting_of(&record),
            });
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

impl crate::Weft {
    /// Runs a blocking call on the run store off the async workers: for a host's own store
    /// work (the mailer's outbox).
    pub async fn in_store<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Error> {
        blocking(self.store(), call).await
    }
}

/// Runs a blocking store call off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    store: &Store,
    call: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Error> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || call(&store))
        .await
        .map_err(|error| Error::failed(format!("a store call stopped: {error}")))?
        .map_err(Error::from)
}
