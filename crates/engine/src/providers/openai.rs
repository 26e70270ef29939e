//! OpenAI Chat Completions client (SPEC §7), also used for Ollama and any other server that
//! speaks the same wire format.
//!
//! One call is `POST {base_url}/chat/completions` with `stream: true`. The answer is read as
//! server-sent events (or as a plain `chat.completion` when the server ignores `stream`), with
//! text pieces passed on as they arrive. 429 and 5xx answers and connection failures are retried
//! with exponential backoff; every network wait is raced against the cancellation token.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    ChatMessage, ChatRequest, ChatResponse, ProviderError, ProviderSettings, Secret, ToolCall,
    Usage,
};

/// Largest answer accepted (streamed or not).
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// How much of an error body is read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Longest excerpt of a malformed answer quoted in an error, in characters.
const EXCERPT_CHARS: usize = 200;
/// Longest provider error message kept, in characters.
const MAX_MESSAGE_CHARS: usize = 500;

/// A client for the OpenAI Chat Completions wire format. Cheap to clone: the HTTP connection
/// pool is shared.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    settings: ProviderSettings,
}

impl OpenAiClient {
    /// A client using `http` (which carries the connect and read timeouts) and the retry
    /// policy of `settings`.
    pub fn new(http: reqwest::Client, settings: ProviderSettings) -> OpenAiClient {
        OpenAiClient { http, settings }
    }

    /// Sends `request` to `{base_url}/chat/completions` and reads the streamed answer, passing
    /// each text piece to `on_delta`. `provider` names the provider in errors; `key`, when
    /// present, is sent as a bearer token.
    pub async fn complete(
        &self,
        provider: &'static str,
        base_url: &str,
        key: Option<&Secret>,
        request: &ChatRequest,
        on_delta: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let base_url = base_url.trim_end_matches('/');
        let call = Call {
            client: self,
            provider,
            base_url,
            url: format!("{base_url}/chat/completions"),
            key,
            body: request_body(request),
            on_delta,
            cancel,
        };
        let attempts = self.settings.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            let failure = match call.attempt().await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if !failure.retryable || attempt >= attempts {
                return Err(failure.error);
            }
            let delay = failure
                .retry_after
                .unwrap_or_else(|| self.backoff(attempt))
                .min(self.settings.max_backoff);
            tracing::debug!(
                provider,
                attempt,
                reason = %failure_reason(&failure.error),
                ?delay,
                "model call failed, retrying"
            );
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    /// The wait after failed attempt number `attempt` (from 1): the initial backoff doubled
    /// per attempt, ±25 % jitter, capped at the maximum backoff.
    fn backoff(&self, attempt: u32) -> Duration {
        let max = self.settings.max_backoff;
        let doublings = i32::try_from(attempt.saturating_sub(1).min(30)).unwrap_or(30);
        let base = self.settings.initial_backoff.as_secs_f64() * 2f64.powi(doublings);
        let jittered = base * (0.75 + 0.5 * rand::random::<f64>());
        Duration::try_from_secs_f64(jittered)
            .unwrap_or(max)
            .min(max)
    }
}

/// A short description of a failure for logs (never the provider's message, which might echo
/// a key).
fn failure_reason(error: &ProviderError) -> String {
    match error {
        ProviderError::Http { status, .. } => format!("HTTP {status}"),
        ProviderError::Connect { .. } => "connection failed".into(),
        ProviderError::Timeout { .. } => "timed out".into(),
        _ => "error".into(),
    }
}

/// Why an attempt failed and whether another attempt may help.
struct Failure {
    error: ProviderError,
    retryable: bool,
    /// The server's `Retry-After`, when it sent one.
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(error: ProviderError) -> Failure {
        Failure {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    fn retry_if(error: ProviderError, retryable: bool) -> Failure {
        Failure {
            error,
            retryable,
            retry_after: None,
        }
    }
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Failure {
        Failure::fatal(error)
    }
}

/// Everything one model call needs, shared by its attempts.
struct Call<'a> {
    client: &'a OpenAiClient,
    provider: &'static str,
    base_url: &'a str,
    url: String,
    key: Option<&'a Secret>,
    body: Value,
    on_delta: &'a (dyn Fn(&str) + Send + Sync),
    cancel: &'a CancellationToken,
}

impl Call<'_> {
    async fn attempt(&self) -> Result<ChatResponse, Failure> {
        let mut builder = self
            .client
            .http
            .post(&self.url)
            .header(ACCEPT, "text/event-stream, application/json")
            .json(&self.body);
        if let Some(key) = self.key {
            builder = builder.bearer_auth(key.expose());
        }
        let sent = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(ProviderError::Cancelled.into()),
            sent = builder.send() => sent,
        };
        // Nothing of an answer arrived, so another attempt cannot repeat anything; only a
        // request that could not even be built (a bad URL) is not worth another try.
        let response = sent.map_err(|error| {
            Failure::retry_if(self.transport_error(&error), !error.is_builder())
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.http_failure(response).await);
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                value
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            });
        let reader = BodyReader {
            response,
            received: 0,
            limit: MAX_RESPONSE_BYTES,
            cancel: self.cancel,
        };
        if is_json {
            self.read_completion(reader).await
        } else {
            self.read_stream(reader).await
        }
    }

    /// The error for a request that got no answer.
    fn transport_error(&self, error: &reqwest::Error) -> ProviderError {
        if error.is_timeout() {
            let limit = if error.is_connect() {
                self.client.settings.connect_timeout
            } else {
                self.client.settings.read_timeout
            };
            ProviderError::Timeout {
                provider: self.provider,
                seconds: limit.as_secs(),
            }
        } else {
            ProviderError::Connect {
                provider: self.provider,
                url: self.base_url.to_string(),
                message: describe(error),
            }
        }
    }

    fn timeout(&self) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider,
            seconds: self.client.settings.read_timeout.as_secs(),
        }
    }

    fn malformed(&self, message: impl Into<String>) -> ProviderError {
        ProviderError::Malformed {
            provider: self.provider,
            message: message.into(),
        }
    }

    /// A non-2xx answer: the provider's message, retryable for 429 and 5xx.
    async fn http_failure(&self, response: reqwest::Response) -> Failure {
        let status = response.status();
        let retry_after = parse_retry_after(response.headers());
        let mut reader = BodyReader {
            response,
            received: 0,
            limit: usize::MAX,
            cancel: self.cancel,
        };
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match reader.next().await {
                Ok(Some(bytes)) => body.extend_from_slice(bytes.as_ref()),
                Err(ReadError::Cancelled) => return Failure::fatal(ProviderError::Cancelled),
                // A broken or slow error body still leaves the status to report.
                Ok(None) | Err(_) => break,
            }
        }
        body.truncate(MAX_ERROR_BODY_BYTES);
        Failure {
            error: ProviderError::Http {
                provider: self.provider,
                status: status.as_u16(),
                message: error_message(status, &body),
            },
            retryable: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
            retry_after,
        }
    }

    /// A plain `chat.completion` body (the server ignored `stream: true`).
    async fn read_completion(&self, mut reader: BodyReader<'_>) -> Result<ChatResponse, Failure> {
        let mut body = Vec::new();
        loop {
            match reader.next().await {
                Ok(Some(bytes)) => body.extend_from_slice(bytes.as_ref()),
                Ok(None) => break,
                Err(error) => return Err(self.read_failure(error, reader.received, None)),
            }
        }
        let completion: Completion = serde_json::from_slice(&body).map_err(|error| {
            self.malformed(format!(
                "the answer is not a valid chat completion ({error}): {}",
                excerpt(&String::from_utf8_lossy(&body))
            ))
        })?;
        if let Some(error) = completion.error.filter(|error| !error.is_null()) {
            return Err(reported_error(self.provider, &error).into());
        }
        let usage = completion.usage.map(WireUsage::into_usage);
        let Some(choice) = completion.choices.into_iter().next() else {
            return Err(self.malformed("the answer has no choices").into());
        };
        let message = choice.message.unwrap_or_default();
        let content = message
            .content
            .as_ref()
            .map(content_text)
            .unwrap_or_default();
        if !content.is_empty() {
            (self.on_delta)(&content);
        }
        let tool_calls = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(index, call)| {
                let function = call.function.unwrap_or_default();
                let mut arguments = String::new();
                if let Some(value) = &function.arguments {
                    push_arguments(&mut arguments, value);
                }
                finish_call(index, call.id, function.name, arguments)
            })
            .collect();
        Ok(ChatResponse {
            content,
            tool_calls,
            usage,
            sources: Vec::new(),
        })
    }

    /// A server-sent event stream of `chat.completion.chunk`s.
    async fn read_stream(&self, mut reader: BodyReader<'_>) -> Result<ChatResponse, Failure> {
        let mut parser = SseParser::default();
        let mut state = StreamState::default();
        let mut events = Vec::new();
        loop {
            match reader.next().await {
                Ok(Some(bytes)) => {
                    parser.push(bytes.as_ref(), &mut events);
                    for event in events.drain(..) {
                        if state.event(self, &event, false)? {
                            return Ok(state.finish());
                        }
                    }
                }
                Ok(None) => {
                    parser.finish(&mut events);
                    for event in events.drain(..) {
                        if state.event(self, &event, true)? {
                            return Ok(state.finish());
                        }
                    }
                    if state.finish_reason.is_some() {
                        return Ok(state.finish());
                    }
                    return Err(self
                        .malformed(
                            "the stream ended early (no finish reason and no [DONE]); \
                             the connection was probably cut",
                        )
                        .into());
                }
                // The answer is complete but for its usage or [DONE]: keep it.
                Err(ReadError::Broken(_) | ReadError::TimedOut)
                    if state.finish_reason.is_some() =>
                {
                    tracing::debug!(
                        provider = self.provider,
                        "stream broke after its finish reason"
                    );
                    return Ok(state.finish());
                }
                Err(error) => {
                    let cut = "the stream ended early";
                    return Err(self.read_failure(error, reader.received, Some(cut)));
                }
            }
        }
    }

    /// The failure for a body that could not be read to its end. Only a body of which nothing
    /// arrived may be retried.
    fn read_failure(&self, error: ReadError, received: usize, cut: Option<&str>) -> Failure {
        let nothing_yet = received == 0;
        match error {
            ReadError::Cancelled => Failure::fatal(ProviderError::Cancelled),
            ReadError::TooLarge => Failure::fatal(self.malformed(format!(
                "the answer is larger than {} MiB",
                MAX_RESPONSE_BYTES / (1024 * 1024)
            ))),
            ReadError::TimedOut => Failure::retry_if(self.timeout(), nothing_yet),
            ReadError::Broken(message) if nothing_yet => Failure::retry_if(
                ProviderError::Connect {
                    provider: self.provider,
                    url: self.base_url.to_string(),
                    message,
                },
                true,
            ),
            ReadError::Broken(message) => {
                let cut = cut.unwrap_or("the answer was cut off");
                Failure::fatal(self.malformed(format!("{cut} ({message})")))
            }
        }
    }
}

/// Why the body of an answer could not be read further.
enum ReadError {
    Cancelled,
    TooLarge,
    TimedOut,
    Broken(String),
}

/// Reads an answer's body chunk by chunk, racing each read against cancellation and bounding
/// its size.
struct BodyReader<'a> {
    response: reqwest::Response,
    received: usize,
    limit: usize,
    cancel: &'a CancellationToken,
}

impl BodyReader<'_> {
    async fn next(&mut self) -> Result<Option<impl AsRef<[u8]> + use<>>, ReadError> {
        let chunk = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(ReadError::Cancelled),
            chunk = self.response.chunk() => chunk,
        };
        match chunk {
            Ok(Some(bytes)) => {
                self.received = self.received.saturating_add(bytes.as_ref().len());
                if self.received > self.limit {
                    return Err(ReadError::TooLarge);
                }
                Ok(Some(bytes))
            }
            Ok(None) => Ok(None),
            Err(error) if error.is_timeout() => Err(ReadError::TimedOut),
            Err(error) => Err(ReadError::Broken(describe(&error))),
        }
    }
}

/// A reqwest error as text: its chain of causes, without the URL.
fn describe(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && parts.last() != Some(&text) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        if error.is_body() || error.is_decode() {
            "the connection broke while reading the answer".into()
        } else {
            "the request failed".into()
        }
    } else {
        parts.join(": ")
    }
}

/// The `Retry-After` header in seconds (integer or fractional); dates are ignored.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: f64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

/// The message of an error answer: `error.message` of a JSON body, else the body's text.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if let Ok(value) = serde_json::from_str::<Value>(&text)
        && let Some(message) = json_error_message(&value)
    {
        return truncate(message.trim(), MAX_MESSAGE_CHARS);
    }
    let text = text.trim();
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string()
    } else {
        truncate(text, MAX_MESSAGE_CHARS)
    }
}

/// The message of a JSON error body in the shapes servers use: `{"error": {"message"}}`,
/// `{"error": "…"}`, `{"message": "…"}` or `{"detail": "…"}`.
fn json_error_message(value: &Value) -> Option<&str> {
    match value.get("error") {
        Some(Value::String(message)) => Some(message),
        Some(error) if error.is_object() => error.get("message").and_then(Value::as_str),
        _ => value
            .get("message")
            .or_else(|| value.get("detail"))
            .and_then(Value::as_str),
    }
}

/// An `error` object found inside a successful answer.
fn reported_error(provider: &'static str, error: &Value) -> ProviderError {
    let message = match error {
        Value::String(message) => message.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| other.to_string(), str::to_string),
    };
    let message = truncate(message.trim(), MAX_MESSAGE_CHARS);
    let status = ["code", "status"]
        .iter()
        .filter_map(|field| error.get(*field).and_then(Value::as_u64))
        .find(|code| (400..=599).contains(code))
        .and_then(|code| u16::try_from(code).ok());
    match status {
        Some(status) => ProviderError::Http {
            provider,
            status,
            message,
        },
        None => ProviderError::Malformed {
            provider,
            message: format!("the provider reported an error: {message}"),
        },
    }
}

/// At most `max` characters of `text`, with `…` when shortened.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A short excerpt of a malformed answer for an error message.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        "(empty)".into()
    } else {
        truncate(text, EXCERPT_CHARS)
    }
}

/// The JSON body of a streamed chat completion request.
fn request_body(request: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(wire_message).collect()),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(effort) = &request.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    Value::Object(body)
}

fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({ "role": "system", "content": content }),
        ChatMessage::User { content } => json!({ "role": "user", "content": content }),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } if !tool_calls.is_empty() => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            // A message that only calls tools has no content, as the API itself answers it.
            let content = if content.is_empty() {
                Value::Null
            } else {
                json!(content)
            };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        ChatMessage::Assistant { content, .. } => {
            json!({ "role": "assistant", "content": content })
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

/// A message's content: a string, or the concatenated text of content parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

/// Appends tool-call arguments as sent: a JSON string fragment, or (some servers) an object.
fn push_arguments(arguments: &mut String, value: &Value) {
    match value {
        Value::String(fragment) => arguments.push_str(fragment),
        Value::Null => {}
        other => *arguments = other.to_string(),
    }
}

/// A tool call as returned: calls without an id get one, calls without arguments get `{}`.
fn finish_call(
    index: usize,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
) -> ToolCall {
    ToolCall {
        id: id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("call_{index}")),
        name: name.unwrap_or_default(),
        arguments: if arguments.trim().is_empty() {
            "{}".into()
        } else {
            arguments
        },
    }
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
        }
    }
}

/// A non-streamed `chat.completion`.
#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<CompletionChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    #[serde(default)]
    message: Option<CompletionMessage>,
}

#[derive(Deserialize, Default)]
struct CompletionMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// One `chat.completion.chunk` of a stream.
#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<StreamChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Option<StreamDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct StreamDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

/// A tool call being assembled from stream fragments.
struct PartialCall {
    index: usize,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// What a stream has said so far.
#[derive(Default)]
struct StreamState {
    content: String,
    calls: Vec<PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
}

impl StreamState {
    /// Takes in one event's data; true once the stream says `[DONE]`. `at_end` marks events
    /// flushed at the end of the body, which may have been cut in the middle.
    fn event(&mut self, call: &Call<'_>, data: &str, at_end: bool) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: StreamChunk = serde_json::from_str(data).map_err(|error| {
            if at_end {
                call.malformed(format!(
                    "the stream ended early, in the middle of an event: {}",
                    excerpt(data)
                ))
            } else {
                call.malformed(format!(
                    "the stream sent invalid JSON ({error}): {}",
                    excerpt(data)
                ))
            }
        })?;
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            return Err(reported_error(call.provider, &error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into_usage());
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(false);
        };
        if let Some(delta) = choice.delta {
            if let Some(piece) = delta.content.filter(|piece| !piece.is_empty()) {
                (call.on_delta)(&piece);
                self.content.push_str(&piece);
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                self.tool_call_fragment(fragment);
            }
        }
        if let Some(reason) = choice.finish_reason.filter(|reason| !reason.is_empty()) {
            self.finish_reason = Some(reason);
        }
        Ok(false)
    }

    /// Adds a fragment to the call with the same `index` (a fragment without an index starts
    /// a new call when it has an id, else continues the last one).
    fn tool_call_fragment(&mut self, fragment: WireToolCall) {
        let index = fragment.index.unwrap_or_else(|| match self.calls.last() {
            Some(last) if fragment.id.is_none() => last.index,
            Some(_) => self.calls.iter().map(|c| c.index).max().unwrap_or(0) + 1,
            None => 0,
        });
        let position = match self.calls.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: None,
                    name: None,
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let Some(call) = self.calls.get_mut(position) else {
            return;
        };
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = Some(id);
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                match &mut call.name {
                    // Some servers stream the name in pieces too.
                    Some(existing) if existing != &name => existing.push_str(&name),
                    Some(_) => {}
                    None => call.name = Some(name),
                }
            }
            if let Some(arguments) = &function.arguments {
                push_arguments(&mut call.arguments, arguments);
            }
        }
    }

    fn finish(mut self) -> ChatResponse {
        self.calls.sort_by_key(|call| call.index);
        ChatResponse {
            content: self.content,
            tool_calls: self
                .calls
                .into_iter()
                .map(|call| finish_call(call.index, call.id, call.name, call.arguments))
                .collect(),
            usage: self.usage,
            sources: Vec::new(),
        }
    }
}

/// An incremental server-sent events parser: feeds on bytes as they arrive, yields the data of
/// each complete event. Lines end in `\n`, `\r\n` or `\r`; comments and fields other than
/// `data` are ignored; several `data` lines of one event are joined with `\n`.
#[derive(Default)]
struct SseParser {
    /// Bytes not yet split into lines.
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no line end.
    scanned: usize,
    /// The data of the event being read.
    data: String,
    has_data: bool,
}

impl SseParser {
    fn push(&mut self, bytes: &[u8], events: &mut Vec<String>) {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.extend_from_slice(bytes);
        let mut start = 0;
        let mut search = self.scanned;
        while let Some(offset) = buffer
            .get(search..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n' || b == b'\r'))
        {
            let end = search + offset;
            let next = if buffer.get(end) == Some(&b'\r') {
                match buffer.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    // The `\n` of a `\r\n` may be in the next chunk.
                    None => break,
                }
            } else {
                end + 1
            };
            self.line(&buffer[start..end], events);
            start = next;
            search = next;
        }
        buffer.drain(..start);
        self.scanned = buffer.len() - usize::from(buffer.last() == Some(&b'\r'));
        self.buffer = buffer;
    }

    /// The end of the body: a last line and event without their terminators still count.
    fn finish(&mut self, events: &mut Vec<String>) {
        let buffer = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        let line = buffer.strip_suffix(b"\r").unwrap_or(&buffer);
        if !line.is_empty() {
            self.line(line, events);
        }
        self.line(b"", events);
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            if self.has_data {
                events.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (line, &[][..]),
        };
        if field != b"data" {
            return;
        }
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(&String::from_utf8_lossy(value));
        self.has_data = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut events);
        }
        parser.finish(&mut events);
        events
    }

    #[test]
    fn sse_events_survive_any_split() {
        let stream = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line one\ndata: line two\n\ndata:[DONE]\n\n";
        let expected = vec![
            "{\"a\":1}".to_string(),
            "line one\nline two".to_string(),
            "[DONE]".to_string(),
        ];
        assert_eq!(parse(&[stream]), expected);
        for split in 0..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(parse(&[a, b]), expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse(&bytes), expected);
    }

    #[test]
    fn sse_handles_lone_cr_and_unterminated_end() {
        assert_eq!(parse(&[b"data: a\r\rdata: b"]), vec!["a", "b"]);
        assert_eq!(parse(&[b"data: a\r", b"\r"]), vec!["a"]);
        assert_eq!(parse(&[b"data: h\xc3", b"\xa9\n\n"]), vec!["hé"]);
    }

    #[test]
    fn request_body_has_the_wire_shape() {
        let request = ChatRequest {
            model: "gpt-x".into(),
            messages: vec![
                ChatMessage::System {
                    content: "be brief".into(),
                },
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "add".into(),
                        arguments: "{\"a\":1}".into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "c1".into(),
                    content: "2".into(),
                },
            ],
            tools: Vec::new(),
            reasoning_effort: None,
            temperature: Some(0.5),
            web_search: false,
            response_schema: None,
        };
        let body = request_body(&request);
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_calls"][0]["type"], "function");
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("tools").is_none());
        assert!(body.get("reasoning_effort").is_none());
    }

    #[test]
    fn error_messages_are_extracted_and_bounded() {
        let status = StatusCode::BAD_REQUEST;
        assert_eq!(
            error_message(status, br#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(error_message(status, br#"{"error":"nope"}"#), "nope");
        assert_eq!(error_message(status, b"  plain text \n"), "plain text");
        assert_eq!(error_message(status, b""), "Bad Request");
        let long = "x".repeat(5000);
        assert_eq!(
            error_message(status, long.as_bytes()).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn retry_after_accepts_integers_and_fractions() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, "0.25".parse().expect("header"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(250))
        );
        headers.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"),
        );
        assert_eq!(parse_retry_after(&headers), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let client = OpenAiClient::new(
            reqwest::Client::new(),
            ProviderSettings {
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_millis(300),
                ..ProviderSettings::default()
            },
        );
        let first = client.backoff(1);
        assert!(first >= Duration::from_millis(75) && first <= Duration::from_millis(125));
        let second = client.backoff(2);
        assert!(second >= Duration::from_millis(150) && second <= Duration::from_millis(250));
        assert_eq!(client.backoff(40), Duration::from_millis(300));
    }
}
