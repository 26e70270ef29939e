//! The worker: a Restate service endpoint whose workflow runs flows.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::breakpoints::Breakpoint;
use weft_engine::{Continue, Engine, PauseAnswer, ResumeOptions, RunError, RunOptions, RunOutcome};

use crate::HOST_PREFIX;

use weft_nodes::Decision;

use weft_flow::{Flow, FlowNameError, flow_in_dir};

use weft_event::RunStatus;

use weft_store::StoreError;

/// How often a segment looks again at a run another worker left `running` (until that
/// worker's lease runs out).
const STALE_RUN_POLL: Duration = Duration::from_millis(250);

/// What starts a run: a flow of the worker's folder and its input.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRequest {
    /// A flow name: `triage` is `FLOWS/triage.json`.
    pub flow: String,
    /// The run's input; a string is used as it is, anything else as JSON.
    #[serde(default)]
    pub input: Option<Value>,
    /// Where the run stops for a person (`[{"nodeId": "draft", "when": "after"}]`); it goes on
    /// through the `proceed` handler.
    #[serde(default)]
    pub breakpoints: Vec<Breakpoint>,
    /// What started the run (a worker's schedule sends `schedule` with its occurrence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<weft_store::Trigger>,
}

/// Where a run stood at the end of a segment (and, for the workflow's result, at its end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub run_id: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The node a paused run waits at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_node_id: Option<String>,
    /// The run's last event when it paused: a decision is for this pause only.
    #[serde(default)]
    pub pause_seq: u64,
    /// When the approval a paused run waits at times out (RFC 3339), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

/// What a segment does to the run.
enum Step {
    Start {
        flow_path: PathBuf,
        input: Option<String>,
        breakpoints: Vec<Breakpoint>,
        trigger: Option<weft_store::Trigger>,
    },
    Answer {
        answer: PauseAnswer,
        pause_seq: u64,
    },
}

/// The workflow: a run per invocation, on `engine` (whose store the workers share), of the
/// flows in `flows` (canonical).
pub struct WeftRun {
    engine: Engine,
    flows: PathBuf,
}

impl WeftRun {
    /// The workflow over `flows`; `ingress` is Restate's ingress as the other hosts of the
    /// store reach it (a decision given to `weft resume`, `weft serve` or the app for one of
    /// these runs is sent there).
    pub fn new(engine: Engine, flows: &Path, ingress: &str) -> std::io::Result<WeftRun> {
        Ok(WeftRun {
            engine: engine.hosted_by(format!("{HOST_PREFIX}{}", ingress.trim_end_matches('/'))),
            flows: flows.canonicalize()?,
        })
    }
}

// The name is [`SERVICE`]'s (the macro takes a literal).
#[restate_sdk::workflow(name = "WeftRun")]
impl WeftRun {
    /// Runs flow `request.flow` as run `ctx.key()`, through its pauses, to its end.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        request: Json<StartRequest>,
    ) -> HandlerResult<Json<Outcome>> {
        let run_id = ctx.key().to_string();
        let request = request.into_inner();
        let flow_path = flow_in_dir(&self.flows, &request.flow).map_err(|error| {
            let code = match error {
                FlowNameError::NotAName(_) => 400,
                FlowNameError::NotFound(_) => 404,
            };
            TerminalError::new_with_code(code, error.to_string())
        })?;
        let input = request.input.map(|input| match input {
            Value::String(text) => text,
            other => other.to_string(),
        });
        let breakpoints = request.breakpoints;
        let trigger = request.trigger;
        let engine = self.engine.clone();
        let id = run_id.clone();
        let mut outcome = ctx
            .run(|| async move {
                segment(
                    &engine,
                    &id,
                    Step::Start {
                        flow_path,
                        input,
                        breakpoints,
                        trigger,
                    },
                )
                .await
                .map(Json)
            })
            .name("start")
            .await?
            .into_inner();
        let mut pause: u64 = 0;
        while outcome.status == RunStatus::Paused {
            pause += 1;
            let name = promise_name(outcome.pause_seq);
            let promised = ctx.promise::<Json<PauseAnswer>>(&name);
            // An approval with a timeout waits on a durable timer too: whichever comes first.
            let answer = match outcome.deadline.as_deref().map(time_until) {
                Some(wait) => restate_sdk::select! {
                    answer = promised => answer?.into_inner(),
                    _ = ctx.sleep(wait) => PauseAnswer::Decision(Decision::timeout()),
                },
                None => promised.await?.into_inner(),
            };
            let engine = self.engine.clone();
            let id = run_id.clone();
            let pause_seq = outcome.pause_seq;
            outcome = ctx
                .run(|| async move {
                    segment(&engine, &id, Step::Answer { answer, pause_seq })
                        .await
                        .map(Json)
                })
                .name(format!("answer {pause}"))
                .await?
                .into_inner();
        }
        Ok(Json(outcome))
    }

    /// Decides the approval the run waits at: refused (409) when it waits for nothing, (400)
    /// when the answer does not fit the approval's form, and (409) when this pause was already
    /// answered.
    #[handler]
    async fn decide(
        &self,
        ctx: SharedWorkflowContext<'_>,
        decision: Json<Decision>,
    ) -> HandlerResult<()> {
        answer(
            &self.engine,
            ctx,
            PauseAnswer::Decision(decision.into_inner()),
        )
        .await
    }

    /// Goes on from the breakpoint the run stopped at (`{}`; `{"step": true}` stops again
    /// before the next steps; `{"set": VALUE}` goes on with another value); refused as
    /// `decide` is.
    #[handler]
    async fn proceed(
        &self,
        ctx: SharedWorkflowContext<'_>,
        how: Json<Continue>,
    ) -> HandlerResult<()> {
        answer(&self.engine, ctx, PauseAnswer::Continue(how.into_inner())).await
    }
}

/// Resolves the promise of the pause the run waits at with `given`, once it fits.
async fn answer(
    engine: &Engine,
    ctx: SharedWorkflowContext<'_>,
    given: PauseAnswer,
) -> HandlerResult<()> {
    let run_id = ctx.key().to_string();
    let engine = engine.clone();
    let checked = given.clone();
    let id = run_id.clone();
    // The store says where the run waits (the workflow may not have reached its promise yet):
    // see `pause_of` for the pause's name.
    let pause_seq = ctx
        .run(|| async move {
            match engine.check_answer(&id, &checked).await {
                Ok(()) => {
                    let record = engine.store().run(&id).map_err(retryable)?;
                    pause_of(&engine, &record).await
                }
                Err(RunError::Store(StoreError::Refused { message })) => {
                    Err(TerminalError::new_with_code(400, message).into())
                }
                Err(RunError::Store(
                    error @ (StoreError::NotPaused { .. }
                    | StoreError::Finished { .. }
                    | StoreError::NoSuchRun(_)),
                )) => Err(TerminalError::new_with_code(409, error.to_string()).into()),
                Err(error) => Err(retryable(error)),
            }
        })
        .name("check the answer")
        .await?;
    let name = promise_name(pause_seq);
    if ctx
        .peek_promise::<Json<PauseAnswer>>(&name)
        .await?
        .is_some()
    {
        return Err(TerminalError::new_with_code(
            409,
            format!("the pause of run {run_id} was already answered"),
        )
        .into());
    }
    ctx.resolve_promise::<Json<PauseAnswer>>(&name, Json(given));
    Ok(())
}

/// How long until `deadline` (RFC 3339); zero when it has passed or cannot be read. Only the
/// first execution's value counts: Restate journals the timer's end.
fn time_until(deadline: &str) -> Duration {
    chrono::DateTime::parse_from_rfc3339(deadline)
        .ok()
        .and_then(|end| {
            (end.with_timezone(&chrono::Utc) - chrono::Utc::now())
                .to_std()
                .ok()
        })
        .unwrap_or_default()
}

/// The promise a pause waits on, named by the run's last event when it paused.
fn promise_name(pause_seq: u64) -> String {
    format!("pause-at-{pause_seq}")
}

/// An error worth trying again (the store unreachable, a lost run task): Restate retries the
/// segment with its retry policy.
fn retryable(error: impl std::fmt::Display) -> HandlerError {
    HandlerError::from(std::io::Error::other(error.to_string()))
}

/// Drives run `run_id` through one segment: `step` applied to where the store says the run
/// stands, whoever took it that far (this worker before, or one that died).
async fn segment(engine: &Engine, run_id: &str, step: Step) -> HandlerResult<Outcome> {
    loop {
        let record = match engine.store().run(run_id) {
            Ok(record) => Some(record),
            Err(StoreError::NoSuchRun(_)) => None,
            Err(error) => return Err(retryable(error)),
        };
        let handle = match (record, &step) {
            (
                None,
                Step::Start {
                    flow_path,
                    input,
                    breakpoints,
                    trigger,
                },
            ) => {
                let flow = Flow::load(flow_path)
                    .map_err(|error| TerminalError::new_with_code(400, error.to_string()))?;
                let options = RunOptions {
                    run_id: Some(run_id.to_string()),
                    input: input.clone(),
                    flow_path: Some(flow_path.clone()),
                    breakpoints: breakpoints.clone(),
                    trigger: trigger.clone(),
                    ..RunOptions::default()
                };
                match engine.spawn(flow, options).await {
                    Ok(handle) => handle,
                    Err(error @ (RunError::Invalid { .. } | RunError::Debugging { .. })) => {
                        return Err(TerminalError::new_with_code(400, error.to_string()).into());
                    }
                    Err(error) => return Err(retryable(error)),
                }
            }
            (None, Step::Answer { .. }) => {
                return Err(TerminalError::new_with_code(
                    404,
                    format!("run {run_id} is not stored"),
                )
                .into());
            }
            (Some(record), step) => match (record.summary.status, step) {
                (status, _) if status.is_finished() => return outcome_of(engine, &record).await,
                (RunStatus::Paused, Step::Start { .. }) => {
                    return outcome_of(engine, &record).await;
                }
                (RunStatus::Paused, Step::Answer { answer, pause_seq }) => {
                    if pause_of(engine, &record).await? != *pause_seq {
                        // This decision was taken and the run paused again before the segment
                        // was journaled: that later pause is where it stands.
                        return outcome_of(engine, &record).await;
                    }
                    let resumed = match answer {
                        PauseAnswer::Decision(decision) => {
                            engine
                                .spawn_resume(run_id, decision.clone(), ResumeOptions::default())
                                .await
                        }
                        PauseAnswer::Continue(how) => {
                            engine
                                .spawn_continue(run_id, how.clone(), ResumeOptions::default())
                                .await
                        }
                    };
                    match resumed {
                        Ok(handle) => handle,
                        // Claimed by someone else meanwhile: look again.
                        Err(RunError::Store(StoreError::NotPaused { .. })) => continue,
                        Err(error) => return Err(retryable(error)),
                    }
                }
                (RunStatus::Interrupted, step) => {
                    let answer = match step {
                        Step::Answer {
                            answer: PauseAnswer::Decision(decision),
                            ..
                        } => Some(decision.clone()),
                        _ => None,
                    };
                    let retried = engine
                        .spawn_retry(run_id, answer.clone(), ResumeOptions::default())
                        .await;
                    match retried {
                        Ok(handle) => handle,
                        // Its decision was already taken (or it was not waiting): go on without.
                        Err(RunError::Store(StoreError::NotWaiting { .. })) if answer.is_some() => {
                            match engine
                                .spawn_retry(run_id, None, ResumeOptions::default())
                                .await
                            {
                                Ok(handle) => handle,
                                Err(error) => return Err(retryable(error)),
                            }
                        }
                        Err(RunError::Store(StoreError::NotInterrupted { .. })) => continue,
                        Err(error) => return Err(retryable(error)),
                    }
                }
                (RunStatus::Running, _) => {
                    // Left running by a worker that died (or is still finishing it): once its
                    // process is known gone, or its lease ran out, the store marks it
                    // interrupted and the next look continues it.
                    if let Err(error) = engine.store().interrupt_abandoned() {
                        return Err(retryable(error));
                    }
                    tokio::time::sleep(STALE_RUN_POLL).await;
                    continue;
                }
                (status, _) => {
                    return Err(retryable(format!("run {run_id} is {status}")));
                }
            },
        };
        let outcome = handle.outcome().await.map_err(retryable)?;
        return outcome_from(engine, outcome).await;
    }
}

async fn last_seq(engine: &Engine, run_id: &str) -> HandlerResult<u64> {
    engine.store().last_seq(run_id).map_err(retryable)
}

/// The name of the pause a paused run waits at (its workflow's promise is named by it): the
/// number of the run's last event when it paused. Taken from the pause itself, not the log, so
/// that events a keeper adds while the run waits (a reminder) do not rename it; a workflow
/// paused by an earlier Weft, which read the log's last event then, has the same name.
async fn pause_of(engine: &Engine, record: &weft_store::RunRecord) -> HandlerResult<u64> {
    match weft_engine::waiting_of(record) {
        Some(waiting) => Ok(waiting.pause.saturating_sub(1)),
        None => last_seq(engine, &record.summary.id).await,
    }
}

async fn outcome_from(engine: &Engine, outcome: RunOutcome) -> HandlerResult<Outcome> {
    let pause_seq = match (outcome.status, &outcome.waiting) {
        (RunStatus::Paused, Some(waiting)) => waiting.pause.saturating_sub(1),
        (RunStatus::Paused, None) => last_seq(engine, &outcome.run_id).await?,
        _ => 0,
    };
    let deadline = outcome
        .waiting
        .as_ref()
        .and_then(|waiting| waiting.deadline.clone());
    Ok(Outcome {
        waiting_node_id: outcome.waiting.map(|waiting| waiting.node_id),
        deadline,
        run_id: outcome.run_id,
        status: outcome.status,
        result: outcome.result.map(Arc::unwrap_or_clone),
        error: outcome.error,
        pause_seq,
    })
}

async fn outcome_of(engine: &Engine, record: &weft_store::RunRecord) -> HandlerResult<Outcome> {
    let status = record.summary.status;
    let pause_seq = match status {
        RunStatus::Paused => pause_of(engine, record).await?,
        _ => 0,
    };
    Ok(Outcome {
        run_id: record.summary.id.clone(),
        status,
        result: record.result.clone(),
        error: record.error.clone(),
        waiting_node_id: record.summary.waiting_node_id.clone(),
        pause_seq,
        deadline: weft_engine::waiting_of(record).and_then(|waiting| waiting.deadline),
    })
}

/// How long Restate waits for a segment: a run's segment may spend minutes in LLM calls, and
/// the worker says nothing to Restate meanwhile.
const SEGMENT_INACTIVITY: Duration = Duration::from_secs(60 * 60);

/// The Restate endpoint serving [`SERVICE`], with how long Restate waits before retrying an
/// invocation whose worker went away.
pub fn endpoint(workflow: WeftRun, retry_after: Duration) -> Endpoint {
    Endpoint::builder()
        .bind(
            workflow.into_service_definition().options(
                ServiceOptions::new()
                    .inactivity_timeout(SEGMENT_INACTIVITY)
                    .retry_policy_initial_interval(retry_after)
                    .retry_policy_exponentiation_factor(2.0)
                    .retry_policy_max_interval(Duration::from_secs(10).max(retry_after)),
            ),
        )
        .build()
}

/// Serves `endpoint` on `listener` (until the task running this is dropped).
pub async fn serve(endpoint: Endpoint, listener: tokio::net::TcpListener) {
    HttpServer::new(endpoint).serve(listener).await;
}

/// Why registering with Restate's admin API failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("cannot reach Restate's admin API at {admin}: {source}")]
    Unreachable {
        admin: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("Restate's admin API at {admin} refused to register {uri} ({status}): {body}")]
    Refused {
        admin: String,
        uri: String,
        status: u16,
        body: String,
    },
}

/// Registers the endpoint at `uri` (as Restate reaches it) with the admin API at `admin`
/// (`http://host:9070`); registering the same endpoint again updates it.
pub async fn register(admin: &str, uri: &str) -> Result<(), RegisterError> {
    let admin = admin.trim_end_matches('/').to_string();
    let answer = reqwest::Client::new()
        .post(format!("{admin}/deployments"))
        .json(&serde_json::json!({ "uri": uri, "force": true }))
        .send()
        .await
        .map_err(|source| RegisterError::Unreachable {
            admin: admin.clone(),
            source,
        })?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    Err(RegisterError::Refused {
        admin,
        uri: uri.to_string(),
        status: status.as_u16(),
        body: answer.text().await.unwrap_or_default(),
    })
}

/// The address the endpoint listens on, as a worker prints it.
pub fn endpoint_url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}
