//! The OpenAI client against a real server nobody here wrote: llama.cpp's OpenAI-compatible
//! HTTP server (the prebuilt one in the `xllamacpp` wheel) serving a tiny random-weight model.
//!
//! `bash tests/llama/setup.sh` prepares a venv with the server and the model and prints its
//! python; point `WEFT_LLAMA_PYTHON` at it (default: the venv in `WEFT_LLAMA_VENV`, else
//! `~/.cache/weft/llama-venv`). Without it the tests are skipped with a notice, except under
//! CI (`CI` set), where they fail.
//!
//! The server answers greedily with exactly [`MAX_TOKENS`] tokens of gibberish (it ignores
//! end-of-text), so answers are deterministic, never empty and take milliseconds.

use std::collections::HashMap;
use std::fs::File;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use weft_engine::{Engine, RunOptions};
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ProviderError, ProviderKind,
    ProviderSettings, route_model,
};

use weft_event::{EventType, RunEvent, RunStatus};

use weft_flow::Flow;

use weft_store::Store;

/// Tokens per answer (`serve.py --max-tokens`).
const MAX_TOKENS: u64 = 16;
/// Longest wait for the server to answer `/v1/models`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// The venv's python: `WEFT_LLAMA_PYTHON`, else `bin/python` of the default venv.
fn python_path() -> Option<PathBuf> {
    env_path("WEFT_LLAMA_PYTHON").or_else(|| {
        let venv = env_path("WEFT_LLAMA_VENV")
            .or_else(|| env_path("HOME").map(|home| home.join(".cache/weft/llama-venv")))?;
        Some(venv.join("bin/python"))
    })
}

/// The python to run the server with, or `None` (after saying why) when the test is to be
/// skipped. Under CI a missing python fails the test instead.
fn python_or_skip(test: &str) -> Option<PathBuf> {
    let python = python_path();
    if let Some(python) = python.as_ref().filter(|path| path.is_file()) {
        return Some(python.clone());
    }
    let looked = python.map_or_else(
        || "no WEFT_LLAMA_PYTHON and no HOME".to_string(),
        |path| format!("{} does not exist", path.display()),
    );
    if std::env::var_os("CI").is_some() {
        panic!(
            "the llama.cpp peer is not installed ({looked}): run `bash tests/llama/setup.sh` \
             and set WEFT_LLAMA_PYTHON to the python it prints"
        );
    }
    eprintln!(
        "SKIPPED llama_peer::{test}: the llama.cpp peer is not installed ({looked}); \
         run `bash tests/llama/setup.sh` to enable it"
    );
    None
}

/// A llama.cpp server started by this test, killed (by its own pid) when dropped.
struct LlamaServer {
    child: Child,
    /// Kept open: the server also exits when it closes, should this process die unclean.
    _stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT`.
    address: String,
    log: PathBuf,
    /// Holds the log (and the model, when this test wrote it).
    _dir: Arc<tempfile::TempDir>,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // Only the process this test started; errors mean it has already exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    /// Starts the server, or returns `None` when the peer is not installed (see
    /// [`python_or_skip`]).
    async fn start_or_skip(test: &str) -> Option<LlamaServer> {
        let python = python_or_skip(test)?;
        Some(LlamaServer::start(&python).await)
    }

    async fn start(python: &Path) -> LlamaServer {
        let dir = Arc::new(tempfile::tempdir().expect("a temporary directory for the server"));
        let model = model_path(python, dir.path());
        let serve = repo_root().join("tests/llama/serve.py");
        let log = dir.path().join("server.log");
        // The port is picked by binding port 0 and released before the server binds it; if
        // another process takes it in between, the server exits and the next port is tried.
        let mut last_failure = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log_file = File::create(&log).expect("the server log can be created");
            let mut child = Command::new(python)
                .arg(&serve)
                .arg("--model")
                .arg(&model)
                .arg("--port")
                .arg(port.to_string())
                .arg("--max-tokens")
                .arg(MAX_TOKENS.to_string())
                .stdin(Stdio::piped())
                .stdout(
                    log_file
                        .try_clone()
                        .expect("the log file handle can be cloned"),
                )
                .stderr(log_file)
                .spawn()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
            let stdin = child.stdin.take();
            let mut server = LlamaServer {
                child,
                _stdin: stdin,
                address: format!("http://127.0.0.1:{port}"),
                log: log.clone(),
                _dir: Arc::clone(&dir),
            };
            match server.wait_ready().await {
                Ok(()) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("the llama.cpp server did not start: {last_failure}");
    }

    /// Waits until `GET /v1/models` answers as llama.cpp does.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("an HTTP client");
        let url = format!("{}/v1/models", self.address);
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "it exited ({status}); its log:\n{}",
                    self.log_text()
                ));
            }
            if let Ok(response) = http.get(&url).send().await
                && response.status().is_success()
                && let Ok(body) = response.text().await
            {
                if body.contains("llamacpp") {
                    return Ok(());
                }
                return Err(format!("{url} answered, but not as llama.cpp: {body}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "{url} did not answer within {} s; its log:\n{}",
            READY_TIMEOUT.as_secs(),
            self.log_text()
        ))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The OpenAI base URL (`OPENAI_BASE_URL`) of this server.
    fn base_url(&self) -> String {
        format!("{}/v1", self.address)
    }
}

/// The model setup.sh wrote beside the venv's `bin/`; when it is missing (a python given by
/// `WEFT_LLAMA_PYTHON` from elsewhere), make_model.py writes one into `dir`.
fn model_path(python: &Path, dir: &Path) -> PathBuf {
    let beside = python
        .parent()
        .and_then(Path::parent)
        .map(|venv| venv.join("tiny-llama.gguf"));
    if let Some(model) = beside.filter(|path| path.is_file()) {
        return model;
    }
    let model = dir.join("tiny-llama.gguf");
    let status = Command::new(python)
        .arg(repo_root().join("tests/llama/make_model.py"))
        .arg(&model)
        .stdout(Stdio::null())
        .status()
        .expect("make_model.py runs");
    assert!(status.success(), "make_model.py failed ({status})");
    model
}

fn free_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

fn settings(base_url: String) -> ProviderSettings {
    ProviderSettings {
        openai_base_url: base_url,
        openai_api_key: None,
        read_timeout: Duration::from_secs(10),
        max_attempts: 2,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        ..ProviderSettings::default()
    }
}

/// The hello flow's conversation.
fn poet_messages() -> Vec<ChatMessage> {
    vec![
        ChatMessage::System {
            content: "You are a concise poet.".into(),
        },
        ChatMessage::User {
            content: "Write a haiku about a river in spring.".into(),
        },
    ]
}

/// One call through [`LlmClients`]; returns its result and the pieces passed to `on_delta`.
async fn call(
    base_url: String,
    messages: Vec<ChatMessage>,
) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
    let clients = LlmClients::new(settings(base_url));
    let route = route_model("gpt-4o-mini", clients.settings()).expect("the model routes");
    assert_eq!(route.provider, ProviderKind::OpenAi);
    let request = ChatRequest::new(route.model.clone(), messages);
    let deltas = Mutex::new(Vec::new());
    let on_delta = |piece: &str| deltas.lock().expect("lock").push(piece.to_string());
    let result = clients
        .complete(&route, &request, &on_delta, &CancellationToken::new())
        .await;
    (result, deltas.into_inner().expect("lock"))
}

#[tokio::test]
async fn streamed_answer_is_read_piece_by_piece() {
    let Some(server) = LlamaServer::start_or_skip("streamed_answer_is_read_piece_by_piece").await
    else {
        return;
    };
    let (result, deltas) = call(server.base_url(), poet_messages()).await;
    let response = result.expect("llama.cpp answers the streamed request");
    assert!(!response.content.is_empty(), "the answer has text");
    assert!(
        deltas.len() > 1,
        "the answer arrived as a stream of pieces, got {deltas:?}"
    );
    assert_eq!(deltas.concat(), response.content);
    assert!(response.tool_calls.is_empty());
    // Asked for with `stream_options.include_usage`; llama.cpp sends it in a last chunk.
    let usage = response
        .usage
        .expect("llama.cpp reports usage at the end of the stream");
    assert_eq!(usage.output_tokens, MAX_TOKENS);
    assert!(usage.input_tokens > 0, "usage counts the prompt: {usage:?}");
}

#[tokio::test]
async fn plain_answer_is_read_when_the_server_does_not_stream() {
    let Some(server) =
        LlamaServer::start_or_skip("plain_answer_is_read_when_the_server_does_not_stream").await
    else {
        return;
    };
    // llama.cpp honours `stream: true`, so a relay turns the client's request into a
    // `stream: false` one and hands back llama.cpp's plain `chat.completion` answer untouched:
    // the client's path for servers that ignore `stream`, against a real plain answer.
    let relay = Relay::start(server.address.trim_start_matches("http://")).await;
    let (result, deltas) = call(relay.base_url(), poet_messages()).await;
    let plain = result.expect("the client reads llama.cpp's plain answer");

    let asked = relay.requests();
    assert_eq!(asked.len(), 1, "one request, not retried");
    assert_eq!(
        asked[0]["stream"],
        Value::Bool(true),
        "the client asked to stream"
    );
    assert!(!plain.content.is_empty(), "the answer has text");
    assert_eq!(
        deltas,
        [plain.content.as_str()],
        "a plain answer is one piece"
    );
    let usage = plain.usage.expect("llama.cpp's plain answer has usage");
    assert_eq!(usage.output_tokens, MAX_TOKENS);

    // The same request streamed gets the same answer (greedy sampling, no prompt cache).
    let (streamed, _) = call(server.base_url(), poet_messages()).await;
    let streamed = streamed.expect("llama.cpp answers the streamed request");
    assert_eq!(streamed.content, plain.content);
    assert_eq!(streamed.usage, Some(usage));
}

#[tokio::test]
async fn server_errors_come_back_with_llama_cpps_message() {
    let Some(server) =
        LlamaServer::start_or_skip("server_errors_come_back_with_llama_cpps_message").await
    else {
        return;
    };
    // Each character is about one token: far more than the server's context of 512.
    let messages = vec![ChatMessage::User {
        content: "x".repeat(3000),
    }];
    let (result, deltas) = call(server.base_url(), messages).await;
    match result {
        Err(ProviderError::Http {
            provider: "openai",
            status: 400,
            message,
        }) => assert!(
            message.contains("context size"),
            "the message is llama.cpp's: {message}"
        ),
        other => panic!("expected llama.cpp's HTTP 400, got {other:?}"),
    }
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn hello_flow_runs_against_llama_cpp() {
    let Some(server) = LlamaServer::start_or_skip("hello_flow_runs_against_llama_cpp").await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("runs.db")).expect("the store opens");
    let engine = Engine::new(LlmClients::new(settings(server.base_url())), store);
    let path = repo_root().join("flows/hello.json");
    let flow = Flow::load(&path).expect("the example flow loads");
    let events: Arc<Mutex<Vec<RunEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let started = Instant::now();
    let outcome = engine
        .start(
            flow,
            RunOptions {
                flow_path: Some(path),
                on_event: Some(Arc::new(move |event: &RunEvent| {
                    sink.lock().expect("lock").push(event.clone());
                })),
                ..RunOptions::default()
            },
        )
        .await
        .expect("the run starts");
    let elapsed = started.elapsed();

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "error: {:?}",
        outcome.error
    );
    let Some(Value::String(result)) = outcome.result.as_deref() else {
        panic!("the result is the poet's text, got {:?}", outcome.result);
    };
    assert!(!result.is_empty(), "the poet answered");

    let events = events.lock().expect("lock");
    let mut by_kind: HashMap<EventType, Vec<&RunEvent>> = HashMap::new();
    for event in events.iter() {
        by_kind.entry(event.kind).or_default().push(event);
    }
    let deltas = by_kind
        .get(&EventType::LlmDelta)
        .expect("llm_delta events were emitted");
    assert!(deltas.len() > 1, "the answer was streamed in pieces");
    assert!(
        deltas
            .iter()
            .all(|event| event.node_id.as_deref() == Some("poet"))
    );
    let streamed: String = deltas.iter().map(|event| event.content.as_str()).collect();
    assert_eq!(&streamed, result);
    let responses = by_kind
        .get(&EventType::LlmResponse)
        .expect("an llm_response event was emitted");
    assert_eq!(&responses[0].content, result);
    assert!(!by_kind.contains_key(&EventType::LlmError));
    assert!(
        elapsed < Duration::from_secs(10),
        "the run took {elapsed:?}"
    );
}

/// A one-purpose HTTP relay on 127.0.0.1: forwards each request to llama.cpp with `stream`
/// set to false and copies the answer back byte for byte. Records the requests it relayed.
struct Relay {
    address: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Relay {
    async fn start(upstream: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the relay binds");
        let address = listener.local_addr().expect("the relay's address");
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen = Arc::clone(&requests);
        let upstream = upstream.to_string();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Err(error) = relay_one(client, &upstream, &seen).await {
                        eprintln!("relay: {error}");
                    }
                });
            }
        });
        Relay {
            address,
            requests,
            task,
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }
}

async fn relay_one(
    mut client: TcpStream,
    upstream: &str,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if client.read_buf(&mut buffer).await? == 0 {
            return Ok(());
        }
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let is_header = |line: &str, name: &str| {
        line.split_once(':')
            .is_some_and(|(header, _)| header.trim().eq_ignore_ascii_case(name))
    };
    let length: usize = head
        .lines()
        .find(|line| is_header(line, "content-length"))
        .and_then(|line| line.split_once(':'))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        if client.read_buf(&mut buffer).await? == 0 {
            return Err(std::io::Error::other("the request body was cut off"));
        }
    }
    let mut body: Value = serde_json::from_slice(&buffer[head_end..head_end + length])?;
    seen.lock().expect("lock").push(body.clone());
    if let Some(object) = body.as_object_mut() {
        object.insert("stream".into(), Value::Bool(false));
    }
    let body = serde_json::to_vec(&body)?;
    let mut forwarded: String = head
        .split("\r\n")
        .filter(|line| {
            !line.is_empty() && !is_header(line, "content-length") && !is_header(line, "connection")
        })
        .map(|line| format!("{line}\r\n"))
        .collect();
    forwarded.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    let mut server = TcpStream::connect(upstream).await?;
    server.write_all(forwarded.as_bytes()).await?;
    server.write_all(&body).await?;
    // llama.cpp closes the connection after its answer (`connection: close`).
    tokio::io::copy(&mut server, &mut client).await?;
    client.shutdown().await
}
