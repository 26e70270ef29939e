//! The HTTP client of streamable HTTP servers, retrying as the LLM providers do: an answer of
//! 429 or 5xx is tried again after the server's `Retry-After` (else a doubling wait), a few
//! times. A tool call is the exception: it may have changed something before a 500 or 502, so
//! it is sent again only after 429 and 503, the statuses that say the request was not served.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// Attempts of one POST at most (the first and two retries).
pub(crate) const MAX_ATTEMPTS: u32 = 3;
/// The first wait when the server names none; each retry doubles it.
const FIRST_WAIT: Duration = Duration::from_millis(500);
/// The longest wait, whatever `Retry-After` asks: a call's own timeout still bounds it all.
const LONGEST_WAIT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub(crate) struct RetryingClient {
    inner: reqwest::Client,
    /// Where the last error status is told, for the message when the connection then closes
    /// (a stdio server's stderr tail has the same use).
    last_words: Arc<Mutex<VecDeque<String>>>,
}

impl RetryingClient {
    pub(crate) fn new(
        inner: reqwest::Client,
        last_words: Arc<Mutex<VecDeque<String>>>,
    ) -> RetryingClient {
        RetryingClient { inner, last_words }
    }

    fn tell(&self, message: &ClientJsonRpcMessage, error: &HttpStatusError, attempts: u32) {
        let method = serde_json::to_value(message)
            .ok()
            .and_then(|value| value["method"].as_str().map(str::to_string))
            .unwrap_or_else(|| "a message".to_string());
        let tries = if attempts > 1 {
            format!(" ({attempts} tries)")
        } else {
            String::new()
        };
        let mut kept = self
            .last_words
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.clear();
        kept.push_back(format!(
            "it answered `{method}` with HTTP {}{tries}",
            error.status
        ));
    }
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// How long to wait before sending `message` again after `status`, or `None` when it must not
/// be sent again.
fn retry_wait(
    message: &ClientJsonRpcMessage,
    error: &HttpStatusError,
    retry: u32,
) -> Option<Duration> {
    let status = error.status;
    let calls_a_tool = serde_json::to_value(message)
        .ok()
        .is_some_and(|value| value["method"] == "tools/call");
    let served = !matches!(status, 429 | 503);
    if !(status == 429 || (500..=599).contains(&status)) || (calls_a_tool && served) {
        return None;
    }
    let asked = error
        .retry_after
        .as_deref()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok());
    let doubled = FIRST_WAIT.saturating_mul(1 << retry.saturating_sub(1).min(8));
    Some(asked.unwrap_or(doubled).min(LONGEST_WAIT))
}

impl RetryingClient {
    async fn post_with_retries<F, Fut>(&self, message: ClientJsonRpcMessage, send: F) -> PostResult
    where
        F: Fn(ClientJsonRpcMessage) -> Fut,
        Fut: Future<Output = PostResult>,
    {
        let mut attempt = 1;
        loop {
            let result = send(message.clone()).await;
            let Err(StreamableHttpError::HttpStatus(error)) = &result else {
                return result;
            };
            let wait = retry_wait(&message, error, attempt).filter(|_| attempt < MAX_ATTEMPTS);
            let Some(wait) = wait else {
                self.tell(&message, error, attempt);
                return result;
            };
            tracing::debug!(
                status = error.status,
                attempt,
                ?wait,
                "MCP server busy, retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

impl StreamableHttpClient for RetryingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        self.post_with_retries(message, |message| {
            self.inner.post_message(
                uri.clone(),
                message,
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        self.post_with_retries(message, |message| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message,
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        self.post_with_retries(message, |message| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message,
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(method: &str) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"name": "work", "arguments": {}}
        }))
        .expect("a request")
    }

    #[test]
    fn busy_answers_are_retried_and_a_tool_call_only_when_it_was_not_served() {
        let status =
            |code: u16, after: Option<&str>| HttpStatusError::new(code, after.map(str::to_string));
        let list = message("tools/list");
        let call = message("tools/call");
        assert_eq!(
            retry_wait(&list, &status(503, Some("2")), 1),
            Some(Duration::from_secs(2))
        );
        assert_eq!(retry_wait(&list, &status(500, None), 1), Some(FIRST_WAIT));
        assert_eq!(
            retry_wait(&list, &status(502, None), 2),
            Some(FIRST_WAIT * 2)
        );
        assert_eq!(
            retry_wait(&list, &status(429, Some("3600")), 1),
            Some(LONGEST_WAIT)
        );
        assert_eq!(retry_wait(&list, &status(404, None), 1), None);
        assert_eq!(
            retry_wait(&call, &status(429, Some("0")), 1),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_wait(&call, &status(503, None), 1), Some(FIRST_WAIT));
        assert_eq!(
            retry_wait(&call, &status(500, None), 1),
            None,
            "it may have run"
        );
        assert_eq!(
            retry_wait(&call, &status(502, None), 1),
            None,
            "it may have run"
        );
    }
}
