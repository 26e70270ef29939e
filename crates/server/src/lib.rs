//! `weft serve` (SPEC §12): an HTTP API over the same engine and run store as `weft` and the
//! desktop app. Start a run of a flow in the flows folder, follow its events (SSE), list and read
//! runs, list the approvals waiting for a person and decide them (with form answers), cancel,
//! and start a flow from a webhook. Every route but `/openapi.json` needs a bearer token; the
//! token's name is recorded as the decider of what it decides.
//!
//! Errors are `{code, message}` with the status that fits: 400 a bad body or flow, 401 no or a
//! wrong token, 404 an unknown run or flow, 409 a run not waiting (decided twice, ended), 413 a
//! body over the limit.

mod error;
pub mod tokens;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use weft_engine::cost::Prices;
use weft_engine::providers::ProviderSettings;
use weft_engine::{
    Decision, Engine, EventListener, EventSink, EventType, Flow, FlowNameError, ResumeOptions,
    RunEvent, RunOptions, RunStatus, check_decisions, check_for_run, flow_in_dir,
};

pub use error::ApiError;
pub use tokens::{Tokens, TokensError};

/// The OpenAPI 3 document of this API, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Request bodies larger than this are refused with 413 unless configured otherwise.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Flows are started by name from this folder (`triage` is `DIR/triage.json`).
    pub flows_dir: PathBuf,
    pub tokens: Tokens,
    /// Request bodies larger than this many bytes get 413.
    pub max_body: usize,
    pub prices: Prices,
    pub provider_settings: ProviderSettings,
}

/// What every request handler shares.
struct Api {
    engine: Engine,
    flows_dir: PathBuf,
    tokens: Tokens,
    prices: Prices,
    provider_settings: ProviderSettings,
    /// Woken whenever a run going in this process commits events (event streams wait on it).
    changed: Arc<Notify>,
    /// Set when the server shuts down: event streams end.
    stopping: CancellationToken,
}

/// Who called: the name of their token.
#[derive(Debug, Clone)]
struct Caller(String);

/// Wakes the event streams when a batch of a run's events is committed.
struct Wake(Arc<Notify>);

impl EventSink for Wake {
    fn event(&self, _event: &RunEvent) {}

    fn flush(&self) {
        self.0.notify_waiters();
    }
}

/// Serves the API on `listener` until `shutdown` completes; then the runs going in this
/// process are cancelled (stored as `cancelled`; paused runs keep their pause) within `grace`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Engine,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (router, api) = router_and_state(engine.clone(), config)?;
    // Approvals nobody decided in time, also those that ran out while no process ran.
    let keeper = {
        let api = api.clone();
        tokio::spawn(async move {
            while !api.stopping.is_cancelled() {
                let wake: EventListener = Arc::new(Wake(api.changed.clone()));
                if let Err(error) = api.engine.settle_timeouts(Some(wake)).await {
                    tracing::warn!("timed-out approvals could not be settled: {error}");
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = api.stopping.cancelled() => {}
                }
            }
        })
    };
    let stopping = api.stopping.clone();
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Event streams end so that the connections they hold can close.
            stopping.cancel();
        })
        .await;
    api.stopping.cancel();
    keeper.abort();
    if !engine.shutdown(grace).await {
        tracing::warn!("some runs were still going when the server stopped");
    }
    result
}

/// The API's routes, for a server or a test.
pub fn router(engine: Engine, config: ServeConfig) -> std::io::Result<Router> {
    router_and_state(engine, config).map(|(router, _)| router)
}

fn router_and_state(engine: Engine, config: ServeConfig) -> std::io::Result<(Router, Arc<Api>)> {
    let flows_dir = config.flows_dir.canonicalize().map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!("the flows folder {}: {error}", config.flows_dir.display()),
        )
    })?;
    let api = Arc::new(Api {
        engine,
        flows_dir,
        tokens: config.tokens,
        prices: config.prices,
        provider_settings: config.provider_settings,
        changed: Arc::new(Notify::new()),
        stopping: CancellationToken::new(),
    });
    let protected = Router::new()
        .route("/v1/runs", post(start_run).get(list_runs))
        .route("/v1/runs/{id}", get(show_run))
        .route("/v1/runs/{id}/events", get(run_events))
        .route("/v1/runs/{id}/decision", post(decide))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .route("/v1/approvals", get(approvals))
        .route("/v1/hooks/{flow}", post(webhook))
        .route_layer(middleware::from_fn_with_state(api.clone(), authorize));
    let router = Router::new()
        .route("/openapi.json", get(openapi))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(config.max_body))
        .with_state(api.clone());
    Ok((router, api))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route; GET /openapi.json lists them")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; GET /openapi.json lists them",
    )
}

/// Lets a request through with a known bearer token, naming its caller; else 401.
async fn authorize(State(api): State<Arc<Api>>, mut request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let Some(name) = api.tokens.caller(header) else {
        let message = if header.is_empty() {
            "no token: send `Authorization: Bearer TOKEN`"
        } else {
            "the token is not known"
        };
        let mut response =
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    };
    request.extensions_mut().insert(Caller(name.to_string()));
    next.run(request).await
}

/// A request body as JSON of type `T`: 413 over the limit, 400 when it is not such JSON.
fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body_bytes(body)?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ApiError::bad_request(format!("the body is not what this route takes: {error}"))
    })
}

fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the body is larger than this server takes (--max-body)",
            )
        } else {
            ApiError::bad_request(format!("the body could not be read: {rejection}"))
        }
    })
}

/// An approval's answer in a request: `"approve"`, `"reject: a note"`, or
/// `{"decision", "note", "fields"}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Answer {
    Text(String),
    Full {
        decision: String,
        #[serde(default)]
        note: String,
        #[serde(default)]
        fields: BTreeMap<String, Value>,
    },
}

impl Answer {
    fn decision(self, by: &str) -> Result<Decision, String> {
        let decision = match self {
            Answer::Text(text) => {
                let (answer, note) = text.split_once(':').unwrap_or((&text, ""));
                Decision::parse(answer, note.trim())?
            }
            Answer::Full {
                decision,
                note,
                fields,
            } => Decision {
                fields,
                ..Decision::parse(&decision, note)?
            },
        };
        Ok(decision.by(Some(by.to_string())))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartRequest {
    flow: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    decide: BTreeMap<String, Answer>,
}

impl Api {
    /// The file of flow `name` (`triage` or `triage.json`) in the flows folder: 400 for a name
    /// that could leave it, 404 for none there.
    fn flow_path(&self, name: &str) -> Result<PathBuf, ApiError> {
        flow_in_dir(&self.flows_dir, name).map_err(|error| match error {
            FlowNameError::NotAName(_) => ApiError::bad_request(error.to_string()),
            FlowNameError::NotFound(_) => ApiError::not_found(error.to_string()),
        })
    }

    /// Validates and starts flow `name` with `input`; its events wake the event streams.
    async fn start(
        &self,
        name: &str,
        input: Option<String>,
        decisions: std::collections::HashMap<String, Decision>,
    ) -> Result<String, ApiError> {
        let path = self.flow_path(name)?;
        let flow = Flow::load(&path).map_err(|error| ApiError::bad_request(error.to_string()))?;
        let checked =
            check_for_run(flow, Some(&path), &self.provider_settings).map_err(|problems| {
                let lines: Vec<String> = problems
                    .iter()
                    .filter(|problem| problem.is_error())
                    .map(ToString::to_string)
                    .collect();
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_flow",
                    format!("the flow `{name}` is not valid: {}", lines.join("; ")),
                )
            })?;
        check_decisions(checked.flow(), &decisions)
            .map_err(|error| ApiError::bad_request(error.to_string()))?;
        let options = RunOptions {
            input,
            decisions,
            flow_path: Some(path),
            on_event: Some(Arc::new(Wake(self.changed.clone()))),
            ..RunOptions::default()
        };
        let handle = self.engine.spawn(checked, options).await?;
        Ok(handle.run_id)
    }
}

async fn start_run(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: StartRequest = json_body(body)?;
    let mut decisions = std::collections::HashMap::new();
    for (node, answer) in request.decide {
        let decision = answer
            .decision(&caller.0)
            .map_err(|problem| ApiError::bad_request(format!("decide `{node}`: {problem}")))?;
        decisions.insert(node, decision);
    }
    let input = request.input.map(|input| match input {
        Value::String(text) => text,
        other => other.to_string(),
    });
    let run_id = api.start(&request.flow, input, decisions).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "runId": run_id, "status": RunStatus::Running })),
    ))
}

/// `POST /v1/hooks/{flow}`: the body (JSON, else text) is the run's input.
async fn webhook(
    State(api): State<Arc<Api>>,
    UrlPath(flow): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let bytes = body_bytes(body)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let input = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::String(text)) => Some(text),
        Ok(other) => Some(other.to_string()),
        Err(_) if text.trim().is_empty() => None,
        Err(_) => Some(text),
    };
    let run_id = api
        .start(&flow, input, std::collections::HashMap::new())
        .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "runId": run_id }))))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<usize>,
}

async fn list_runs(
    State(api): State<Arc<Api>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("the query: {error}")))?;
    let limit = query.limit.unwrap_or(20).min(1000);
    let store = api.engine.store().clone();
    let prices = api.prices.clone();
    let listed =
        blocking(move || weft_engine::history::listed_runs(&store, limit, &prices)).await?;
    Ok(Json(Value::Array(listed)))
}

async fn show_run(
    State(api): State<Arc<Api>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let store = api.engine.store().clone();
    let prices = api.prices.clone();
    let report = blocking(move || weft_engine::history::run_report(&store, &id, &prices)).await?;
    Ok(Json(report))
}

async fn approvals(State(api): State<Arc<Api>>) -> Result<Json<Value>, ApiError> {
    let pending = api.engine.pending_approvals().await?;
    let listed: Vec<Value> = pending
        .into_iter()
        .map(|approval| {
            let flow = approval
                .flow_path
                .as_deref()
                .and_then(|path| Path::new(path).file_stem())
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or(approval.flow_name.clone());
            let mut entry = json!({
                "runId": approval.run_id,
                "nodeId": approval.waiting.node_id,
                "flow": flow,
                "message": approval.waiting.message,
                "since": approval.since,
                "input": approval.waiting.input,
            });
            if !approval.waiting.fields.is_empty() {
                entry["fields"] = json!(approval.waiting.fields);
            }
            if let Some(deadline) = approval.waiting.deadline {
                entry["deadline"] = json!(deadline);
            }
            entry
        })
        .collect();
    Ok(Json(Value::Array(listed)))
}

async fn decide(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
    UrlPath(id): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let answer: Answer = json_body(body)?;
    let decision = answer.decision(&caller.0).map_err(ApiError::bad_request)?;
    let record = {
        let store = api.engine.store().clone();
        let wanted = id.clone();
        blocking(move || store.run(&store.resolve_run_id(&wanted)?)).await?
    };
    let run_id = record.summary.id.clone();
    match weft_engine::waiting_of(&record) {
        None => {
            return Err(ApiError::conflict(format!(
                "run {run_id} is {}, not waiting for a decision",
                record.summary.status
            )));
        }
        Some(waiting) if waiting.breakpoint.is_some() => {
            return Err(ApiError::conflict(format!(
                "run {run_id} is stopped at a breakpoint at `{}`, not at an approval",
                waiting.node_id
            )));
        }
        Some(_) => {}
    }
    let options = ResumeOptions {
        on_event: Some(Arc::new(Wake(api.changed.clone()))),
        ..ResumeOptions::default()
    };
    let handle = api.engine.spawn_resume(&run_id, decision, options).await?;
    Ok(Json(
        json!({ "runId": handle.run_id, "status": RunStatus::Running }),
    ))
}

async fn cancel(
    State(api): State<Arc<Api>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let record = {
        let store = api.engine.store().clone();
        blocking(move || store.run(&store.resolve_run_id(&id)?)).await?
    };
    let run_id = record.summary.id.clone();
    if api.engine.cancel(&run_id) {
        return Ok(Json(
            json!({ "runId": run_id, "status": RunStatus::Cancelled }),
        ));
    }
    match record.summary.status {
        RunStatus::Paused => {
            let wake: EventListener = Arc::new(Wake(api.changed.clone()));
            let outcome = api.engine.cancel_paused(&run_id, Some(wake)).await?;
            Ok(Json(json!({ "runId": run_id, "status": outcome.status })))
        }
        RunStatus::Running => Err(ApiError::conflict(format!(
            "run {run_id} is going in another process; cancel it there"
        ))),
        status => Err(ApiError::conflict(format!(
            "run {run_id} is {status}: there is nothing to cancel"
        ))),
    }
}

/// `GET /v1/runs/{id}/events`: the run's events so far, then live ones as they are committed,
/// one per SSE message; the stream ends after `run_end` or when the run pauses.
async fn run_events(
    State(api): State<Arc<Api>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let run_id = {
        let store = api.engine.store().clone();
        blocking(move || store.resolve_run_id(&id)).await?
    };
    struct Cursor {
        api: Arc<Api>,
        run_id: String,
        last: u64,
        done: bool,
    }
    let cursor = Cursor {
        api,
        run_id,
        last: 0,
        done: false,
    };
    let batches = stream::unfold(cursor, |mut cursor| async move {
        if cursor.done {
            return None;
        }
        loop {
            // Subscribed before reading, so an event committed meanwhile wakes this stream.
            let changed = cursor.api.changed.clone();
            let woken = changed.notified();
            let store = cursor.api.engine.store().clone();
            let (run_id, after) = (cursor.run_id.clone(), cursor.last);
            let read = blocking(move || {
                let events = store.events_after(&run_id, after)?;
                let status = store.run(&run_id)?.summary.status;
                Ok((events, status))
            })
            .await;
            let Ok((events, status)) = read else {
                return None;
            };
            if let Some(last) = events.last() {
                cursor.last = last.seq;
            }
            let ended = events
                .iter()
                .any(|event| event.kind == EventType::RunEnd && event.scope.is_none());
            let quiet = status != RunStatus::Running;
            if ended || (events.is_empty() && quiet) || cursor.api.stopping.is_cancelled() {
                cursor.done = true;
            }
            if !events.is_empty() || cursor.done {
                return Some((events, cursor));
            }
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
                () = cursor.api.stopping.cancelled() => {}
            }
        }
    });
    let events = batches.flat_map(stream::iter).map(|event| {
        let data = serde_json::to_string(&event).unwrap_or_default();
        Ok(SseEvent::default().event(event.kind.as_str()).data(data))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Runs store work off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, weft_engine::StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ApiError::internal(format!("a store task failed: {error}")))?
        .map_err(ApiError::from)
}
