//! What every provider client shares: one model call over HTTP with retries and backoff,
//! timeouts, cancellation and a size bound, and the server-sent events parser.
//!
//! A wire format ([`WireFormat`]) only says how to read a plain JSON answer and how to follow
//! a stream of events; [`Exchange::run`] does the rest. 429 and 5xx answers and connection
//! failures are retried with exponential backoff; every network wait is raced against the
//! cancellation token.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{ChatResponse, ProviderError, ProviderSettings};

/// Largest answer accepted (streamed or not).
pub(super) const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// How much of an error body is read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Longest excerpt of a malformed answer quoted in an error, in characters.
const EXCERPT_CHARS: usize = 200;
/// Longest provider error message kept, in characters.
const MAX_MESSAGE_CHARS: usize = 500;

/// How one provider's answers are read.
pub(super) trait WireFormat {
    type Stream: StreamDecoder;

    /// A decoder for a new streamed answer.
    fn stream(&self) -> Self::Stream;

    /// A complete non-streamed answer (the server ignored `stream: true`).
    fn parse_json(&self, body: &[u8]) -> Result<ChatResponse, ProviderError>;
}

/// Follows one streamed answer, event by event.
pub(super) trait StreamDecoder {
    /// Takes in one event; true once the stream says it is over. `at_end` marks events
    /// flushed at the end of the body, which may have been cut in the middle.
    fn event(&mut self, event: &SseEvent, at_end: bool) -> Result<bool, Failure>;

    /// Whether the answer is complete if the body ends (or breaks) now.
    fn is_finished(&self) -> bool;

    fn finish(self) -> ChatResponse;
}

/// Why an attempt failed and whether another attempt may help.
pub(super) struct Failure {
    pub error: ProviderError,
    pub retryable: bool,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn fatal(error: ProviderError) -> Failure {
        Failure::retry_if(error, false)
    }

    pub fn retry_if(error: ProviderError, retryable: bool) -> Failure {
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

/// One model call: a JSON body POSTed to `url`, retried as the settings allow.
pub(super) struct Exchange<'a> {
    pub http: &'a reqwest::Client,
    /// A turn is held from sending an attempt until its answer is read (not while backing off).
    pub requests: &'a Semaphore,
    pub settings: &'a ProviderSettings,
    /// Names the provider in errors.
    pub provider: &'static str,
    /// The base URL, named in connection errors.
    pub base_url: &'a str,
    pub url: String,
    /// Extra headers (keys among them should be marked sensitive).
    pub headers: HeaderMap,
    pub body: Value,
    pub cancel: &'a CancellationToken,
}

impl Exchange<'_> {
    /// Sends the request until an attempt succeeds, fails for good, or the attempts run out.
    pub async fn run<F: WireFormat>(&self, format: &F) -> Result<ChatResponse, ProviderError> {
        let attempts = self.settings.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            if self.cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            let failure = match self.attempt(format).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if !failure.retryable || attempt >= attempts {
                return Err(failure.error);
            }
            let delay = failure
                .retry_after
                .unwrap_or_else(|| self.settings.backoff().delay(attempt))
                .min(self.settings.max_backoff);
            tracing::debug!(
                provider = self.provider,
                attempt,
                reason = %failure_reason(&failure.error),
                ?delay,
                "model call failed, retrying"
            );
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ProviderError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    async fn attempt<F: WireFormat>(&self, format: &F) -> Result<ChatResponse, Failure> {
        let _turn = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(ProviderError::Cancelled.into()),
            // The semaphore is never closed, so a turn always comes.
            turn = self.requests.acquire() => turn.ok(),
        };
        let builder = self
            .http
            .post(&self.url)
            .header(ACCEPT, "text/event-stream, application/json")
            .headers(self.headers.clone())
            .json(&self.body);
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
        if !response.status().is_success() {
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
            let body = self.read_all(reader).await?;
            Ok(format.parse_json(&body)?)
        } else {
            self.read_stream(reader, format.stream()).await
        }
    }

    /// The error for a request that got no answer.
    fn transport_error(&self, error: &reqwest::Error) -> ProviderError {
        if error.is_timeout() {
            let limit = if error.is_connect() {
                self.settings.connect_timeout
            } else {
                self.settings.read_timeout
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
            retryable: is_retryable_status(status.as_u16()),
            retry_after,
        }
    }

    /// A whole non-streamed body.
    async fn read_all(&self, mut reader: BodyReader<'_>) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            match reader.next().await {
                Ok(Some(bytes)) => body.extend_from_slice(bytes.as_ref()),
                Ok(None) => return Ok(body),
                Err(error) => return Err(self.read_failure(error, reader.received, None)),
            }
        }
    }

    /// A server-sent event stream, fed to `decoder`.
    async fn read_stream<D: StreamDecoder>(
        &self,
        mut reader: BodyReader<'_>,
        mut decoder: D,
    ) -> Result<ChatResponse, Failure> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        loop {
            match reader.next().await {
                Ok(Some(bytes)) => {
                    parser.push(bytes.as_ref(), &mut events);
                    for event in events.drain(..) {
                        if decoder.event(&event, false)? {
                            return Ok(decoder.finish());
                        }
                    }
                }
                Ok(None) => {
                    parser.finish(&mut events);
                    for event in events.drain(..) {
                        if decoder.event(&event, true)? {
                            return Ok(decoder.finish());
                        }
                    }
                    if decoder.is_finished() {
                        return Ok(decoder.finish());
                    }
                    return Err(malformed(
                        self.provider,
                        "the stream ended early (it never said it was done); \
                         the connection was probably cut",
                    )
                    .into());
                }
                // The answer is complete but for its last bookkeeping events: keep it.
                Err(ReadError::Broken(_) | ReadError::TimedOut) if decoder.is_finished() => {
                    tracing::debug!(provider = self.provider, "stream broke after its end");
                    return Ok(decoder.finish());
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
            ReadError::TooLarge => Failure::fatal(malformed(
                self.provider,
                format!(
                    "the answer is larger than {} MiB",
                    MAX_RESPONSE_BYTES / (1024 * 1024)
                ),
            )),
            ReadError::TimedOut => Failure::retry_if(
                ProviderError::Timeout {
                    provider: self.provider,
                    seconds: self.settings.read_timeout.as_secs(),
                },
                nothing_yet,
            ),
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
                Failure::fatal(malformed(self.provider, format!("{cut} ({message})")))
            }
        }
    }
}

/// A header value holding a key: marked sensitive so it never shows in debug output.
pub(super) fn secret_header(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Whether an HTTP status is worth another attempt: 429 and 5xx (Anthropic's 529 included).
pub(super) fn is_retryable_status(status: u16) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS.as_u16() || (500..=599).contains(&status)
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

pub(super) fn malformed(provider: &'static str, message: impl Into<String>) -> ProviderError {
    ProviderError::Malformed {
        provider,
        message: message.into(),
    }
}

/// The error for an event or body that is not the JSON it should be.
pub(super) fn invalid_json(
    provider: &'static str,
    data: &str,
    error: &serde_json::Error,
    at_end: bool,
) -> ProviderError {
    if at_end {
        malformed(
            provider,
            format!(
                "the stream ended early, in the middle of an event: {}",
                excerpt(data)
            ),
        )
    } else {
        malformed(
            provider,
            format!("the stream sent invalid JSON ({error}): {}", excerpt(data)),
        )
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

/// The `Retry-After` header: seconds (integer or fractional) or an HTTP date (how long until
/// then; a date in the past means at once).
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    retry_after_from(text, chrono::Utc::now())
}

fn retry_after_from(text: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = chrono::DateTime::parse_from_rfc2822(text).ok()?;
    Some(
        (date.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// The message of an error answer: `error.message` of a JSON body, else the body's text.
pub(crate) fn error_message(status: StatusCode, body: &[u8]) -> String {
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

/// The message of a JSON error body in the shapes servers use: `{"error": {"message"}}`
/// (OpenAI, and Anthropic's `{"type": "error", "error": {…}}`), `{"error": "…"}`,
/// `{"message": "…"}` or `{"detail": "…"}`.
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

/// An error object found inside a successful answer (a stream's error event, or an error
/// member of a 200 body). `status` is the HTTP status it stands for, when known; otherwise a
/// `code` or `status` member in 400–599 gives one, and without any the error is reported as a
/// malformed answer.
pub(super) fn reported_error(
    provider: &'static str,
    error: &Value,
    status: Option<u16>,
) -> ProviderError {
    let message = match error {
        Value::String(message) => message.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| other.to_string(), str::to_string),
    };
    let message = truncate(message.trim(), MAX_MESSAGE_CHARS);
    let status = status.or_else(|| {
        ["code", "status"]
            .iter()
            .filter_map(|field| error.get(*field).and_then(Value::as_u64))
            .find(|code| (400..=599).contains(code))
            .and_then(|code| u16::try_from(code).ok())
    });
    match status {
        Some(status) => ProviderError::Http {
            provider,
            status,
            message,
        },
        None => malformed(
            provider,
            format!("the provider reported an error: {message}"),
        ),
    }
}

/// At most `max` characters of `text`, with `…` when shortened.
pub(super) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A short excerpt of a malformed answer for an error message.
pub(super) fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        "(empty)".into()
    } else {
        truncate(text, EXCERPT_CHARS)
    }
}

/// One server-sent event: its `event` name (empty when none was given) and its data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct SseEvent {
    pub name: String,
    pub data: String,
}

/// An incremental server-sent events parser: feeds on bytes as they arrive, yields each
/// complete event. Lines end in `\n`, `\r\n` or `\r`; comments and fields other than `event`
/// and `data` are ignored; several `data` lines of one event are joined with `\n`; an event
/// without data is not dispatched.
#[derive(Default)]
struct SseParser {
    /// Bytes not yet split into lines.
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no line end.
    scanned: usize,
    /// The event being read.
    event: SseEvent,
    has_data: bool,
}

impl SseParser {
    fn push(&mut self, bytes: &[u8], events: &mut Vec<SseEvent>) {
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
    fn finish(&mut self, events: &mut Vec<SseEvent>) {
        let buffer = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        let line = buffer.strip_suffix(b"\r").unwrap_or(&buffer);
        if !line.is_empty() {
            self.line(line, events);
        }
        self.line(b"", events);
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if std::mem::take(&mut self.has_data) {
                events.push(event);
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
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.event.name = String::from_utf8_lossy(value).into_owned(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .expect("a date")
            .with_timezone(&chrono::Utc);
        let after = |text| retry_after_from(text, now);
        assert_eq!(after("7"), Some(Duration::from_secs(7)));
        assert_eq!(after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            after("Wed, 21 Oct 2015 07:28:30 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(after("Wed, 21 Oct 2015 07:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(after("-3"), None);
        assert_eq!(after("soon"), None);
    }

    fn parse(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut events);
        }
        parser.finish(&mut events);
        events
    }

    fn data(events: Vec<SseEvent>) -> Vec<String> {
        events.into_iter().map(|event| event.data).collect()
    }

    #[test]
    fn sse_events_survive_any_split() {
        let stream = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line one\ndata: line two\n\nevent: lonely\n\ndata:[DONE]\n\n";
        let expected = vec![
            SseEvent {
                name: String::new(),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                name: "x".into(),
                data: "line one\nline two".into(),
            },
            SseEvent {
                name: String::new(),
                data: "[DONE]".into(),
            },
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
        assert_eq!(data(parse(&[b"data: a\r\rdata: b"])), vec!["a", "b"]);
        assert_eq!(data(parse(&[b"data: a\r", b"\r"])), vec!["a"]);
        assert_eq!(data(parse(&[b"data: h\xc3", b"\xa9\n\n"])), vec!["hé"]);
    }

    #[test]
    fn error_messages_are_extracted_and_bounded() {
        let status = StatusCode::BAD_REQUEST;
        assert_eq!(
            error_message(status, br#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(
            error_message(
                status,
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#
            ),
            "bad"
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
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::ZERO),
            "a past date"
        );
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let settings = ProviderSettings {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
            ..ProviderSettings::default()
        };
        let first = settings.backoff().delay(1);
        assert!(first >= Duration::from_millis(75) && first <= Duration::from_millis(125));
        let second = settings.backoff().delay(2);
        assert!(second >= Duration::from_millis(150) && second <= Duration::from_millis(250));
        assert_eq!(settings.backoff().delay(40), Duration::from_millis(300));
        assert!(is_retryable_status(529) && is_retryable_status(429));
        assert!(!is_retryable_status(400));
    }
}
