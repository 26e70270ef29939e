//! The OpenAI Chat Completions wire format of each [`crate::Reply`]: a `chat.completion`, or
//! with `"stream": true` server-sent `chat.completion.chunk`s ending in `data: [DONE]`.

use std::io;

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use crate::http::{self, ChunkedBody};
use crate::wire::{
    ARGUMENT_FRAGMENT, Ctx, ResolvedCall, call_tokens, cut_body, json_headers, split_chars,
    split_words, sse_headers, word_count,
};
use crate::{CREATED, SearchResult};

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

    /// Sends a whole `chat.completion`.
    async fn send_completion<W: AsyncWrite + Unpin>(
        &self,
        message: Value,
        finish_reason: &str,
        completion_tokens: usize,
        io: &mut W,
    ) -> io::Result<()> {
        let body = self.completion(message, finish_reason, completion_tokens);
        http::write_response(
            io,
            200,
            &json_headers(),
            body.to_string().as_bytes(),
            self.close,
        )
        .await
    }

    /// Sends a stream of the given deltas, then the finish reason, the usage (when asked
    /// for) and `[DONE]`.
    async fn send_stream<W: AsyncWrite + Unpin>(
        &self,
        deltas: Vec<Value>,
        finish_reason: &str,
        completion_tokens: usize,
        io: &mut W,
    ) -> io::Result<()> {
        let mut out = ChunkedBody::start(io, 200, &sse_headers(), self.close)
            .await?
            .paced(self.chunk_gap_ms);
        for delta in deltas {
            out.chunk(&sse_event(&self.chunk(delta, None))).await?;
        }
        out.chunk(&sse_event(&self.chunk(json!({}), Some(finish_reason))))
            .await?;
        if self.include_usage {
            out.chunk(&sse_event(&self.usage_chunk(completion_tokens)))
                .await?;
        }
        out.chunk(SSE_DONE).await?;
        out.finish().await
    }
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

pub(crate) async fn send_text<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    io: &mut W,
) -> io::Result<()> {
    let completion_tokens = word_count(content);
    if !ctx.stream {
        let message = json!({ "role": "assistant", "content": content, "refusal": null });
        return ctx
            .send_completion(message, "stop", completion_tokens, io)
            .await;
    }
    ctx.send_stream(text_deltas(content), "stop", completion_tokens, io)
        .await
}

/// A text answer citing the pages of a web search: `url_citation` annotations spanning the
/// whole text (streamed: in a delta of their own after the text).
pub(crate) async fn send_web_search<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    sources: &[SearchResult],
    io: &mut W,
) -> io::Result<()> {
    let end = content.chars().count();
    let annotations: Vec<Value> = sources
        .iter()
        .map(|source| {
            json!({
                "type": "url_citation",
                "url_citation": {
                    "url": source.url,
                    "title": source.title,
                    "start_index": 0,
                    "end_index": end,
                },
            })
        })
        .collect();
    let completion_tokens = word_count(content);
    if !ctx.stream {
        let message = json!({
            "role": "assistant",
            "content": content,
            "refusal": null,
            "annotations": annotations,
        });
        return ctx
            .send_completion(message, "stop", completion_tokens, io)
            .await;
    }
    let mut deltas = text_deltas(content);
    deltas.push(json!({ "annotations": annotations }));
    ctx.send_stream(deltas, "stop", completion_tokens, io).await
}

pub(crate) async fn send_tool_calls<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    calls: &[ResolvedCall],
    io: &mut W,
) -> io::Result<()> {
    let completion_tokens = call_tokens(calls);
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
        let message = json!({ "role": "assistant", "content": null, "refusal": null, "tool_calls": tool_calls });
        return ctx
            .send_completion(message, "tool_calls", completion_tokens, io)
            .await;
    }
    let mut deltas = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let opening = json!([{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]);
        deltas.push(if index == 0 {
            json!({ "role": "assistant", "content": null, "tool_calls": opening })
        } else {
            json!({ "tool_calls": opening })
        });
        for fragment in split_chars(&call.arguments, ARGUMENT_FRAGMENT) {
            deltas.push(json!({
                "tool_calls": [{ "index": index, "function": { "arguments": fragment } }],
            }));
        }
    }
    ctx.send_stream(deltas, "tool_calls", completion_tokens, io)
        .await
}

/// Sends part of an answer, then leaves the connection to be closed mid-response.
pub(crate) async fn cut_stream<W: AsyncWrite + Unpin>(
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
        out.cut().await?;
    } else {
        let body = ctx
            .completion(
                json!({ "role": "assistant", "content": content, "refusal": null }),
                "stop",
                word_count(content),
            )
            .to_string()
            .into_bytes();
        cut_body(io, &body).await?;
    }
    // The caller shuts the socket down without completing the response.
    Ok(())
}
