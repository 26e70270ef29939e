//! Routing, and what every wire format shares: the reply picked for a request, the facts of
//! one response, and how text is cut into streamed pieces. The formats themselves are in
//! [`crate::openai`] and [`crate::anthropic`].

use std::io;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use crate::http::{self, Request};
use crate::{
    After, CREATED, DEFAULT_MODEL, RecordedRequest, Reply, SearchResult, Shared, ToolCall,
    anthropic, openai,
};

pub(crate) fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

pub(crate) fn sse_headers() -> Vec<(String, String)> {
    vec![
        ("content-type".to_string(), "text/event-stream".to_string()),
        ("cache-control".to_string(), "no-cache".to_string()),
    ]
}

/// An OpenAI-style error body.
pub(crate) fn error_body(message: &str, kind: &str) -> Vec<u8> {
    json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
        .to_string()
        .into_bytes()
}

/// The wire format of a request, decided by its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// `POST …/chat/completions`.
    OpenAi,
    /// `POST …/messages`.
    Anthropic,
}

impl Wire {
    /// An error body in this format's shape. `kind` is an OpenAI error type.
    fn error_body(self, message: &str, kind: &str) -> Vec<u8> {
        match self {
            Wire::OpenAi => error_body(message, kind),
            Wire::Anthropic => anthropic::error_body(message, kind),
        }
    }
}

/// Records and answers one request.
pub(crate) async fn handle<W: AsyncWrite + Unpin>(
    shared: &Shared,
    req: Request,
    io: &mut W,
) -> io::Result<After> {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let recorded = RecordedRequest {
        method: req.method,
        path: req.path,
        headers: req.headers,
        body,
    };
    crate::lock(&shared.requests).push(recorded.clone());

    let route = recorded.path.split('?').next().unwrap_or("");
    let close = !req.keep_alive;
    let wire = match (recorded.method.as_str(), route) {
        ("POST", r) if r.ends_with("/chat/completions") => Wire::OpenAi,
        ("POST", r) if r.ends_with("/messages") => Wire::Anthropic,
        ("GET", "/v1/models" | "/models") => {
            let body = json!({
                "object": "list",
                "data": [{ "id": DEFAULT_MODEL, "object": "model", "created": CREATED, "owned_by": "scripted-llm" }],
            });
            http::write_response(io, 200, &json_headers(), body.to_string().as_bytes(), close)
                .await?;
            return Ok(After::KeepOpen);
        }
        (method, _) => {
            let message = format!("scripted-llm: no route for {method} {}", recorded.path);
            let body = error_body(&message, "invalid_request_error");
            http::write_response(io, 404, &json_headers(), &body, close).await?;
            return Ok(After::KeepOpen);
        }
    };

    let Some(reply) = shared.pick(&recorded.body) else {
        let message = format!(
            "scripted-llm: no rule matches this request and there is no fallback (last user/tool message: {:?})",
            recorded.last_user_text().unwrap_or_default()
        );
        let body = wire.error_body(&message, "server_error");
        http::write_response(io, 500, &json_headers(), &body, close).await?;
        return Ok(After::KeepOpen);
    };

    let mut ctx = Ctx {
        wire,
        id: shared.response_id(wire),
        model: recorded.model().unwrap_or(DEFAULT_MODEL).to_string(),
        prompt_tokens: crate::conversation(&recorded.body)
            .iter()
            .map(|(_, text)| word_count(text))
            .sum(),
        stream: recorded.is_stream(),
        include_usage: recorded
            .body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
        close,
        chunk_gap_ms: 0,
    };

    match reply {
        Reply::Text {
            content,
            delay_ms,
            echo,
            chunk_gap_ms,
        } => {
            sleep_ms(delay_ms).await;
            ctx.chunk_gap_ms = chunk_gap_ms;
            let content = if echo {
                format!("{content}{}", recorded.last_user_text().unwrap_or_default())
            } else {
                content
            };
            send_text(&ctx, &content, io).await?;
        }
        Reply::Slow { delay_ms, content } => {
            sleep_ms(delay_ms).await;
            send_text(&ctx, &content, io).await?;
        }
        Reply::ToolCalls { calls, delay_ms } => {
            sleep_ms(delay_ms).await;
            let calls: Vec<ResolvedCall> = calls
                .into_iter()
                .map(|c| ResolvedCall::new(shared, wire, c))
                .collect();
            match wire {
                Wire::OpenAi => openai::send_tool_calls(&ctx, &calls, io).await?,
                Wire::Anthropic => anthropic::send_tool_calls(&ctx, &calls, io).await?,
            }
        }
        Reply::WebSearch { content, sources } => match wire {
            Wire::OpenAi => openai::send_web_search(&ctx, &content, &sources, io).await?,
            Wire::Anthropic => {
                let search = Search {
                    id: shared.server_tool_id(),
                    query: recorded.last_user_text().unwrap_or_default(),
                    sources: &sources,
                };
                anthropic::send_web_search(&ctx, &content, &search, io).await?;
            }
        },
        Reply::Status {
            status,
            body,
            headers,
        } => {
            let (default_type, bytes) = match body {
                Value::String(text) => ("text/plain; charset=utf-8", text.into_bytes()),
                other => ("application/json", other.to_string().into_bytes()),
            };
            let mut all = Vec::with_capacity(headers.len() + 1);
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                all.push(("content-type".to_string(), default_type.to_string()));
            }
            all.extend(
                headers
                    .into_iter()
                    .filter(|(n, _)| !n.eq_ignore_ascii_case("content-length")),
            );
            http::write_response(io, status, &all, &bytes, close).await?;
        }
        Reply::Garbage { body } => {
            http::write_response(io, 200, &json_headers(), body.as_bytes(), close).await?;
        }
        Reply::CutStream {
            content,
            after_chunks,
        } => {
            match wire {
                Wire::OpenAi => openai::cut_stream(&ctx, &content, after_chunks, io).await?,
                Wire::Anthropic => anthropic::cut_stream(&ctx, &content, after_chunks, io).await?,
            }
            return Ok(After::Close);
        }
    }
    Ok(After::KeepOpen)
}

async fn send_text<W: AsyncWrite + Unpin>(ctx: &Ctx, content: &str, io: &mut W) -> io::Result<()> {
    match ctx.wire {
        Wire::OpenAi => openai::send_text(ctx, content, io).await,
        Wire::Anthropic => anthropic::send_text(ctx, content, io).await,
    }
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Per-response facts shared by the wire formats.
pub(crate) struct Ctx {
    pub wire: Wire,
    pub id: String,
    pub model: String,
    pub prompt_tokens: usize,
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage`.
    pub include_usage: bool,
    pub close: bool,
    /// Pause before each streamed chunk (see [`Reply::Text`]).
    pub chunk_gap_ms: u64,
}

/// A tool call with its id decided and its arguments serialized.
pub(crate) struct ResolvedCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    pub arguments: String,
}

impl ResolvedCall {
    fn new(shared: &Shared, wire: Wire, call: ToolCall) -> Self {
        Self {
            id: call.id.unwrap_or_else(|| shared.call_id(wire)),
            name: call.name,
            arguments: call.arguments.to_string(),
            input: call.arguments,
        }
    }
}

/// A rough token count for the arguments of tool calls.
pub(crate) fn call_tokens(calls: &[ResolvedCall]) -> usize {
    calls
        .iter()
        .map(|c| 1 + word_count(&c.arguments.replace([',', ':'], " ")))
        .sum()
}

/// A web search the server pretends to have made (Anthropic shows it as blocks).
pub(crate) struct Search<'a> {
    pub id: String,
    pub query: String,
    pub sources: &'a [SearchResult],
}

/// A rough, deterministic token count: whitespace-separated words.
pub(crate) fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Splits text word by word, each piece keeping the whitespace that follows it (leading
/// whitespace stays with the first word). Concatenating the pieces gives back `text`.
pub(crate) fn split_words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut seen_word = false;
    let mut after_word_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            after_word_space |= seen_word;
        } else {
            if after_word_space {
                pieces.push(&text[start..i]);
                start = i;
                after_word_space = false;
            }
            seen_word = true;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Splits text into pieces of at most `max` characters.
pub(crate) fn split_chars(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (count, (i, _)) in text.char_indices().enumerate() {
        if count > 0 && count % max == 0 {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Longest fragment of tool-call arguments per streamed chunk, in characters.
pub(crate) const ARGUMENT_FRAGMENT: usize = 16;

#[cfg(test)]
mod tests {
    use super::{split_chars, split_words};

    #[test]
    fn split_words_keeps_spaces() {
        assert_eq!(
            split_words("  Hello big  world\n"),
            vec!["  Hello ", "big  ", "world\n"]
        );
        assert_eq!(split_words("one"), vec!["one"]);
        assert!(split_words("").is_empty());
        assert_eq!(split_words("   "), vec!["   "]);
    }

    #[test]
    fn split_chars_respects_boundaries() {
        assert_eq!(split_chars("abcdefg", 3), vec!["abc", "def", "g"]);
        assert_eq!(split_chars("ééé", 2), vec!["éé", "é"]);
        assert!(split_chars("", 4).is_empty());
    }
}
