//! The Anthropic Messages wire format of each [`crate::Reply`]: a `message`, or with
//! `"stream": true` server-sent events named by their type (`message_start`, `ping`,
//! `content_block_start`, `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`).

use std::io;

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use crate::http::{self, ChunkedBody};
use crate::wire::{
    ARGUMENT_FRAGMENT, Ctx, ResolvedCall, Search, call_tokens, cut_body, json_headers, split_chars,
    split_words, sse_headers, word_count,
};

/// The opaque stand-in for the encrypted page contents and citation indexes the real API
/// sends.
const ENCRYPTED: &str = "c2NyaXB0ZWQ=";

/// An Anthropic-style error body; `kind` is an OpenAI error type, mapped to Anthropic's.
pub(crate) fn error_body(message: &str, kind: &str) -> Vec<u8> {
    let kind = match kind {
        "invalid_request_error" => "invalid_request_error",
        _ => "api_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": message } })
        .to_string()
        .into_bytes()
}

/// A content block of an answer.
enum Block<'a> {
    Text(&'a str),
    ToolUse(&'a ResolvedCall),
    /// The web search the server "ran".
    ServerSearch(&'a Search<'a>),
    /// Its results.
    SearchResults(&'a Search<'a>),
    /// Text citing every result of the search.
    CitedText(&'a str, &'a Search<'a>),
}

impl Block<'_> {
    /// The block whole, as in a non-streamed message.
    fn whole(&self) -> Value {
        match self {
            Block::Text(text) => json!({ "type": "text", "text": text }),
            Block::ToolUse(call) => {
                json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": call.input })
            }
            Block::ServerSearch(search) => json!({
                "type": "server_tool_use",
                "id": search.id,
                "name": "web_search",
                "input": { "query": search.query },
            }),
            Block::SearchResults(search) => json!({
                "type": "web_search_tool_result",
                "tool_use_id": search.id,
                "content": search_results(search),
            }),
            Block::CitedText(text, search) => json!({
                "type": "text",
                "text": text,
                "citations": citations(text, search),
            }),
        }
    }

    /// The `content_block_start` payload and the deltas that follow it.
    fn streamed(&self) -> (Value, Vec<Value>) {
        let text_deltas = |text: &str| -> Vec<Value> {
            split_words(text)
                .into_iter()
                .map(|piece| json!({ "type": "text_delta", "text": piece }))
                .collect()
        };
        let json_deltas = |json: &str| -> Vec<Value> {
            split_chars(json, ARGUMENT_FRAGMENT)
                .into_iter()
                .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }))
                .collect()
        };
        match self {
            Block::Text(text) => (json!({ "type": "text", "text": "" }), text_deltas(text)),
            Block::ToolUse(call) => (
                json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": {} }),
                json_deltas(&call.arguments),
            ),
            Block::ServerSearch(search) => (
                json!({ "type": "server_tool_use", "id": search.id, "name": "web_search", "input": {} }),
                json_deltas(&json!({ "query": search.query }).to_string()),
            ),
            Block::SearchResults(_) => (self.whole(), Vec::new()),
            Block::CitedText(text, search) => {
                let mut deltas: Vec<Value> = citations(text, search)
                    .into_iter()
                    .map(|citation| json!({ "type": "citations_delta", "citation": citation }))
                    .collect();
                deltas.extend(text_deltas(text));
                (json!({ "type": "text", "text": "" }), deltas)
            }
        }
    }
}

fn search_results(search: &Search<'_>) -> Vec<Value> {
    search
        .sources
        .iter()
        .map(|source| {
            json!({
                "type": "web_search_result",
                "url": source.url,
                "title": source.title,
                "encrypted_content": ENCRYPTED,
                "page_age": null,
            })
        })
        .collect()
}

fn citations(text: &str, search: &Search<'_>) -> Vec<Value> {
    let cited: String = text.chars().take(150).collect();
    search
        .sources
        .iter()
        .map(|source| {
            json!({
                "type": "web_search_result_location",
                "url": source.url,
                "title": source.title,
                "encrypted_index": ENCRYPTED,
                "cited_text": cited,
            })
        })
        .collect()
}

fn sse_event(event: &Value) -> Vec<u8> {
    let name = event["type"].as_str().unwrap_or("message");
    format!("event: {name}\ndata: {event}\n\n").into_bytes()
}

/// What an answer is made of.
struct Answer<'a> {
    blocks: Vec<Block<'a>>,
    stop_reason: &'a str,
    output_tokens: usize,
    /// Searches made, reported in the usage.
    web_searches: usize,
}

impl Ctx {
    fn message(&self, content: Vec<Value>, stop_reason: Option<&str>, usage: Value) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": usage,
        })
    }

    fn final_usage(&self, answer: &Answer<'_>) -> Value {
        let mut usage = json!({
            "input_tokens": self.prompt_tokens,
            "output_tokens": answer.output_tokens,
        });
        if answer.web_searches > 0 {
            usage["server_tool_use"] = json!({ "web_search_requests": answer.web_searches });
        }
        usage
    }

    /// The events of a stream up to the end of its blocks (`message_start`, `ping`, each
    /// block's start, deltas and stop). With `cut_after`, only that many deltas are sent and
    /// the blocks are left open.
    fn block_events(&self, answer: &Answer<'_>, cut_after: Option<usize>) -> Vec<Value> {
        let start_usage = json!({ "input_tokens": self.prompt_tokens, "output_tokens": 1 });
        let mut events = vec![
            json!({ "type": "message_start", "message": self.message(Vec::new(), None, start_usage) }),
            json!({ "type": "ping" }),
        ];
        let mut deltas_left = cut_after.unwrap_or(usize::MAX);
        for (index, block) in answer.blocks.iter().enumerate() {
            let (start, deltas) = block.streamed();
            events.push(
                json!({ "type": "content_block_start", "index": index, "content_block": start }),
            );
            for delta in deltas {
                if deltas_left == 0 {
                    return events;
                }
                deltas_left -= 1;
                events
                    .push(json!({ "type": "content_block_delta", "index": index, "delta": delta }));
            }
            if cut_after.is_some() && deltas_left == 0 {
                return events;
            }
            events.push(json!({ "type": "content_block_stop", "index": index }));
        }
        events
    }

    async fn send_answer<W: AsyncWrite + Unpin>(
        &self,
        answer: Answer<'_>,
        io: &mut W,
    ) -> io::Result<()> {
        if !self.stream {
            let content = answer.blocks.iter().map(Block::whole).collect();
            let body = self.message(content, Some(answer.stop_reason), self.final_usage(&answer));
            return http::write_response(
                io,
                200,
                &json_headers(),
                body.to_string().as_bytes(),
                self.close,
            )
            .await;
        }
        let mut out = ChunkedBody::start(io, 200, &sse_headers(), self.close)
            .await?
            .paced(self.chunk_gap_ms);
        for event in self.block_events(&answer, None) {
            out.chunk(&sse_event(&event)).await?;
        }
        let mut usage = self.final_usage(&answer);
        if let Some(usage) = usage.as_object_mut() {
            // The final delta reports output tokens (and server tool use) only.
            usage.remove("input_tokens");
        }
        let delta = json!({
            "type": "message_delta",
            "delta": { "stop_reason": answer.stop_reason, "stop_sequence": null },
            "usage": usage,
        });
        out.chunk(&sse_event(&delta)).await?;
        out.chunk(&sse_event(&json!({ "type": "message_stop" })))
            .await?;
        out.finish().await
    }
}

pub(crate) async fn send_text<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    io: &mut W,
) -> io::Result<()> {
    ctx.send_answer(text_answer(content), io).await
}

fn text_answer(content: &str) -> Answer<'_> {
    Answer {
        blocks: vec![Block::Text(content)],
        stop_reason: "end_turn",
        output_tokens: word_count(content),
        web_searches: 0,
    }
}

pub(crate) async fn send_tool_calls<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    calls: &[ResolvedCall],
    io: &mut W,
) -> io::Result<()> {
    let answer = Answer {
        blocks: calls.iter().map(Block::ToolUse).collect(),
        stop_reason: "tool_use",
        output_tokens: call_tokens(calls),
        web_searches: 0,
    };
    ctx.send_answer(answer, io).await
}

/// A `server_tool_use` web search, its `web_search_tool_result`, then the text citing it.
pub(crate) async fn send_web_search<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    search: &Search<'_>,
    io: &mut W,
) -> io::Result<()> {
    let answer = Answer {
        blocks: vec![
            Block::ServerSearch(search),
            Block::SearchResults(search),
            Block::CitedText(content, search),
        ],
        stop_reason: "end_turn",
        output_tokens: word_count(content),
        web_searches: 1,
    };
    ctx.send_answer(answer, io).await
}

/// Sends the start of a text answer and its first `after_chunks` text deltas, then leaves the
/// connection to be closed mid-response. Not streamed: half of the announced body.
pub(crate) async fn cut_stream<W: AsyncWrite + Unpin>(
    ctx: &Ctx,
    content: &str,
    after_chunks: usize,
    io: &mut W,
) -> io::Result<()> {
    let answer = text_answer(content);
    if ctx.stream {
        let mut out = ChunkedBody::start(io, 200, &sse_headers(), false).await?;
        for event in ctx.block_events(&answer, Some(after_chunks)) {
            out.chunk(&sse_event(&event)).await?;
        }
        out.cut().await?;
    } else {
        let content = answer.blocks.iter().map(Block::whole).collect();
        let body = ctx.message(content, Some("end_turn"), ctx.final_usage(&answer));
        cut_body(io, body.to_string().as_bytes()).await?;
    }
    // The caller shuts the socket down without completing the response.
    Ok(())
}
