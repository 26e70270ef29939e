//! Property tests over the API's request bodies, over real HTTP on loopback: the valid bodies of
//! each route that takes one, mutated at random (as JSON and as text), and random bytes, deep
//! nesting, huge numbers, odd unicode and bodies over the limit, with wrong content types,
//! of a declared length or chunked, with the token, a wrong one, a malformed one or none, to
//! every route that takes a body (and, since any request may carry one, to the others).
//!
//! Every request is answered (no dropped connection), never with a 5xx (the store is healthy,
//! so a 5xx could only come from the request), with a status its route documents; a refusal is
//! `{code, message}`; and after each the server still serves `GET /v1/runs`. Once the cases are
//! run, the server stops within its grace.
//!
//! One server serves every case of a property (one per process: under `PROPTEST_FORK`, the
//! child that runs the cases starts it). As in `crates/engine/tests/it/fuzz.rs`, the test
//! command runs a fixed number of cases from a fixed seed; `scripts/fuzz.sh` runs many more from
//! random seeds (`WEFT_FUZZ_CASES`, `WEFT_FUZZ_SEED=random`).

use std::cell::OnceCell;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{FileFailurePersistence, TestCaseResult, TestRunner};
use serde_json::{Value, json};
use weft_api::{Lifetime, StoreLocation, Weft};
use weft_fuzz::{Change, apply, config};
use weft_providers::ProviderSettings;
use weft_server::{ServeConfig, Tokens};

const TOKEN: &str = "fuzz-token-0123456789abcdef";

/// The server's body limit: small, so that bodies over it are cheap to send.
const MAX_BODY: usize = 16 * 1024;

/// Runs the property `test` over `strategy` as `proptest!` would (the same failure persistence
/// and forking), with one server for all its cases, started by the first case.
fn run<S: Strategy>(
    name: &'static str,
    cases: u32,
    strategy: S,
    test: impl Fn(&Server, &S::Value) -> TestCaseResult,
) {
    let mut config = config(cases);
    config.test_name = Some(name);
    config.source_file = Some(file!());
    // Failures are kept where `proptest!` keeps them for a crate's own tests.
    config.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz.txt"
    ))));
    let server = OnceCell::new();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |value| {
        test(server.get_or_init(Server::start), &value)
    });
    if let Err(error) = result {
        panic!("{error}\n{runner}");
    }
    if let Some(server) = server.into_inner() {
        server.stop();
    }
}

fn node(id: &str, kind: &str, data: Value) -> Value {
    json!({ "id": id, "type": kind, "position": { "x": 0, "y": 0 }, "data": data })
}

/// start → review (a form) → sent / dropped; a flow that echoes its input; a file that is no
/// flow.
fn write_flows(flows: &Path) {
    std::fs::create_dir_all(flows).expect("flows");
    let review = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({ "initialInput": "a draft" })),
            node("review", "approval", json!({
                "message": "Send {{ PREVIOUS_OUTPUT }}?",
                "fields": [{ "name": "amount", "type": "number", "required": true }]
            })),
            node("sent", "template", json!({ "template": "sent ({{ approval.amount }})" })),
            node("dropped", "template", json!({ "template": "dropped" })),
        ],
        "edges": [
            { "id": "e1", "source": "start", "target": "review" },
            { "id": "e2", "source": "review", "target": "sent", "sourceHandle": "approve" },
            { "id": "e3", "source": "review", "target": "dropped", "sourceHandle": "reject" },
        ]
    });
    let echo = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("said", "template", json!({ "template": "got {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [{ "id": "e1", "source": "start", "target": "said" }]
    });
    std::fs::write(flows.join("review.json"), review.to_string()).expect("review");
    std::fs::write(flows.join("echo.json"), echo.to_string()).expect("echo");
    std::fs::write(flows.join("broken.json"), "{\"nodes\": [").expect("broken");
}

/// A server on loopback, and what the cases need of it.
struct Server {
    runtime: tokio::runtime::Runtime,
    url: String,
    /// A new connection for every request: a connection the server closed is never reused.
    http: reqwest::Client,
    /// The OpenAPI document: the statuses each operation may answer.
    document: Value,
    /// A run waiting at its approval, for the decision route; another is started once it has
    /// been decided.
    paused: Mutex<Option<String>>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    served: Mutex<Option<tokio::task::JoinHandle<std::io::Result<()>>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().expect("dir");
        let flows = dir.path().join("flows");
        write_flows(&flows);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let weft = Weft::open(
            StoreLocation::from(dir.path().join("runs.db")),
            Lifetime::Service,
            ProviderSettings::default(),
        )
        .expect("store");
        let config = ServeConfig {
            max_body: MAX_BODY,
            ..ServeConfig::new(
                flows,
                Tokens::parse(&format!("fuzz:{TOKEN}"), "tokens").expect("tokens"),
            )
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (url, served) = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("listen");
            let url = format!("http://{}", listener.local_addr().expect("address"));
            let served = tokio::spawn(weft_server::serve(
                listener,
                weft,
                config,
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(2),
            ));
            (url, served)
        });
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(60))
            .build()
            .expect("a client");
        Server {
            runtime,
            url,
            http,
            document: weft_server::openapi_document(),
            paused: Mutex::new(None),
            stop: Mutex::new(Some(stop)),
            served: Mutex::new(Some(served)),
            _dir: dir,
        }
    }

    /// Stops the server: it must end, without an error, within its drain and grace.
    fn stop(self) {
        if let Some(stop) = self.stop.lock().expect("stop").take() {
            let _ = stop.send(());
        }
        let served = self.served.lock().expect("served").take().expect("serving");
        let ended = self
            .runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), served).await });
        match ended {
            Ok(Ok(Ok(()))) => {}
            other => panic!("the server did not stop cleanly: {other:?}"),
        }
    }

    /// Sends a request and reads the whole answer: status, content type (without parameters),
    /// body; an error when there was no answer.
    fn send(&self, request: reqwest::RequestBuilder) -> Result<(u16, String, Vec<u8>), String> {
        self.runtime.block_on(async {
            let answer = request.send().await.map_err(|error| format!("{error:?}"))?;
            let status = answer.status().as_u16();
            let content_type = answer
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            let body = answer
                .bytes()
                .await
                .map_err(|error| format!("the body: {error:?}"))?;
            Ok((status, content_type, body.to_vec()))
        })
    }

    fn json(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, _, body) = self.send(request).expect("an answer");
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The id of a run waiting at its approval: the one kept, else a new one.
    fn paused_run(&self) -> String {
        let mut paused = self.paused.lock().expect("paused");
        if let Some(id) = paused.as_ref() {
            return id.clone();
        }
        let (status, started) = self.json(
            reqwest::Method::POST,
            "/v1/runs",
            Some(json!({"flow": "review"})),
        );
        assert_eq!(status, 201, "{started}");
        let id = started["runId"].as_str().expect("an id").to_string();
        for _ in 0..200 {
            let (status, run) = self.json(reqwest::Method::GET, &format!("/v1/runs/{id}"), None);
            assert_eq!(status, 200, "{run}");
            if !run["waiting"].is_null() {
                *paused = Some(id.clone());
                return id;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the run {id} did not pause at its approval");
    }

    /// A run's id was decided: the next decision needs another run.
    fn decided(&self, id: &str) {
        let mut paused = self.paused.lock().expect("paused");
        if paused.as_deref() == Some(id) {
            *paused = None;
        }
    }
}

/// Where a request goes.
#[derive(Debug, Clone)]
enum Target {
    /// `POST /v1/runs`.
    Start,
    /// `POST /v1/runs/{id}/decision`.
    Decide(Id),
    /// `POST /v1/hooks/{flow}`, the flow's name as bytes (percent-encoded in the path).
    Hook(Vec<u8>),
    /// One of [`OTHERS`], which take no body.
    Other(Index),
}

/// Which run a decision is for.
#[derive(Debug, Clone)]
enum Id {
    /// One waiting at its approval.
    Paused,
    /// The first characters of the id of one waiting.
    Prefix(usize),
    Unknown,
    /// Any bytes (percent-encoded in the path).
    Raw(Vec<u8>),
}

/// Routes that take no body, called with one: (method, path, documented path).
const OTHERS: &[(&str, &str, &str)] = &[
    ("GET", "/v1/runs", "/v1/runs"),
    ("GET", "/v1/approvals", "/v1/approvals"),
    ("GET", "/openapi.json", "/openapi.json"),
    ("GET", "/v1/flows", "/v1/flows"),
    ("GET", "/v1/flows/no-such-flow", "/v1/flows/{name}"),
    ("GET", "/v1/runs/no-such-run", "/v1/runs/{id}"),
    ("GET", "/v1/runs/no-such-run/events", "/v1/runs/{id}/events"),
    (
        "POST",
        "/v1/runs/no-such-run/cancel",
        "/v1/runs/{id}/cancel",
    ),
    ("POST", "/v1/runs/no-such-run/pause", "/v1/runs/{id}/pause"),
    (
        "POST",
        "/v1/runs/no-such-run/continue",
        "/v1/runs/{id}/continue",
    ),
];

/// The `Authorization` header sent.
#[derive(Debug, Clone, Copy)]
enum Auth {
    None,
    Valid,
    /// `bearer TOKEN`.
    LowerCase,
    /// `Bearer   TOKEN  `.
    Padded,
    Wrong,
    Basic,
    /// `Bearer` alone.
    Empty,
    /// Bytes that are not text (obs-text).
    NotText,
}

impl Auth {
    fn header(self) -> Option<reqwest::header::HeaderValue> {
        use reqwest::header::HeaderValue;
        let value = match self {
            Auth::None => return None,
            Auth::Valid => HeaderValue::from_str(&format!("Bearer {TOKEN}")),
            Auth::LowerCase => HeaderValue::from_str(&format!("bearer {TOKEN}")),
            Auth::Padded => HeaderValue::from_str(&format!("Bearer   {TOKEN}  ")),
            Auth::Wrong => HeaderValue::from_str("Bearer wrong-token-0123456789abcdef"),
            Auth::Basic => HeaderValue::from_str("Basic YWRhOnNlY3JldA=="),
            Auth::Empty => HeaderValue::from_str("Bearer"),
            Auth::NotText => HeaderValue::from_bytes(b"Bearer \xff\xfe-token-0123456789"),
        };
        Some(value.expect("a header value"))
    }

    fn authorized(self) -> bool {
        matches!(self, Auth::Valid | Auth::LowerCase | Auth::Padded)
    }
}

fn auth() -> impl Strategy<Value = Auth> {
    prop_oneof![
        14 => Just(Auth::Valid),
        1 => Just(Auth::None),
        1 => Just(Auth::LowerCase),
        1 => Just(Auth::Padded),
        1 => Just(Auth::Wrong),
        1 => Just(Auth::Basic),
        1 => Just(Auth::Empty),
        1 => Just(Auth::NotText),
    ]
}

/// The `Content-Type` sent, if any.
fn content_type() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => Just(Some("application/json".to_string())),
        2 => Just(None),
        1 => prop::sample::select(vec![
            "application/json; charset=utf-8",
            "application/json; charset=utf-16",
            "text/plain",
            "text/plain; charset=latin1",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/octet-stream",
            "application/xml",
            ";;=",
            "*/*",
        ])
        .prop_map(|value| Some(value.to_string())),
        1 => "[ -~]{0,40}".prop_map(Some),
    ]
}

/// How the body is sent: of a declared length, or chunked at these places.
fn chunks() -> impl Strategy<Value = Option<Vec<Index>>> {
    prop_oneof![3 => Just(None), 1 => prop::collection::vec(any::<Index>(), 0..3).prop_map(Some)]
}

fn target() -> impl Strategy<Value = Target> {
    let id = prop_oneof![
        4 => Just(Id::Paused),
        1 => (1usize..12).prop_map(Id::Prefix),
        1 => Just(Id::Unknown),
        1 => prop::collection::vec(any::<u8>(), 1..24).prop_map(Id::Raw),
    ];
    let flow = prop_oneof![
        4 => prop::sample::select(vec!["echo", "review", "broken", "nowhere", "echo.json", "../echo", ".echo", "echo/x", "ECHO", "echo\u{0}", "é"])
            .prop_map(|name| name.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..24),
    ];
    prop_oneof![
        4 => Just(Target::Start),
        4 => id.prop_map(Target::Decide),
        4 => flow.prop_map(Target::Hook),
        1 => any::<Index>().prop_map(Target::Other),
    ]
}

/// `bytes` as one path segment: every byte but letters, digits, `-` and `_` percent-encoded
/// (so that no URL parser changes it: not even `.` and `..`).
fn segment(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| {
            if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// Values that have broken JSON readers and request checks, or might.
fn hostile_value() -> impl Strategy<Value = Value> {
    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!("bottom"), |inner, _| json!([inner]))
    }
    prop_oneof![
        Just(json!(null)),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(-0.0)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(f64::MAX)),
        Just(json!(f64::MIN_POSITIVE)),
        Just(json!("")),
        Just(json!(" ")),
        Just(json!("approve")),
        Just(json!("reject: too dear")),
        Just(json!("timeout")),
        Just(json!("APPROVED")),
        Just(json!("review")),
        Just(json!("echo")),
        Just(json!("broken")),
        Just(json!("../echo")),
        Just(json!("/etc/passwd")),
        Just(json!("sub/review")),
        Just(json!("{{ input }}")),
        Just(json!("\u{0}\u{202e}\u{fffd}é\u{1F600}")),
        Just(json!("x".repeat(5000))),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"decision": "approve"})),
        Just(json!({"decision": "approve", "fields": {"amount": 1}})),
        Just(json!({"amount": "40"})),
        Just(json!({"review": "approve"})),
        Just(json!({"nowhere": "approve"})),
        Just(nested(60)),
        Just(nested(126)),
        Just(nested(200)),
        ".{0,20}".prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| json!(number)),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "flow", "input", "decide", "decision", "note", "fields", "by", "amount", "review", "",
        ])
        .prop_map(str::to_string),
        ".{0,12}",
    ];
    prop_oneof![
        4 => (any::<Index>(), hostile_value()).prop_map(|(at, value)| Change::Replace(at, value)),
        1 => (any::<Index>(), key).prop_map(|(at, key)| Change::Rename(at, key)),
        1 => any::<Index>().prop_map(Change::Remove),
    ]
}
/// Valid bodies of the route `target` goes to.
fn examples(target: &Target) -> Vec<Value> {
    match target {
        Target::Start | Target::Other(_) => vec![
            json!({"flow": "echo", "input": "hi"}),
            json!({"flow": "echo"}),
            json!({"flow": "review"}),
            json!({"flow": "echo.json", "input": 42}),
            json!({
                "flow": "review",
                "input": {"a": [1, 2, {"b": null}]},
                "decide": {"review": {"decision": "approve", "note": "ok", "fields": {"amount": 3}}}
            }),
            json!({"flow": "review", "decide": {"review": "reject: too dear"}}),
        ],
        // The form wants `amount`: the short forms do not fit it.
        Target::Decide(_) => vec![
            json!("approve"),
            json!("reject: too late"),
            json!({"decision": "approve", "fields": {"amount": 40}}),
            json!({"decision": "reject", "note": "no", "fields": {"amount": 0}}),
            json!({"decision": "Yes", "note": "", "fields": {"amount": 1.5}, "by": "someone"}),
            json!({"decision": "approved", "note": null, "fields": {"amount": -2e9}}),
        ],
        Target::Hook(_) => vec![
            json!({"customer": "Bo"}),
            json!("some text"),
            json!([1, 2, 3]),
            json!({"nested": {"deep": [{"x": null}]}}),
            json!(42),
        ],
    }
}

/// A request to send: where, with what header, and what body how.
#[derive(Debug, Clone)]
struct Request {
    target: Target,
    auth: Auth,
    content_type: Option<String>,
    /// A `Content-Encoding` that the body does not have.
    encoding: Option<&'static str>,
    chunks: Option<Vec<Index>>,
}

fn request() -> impl Strategy<Value = Request> {
    (
        target(),
        auth(),
        content_type(),
        prop_oneof![4 => Just(None), 1 => Just(Some("gzip")), 1 => Just(Some("identity"))],
        chunks(),
    )
        .prop_map(|(target, auth, content_type, encoding, chunks)| Request {
            target,
            auth,
            content_type,
            encoding,
            chunks,
        })
}

/// Sends `body` as `request` says and checks the answer, then that the server still serves.
fn exchange(server: &Server, request: &Request, body: &[u8]) -> TestCaseResult {
    let shown = || {
        format!(
            "{request:?} with the body {:?}",
            String::from_utf8_lossy(&body[..body.len().min(600)])
        )
    };
    // The method, the path, the documented path, and the run a decision is for.
    let mut decided = None;
    let (method, path, template) = match &request.target {
        Target::Start => ("POST", "/v1/runs".to_string(), "/v1/runs"),
        Target::Decide(id) => {
            let id = match id {
                Id::Paused => {
                    let id = server.paused_run();
                    decided = Some(id.clone());
                    id
                }
                Id::Prefix(length) => {
                    let id = server.paused_run();
                    decided = Some(id.clone());
                    id[..(*length).min(id.len())].to_string()
                }
                Id::Unknown => "no-such-run".to_string(),
                Id::Raw(bytes) => segment(bytes),
            };
            (
                "POST",
                format!("/v1/runs/{id}/decision"),
                "/v1/runs/{id}/decision",
            )
        }
        Target::Hook(flow) => (
            "POST",
            format!("/v1/hooks/{}", segment(flow)),
            "/v1/hooks/{flow}",
        ),
        Target::Other(index) => {
            let (method, path, template) = OTHERS[index.index(OTHERS.len())];
            (method, path.to_string(), template)
        }
    };
    let mut builder = server.http.request(
        method.parse().expect("a method"),
        format!("{}{path}", server.url),
    );
    if let Some(value) = request.auth.header() {
        builder = builder.header("authorization", value);
    }
    if let Some(content_type) = &request.content_type {
        builder = builder.header("content-type", content_type.as_str());
    }
    if let Some(encoding) = request.encoding {
        builder = builder.header("content-encoding", encoding);
    }
    // hyper's client sends no chunked body with a GET (it would not be read as one).
    let chunks = request.chunks.as_ref().filter(|_| method != "GET");
    builder = match chunks {
        None => builder.body(body.to_vec()),
        Some(cuts) => {
            let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(body.len() + 1)).collect();
            cuts.push(0);
            cuts.push(body.len());
            cuts.sort_unstable();
            let pieces: Vec<Result<Vec<u8>, std::io::Error>> = cuts
                .windows(2)
                .map(|pair| Ok(body[pair[0]..pair[1]].to_vec()))
                .collect();
            builder.body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                pieces,
            )))
        }
    };
    let (status, content_type, answer) = match server.send(builder) {
        Ok(answer) => answer,
        Err(error) => {
            return Err(TestCaseError::fail(format!(
                "no answer to {}: {error}",
                shown()
            )));
        }
    };
    let text = String::from_utf8_lossy(&answer);
    prop_assert!(status < 500, "{} answered {}: {}", shown(), status, text);

    // The status is one the operation documents, or 413 for a body over the limit (on any
    // route: a declared length over it is refused before the route is known).
    let over = body.len() > MAX_BODY;
    let declared_over = over && chunks.is_none();
    let operation = &server.document["paths"][template][method.to_lowercase()];
    let documented = operation["responses"][status.to_string()].is_object();
    prop_assert!(
        documented || (status == 413 && over),
        "{} answered {}, which {} {} does not document: {}",
        shown(),
        status,
        method,
        template,
        text
    );
    let protected = template != "/openapi.json";
    if declared_over {
        prop_assert_eq!(status, 413, "{}: {}", shown(), text);
    } else if protected && !request.auth.authorized() {
        prop_assert_eq!(status, 401, "{}: {}", shown(), text);
    } else if protected && over {
        // Chunked, so read (after the token) up to the limit.
        prop_assert_eq!(status, 413, "{}: {}", shown(), text);
    } else if matches!(request.target, Target::Start | Target::Decide(_))
        && serde_json::from_slice::<Value>(body).is_err()
    {
        prop_assert_eq!(status, 400, "{} is not JSON: {}", shown(), text);
    } else if protected {
        prop_assert_ne!(status, 401, "{}: {}", shown(), text);
    }

    // A refusal is `{code, message}`; what is not is JSON too.
    prop_assert_eq!(&content_type, "application/json", "{}: {}", shown(), text);
    let answered: Result<Value, serde_json::Error> = serde_json::from_slice(&answer);
    // A run's input as deep as a body may be (127 levels) is nested deeper in the views of the
    // run and its approval than serde_json reads by default: JSON all the same.
    let too_deep = |error: &serde_json::Error| {
        status < 400 && error.to_string().starts_with("recursion limit exceeded")
    };
    prop_assert!(
        answered.as_ref().err().is_none_or(too_deep),
        "{} answered {} not JSON: {}",
        shown(),
        status,
        text
    );
    let answered = answered.unwrap_or_default();
    if status >= 400 {
        let fields = answered.as_object().map(|object| {
            let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
            keys.sort_unstable();
            keys
        });
        prop_assert_eq!(
            fields,
            Some(vec!["code", "message"]),
            "{}: {}",
            shown(),
            text
        );
        for field in ["code", "message"] {
            prop_assert!(
                answered[field]
                    .as_str()
                    .is_some_and(|text| !text.trim().is_empty()),
                "{}: `{}` is not a text: {}",
                shown(),
                field,
                text
            );
        }
    }
    // Decided (or no longer waiting): the next decision needs another run.
    if let Some(id) = decided
        && matches!(status, 200 | 409)
    {
        server.decided(&id);
    }

    // The run this request started or decided reads back until it stops going (it ends, or
    // waits). One waiting at its approval is then cancelled, so that the approvals to list stay
    // few.
    let get = reqwest::Method::GET;
    if let Some(id) = answered["runId"].as_str() {
        let mut waiting = false;
        for _ in 0..500 {
            let (status, run) = server.json(get.clone(), &format!("/v1/runs/{id}"), None);
            prop_assert_eq!(status, 200, "after {}: {}", shown(), run);
            let (_, runs) = server.json(get.clone(), "/v1/runs?limit=20", None);
            let listed = runs
                .as_array()
                .and_then(|runs| runs.iter().find(|run| run["id"] == id))
                .map(|run| run["status"].as_str().unwrap_or_default().to_string());
            match listed.as_deref() {
                Some("running") => std::thread::sleep(Duration::from_millis(5)),
                Some(status) => {
                    waiting = status == "paused";
                    break;
                }
                None => break,
            }
        }
        let kept = server.paused.lock().expect("paused").as_deref() == Some(id);
        if waiting && !kept {
            let (status, cancelled) = server.json(
                reqwest::Method::POST,
                &format!("/v1/runs/{id}/cancel"),
                None,
            );
            prop_assert_eq!(status, 200, "after {}: {}", shown(), cancelled);
        }
    }

    // And the server still serves: the newest run, and the approvals (every waiting run's
    // state).
    let (status, runs) = server.json(get.clone(), "/v1/runs?limit=1", None);
    prop_assert_eq!(status, 200, "after {}: {}", shown(), runs);
    prop_assert!(runs.is_array(), "after {}: {}", shown(), runs);
    let (status, approvals) = server.json(get, "/v1/approvals", None);
    prop_assert_eq!(status, 200, "after {}: {}", shown(), approvals);
    Ok(())
}

#[test]
fn fuzz_mutated_valid_bodies_are_answered_as_documented() {
    let strategy = (
        request(),
        any::<Index>(),
        prop_oneof![
            1 => Just(Vec::new()),
            2 => prop::collection::vec(change(), 1..4),
        ],
        prop::option::weighted(
            0.25,
            (
                any::<Index>(),
                0usize..32,
                prop::collection::vec(any::<u8>(), 0..12),
            ),
        ),
    );
    run(
        concat!(
            module_path!(),
            "::fuzz_mutated_valid_bodies_are_answered_as_documented"
        ),
        128,
        strategy,
        |server, (request, example, changes, splice)| {
            let examples = examples(&request.target);
            let mut value = examples[example.index(examples.len())].clone();
            for change in changes {
                apply(&mut value, change);
            }
            let mut body = value.to_string().into_bytes();
            if let Some((cut, length, insert)) = splice {
                let at = cut.index(body.len() + 1);
                let end = (at + length).min(body.len());
                body.splice(at..end, insert.iter().copied());
            }
            exchange(server, request, &body)
        },
    );
}

/// Bodies that are no route's: random bytes and text, deep nesting, huge numbers, odd unicode,
/// bodies at and over the limit.
fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    let nesting = (
        prop::sample::select(vec![
            "[",
            "{\"a\":",
            "{\"flow\":\"echo\",\"input\":[",
            "{\"decision\":\"approve\",\"fields\":{\"amount\":[",
        ]),
        0usize..3000,
        any::<bool>(),
    )
        .prop_map(|(open, depth, closed)| {
            let mut text = open.repeat(depth);
            if closed {
                for _ in 0..depth {
                    text.push_str(if open.ends_with('[') { "]" } else { "1}" });
                }
            }
            text.into_bytes()
        });
    let number = prop_oneof![
        "-?[0-9]{1,400}(\\.[0-9]{1,40})?([eE][+-]?[0-9]{1,7})?",
        Just("NaN".to_string()),
        Just("-Infinity".to_string()),
        Just("1e999999999".to_string()),
        Just("0x10".to_string()),
        Just("-0".to_string()),
        any::<f64>().prop_map(|number| number.to_string()),
    ];
    let numbered = (
        number,
        prop::sample::select(vec![
            "{}",
            "{\"flow\": \"echo\", \"input\": {}}",
            "{\"decision\": \"approve\", \"fields\": {\"amount\": {}}}",
            "{\"flow\": \"review\", \"decide\": {\"review\": {\"decision\": \"approve\", \"fields\": {\"amount\": {}}}}}",
        ]),
    )
        .prop_map(|(number, around)| around.replacen("{}", &number, 1).into_bytes());
    let fixed: Vec<Vec<u8>> = vec![
        Vec::new(),
        b" ".to_vec(),
        b"null".to_vec(),
        b"{}".to_vec(),
        b"[]".to_vec(),
        b"\"\"".to_vec(),
        b"0".to_vec(),
        b"\xef\xbb\xbf{\"flow\": \"echo\"}".to_vec(),
        b"{\"flow\": \"echo\\ud800\"}".to_vec(),
        b"{\"flow\": \"ech\\u0000o\"}".to_vec(),
        b"{\"flow\": \"\xff\xfe\"}".to_vec(),
        b"\"approve\\udfff\"".to_vec(),
        b"{\"flow\": \"echo\", \"flow\": \"review\"}".to_vec(),
        b"{\"flow\": \"echo\", \"decide\": {\"review\": \"approve\"}}".to_vec(),
        b"{\"flow\": \"review\", \"decide\": {\"review\": {\"decision\": \"timeout\"}}}".to_vec(),
        b"{\"decision\": \"timeout\"}".to_vec(),
        b"{\"decision\": \"approve\", \"fields\": {\"amount\": 40}} trailing".to_vec(),
        b"{\"flow\": \"echo\"}\n{\"flow\": \"echo\"}".to_vec(),
        b"flow=echo&input=x".to_vec(),
        b"--x\r\nContent-Disposition: form-data; name=\"flow\"\r\n\r\necho\r\n--x--\r\n".to_vec(),
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00".to_vec(),
        b"GET /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        format!(
            "{{\"flow\": \"echo\", \"input\": \"{}\"}}",
            "é".repeat(4000)
        )
        .into_bytes(),
        // Exactly at the limit, and just over it.
        format!("{:<MAX_BODY$}", "{\"flow\": \"echo\"}").into_bytes(),
        format!("{:<1$}", "{\"flow\": \"echo\"}", MAX_BODY + 1).into_bytes(),
        vec![b'['; MAX_BODY * 4],
    ];
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..512),
        2 => ".{0,200}".prop_map(String::into_bytes),
        3 => prop::sample::select(fixed),
        2 => nesting,
        2 => numbered,
        1 => (MAX_BODY - 64..MAX_BODY * 3).prop_map(|length| vec![b'x'; length]),
    ]
}

#[test]
fn fuzz_random_and_hostile_bodies_are_answered_as_documented() {
    run(
        concat!(
            module_path!(),
            "::fuzz_random_and_hostile_bodies_are_answered_as_documented"
        ),
        128,
        (request(), hostile_body()),
        |server, (request, body)| exchange(server, request, body),
    );
}
