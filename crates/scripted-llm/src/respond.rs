//! Routing: the reply picked for a request, sent in the request's wire format
//! ([`crate::openai`], [`crate::anthropic`]; what they share is [`crate::wire`]'s).

use std::io;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use crate::http::{self, Request};
use crate::wire::{Ctx, ResolvedCall, Search, Wire, json_headers, word_count};
use crate::{After, CREATED, DEFAULT_MODEL, RecordedRequest, Reply, Shared, anthropic, openai};

/// An OpenAI-style error body.
pub(crate) fn error_body(message: &str, kind: &str) -> Vec<u8> {
    json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
        .to_string()
        .into_bytes()
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
