//! Paused runs driven by another host: a run that is a Restate workflow (`weft restate`) waits
//! for its decision as a durable promise of the workflow. A decision given anywhere else —
//! `weft resume`, `weft serve`, the app's inbox — is sent to the workflow through Restate's
//! ingress instead of being applied by this process, which then follows the run in the shared
//! store until it ends or pauses again.

use std::time::Duration;

use super::{Engine, PauseAnswer, RunError, RunHandle, RunOutcome, waiting_of};
use crate::event::RunStatus;
use crate::store::{RunRecord, StoreError};

/// How a run hosted by a Restate workflow names its host: `restate INGRESS-URL`.
pub const RESTATE_HOST: &str = "restate ";

/// The Restate workflow that runs are (the ingress path is `/WeftRun/{run id}/…`).
pub const RESTATE_WORKFLOW: &str = "WeftRun";

/// How long sending a decision to the ingress may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the store is read while following a run driven elsewhere.
const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// When run `run_id` is driven by a host other than `engine`'s, hands `answer` to that host and
/// returns a handle that follows the run to its end or next pause; `None` for a run this
/// process may claim itself (the usual case), whose errors the claim reports.
pub(super) async fn forward_if_hosted(
    engine: &Engine,
    run_id: &str,
    answer: &PauseAnswer,
) -> Result<Option<RunHandle>, RunError> {
    let wanted = run_id.to_string();
    let record = engine
        .blocking(move |store| {
            let run_id = store.resolve_run_id(&wanted)?;
            store.run(&run_id)
        })
        .await;
    let Ok(record) = record else {
        return Ok(None);
    };
    let Some(host) = record.host.clone() else {
        return Ok(None);
    };
    if engine.host.as_deref() == Some(host.as_str()) {
        return Ok(None);
    }
    let run_id = record.summary.id.clone();
    let refused = |message: String| RunError::Store(StoreError::Refused { message });
    let Some(ingress) = host.strip_prefix(RESTATE_HOST) else {
        return Err(refused(format!(
            "run {run_id} is driven by `{host}`, which this version of Weft cannot reach"
        )));
    };
    match record.summary.status {
        RunStatus::Paused => {}
        status if status.is_finished() => {
            return Err(RunError::Store(StoreError::Finished { run_id, status }));
        }
        // Running, or interrupted while a worker takes it over: its workflow goes on with it.
        status => return Err(RunError::Store(StoreError::NotPaused { run_id, status })),
    }
    let (handler, body) = match answer {
        PauseAnswer::Decision(decision) => ("decide", serde_json::to_value(decision)),
        PauseAnswer::Continue(how) => ("proceed", serde_json::to_value(how)),
    };
    let body = body.map_err(|error| refused(format!("cannot send the answer: {error}")))?;
    let id = run_id.clone();
    let before = engine.blocking(move |store| store.last_seq(&id)).await?;
    let url = format!(
        "{}/{RESTATE_WORKFLOW}/{run_id}/{handler}",
        ingress.trim_end_matches('/')
    );
    let sent = reqwest::Client::new()
        .post(&url)
        .timeout(SEND_TIMEOUT)
        .json(&body)
        .send()
        .await
        .map_err(|error| {
            refused(format!(
                "run {run_id} is a Restate workflow; its answer goes through Restate's ingress, \
                 which did not answer at {ingress}: {error}"
            ))
        })?;
    let status = sent.status();
    if !status.is_success() {
        let body = sent.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|answer| answer["message"].as_str().map(str::to_string))
            .unwrap_or(body);
        return Err(refused(format!(
            "Restate's ingress refused the answer for run {run_id} ({}): {message}",
            status.as_u16()
        )));
    }
    let following = engine.clone();
    let followed = run_id.clone();
    let task = tokio::spawn(async move { follow(&following, &followed, before).await });
    Ok(Some(RunHandle { run_id, task }))
}

/// Refuses to continue here an interrupted run driven by another host (Restate retries the
/// workflow on a worker), or to cancel here a paused one (its workflow would wait on);
/// `refusal` says what this process would have done and why it does not.
pub(super) async fn refuse_if_hosted(
    engine: &Engine,
    run_id: &str,
    refusal: &str,
) -> Result<(), RunError> {
    let wanted = run_id.to_string();
    let Ok(record) = engine
        .blocking(move |store| {
            let run_id = store.resolve_run_id(&wanted)?;
            store.run(&run_id)
        })
        .await
    else {
        return Ok(());
    };
    match record.host {
        Some(host) if engine.host.as_deref() != Some(host.as_str()) => {
            Err(RunError::Store(StoreError::Refused {
                message: format!("run {} is driven by `{host}`: {refusal}", record.summary.id),
            }))
        }
        _ => Ok(()),
    }
}

/// Reads run `run_id` until it ends, or pauses again after event `before`.
async fn follow(engine: &Engine, run_id: &str, before: u64) -> Result<RunOutcome, RunError> {
    loop {
        let id = run_id.to_string();
        let (record, last) = engine
            .blocking(move |store| Ok((store.run(&id)?, store.last_seq(&id)?)))
            .await?;
        let status = record.summary.status;
        if status.is_finished() || (status == RunStatus::Paused && last > before) {
            return Ok(outcome_of(&record));
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

fn outcome_of(record: &RunRecord) -> RunOutcome {
    RunOutcome {
        run_id: record.summary.id.clone(),
        status: record.summary.status,
        result: record.result.clone(),
        error: record.error.clone(),
        waiting: waiting_of(record),
    }
}
