//! `weft serve` (docs/serving.md): an HTTP API over the same engine and run store as `weft` and
//! the desktop app, through the same application layer (`weft-api`). Start a run of a flow in the
//! flows folder, follow its events (SSE), list and read
//! runs, list the approvals waiting for a person and decide them (with form answers), cancel,
//! and start a flow from a webhook. Every route but `/openapi.json` needs a bearer token; the
//! token's name is recorded as the decider of what it decides.
//!
//! Errors are `{code, message}` with the status that fits: 400 a bad body or flow (or several
//! `Authorization` headers), 401 no or a wrong token, 404 an unknown run or flow, 408 a body that
//! did not arrive in time, 409 a run not waiting (decided twice, ended), 413 a body over the
//! limit (refused before it is read when its declared length is over it).
//!
//! Reading a request is bounded in time: its line and headers within the header timeout (else
//! the connection is closed), its body within the body timeout. Answers are not: an event
//! stream lasts as long as its run.

mod connections;
mod error;
pub mod links;
pub mod mail;
pub mod mcp;
pub mod openapi;
pub mod tokens;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use weft_store::{Trigger, TriggerKind};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Extension, Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use weft_api::views::{FlowDetail, FlowListing};
use weft_api::{Channel, Decided, ResumeOptions, StartRequest, Weft, check_start, views};
use weft_event::{EventListener, EventSink, EventType, RunEvent, RunStatus};
use weft_flow::{Flow, FlowNameError, flow_in_dir};
use weft_nodes::{Decision, check_for_run};

pub use error::ApiError;
pub use tokens::{Tokens, TokensError};

/// Request bodies larger than this are refused with 413 unless configured otherwise.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// How long a connection may take to send a request's line and headers, unless configured
/// otherwise.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's body may take to arrive, unless configured otherwise.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the connections get to finish what they are answering when the server stops;
/// then those still open (a request that never completes) are closed.
const DRAIN: Duration = Duration::from_secs(3);

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Flows are started by name from this folder (`triage` is `DIR/triage.json`).
    pub flows_dir: PathBuf,
    pub tokens: Tokens,
    /// Request bodies larger than this many bytes get 413.
    pub max_body: usize,
    /// A connection that has not sent a whole request line and headers this long after it
    /// opened, or after its last answer, is closed.
    pub header_timeout: Duration,
    /// A request whose body has not all arrived this long after its headers gets 408.
    pub body_timeout: Duration,
    /// Approval links are answered (`/approve/{token}`) when set: signed with this key.
    pub link_key: Option<links::LinkKey>,
    /// Approval emails are sent through it when set.
    pub mailer: Option<mail::Mailer>,
}

impl ServeConfig {
    /// The flows of `flows_dir` for `tokens`, with the default limits.
    pub fn new(flows_dir: PathBuf, tokens: Tokens) -> ServeConfig {
        ServeConfig {
            flows_dir,
            tokens,
            max_body: DEFAULT_MAX_BODY,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            link_key: None,
            mailer: None,
        }
    }
}

/// What every request handler shares.
struct Api {
    weft: Weft,
    flows_dir: PathBuf,
    tokens: Tokens,
    max_body: usize,
    body_timeout: Duration,
    /// Woken whenever a run going in this process commits events (event streams wait on it).
    changed: Arc<Notify>,
    /// Set when the server shuts down: event streams end.
    stopping: CancellationToken,
    /// What approval links are signed with, if this server answers them.
    link_key: Option<links::LinkKey>,
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

/// Serves the API on `listener` until `shutdown` completes; then the connections get a few
/// seconds to finish what they answer, and the runs going in this process are cancelled
/// (stored as `cancelled`; paused runs keep their pause) within `grace`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    weft: Weft,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let header_timeout = config.header_timeout;
    let flows_dir = config.flows_dir.clone();
    let mailer = config.mailer.clone();
    let (router, api) = router_and_state(weft.clone(), config)?;
    // Approvals nobody decided in time (also those that ran out while no process ran), runs
    // of processes that died.
    let keeper = weft.keep(Some(api.wake()));
    // The flows' schedules (settings.schedules), each occurrence claimed in the store first.
    let schedules = weft.start_schedules(flows_dir, Some(api.wake()));
    // Approval emails, from the store's outbox (any process may have queued them).
    let mailer = mailer.map(|mailer| mailer.start(weft.clone(), api.stopping.clone()));
    let connections = connections::Connections::new(router, header_timeout);
    connections.accept(&listener, shutdown).await;
    // New connections are refused from here on.
    drop(listener);
    // Event streams end so that the connections they hold can close.
    api.stopping.cancel();
    connections.stop(DRAIN).await;
    schedules.stop().await;
    if let Some(mailer) = mailer {
        let _ = mailer.await;
    }
    keeper.stop().await;
    if !weft.engine().shutdown(grace).await {
        tracing::warn!("some runs were still going when the server stopped");
    }
    Ok(())
}

/// The API's routes, for a server or a test.
pub fn router(weft: Weft, config: ServeConfig) -> std::io::Result<Router> {
    router_and_state(weft, config).map(|(router, _)| router)
}

fn router_and_state(weft: Weft, config: ServeConfig) -> std::io::Result<(Router, Arc<Api>)> {
    let flows_dir = config.flows_dir.canonicalize().map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!("the flows folder {}: {error}", config.flows_dir.display()),
        )
    })?;
    let api = Arc::new(Api {
        weft,
        flows_dir,
        tokens: config.tokens,
        max_body: config.max_body,
        body_timeout: config.body_timeout,
        changed: Arc::new(Notify::new()),
        stopping: CancellationToken::new(),
        link_key: config.link_key,
    });
    let mut protected = Router::new();
    let mut public = Router::new();
    for route in routes() {
        for (_, handler, operation) in route.methods {
            if operation.authorized {
                protected = protected.route(route.path, handler);
            } else {
                public = public.route(route.path, handler);
            }
        }
    }
    // Approval links: the signed link is the credential, so no token (docs/approvals.md).
    let public = public.route("/approve/{token}", get(link_page).post(link_answer));
    // Flows as MCP tools over streamable HTTP, behind the same tokens.
    let protected = protected.route_service(
        "/mcp",
        mcp::http_service(&api.weft, &api.flows_dir, &api.stopping),
    );
    // Authorized first, then the body is read: a caller without a token makes the server read
    // nothing but headers.
    let protected = protected
        .route_layer(middleware::from_fn_with_state(api.clone(), read_body))
        .route_layer(middleware::from_fn_with_state(api.clone(), authorize));
    let router = public
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(config.max_body))
        .layer(middleware::from_fn_with_state(
            api.clone(),
            refuse_declared_too_large,
        ))
        .with_state(api.clone());
    Ok((router, api))
}

/// One path of the API: each method's handler and its description.
struct Route {
    path: &'static str,
    methods: Vec<(&'static str, MethodRouter<Arc<Api>>, openapi::Operation)>,
}

/// Every route, served and described from this one list.
fn routes() -> Vec<Route> {
    use openapi::{Answer, Body, Content, Operation, schema};
    let unauthorized = || Answer::error(401, "No token, or an unknown one.");
    let too_large = || {
        Answer::error(
            413,
            "The body is over the limit (refused before it is read when its declared length is).",
        )
    };
    let too_slow = || Answer::error(408, "The body did not all arrive within the body timeout.");
    vec![
        Route {
            path: "/openapi.json",
            methods: vec![(
                "get",
                get(openapi_document_handler),
                Operation {
                    summary: "This document.",
                    authorized: false,
                    body: None,
                    query: &[],
                    responses: vec![Answer {
                        status: 200,
                        description: "The OpenAPI document.",
                        content: Content::Document,
                        headers: &[],
                    }],
                },
            )],
        },
        Route {
            path: "/v1/runs",
            methods: vec![
                (
                    "post",
                    post(start_run),
                    Operation {
                        summary: "Start a run of a flow in the flows folder.",
                        authorized: true,
                        body: Some(Body::Json(schema::<StartBody>)),
                        query: &[WAIT_PARAMETER],
                        responses: vec![
                            Answer::json::<Finished>(
                                200,
                                "With `wait`: the run ended or paused within it.",
                            ),
                            Answer::json::<Going>(201, "Started."),
                            Answer::error(
                                400,
                                "Not JSON, an invalid flow, a flow name that would leave the folder, a decision for no approval, or several `Authorization` headers.",
                            ),
                            unauthorized(),
                            Answer::error(
                                403,
                                "A decision in advance (`decide`) for an approval that names who may decide it: it is answered when the run waits there. Nothing is stored.",
                            ),
                            Answer::error(404, "No such flow in the folder."),
                            too_slow(),
                            too_large(),
                        ],
                    },
                ),
                (
                    "get",
                    get(list_runs),
                    Operation {
                        summary: "The newest runs, as `weft runs --json`, a page at a time.",
                        authorized: true,
                        body: None,
                        query: &[
                            (
                                "limit",
                                "How many runs, newest first (20 by default, at most 1,000).",
                                "integer",
                            ),
                            (
                                "cursor",
                                "The `Next-Cursor` of the page before: the runs that come after it. Runs started meanwhile do not shift the pages.",
                                "string",
                            ),
                        ],
                        responses: vec![
                            Answer::json::<Vec<views::RunListing>>(
                                200,
                                "Runs, newest first, each with its cost.",
                            )
                            .with_headers(&[(
                                NEXT_CURSOR,
                                "Set when more runs follow: the `cursor` of the next page.",
                            )]),
                            Answer::error(
                                400,
                                "A limit that is not a number, a cursor that names no run, or several `Authorization` headers.",
                            ),
                            unauthorized(),
                        ],
                    },
                ),
            ],
        },
        Route {
            path: "/v1/flows",
            methods: vec![(
                "get",
                get(list_flows),
                Operation {
                    summary: "The flows of the flows folder, by name, each with its version (or why it does not load).",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<Vec<FlowListing>>(200, "The flows, in name order."),
                        Answer::error(400, "Several `Authorization` headers."),
                        unauthorized(),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/flows/{name}",
            methods: vec![(
                "get",
                get(show_flow),
                Operation {
                    summary: "One flow of the folder in its canonical form, with its version.",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<FlowDetail>(200, "The flow."),
                        Answer::error(
                            400,
                            "A flow name that would leave the folder, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such flow in the folder."),
                        Answer::error(
                            422,
                            "The file is not a flow Weft can load (the message says why).",
                        ),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}",
            methods: vec![(
                "get",
                get(show_run),
                Operation {
                    summary: "One run, as `weft show --json`: the run, its flow, what it waits for, cost, node outputs, visits, events.",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<views::RunDetail>(200, "The run."),
                        Answer::error(
                            400,
                            "A prefix that names several runs, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such run."),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}/events",
            methods: vec![(
                "get",
                get(run_events),
                Operation {
                    summary: "The run's events so far, then live ones, as server-sent events (each `data:` one event as `weft run --events` prints it, its `id:` the event's `seq`); ends after `run_end` or when the run pauses. With `Last-Event-ID` (as a client that reconnects sends it), the events after that one.",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer {
                            status: 200,
                            description: "An event stream.",
                            content: Content::Events(schema::<RunEvent>),
                            headers: &[],
                        },
                        Answer::error(
                            400,
                            "A prefix that names several runs, a `Last-Event-ID` that is no event number, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such run."),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}/decision",
            methods: vec![(
                "post",
                post(decide),
                Operation {
                    summary: "Decide the approval a run waits at (with its form's answers), as the token's name.",
                    authorized: true,
                    body: Some(Body::Json(schema::<Decision>)),
                    query: &[],
                    responses: vec![
                        Answer::json::<Going>(
                            200,
                            "Decided; the run goes on (`running`), or, at an approval that needs more people, the decision is kept and the run still waits (`paused`, with `approval`: who approved and who is still needed).",
                        ),
                        Answer::error(
                            400,
                            "Not a decision, answers that do not fit the form (the run stays paused), a prefix that names several runs, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(
                            403,
                            "The token's name may not decide this approval: not among its `approvers`, or whoever started the run where `allowSelf` is false. Nothing changes.",
                        ),
                        Answer::error(404, "No such run."),
                        too_slow(),
                        Answer::error(
                            409,
                            "The run is not waiting for a decision (decided already, ended, or at a breakpoint), or the token's name answered this approval otherwise already.",
                        ),
                        too_large(),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}/cancel",
            methods: vec![(
                "post",
                post(cancel),
                Operation {
                    summary: "Cancel a run going in this server, or one paused for a person (by any process).",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<weft_api::Cancelled>(200, "Cancelled."),
                        Answer::error(
                            400,
                            "A prefix that names several runs, a run another host drives (a Restate workflow: cancel it there), or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such run."),
                        Answer::error(409, "The run has ended, or goes in another process."),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}/continue",
            methods: vec![(
                "post",
                post(continue_run),
                Operation {
                    summary: "Go on from the breakpoint a paused run stopped at, as the token's name: `{step?, set?}` (an empty body goes on as it is).",
                    authorized: true,
                    body: Some(Body::Json(schema::<ContinueBody>)),
                    query: &[],
                    responses: vec![
                        Answer::json::<Going>(200, "Going on."),
                        Answer::error(
                            400,
                            "Not JSON, a value that does not fit the node's `outputSchema`, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such run."),
                        Answer::error(
                            409,
                            "The run is not stopped at a breakpoint (it waits for a decision, goes on, or has ended).",
                        ),
                        too_slow(),
                        too_large(),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/runs/{id}/pause",
            methods: vec![(
                "post",
                post(pause_run),
                Operation {
                    summary: "Pause a run going in this server before its next step (as at a breakpoint); it goes on with `POST /v1/runs/{id}/continue`.",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<Going>(202, "Asked: the run stops before its next step."),
                        Answer::error(400, "Several `Authorization` headers."),
                        unauthorized(),
                        Answer::error(409, "No run of that id is going in this server."),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/approvals",
            methods: vec![(
                "get",
                get(approvals),
                Operation {
                    summary: "Every approval waiting for a person, across flows and runs.",
                    authorized: true,
                    body: None,
                    query: &[],
                    responses: vec![
                        Answer::json::<Vec<views::PendingApproval>>(
                            200,
                            "Pending approvals, oldest first.",
                        ),
                        Answer::error(400, "Several `Authorization` headers."),
                        unauthorized(),
                    ],
                },
            )],
        },
        Route {
            path: "/v1/hooks/{flow}",
            methods: vec![(
                "post",
                post(webhook),
                Operation {
                    summary: "Start a flow with the request body as its input (JSON, else text).",
                    authorized: true,
                    body: Some(Body::Anything),
                    query: &[WAIT_PARAMETER],
                    responses: vec![
                        Answer::json::<Finished>(
                            200,
                            "With `wait`: the run ended or paused within it.",
                        ),
                        Answer::json::<Started>(202, "Started."),
                        Answer::error(
                            400,
                            "An invalid flow, a name that would leave the folder, or several `Authorization` headers.",
                        ),
                        unauthorized(),
                        Answer::error(404, "No such flow."),
                        too_slow(),
                        too_large(),
                    ],
                },
            )],
        },
    ]
}

/// The API's OpenAPI document, described from [`routes`].
pub fn openapi_document() -> Value {
    let routes = routes();
    let operations: Vec<(&str, &str, &openapi::Operation)> = routes
        .iter()
        .flat_map(|route| {
            route
                .methods
                .iter()
                .map(move |(method, _, operation)| (route.path, *method, operation))
        })
        .collect();
    openapi::document(&operations)
}

async fn openapi_document_handler() -> Json<Value> {
    Json(openapi_document())
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

/// Lets a request through with a known bearer token, naming its caller; else 401. Several
/// `Authorization` headers are refused (400) rather than one of them picked.
async fn authorize(State(api): State<Arc<Api>>, mut request: Request, next: Next) -> Response {
    let mut headers = request.headers().get_all(header::AUTHORIZATION).iter();
    let first = headers.next();
    if headers.next().is_some() {
        return ApiError::bad_request(
            "several `Authorization` headers: send one, `Authorization: Bearer TOKEN`",
        )
        .into_response();
    }
    let header = first
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

/// 413 for a request whose declared `Content-Length` is over the limit, at once: its body is
/// not waited for.
async fn refuse_declared_too_large(
    State(api): State<Arc<Api>>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > api.max_body as u64) {
        return closing(too_large().into_response());
    }
    next.run(request).await
}

/// Reads the body of an authorized request, at most the limit (else 413) within the body
/// timeout (else 408), and hands it on whole.
async fn read_body(State(api): State<Arc<Api>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let limit = api.max_body;
    let read = async {
        let mut chunks = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|error| {
                ApiError::bad_request(format!("the body could not be read: {error}"))
            })?;
            if bytes.len() + chunk.len() > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(bytes))
    };
    match tokio::time::timeout(api.body_timeout, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(error)) => closing(error.into_response()),
        Err(_) => closing(
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "the body did not arrive within {} s (--body-timeout)",
                    api.body_timeout.as_secs_f64()
                ),
            )
            .into_response(),
        ),
    }
}

/// The refusal of a body over the limit.
fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        "the body is larger than this server takes (--max-body)",
    )
}

/// `response`, after which the connection is closed: what is left of the request's body is not
/// read.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
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
            too_large()
        } else {
            ApiError::bad_request(format!("the body could not be read: {rejection}"))
        }
    })
}

/// The one parameter of a route's path (a run's id, a flow's name), percent-decoded: a refusal
/// is `{code, message}` as any other (one that is not UTF-8 once decoded is a 400).
struct Segment(String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Segment, ApiError> {
        match UrlPath::<String>::from_request_parts(parts, state).await {
            Ok(UrlPath(value)) => Ok(Segment(value)),
            Err(rejection) if rejection.status().is_client_error() => Err(ApiError::bad_request(
                format!("the path: {}", rejection.body_text()),
            )),
            Err(rejection) => Err(ApiError::internal(rejection.body_text())),
        }
    }
}

/// What starts a run.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct StartBody {
    /// A flow of the folder by name: `triage` (or `triage.json`) is `FLOWS/triage.json`.
    flow: String,
    /// The run's input: a text, or any JSON value; else the start node's `initialInput`.
    #[serde(default)]
    input: Option<Value>,
    /// Approvals answered in advance, by node (`sub/review` inside the subflow `sub`).
    #[serde(default)]
    decide: BTreeMap<String, Decision>,
    /// Where the run stops for a person, as `weft run --break` says it: the run pauses there
    /// and goes on with `POST /v1/runs/{id}/continue`.
    #[serde(default)]
    breakpoints: Vec<weft_api::Breakpoint>,
    /// Outputs that stand for their nodes, which then do not run (a pins file's `pins`, each
    /// node's value directly): `{"classify": {"label": "bug"}}`.
    #[serde(default)]
    pins: weft_api::Pins,
}

/// How a run stopped at a breakpoint goes on (`weft resume ID --continue [--step] [--set]`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContinueBody {
    /// Stop again before the steps that become ready next.
    #[serde(default)]
    step: bool,
    /// The value to go on with instead of the one at the breakpoint (the node's input before
    /// it, its output after it).
    #[serde(default)]
    set: Option<Value>,
}

/// A run started by a webhook.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Started {
    run_id: String,
}

/// The flows of the folder `dir`, by name: each `NAME.json` but tests and pins files.
fn flows_in(dir: &std::path::Path) -> std::io::Result<Vec<FlowListing>> {
    let mut flows = Vec::new();
    for (name, path) in weft_flow::flow_files(dir)? {
        if flow_in_dir(dir, &name).is_err() {
            continue;
        }
        let listing = match Flow::load(&path) {
            Ok(flow) => FlowListing {
                name: name.clone(),
                title: (!flow.name.is_empty()).then(|| flow.name.clone()),
                version: Some(flow.version().hash),
                error: None,
            },
            Err(error) => FlowListing {
                name,
                title: None,
                version: None,
                error: Some(error.to_string()),
            },
        };
        flows.push(listing);
    }
    Ok(flows)
}

/// A run that goes on: started, or decided.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Going {
    run_id: String,
    /// `running`; `paused` for a decision counted at an approval that needs more people.
    status: RunStatus,
    /// For such a decision: who approved so far and who is still needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<weft_api::ApprovalProgress>,
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

    /// Where a run's events go: they wake the event streams.
    fn wake(&self) -> EventListener {
        Arc::new(Wake(self.changed.clone()))
    }

    /// Validates and starts flow `name` with `input`; its events wake the event streams.
    async fn start(
        &self,
        name: &str,
        input: Option<String>,
        decisions: std::collections::HashMap<String, Decision>,
        debugging: (Vec<weft_api::Breakpoint>, weft_api::Pins),
        trigger: (TriggerKind, String),
        traceparent: Option<String>,
    ) -> Result<weft_api::RunHandle, ApiError> {
        let (trigger, caller) = trigger;
        let (breakpoints, pins) = debugging;
        let path = self.flow_path(name)?;
        let flow = Flow::load(&path).map_err(|error| ApiError::bad_request(error.to_string()))?;
        let checked = check_for_run(flow, Some(&path), self.weft.engine().llm().settings())
            .map_err(|problems| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_flow",
                    invalid_flow(name, &problems),
                )
            })?;
        let request = StartRequest {
            input,
            decisions,
            breakpoints,
            pins,
            flow_path: Some(path),
            on_event: Some(self.wake()),
            trigger: Some(Trigger::of(trigger).by(Some(caller))),
            traceparent,
            ..StartRequest::default()
        };
        check_start(checked.flow(), &request)?;
        Ok(self.weft.start(checked, request).await?)
    }
}

/// "the flow `NAME` is not valid: …" with each of `problems`' errors, for the API and `/mcp`.
fn invalid_flow(name: &str, problems: &[weft_nodes::Problem]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .filter(|problem| problem.is_error())
        .map(ToString::to_string)
        .collect();
    format!("the flow `{name}` is not valid: {}", lines.join("; "))
}

/// The W3C `traceparent` header a request came with: the run it starts or resumes is a span
/// of that trace (docs/traces.md).
fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// `?wait=SECONDS` of the routes that start runs.
const WAIT_PARAMETER: (&str, &str, &str) = (
    "wait",
    "Seconds to wait for the run to end or pause (at most 300): when it does, the answer is 200 with how it went; else the run goes on and the answer is as without `wait`.",
    "integer",
);

/// The longest `?wait=` honoured: a caller wanting longer follows the run's events instead.
const MAX_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, Deserialize)]
struct WaitQuery {
    wait: Option<u64>,
}

/// A run that ended or paused while the request that started it waited (`?wait=SECONDS`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Finished {
    run_id: String,
    status: RunStatus,
    /// The result of a completed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// Why a failed run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// What a paused run waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<weft_api::Waiting>,
}

/// How long a request asked to wait for its run, refused when it is not a number.
fn wait_of(
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Option<Duration>, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("the query: {error}")))?;
    Ok(query
        .wait
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(seconds).min(MAX_WAIT)))
}

/// The run `handle` drives, once it ended or paused within `wait`; `Err` with its id when it
/// goes on past it (or nobody waits).
async fn finished_within(
    handle: weft_api::RunHandle,
    wait: Option<Duration>,
) -> Result<Result<Finished, String>, ApiError> {
    let run_id = handle.run_id.clone();
    let Some(wait) = wait else {
        return Ok(Err(run_id));
    };
    match tokio::time::timeout(wait, handle.outcome()).await {
        Ok(outcome) => {
            let outcome = outcome.map_err(|error| ApiError::internal(error.to_string()))?;
            Ok(Ok(Finished {
                run_id: outcome.run_id,
                status: outcome.status,
                result: outcome.result.map(|result| (*result).clone()),
                error: outcome.error,
                waiting: outcome.waiting,
            }))
        }
        Err(_) => Ok(Err(run_id)),
    }
}

async fn start_run(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let wait = wait_of(query)?;
    let request: StartBody = json_body(body)?;
    let decisions = request
        .decide
        .into_iter()
        .map(|(node, decision)| (node, decision.by(Some(caller.0.clone()))))
        .collect();
    let input = request.input.map(|input| match input {
        Value::String(text) => text,
        other => other.to_string(),
    });
    let handle = api
        .start(
            &request.flow,
            input,
            decisions,
            (request.breakpoints, request.pins),
            (TriggerKind::Api, caller.0),
            traceparent(&headers),
        )
        .await?;
    Ok(match finished_within(handle, wait).await? {
        Ok(finished) => Json(finished).into_response(),
        Err(run_id) => (
            StatusCode::CREATED,
            Json(Going {
                run_id,
                status: RunStatus::Running,
                approval: None,
            }),
        )
            .into_response(),
    })
}

/// `POST /v1/hooks/{flow}`: the body (JSON, else text) is the run's input.
async fn webhook(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
    Segment(flow): Segment,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let wait = wait_of(query)?;
    let bytes = body_bytes(body)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let input = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::String(text)) => Some(text),
        Ok(other) => Some(other.to_string()),
        Err(_) if text.trim().is_empty() => None,
        Err(_) => Some(text),
    };
    let handle = api
        .start(
            &flow,
            input,
            std::collections::HashMap::new(),
            Default::default(),
            (TriggerKind::Hook, caller.0),
            traceparent(&headers),
        )
        .await?;
    Ok(match finished_within(handle, wait).await? {
        Ok(finished) => Json(finished).into_response(),
        Err(run_id) => (StatusCode::ACCEPTED, Json(Started { run_id })).into_response(),
    })
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// The header of a page of runs that names where the next one starts.
const NEXT_CURSOR: &str = "Next-Cursor";

async fn list_runs(
    State(api): State<Arc<Api>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("the query: {error}")))?;
    let limit = query.limit.unwrap_or(20).min(1000);
    let (runs, next) = api
        .weft
        .runs_page(limit, query.cursor.as_deref())
        .await
        .map_err(|error| match (&query.cursor, error.kind) {
            (Some(cursor), weft_api::ErrorKind::NotFound) => {
                ApiError::bad_request(format!("the cursor `{cursor}` names no run"))
            }
            _ => error.into(),
        })?;
    let mut answer = Json(runs).into_response();
    if let Some(next) = next
        && let Ok(value) = axum::http::HeaderValue::from_str(&next)
    {
        answer.headers_mut().insert(NEXT_CURSOR, value);
    }
    Ok(answer)
}

async fn list_flows(State(api): State<Arc<Api>>) -> Result<Json<Vec<FlowListing>>, ApiError> {
    let dir = api.flows_dir.clone();
    tokio::task::spawn_blocking(move || flows_in(&dir))
        .await
        .map_err(|error| ApiError::internal(error.to_string()))?
        .map(Json)
        .map_err(|error| ApiError::internal(format!("the flows folder: {error}")))
}

async fn show_flow(
    State(api): State<Arc<Api>>,
    Segment(name): Segment,
) -> Result<Json<FlowDetail>, ApiError> {
    let path = api.flow_path(&name)?;
    let name = name.strip_suffix(".json").unwrap_or(&name).to_string();
    tokio::task::spawn_blocking(move || {
        let flow = Flow::load(&path).map_err(|error| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_flow",
                error.to_string(),
            )
        })?;
        let version = flow.version();
        let flow = serde_json::from_str(&version.json)
            .map_err(|error| ApiError::internal(error.to_string()))?;
        Ok(Json(FlowDetail {
            name,
            version: version.hash,
            flow,
        }))
    })
    .await
    .map_err(|error| ApiError::internal(error.to_string()))?
}

async fn continue_run(
    State(api): State<Arc<Api>>,
    Segment(id): Segment,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Going>, ApiError> {
    let bytes = body_bytes(body)?;
    let how: ContinueBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        ContinueBody::default()
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|error| ApiError::bad_request(format!("the body: {error}")))?
    };
    let options = ResumeOptions {
        on_event: Some(api.wake()),
        traceparent: traceparent(&headers),
        ..ResumeOptions::default()
    };
    let how = weft_api::Continue {
        step: how.step,
        set: how.set,
    };
    let handle = api.weft.go_on(&id, how, options).await?;
    Ok(Json(Going {
        run_id: handle.run_id,
        status: RunStatus::Running,
        approval: None,
    }))
}

async fn pause_run(
    State(api): State<Arc<Api>>,
    Segment(id): Segment,
) -> Result<(StatusCode, Json<Going>), ApiError> {
    api.weft.pause(&id)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Going {
            run_id: id,
            status: RunStatus::Running,
            approval: None,
        }),
    ))
}

async fn show_run(
    State(api): State<Arc<Api>>,
    Segment(id): Segment,
) -> Result<Json<views::RunDetail>, ApiError> {
    Ok(Json(api.weft.run(&id).await?))
}

async fn approvals(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<views::PendingApproval>>, ApiError> {
    Ok(Json(api.weft.pending_approvals(Some(caller.0)).await?))
}

async fn decide(
    State(api): State<Arc<Api>>,
    Extension(caller): Extension<Caller>,
    Segment(id): Segment,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Going>, ApiError> {
    let decision: Decision = json_body(body)?;
    let options = ResumeOptions {
        on_event: Some(api.wake()),
        traceparent: traceparent(&headers),
        ..ResumeOptions::default()
    };
    let decided = api
        .weft
        .decide(&id, decision, Some(caller.0), Channel::Api, options)
        .await?;
    Ok(Json(match decided {
        Decided::GoingOn(handle) => Going {
            run_id: handle.run_id,
            status: RunStatus::Running,
            approval: None,
        },
        Decided::Counted {
            run_id, progress, ..
        } => Going {
            run_id,
            status: RunStatus::Paused,
            approval: Some(progress),
        },
    }))
}

/// The link's key and what it is for, or the page saying why it answers nothing.
fn opened_link(api: &Api, token: &str) -> Result<links::Link, links::Page> {
    let Some(key) = &api.link_key else {
        return Err(links::refusal(
            Some(weft_api::ErrorKind::NotFound),
            &format!(
                "this server answers no approval links ({} is not set)",
                links::LINK_KEY_ENV
            ),
        ));
    };
    let link = key
        .open(token)
        .map_err(|refused| links::refusal(None, &refused))?;
    if link.expired(chrono::Utc::now()) {
        return Err(links::expired(&link));
    }
    Ok(link)
}

/// `GET /approve/{token}`: the approval the link answers, its form and buttons; decides
/// nothing (mail scanners and previews open links).
async fn link_page(State(api): State<Arc<Api>>, UrlPath(token): UrlPath<String>) -> links::Page {
    let link = match opened_link(&api, &token) {
        Ok(link) => link,
        Err(page) => return page,
    };
    match api
        .weft
        .asked_of(&link.run_id, link.pause, &link.person)
        .await
    {
        Ok(asked) => links::ask_page(&asked, &link.person),
        Err(error) => links::refusal(Some(error.kind), &error.message),
    }
}

/// `POST /approve/{token}`: the link's person decides (channel `email`), with the form's
/// answers (`decision`, `note`, and each field by name; empty ones left unanswered).
async fn link_answer(
    State(api): State<Arc<Api>>,
    UrlPath(token): UrlPath<String>,
    body: Result<
        axum::extract::Form<Vec<(String, String)>>,
        axum::extract::rejection::FormRejection,
    >,
) -> links::Page {
    let link = match opened_link(&api, &token) {
        Ok(link) => link,
        Err(page) => return page,
    };
    let axum::extract::Form(answers) = match body {
        Ok(form) => form,
        Err(rejection) => {
            return links::refusal(
                Some(weft_api::ErrorKind::Invalid),
                &format!("the answer could not be read: {rejection}"),
            );
        }
    };
    let mut decision = None;
    let mut note = String::new();
    let mut fields = BTreeMap::new();
    for (name, value) in answers {
        match name.as_str() {
            "decision" => decision = Some(value),
            "note" => note = value,
            _ if value.trim().is_empty() => {}
            _ => {
                fields.insert(name, Value::String(value));
            }
        }
    }
    let decision = match Decision::parse(decision.as_deref().unwrap_or(""), note) {
        Ok(decision) => Decision { fields, ..decision },
        Err(problem) => {
            return links::refusal(Some(weft_api::ErrorKind::Invalid), &problem);
        }
    };
    let approving = decision.decision == weft_nodes::DecisionChoice::Approve;
    // The link's own checks first (used already, no longer waiting), as its page made them.
    if let Err(error) = api
        .weft
        .asked_of(&link.run_id, link.pause, &link.person)
        .await
    {
        return links::refusal(Some(error.kind), &error.message);
    }
    let options = ResumeOptions {
        on_event: Some(api.wake()),
        ..ResumeOptions::default()
    };
    match api
        .weft
        .decide(
            &link.run_id,
            decision,
            Some(link.person.clone()),
            Channel::Email,
            options,
        )
        .await
    {
        Ok(Decided::GoingOn(handle)) => links::answered_page(
            if approving { "Approved" } else { "Rejected" },
            &format!(
                "Thank you, {}: your decision is kept, and run {} goes on.",
                link.person, handle.run_id
            ),
        ),
        Ok(Decided::Counted { progress, .. }) => links::answered_page(
            "Approval counted",
            &format!(
                "Thank you, {}: your approval is counted ({} of {}); the run waits for {} more{}.",
                link.person,
                progress.approved_by.len(),
                progress.required,
                progress.still_needed,
                if progress.may_still_approve.is_empty() {
                    String::new()
                } else {
                    format!(" (from {})", progress.may_still_approve.join(", "))
                }
            ),
        ),
        Err(error) => links::refusal(Some(error.kind), &error.message),
    }
}

async fn cancel(
    State(api): State<Arc<Api>>,
    Segment(id): Segment,
) -> Result<Json<weft_api::Cancelled>, ApiError> {
    Ok(Json(api.weft.cancel(&id, Some(api.wake())).await?))
}

/// `GET /v1/runs/{id}/events`: the run's events so far, then live ones as they are committed,
/// one per SSE message; the stream ends after `run_end` or when the run pauses.
async fn run_events(
    State(api): State<Arc<Api>>,
    Segment(id): Segment,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    // A client that reconnects says the last event it had (each is sent with its `seq` as its
    // id): the stream goes on after it, missing nothing and repeating nothing.
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID: an event's number (its `seq`) was expected")
            })?,
    };
    let run_id = {
        let store = api.weft.store().clone();
        blocking(move || store.resolve_run_id(id.trim())).await?
    };
    /// How many reads in a row may fail before an event stream ends (250 ms apart).
    const MAX_FAILED_READS: u32 = 20;
    struct Cursor {
        api: Arc<Api>,
        run_id: String,
        last: u64,
        done: bool,
        /// Reads that failed in a row (a store that is briefly busy).
        failed_reads: u32,
    }
    let cursor = Cursor {
        api,
        run_id,
        last: after,
        done: false,
        failed_reads: 0,
    };
    let batches = stream::unfold(cursor, |mut cursor| async move {
        if cursor.done {
            return None;
        }
        loop {
            // Subscribed before reading, so an event committed meanwhile wakes this stream.
            let changed = cursor.api.changed.clone();
            let woken = changed.notified();
            let store = cursor.api.weft.store().clone();
            let (run_id, after) = (cursor.run_id.clone(), cursor.last);
            // The status first: a run that has ended or paused by then has all its events
            // stored by then too, so the events read next are all there are until it goes on.
            let read = blocking(move || {
                let status = store.run(&run_id)?.summary.status;
                let events = store.events_after(&run_id, after)?;
                Ok((events, status))
            })
            .await;
            let (events, status) = match read {
                Ok(read) => {
                    cursor.failed_reads = 0;
                    read
                }
                // A read that fails now and then (a busy store) does not end the stream; one
                // that keeps failing for seconds does, and the client reconnects.
                Err(error) if cursor.failed_reads < MAX_FAILED_READS => {
                    cursor.failed_reads += 1;
                    tracing::warn!(
                        "reading the events of run {} failed ({error:?}); trying again",
                        cursor.run_id
                    );
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                Err(_) => return None,
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
        Ok(SseEvent::default()
            .event(event.kind.as_str())
            .id(event.seq.to_string())
            .data(data))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Runs store work off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, weft_store::StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ApiError::internal(format!("a store task failed: {error}")))?
        .map_err(ApiError::from)
}
