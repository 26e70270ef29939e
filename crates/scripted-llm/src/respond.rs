//! Routing and the OpenAI Chat Completions wire format of each [`Reply`].

use std::io;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::http::{self, ChunkedBody, Request};
use crate::{After, CREATED, DEFAULT_MODEL, RecordedRequest, Reply, Shared, ToolCall};

/// Longest fragment of tool-call arguments per streamed chunk, in characters.
const ARGUMENT_FRAGMENT: usize = 16;

pub(crate) fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

fn sse_headers() -> Vec<(String, String)> {
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
    match (recorded.method.as_str(), route) {
        ("POST", r) if r.ends_with("/chat/completions") => {}
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
    }

    let Some(reply) = shared.pick(&recorded.body) else {
        let message = format!(
            "scripted-llm: no rule matches this request and there is no fallback (last user/tool message: {:?})",
            recorded.last_user_text().unwrap_or_default()
        );
        let body = error_body(&message, "server_error");
        http::write_response(io, 500, &json_headers(), &body, close).await?;
        return Ok(After::KeepOpen);
    };

    let ctx = Ctx {
        id: shared.completion_id(),
        model: recorded.model().unwrap_or(DEFAULT_MODEL).to_string(),
        prompt_tokens: recorded
            .messages()
            .iter()
            .map(|m| word_count(&crate::content_text(m)))
            .sum(),
        stream: recorded.is_stream(),
        include_usage: recorded
            .body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
        close,
    };

    match reply {
        Reply::Text {
            content,
            delay_ms,
            echo,
        } => {
            sleep_ms(delay_ms).await;
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
                .map(|c| ResolvedCall::new(shared, c))
                .collect();
            send_tool_calls(&ctx, &calls, io).await?;
        }
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
            cut_stream(&ctx, &content, after_chunks, io).await?;
            return Ok(After::Close);
        }
    }
    Ok(After::KeepOpen)
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Per-response facts shared by the wire formats.
struct Ctx {
    id: String,
    model: String,
    prompt_tokens: usize,
    stream: bool,
    include_usage: bool,
    close: bool,
}

impl Ctx {
    fn usage(&self, completion_tokens: usize) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        })
    }

    fn completion(&self, message: Value, finish_reason: &str, completion_tokens: usize) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": CREATED,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
            "usage": self.usage(completion_tokens),
        })
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        })
    }

    fn usage_chunk(&self, completion_tokens: usize) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "choices": [],
            "usage": self.usage(completion_tokens),
        })
    }
}

/// A rough, deterministic token count: whitespace-separated words.
fn word_count(text: &str) -> usize {
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
fn split_chars(text: &str, max: usize) -> Vec<&str> {
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

fn sse_event(value: &Value) -> Vec<u8> {
    format!("data: {value}\n\n").into_bytes()
}

const SSE_DONE: &[u8] = b"data: [DONE]\n\n";

/// The content deltas of a streamed text: the first carries the role; empty text still yields
/// one (empty) delta.
fn text_deltas(content: &str) -> Vec<Value> {
    let pieces = split_words(content);
    if pieces.is_empty() {
        return vec![json!({ "role": "assistant", "content": "" })];
    }
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            if i == 0 {
                json!({ "role": "assistant", "content": piece })
            } else {
                json!({ "content": piece })
            }
        })
        .collect()
}

async fn send_text<W: AsyncWrite + Unpin>(ctx: &Ctx, content: &str, io: &mut W) -> io::Result<()> {
    let completion_tokens = word_count(content);
    if !ctx.stream {
        let body = ctx.completion(
            json!({ "role": "assistant", "content": content, "refusal": null }),
            "stop",
            completion_tokens,
        );
        return http::write_response(
            io,
            200,
            &json_headers(),
            body.to_string().as_bytes(),
            ctx.close,
        )
        .await;
    }
    let mut out = ChunkedBody::start(io, 200, &sse_headers(), ctx.close).await?;
    for delta in text_deltas(content) {
        out.chunk(&sse_event(&ctx.chunk(delta, None))).await?;
    }
    out.chunk(&sse_event(&ctx.chunk(json!({}), Some("stop"))))
        .await?;
    if ctx.include_usage {
        out.chunk(&sse_event(&ctx.usage_chunk(completion_tokens)))
            .await?;
    }
    out.chunk(SSE_DONE).await?;
    out.finish().await
}

/// A tool call with its id decided and its arguments serialized.
struct ResolvedCall {
    id: String,
    name: String,
    arguments: String,
}

impl ResolvedCall {
    fn new(shared: &Shared, call: ToolCall) -> Self {
        Self {
            id: call.id.unwrap_or_else(|| shared.call_id()),
            name: call.name,
            arguments: call.arguments.to_string(),
        }
    }
}

async fn send_tool_calls<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    calls: &[ResolvedCall],
    io: &mut W,
) -> io::Result<()> {
    let completion_tokens: usize = calls
        .iter()
        .map(|c| 1 + word_count(&c.arguments.replace([',', ':'], " ")))
        .sum();
    if !ctx.stream {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })
            })
            .collect();
        let body = ctx.completion(
            json!({ "role": "assistant", "content": null, "refusal": null, "tool_calls": tool_calls }),
            "tool_calls",
            completion_tokens,
        );
        return http::write_response(
            io,
            200,
            &json_headers(),
            body.to_string().as_bytes(),
            ctx.close,
        )
        .await;
    }
    let mut out = ChunkedBody::start(io, 200, &sse_headers(), ctx.close).await?;
    for (index, call) in calls.iter().enumerate() {
        let opening = json!([{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]);
        let delta = if index == 0 {
            json!({ "role": "assistant", "content": null, "tool_calls": opening })
        } else {
            json!({ "tool_calls": opening })
        };
        out.chunk(&sse_event(&ctx.chunk(delta, None))).await?;
        for fragment in split_chars(&call.arguments, ARGUMENT_FRAGMENT) {
            let delta = json!({
                "tool_calls": [{ "index": index, "function": { "arguments": fragment } }],
            });
            out.chunk(&sse_event(&ctx.chunk(delta, None))).await?;
        }
    }
    out.chunk(&sse_event(&ctx.chunk(json!({}), Some("tool_calls"))))
        .await?;
    if ctx.include_usage {
        out.chunk(&sse_event(&ctx.usage_chunk(completion_tokens)))
            .await?;
    }
    out.chunk(SSE_DONE).await?;
    out.finish().await
}

/// Sends part of an answer, then closes the connection mid-response.
async fn cut_stream<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    after_chunks: usize,
    io: &mut W,
) -> io::Result<()> {
    if ctx.stream {
        let mut out = ChunkedBody::start(io, 200, &sse_headers(), false).await?;
        for delta in text_deltas(content).into_iter().take(after_chunks) {
            out.chunk(&sse_event(&ctx.chunk(delta, None))).await?;
        }
    } else {
        let body = ctx
            .completion(
                json!({ "role": "assistant", "content": content, "refusal": null }),
                "stop",
                word_count(content),
            )
            .to_string()
            .into_bytes();
        http::write_head_with_length(io, 200, &json_headers(), body.len()).await?;
        io.write_all(&body[..body.len() / 2]).await?;
        io.flush().await?;
    }
    // The caller shuts the socket down without completing the response.
    Ok(())
}

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
