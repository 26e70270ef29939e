//! A scripted LLM server for tests and benchmarks.
//!
//! [`ScriptedLlm`] is a real HTTP/1.1 server bound to `127.0.0.1` on a free port that speaks the
//! OpenAI Chat Completions wire format (`POST {base_url}/chat/completions`, plain JSON or SSE
//! streaming). What it answers is decided by a [`Script`]: an ordered list of [`Rule`]s, each a
//! [`Match`] condition and a [`Reply`], plus an optional fallback reply. Every request it receives
//! is recorded and can be inspected with [`ScriptedLlm::requests`].
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};
//!
//! let script = Script::default()
//!     .with_rule(Rule::on(
//!         Match { last_user_contains: Some("weather".into()), ..Match::default() },
//!         Reply::text("It is sunny."),
//!     ))
//!     .with_fallback(Reply::text("I don't know."));
//! let llm = ScriptedLlm::start(script).await?;
//! let url = format!("{}/chat/completions", llm.base_url());
//! // ... point the client under test at `url` ...
//! assert!(llm.requests().is_empty());
//! # let _ = url;
//! # Ok(())
//! # }
//! ```
//!
//! Dropping the [`ScriptedLlm`] stops the server and closes its open connections.

mod http;
mod respond;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The fixed `created` timestamp put in every completion, so outputs are deterministic.
pub const CREATED: u64 = 1_700_000_000;

/// Model name reported when the request names none.
pub const DEFAULT_MODEL: &str = "scripted";

/// What the server answers: rules tried in order, then the fallback.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Script {
    /// Tried in order; the first rule whose `when` matches and that has uses left answers.
    pub rules: Vec<Rule>,
    /// Answer used when no rule matches. Without one, unmatched requests get HTTP 500 with an
    /// OpenAI-style error body.
    #[serde(default)]
    pub fallback: Option<Reply>,
}

impl Script {
    /// A script without rules that answers every request with `reply`.
    pub fn always(reply: Reply) -> Self {
        Self {
            rules: Vec::new(),
            fallback: Some(reply),
        }
    }

    /// Appends a rule (builder style).
    pub fn with_rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets the fallback reply (builder style).
    pub fn with_fallback(mut self, reply: Reply) -> Self {
        self.fallback = Some(reply);
        self
    }
}

/// A condition and the reply given when it holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rule {
    /// Condition on the request; `None` matches every request.
    #[serde(default)]
    pub when: Option<Match>,
    /// The answer.
    pub reply: Reply,
    /// How many times this rule may answer; `None` means unlimited.
    #[serde(default)]
    pub times: Option<usize>,
}

impl Rule {
    /// A rule that answers every request, without limit.
    pub fn always(reply: Reply) -> Self {
        Self {
            when: None,
            reply,
            times: None,
        }
    }

    /// A rule that answers requests matching `when`, without limit.
    pub fn on(when: Match, reply: Reply) -> Self {
        Self {
            when: Some(when),
            reply,
            times: None,
        }
    }

    /// Limits how many times the rule may answer (builder style).
    pub fn limit(mut self, times: usize) -> Self {
        self.times = Some(times);
        self
    }
}

/// Conditions on a chat completion request; all given fields must hold.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    /// Substring of the content of the last message whose role is `user` or `tool`.
    pub last_user_contains: Option<String>,
    /// Substring of the content of any message (system, user, assistant or tool).
    pub any_message_contains: Option<String>,
    /// Exact equality with the request's `model`.
    pub model: Option<String>,
    /// Whether the request has a non-empty `tools` array.
    pub has_tools: Option<bool>,
    /// Role of the last message (e.g. `"user"` or `"tool"`).
    pub last_role: Option<String>,
}

impl Match {
    /// Whether a request body (the parsed JSON of a chat completion request) satisfies every
    /// condition given.
    pub fn matches(&self, body: &Value) -> bool {
        if let Some(needle) = &self.last_user_contains
            && !last_user_or_tool_text(body).is_some_and(|t| t.contains(needle.as_str()))
        {
            return false;
        }
        if let Some(needle) = &self.any_message_contains
            && !messages(body)
                .iter()
                .any(|m| content_text(m).contains(needle.as_str()))
        {
            return false;
        }
        if let Some(model) = &self.model
            && body.get("model").and_then(Value::as_str) != Some(model.as_str())
        {
            return false;
        }
        if let Some(want) = self.has_tools
            && has_tools(body) != want
        {
            return false;
        }
        if let Some(role) = &self.last_role
            && messages(body)
                .last()
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                != Some(role.as_str())
        {
            return false;
        }
        true
    }
}

/// What the server sends back.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Reply {
    /// An assistant text answer, streamed word by word as SSE chunks when the request has
    /// `"stream": true`. `delay_ms` is waited before answering. With `echo`, the content is the
    /// text of the last user/tool message prefixed by `content`.
    Text {
        content: String,
        #[serde(default)]
        delay_ms: u64,
        #[serde(default)]
        echo: bool,
    },
    /// The assistant calls tools (`finish_reason: "tool_calls"`). Arguments are sent as a JSON
    /// string in `function.arguments`; streamed, they arrive in several fragments.
    ToolCalls {
        calls: Vec<ToolCall>,
        #[serde(default)]
        delay_ms: u64,
    },
    /// Any HTTP status with a body and optional extra headers (e.g. `Retry-After`). A JSON
    /// string body is sent verbatim as `text/plain`; any other value is sent as JSON. A
    /// `content-type` in `headers` overrides the default one.
    Status {
        status: u16,
        body: Value,
        #[serde(default)]
        headers: Vec<(String, String)>,
    },
    /// HTTP 200 with `content-type: application/json` and a body that is not JSON.
    Garbage { body: String },
    /// A streamed answer that sends the first `after_chunks` content chunks, then closes the
    /// connection without a finish reason, `[DONE]` or the terminating HTTP chunk. For a
    /// non-streaming request, the response announces the full `Content-Length` but the
    /// connection closes after half the body.
    CutStream {
        content: String,
        after_chunks: usize,
    },
    /// Waits `delay_ms` before sending any byte of the response, then answers like `Text`.
    Slow { delay_ms: u64, content: String },
}

impl Reply {
    /// A plain text answer without delay or echo.
    pub fn text(content: impl Into<String>) -> Self {
        Reply::Text {
            content: content.into(),
            delay_ms: 0,
            echo: false,
        }
    }

    /// A text answer that is `prefix` followed by the last user/tool message text.
    pub fn echo(prefix: impl Into<String>) -> Self {
        Reply::Text {
            content: prefix.into(),
            delay_ms: 0,
            echo: true,
        }
    }

    /// A single tool call with a generated id.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::ToolCalls {
            calls: vec![ToolCall {
                id: None,
                name: name.into(),
                arguments,
            }],
            delay_ms: 0,
        }
    }

    /// An HTTP status with a JSON (or, for a string, plain text) body and no extra headers.
    pub fn status(status: u16, body: Value) -> Self {
        Reply::Status {
            status,
            body,
            headers: Vec::new(),
        }
    }
}

/// One tool call made by a [`Reply::ToolCalls`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; `None` generates `call_<n>` (numbered per server, from 1).
    #[serde(default)]
    pub id: Option<String>,
    /// The function name.
    pub name: String,
    /// The arguments, sent as a JSON string as OpenAI does.
    pub arguments: Value,
}

/// A request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Request target as sent, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers in arrival order, names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The parsed JSON body, `Value::Null` when absent or not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Text content of the last message whose role is `user` or `tool`.
    pub fn last_user_text(&self) -> Option<String> {
        last_user_or_tool_text(&self.body)
    }

    /// The request's `messages` array (empty if absent).
    pub fn messages(&self) -> &[Value] {
        messages(&self.body)
    }

    /// The request's `model`, if any.
    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    /// Whether the request asked for a streamed answer.
    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }
}

/// The `messages` array of a request body.
fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A message's content as text: a string, or the concatenated `text` of content parts.
fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

fn last_user_or_tool_text(body: &Value) -> Option<String> {
    messages(body)
        .iter()
        .rev()
        .find(|m| matches!(m.get("role").and_then(Value::as_str), Some("user" | "tool")))
        .map(content_text)
}

fn has_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct RuleSlot {
    rule: Rule,
    used: usize,
}

/// State shared by the server handle and the connection tasks.
struct Shared {
    rules: Mutex<Vec<RuleSlot>>,
    fallback: Mutex<Option<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    next_completion: AtomicU64,
    next_call: AtomicU64,
}

impl Shared {
    /// Picks the reply for a chat completion request, consuming one use of the matching rule.
    fn pick(&self, body: &Value) -> Option<Reply> {
        {
            let mut rules = lock(&self.rules);
            for slot in rules.iter_mut() {
                let has_uses = slot.rule.times.is_none_or(|t| slot.used < t);
                if has_uses && slot.rule.when.as_ref().is_none_or(|m| m.matches(body)) {
                    slot.used += 1;
                    return Some(slot.rule.reply.clone());
                }
            }
        }
        lock(&self.fallback).clone()
    }

    fn completion_id(&self) -> String {
        let n = self.next_completion.fetch_add(1, Ordering::Relaxed) + 1;
        format!("chatcmpl-scripted-{n}")
    }

    fn call_id(&self) -> String {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        format!("call_{n}")
    }
}

/// A running scripted LLM server on `127.0.0.1`. Dropping it stops the server.
pub struct ScriptedLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Binds a free port on `127.0.0.1` and starts serving `script`. Must be called within a
    /// Tokio runtime; the server runs until the returned value is dropped.
    pub async fn start(script: Script) -> io::Result<ScriptedLlm> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(4096)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            rules: Mutex::new(
                script
                    .rules
                    .into_iter()
                    .map(|rule| RuleSlot { rule, used: 0 })
                    .collect(),
            ),
            fallback: Mutex::new(script.fallback),
            requests: Mutex::new(Vec::new()),
            next_completion: AtomicU64::new(0),
            next_call: AtomicU64::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(ScriptedLlm {
            addr,
            shared,
            accept_task,
        })
    }

    /// The OpenAI-style base URL, e.g. `http://127.0.0.1:PORT/v1`; clients POST to
    /// `{base_url}/chat/completions`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// The server root, e.g. `http://127.0.0.1:PORT`.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order (including unmatched ones).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests were received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// Appends a rule at runtime; it is tried after the existing rules.
    pub fn push_rule(&self, rule: Rule) {
        lock(&self.shared.rules).push(RuleSlot { rule, used: 0 });
    }

    /// Replaces the fallback reply at runtime.
    pub fn set_fallback(&self, fallback: Option<Reply>) {
        *lock(&self.shared.fallback) = fallback;
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        // Dropping the accept task drops the listener and the JoinSet of connection tasks,
        // which aborts them.
        self.accept_task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // Each SSE event should leave as soon as it is written.
                let _ = stream.set_nodelay(true);
                connections.spawn(serve_connection(stream, Arc::clone(&shared)));
                while connections.try_join_next().is_some() {}
            }
            // E.g. out of file descriptors under heavy load: back off briefly and retry.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// What to do with a connection after a response.
pub(crate) enum After {
    KeepOpen,
    Close,
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let mut conn = BufReader::new(stream);
    loop {
        let req = match http::read_request(&mut conn).await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(err) => {
                let body = respond::error_body(
                    &format!("scripted-llm: bad request: {err}"),
                    "invalid_request_error",
                );
                let _ = http::write_response(
                    conn.get_mut(),
                    400,
                    &respond::json_headers(),
                    &body,
                    true,
                )
                .await;
                let _ = conn.get_mut().shutdown().await;
                return;
            }
        };
        let keep_alive = req.keep_alive;
        match respond::handle(&shared, req, conn.get_mut()).await {
            Ok(After::KeepOpen) if keep_alive => continue,
            _ => {
                let _ = conn.get_mut().shutdown().await;
                return;
            }
        }
    }
}
