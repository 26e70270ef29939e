//! A scripted LLM server for tests and benchmarks.
//!
//! [`ScriptedLlm`] is a real HTTP/1.1 server bound to `127.0.0.1` on a free port that speaks two
//! wire formats, chosen by the request's path:
//! - OpenAI Chat Completions: `POST {base_url}/chat/completions`;
//! - Anthropic Messages: `POST {root_url}/v1/messages` (any path ending in `/messages`).
//!
//! Both answer as plain JSON, or as server-sent events when the request has `"stream": true`.
//! What the server answers is decided by a [`Script`]: an ordered list of [`Rule`]s, each a
//! [`Match`] condition and a [`Reply`], plus an optional fallback reply. The same script drives
//! both formats: [`Match`] reads either request shape, and each [`Reply`] is sent in the format
//! of the request. Every request it receives is recorded and can be inspected with
//! [`ScriptedLlm::requests`].
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

mod anthropic;
mod http;
mod openai;
mod respond;
mod wire;

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
    /// error body in the request's format.
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

/// Conditions on a request (OpenAI or Anthropic shape); all given fields must hold.
///
/// In an Anthropic request, the top-level `system` counts as a system message, and a user
/// message carrying `tool_result` blocks counts as a message of role `tool`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    /// Substring of the content of the last message whose role is `user` or `tool`.
    pub last_user_contains: Option<String>,
    /// Substring of the content of any message (system, user, assistant or tool).
    pub any_message_contains: Option<String>,
    /// Exact equality with the request's `model`.
    pub model: Option<String>,
    /// Whether the request offers tools of its own (server tools such as web search do not
    /// count).
    pub has_tools: Option<bool>,
    /// Role of the last message (e.g. `"user"` or `"tool"`).
    pub last_role: Option<String>,
    /// Whether the request asks for the provider's web search (OpenAI `web_search_options`,
    /// Anthropic's `web_search_…` server tool).
    #[serde(default)]
    pub has_web_search: Option<bool>,
}

impl Match {
    /// Whether a request body (the parsed JSON of a chat completion or messages request)
    /// satisfies every condition given.
    pub fn matches(&self, body: &Value) -> bool {
        if let Some(needle) = &self.last_user_contains
            && !last_user_or_tool_text(body).is_some_and(|t| t.contains(needle.as_str()))
        {
            return false;
        }
        if let Some(needle) = &self.any_message_contains
            && !conversation(body)
                .iter()
                .any(|(_, text)| text.contains(needle.as_str()))
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
            && messages(body).last().map(message_role) != Some(role.as_str())
        {
            return false;
        }
        if let Some(want) = self.has_web_search
            && has_web_search(body) != want
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
    /// text of the last user/tool message prefixed by `content`. With `chunk_gap_ms`, a
    /// streamed answer waits that long before each chunk, so a client sees tokens arrive over
    /// time (the desktop app's tests watch them stream onto the canvas).
    Text {
        content: String,
        #[serde(default)]
        delay_ms: u64,
        #[serde(default)]
        echo: bool,
        #[serde(default)]
        chunk_gap_ms: u64,
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
    /// A text answer from a web search of `sources`. OpenAI format: `url_citation`
    /// annotations spanning the text (streamed: in a delta after the text). Anthropic format:
    /// a `server_tool_use` block (the query is the last user message), a
    /// `web_search_tool_result` block listing the sources, then the text with `citations`
    /// (streamed: `citations_delta`s before the text deltas).
    WebSearch {
        content: String,
        sources: Vec<SearchResult>,
    },
}

impl Reply {
    /// A plain text answer without delay or echo.
    pub fn text(content: impl Into<String>) -> Self {
        Reply::Text {
            content: content.into(),
            delay_ms: 0,
            echo: false,
            chunk_gap_ms: 0,
        }
    }

    /// A text answer that is `prefix` followed by the last user/tool message text.
    pub fn echo(prefix: impl Into<String>) -> Self {
        Reply::Text {
            content: prefix.into(),
            delay_ms: 0,
            echo: true,
            chunk_gap_ms: 0,
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

/// A page found by a [`Reply::WebSearch`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchResult {
    pub url: String,
    pub title: String,
}

impl SearchResult {
    pub fn new(url: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            title: title.into(),
        }
    }
}

/// One tool call made by a [`Reply::ToolCalls`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; `None` generates `call_<n>` (OpenAI) or `toolu_<n>` (Anthropic), numbered
    /// per server from 1.
    #[serde(default)]
    pub id: Option<String>,
    /// The function name.
    pub name: String,
    /// The arguments: sent as a JSON string in OpenAI format, as the `input` object in
    /// Anthropic format.
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

    /// Text content of the last message whose role is `user` or `tool` (tool results
    /// included).
    pub fn last_user_text(&self) -> Option<String> {
        last_user_or_tool_text(&self.body)
    }

    /// The request's `messages` array (empty if absent).
    pub fn messages(&self) -> &[Value] {
        messages(&self.body)
    }

    /// The conversation as `(role, text)` pairs in either format: an Anthropic request's
    /// top-level `system` first, and user messages of `tool_result` blocks as role `tool`.
    pub fn conversation(&self) -> Vec<(String, String)> {
        conversation(&self.body)
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

/// A content value as text: a string, or the concatenated text of its parts (`text` parts,
/// and the content of `tool_result` blocks).
fn blocks_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.clone(),
                other if other.get("type").and_then(Value::as_str) == Some("tool_result") => {
                    blocks_text(other.get("content"))
                }
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect(),
        _ => String::new(),
    }
}

/// A message's content as text.
fn content_text(message: &Value) -> String {
    blocks_text(message.get("content"))
}

/// A message's role; a user message carrying `tool_result` blocks (Anthropic) counts as `tool`.
fn message_role(message: &Value) -> &str {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    let has_tool_result = message
        .get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
        });
    if role == "user" && has_tool_result {
        "tool"
    } else {
        role
    }
}

/// The conversation of a request in either format, as `(role, text)` pairs.
fn conversation(body: &Value) -> Vec<(String, String)> {
    let system = body
        .get("system")
        .filter(|s| !s.is_null())
        .map(|s| ("system".to_string(), blocks_text(Some(s))));
    system
        .into_iter()
        .chain(
            messages(body)
                .iter()
                .map(|m| (message_role(m).to_string(), content_text(m))),
        )
        .collect()
}

fn last_user_or_tool_text(body: &Value) -> Option<String> {
    messages(body)
        .iter()
        .rev()
        .find(|m| matches!(message_role(m), "user" | "tool"))
        .map(content_text)
}

/// The request's `tools` array (empty if absent).
fn tools(body: &Value) -> &[Value] {
    body.get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Whether a tool is the caller's own: OpenAI `function` tools and Anthropic tools without a
/// type (or of type `custom`); typed Anthropic tools are server tools.
fn is_own_tool(tool: &Value) -> bool {
    matches!(
        tool.get("type").and_then(Value::as_str),
        None | Some("function" | "custom")
    )
}

fn has_tools(body: &Value) -> bool {
    tools(body).iter().any(is_own_tool)
}

fn has_web_search(body: &Value) -> bool {
    body.get("web_search_options").is_some_and(|o| !o.is_null())
        || tools(body).iter().any(|t| {
            t.get("type")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.starts_with("web_search"))
        })
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
    /// Picks the reply for a request, consuming one use of the matching rule.
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

    /// The id of the next response: `chatcmpl-scripted-<n>` or `msg_scripted_<n>`.
    fn response_id(&self, wire: wire::Wire) -> String {
        let n = self.next_completion.fetch_add(1, Ordering::Relaxed) + 1;
        match wire {
            wire::Wire::OpenAi => format!("chatcmpl-scripted-{n}"),
            wire::Wire::Anthropic => format!("msg_scripted_{n}"),
        }
    }

    /// The id of the next generated tool call: `call_<n>` or `toolu_<n>`.
    fn call_id(&self, wire: wire::Wire) -> String {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        match wire {
            wire::Wire::OpenAi => format!("call_{n}"),
            wire::Wire::Anthropic => format!("toolu_{n}"),
        }
    }

    /// The id of the next server tool use (a web search): `srvtoolu_<n>`.
    fn server_tool_id(&self) -> String {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        format!("srvtoolu_{n}")
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
    /// `{base_url}/chat/completions` (OpenAI) or `{base_url}/messages` (Anthropic).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// The server root, e.g. `http://127.0.0.1:PORT`: Anthropic's base URL (clients POST to
    /// `{root_url}/v1/messages`).
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
                let _ =
                    http::write_response(conn.get_mut(), 400, &wire::json_headers(), &body, true)
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
