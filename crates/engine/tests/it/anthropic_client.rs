//! The Anthropic Messages client against a real HTTP server on loopback
//! (`weft_scripted_llm`): the request, streaming, tool use, thinking, web search, structured
//! output, retries, malformed answers, configuration and redaction.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ProviderError, ProviderSettings, Secret,
    ToolSpec, WebSource, route_model,
};
use weft_scripted_llm::{Reply, Rule, Script, ScriptedLlm, SearchResult, ToolCall};

const KEY: &str = "sk-ant-test-key";
const MODEL: &str = "anthropic/claude-test";

async fn start(script: Script) -> (ScriptedLlm, LlmClients) {
    let server = ScriptedLlm::start(script).await.expect("server starts");
    let clients = LlmClients::new(ProviderSettings {
        anthropic_base_url: server.root_url(),
        anthropic_api_key: Some(Secret::new(KEY)),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(200),
        read_timeout: Duration::from_secs(10),
        ..ProviderSettings::default()
    });
    (server, clients)
}

/// A system prompt and one user message.
fn ask(user: &str) -> ChatRequest {
    ChatRequest::new(
        "claude-test",
        vec![
            ChatMessage::System {
                content: "You are terse.".into(),
            },
            ChatMessage::User {
                content: user.into(),
            },
        ],
    )
}

/// One call; its result and the streamed pieces.
async fn send(
    clients: &LlmClients,
    request: &ChatRequest,
) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
    let route = route_model(MODEL, clients.settings()).expect("model routes");
    let pieces = Mutex::new(Vec::new());
    let on_delta = |piece: &str| pieces.lock().expect("lock").push(piece.to_string());
    let result = clients
        .complete(&route, request, &on_delta, &CancellationToken::new())
        .await;
    (result, pieces.into_inner().expect("lock"))
}

/// A 200 answer whose body is an event stream sent verbatim.
fn event_stream(events: &[Value]) -> Reply {
    let body: String = events
        .iter()
        .map(|event| {
            let name = event["type"].as_str().expect("event type");
            format!("event: {name}\ndata: {event}\n\n")
        })
        .collect();
    Reply::Status {
        status: 200,
        body: Value::String(body),
        headers: vec![("content-type".into(), "text/event-stream".into())],
    }
}

fn message_start() -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [], "stop_reason": null, "usage": { "input_tokens": 7, "output_tokens": 1 },
        },
    })
}

fn text_start(index: u64) -> Value {
    json!({ "type": "content_block_start", "index": index, "content_block": { "type": "text", "text": "" } })
}

fn text_delta(index: u64, text: &str) -> Value {
    json!({ "type": "content_block_delta", "index": index, "delta": { "type": "text_delta", "text": text } })
}

fn overloaded_event() -> Value {
    json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })
}

fn api_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(
        status,
        json!({ "type": "error", "error": { "type": kind, "message": message } }),
    )
}

fn malformed(result: Result<ChatResponse, ProviderError>) -> String {
    match result {
        Err(ProviderError::Malformed { provider, message }) => {
            assert_eq!(provider, "anthropic");
            message
        }
        other => panic!("expected a malformed answer, got {other:?}"),
    }
}

#[tokio::test]
async fn the_request_has_the_messages_wire_shape() {
    let (server, clients) = start(Script::always(Reply::text("4"))).await;
    let mut request = ask("what is 2+2?");
    request.temperature = Some(0.25);
    request.tools = vec![ToolSpec {
        name: "add".into(),
        description: "Adds two numbers".into(),
        parameters: json!({ "type": "object", "properties": { "a": { "type": "number" } } }),
    }];
    request.messages.extend([
        ChatMessage::Assistant {
            content: "Let me add.".into(),
            tool_calls: vec![
                weft_providers::ToolCall {
                    id: "toolu_9".into(),
                    name: "add".into(),
                    arguments: r#"{"a":2,"b":2}"#.into(),
                },
                weft_providers::ToolCall {
                    id: "toolu_10".into(),
                    name: "add".into(),
                    arguments: "{}".into(),
                },
            ],
        },
        ChatMessage::Tool {
            tool_call_id: "toolu_9".into(),
            content: "4".into(),
            is_error: false,
        },
        ChatMessage::Tool {
            tool_call_id: "toolu_10".into(),
            content: "0".into(),
            is_error: false,
        },
        ChatMessage::User {
            content: "and so?".into(),
        },
    ]);
    let (result, _) = send(&clients, &request).await;
    assert_eq!(result.expect("succeeds").content, "4");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "system": "You are terse.",
            "messages": [
                { "role": "user", "content": "what is 2+2?" },
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Let me add." },
                    { "type": "tool_use", "id": "toolu_9", "name": "add", "input": { "a": 2, "b": 2 } },
                    { "type": "tool_use", "id": "toolu_10", "name": "add", "input": {} },
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_9", "content": "4" },
                    { "type": "tool_result", "tool_use_id": "toolu_10", "content": "0" },
                    { "type": "text", "text": "and so?" },
                ] },
            ],
            "tools": [{
                "name": "add",
                "description": "Adds two numbers",
                "input_schema": { "type": "object", "properties": { "a": { "type": "number" } } },
            }],
            "temperature": 0.25,
            "stream": true,
        })
    );
}

#[tokio::test]
async fn reasoning_effort_sets_a_thinking_budget_below_max_tokens() {
    let (server, clients) = start(Script::always(Reply::text("ok"))).await;
    for (effort, budget) in [("low", 1024), ("medium", 4096), ("high", 16384)] {
        let mut request = ask("think");
        request.reasoning_effort = Some(effort.into());
        request.temperature = Some(0.7);
        send(&clients, &request).await.0.expect("succeeds");
        let body = server.requests().pop().expect("a request").body;
        assert_eq!(
            body["thinking"],
            json!({ "type": "enabled", "budget_tokens": budget }),
            "{effort}"
        );
        assert_eq!(body["max_tokens"], budget + 4096, "{effort}");
        assert!(
            body.get("temperature").is_none(),
            "{effort}: no temperature"
        );
    }
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_with_usage() {
    let text = "The quick brown fox jumps over the lazy dog.";
    let (_server, clients) = start(Script::always(Reply::text(text))).await;
    let (result, pieces) = send(&clients, &ask("hello")).await;
    let response = result.expect("succeeds");
    assert!(pieces.len() > 1, "several pieces: {pieces:?}");
    assert_eq!(pieces.concat(), text);
    assert_eq!(response.content, text);
    assert!(response.tool_calls.is_empty());
    assert!(response.sources.is_empty());
    let usage = response.usage.expect("usage");
    // "You are terse." + "hello" in, nine words out.
    assert_eq!((usage.input_tokens, usage.output_tokens), (4, 9));
}

#[tokio::test]
async fn streamed_tool_use_is_assembled() {
    let arguments = json!({ "query": "weather in Amsterdam tomorrow morning", "days": 2 });
    let (_server, clients) = start(Script::always(Reply::ToolCalls {
        calls: vec![
            ToolCall {
                id: Some("toolu_a".into()),
                name: "search".into(),
                arguments: arguments.clone(),
            },
            ToolCall {
                id: None,
                name: "clock".into(),
                arguments: json!({}),
            },
        ],
        delay_ms: 0,
    }))
    .await;
    let (result, pieces) = send(&clients, &ask("weather?")).await;
    let response = result.expect("succeeds");
    assert!(pieces.is_empty());
    assert_eq!(response.content, "");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].id, "toolu_a");
    assert_eq!(response.tool_calls[0].name, "search");
    let parsed: Value =
        serde_json::from_str(&response.tool_calls[0].arguments).expect("arguments are JSON");
    assert_eq!(parsed, arguments);
    assert_eq!(response.tool_calls[1].name, "clock");
    assert!(response.tool_calls[1].id.starts_with("toolu_"));
    assert_eq!(response.tool_calls[1].arguments, "{}");
    assert!(response.usage.expect("usage").output_tokens > 0);
}

#[tokio::test]
async fn a_plain_message_answer_is_accepted() {
    let message = json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            { "type": "thinking", "thinking": "hmm", "signature": "sig" },
            { "type": "text", "text": "Noting." },
            { "type": "tool_use", "id": "toolu_x", "name": "note", "input": { "text": "hi" } },
        ],
        "stop_reason": "tool_use",
        "usage": { "input_tokens": 12, "output_tokens": 3 },
    });
    let (_server, clients) = start(Script::always(Reply::status(200, message))).await;
    let (result, pieces) = send(&clients, &ask("note it")).await;
    let response = result.expect("succeeds");
    assert_eq!(response.content, "Noting.");
    assert_eq!(pieces, vec!["Noting.".to_string()]);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "toolu_x");
    assert_eq!(response.tool_calls[0].name, "note");
    assert_eq!(response.tool_calls[0].arguments, r#"{"text":"hi"}"#);
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (12, 3));
}

#[tokio::test]
async fn thinking_blocks_go_back_with_their_tool_calls() {
    let first = [
        message_start(),
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "thinking", "thinking": "" } }),
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": "Use the " } }),
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": "tool." } }),
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "signature_delta", "signature": "c2ln" } }),
        json!({ "type": "content_block_stop", "index": 0 }),
        json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "tool_use", "id": "toolu_t", "name": "add", "input": {} } }),
        json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "{\"a\":" } }),
        json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "1}" } }),
        json!({ "type": "content_block_stop", "index": 1 }),
        json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 30 } }),
        json!({ "type": "message_stop" }),
    ];
    let script = Script {
        rules: vec![Rule::always(event_stream(&first)).limit(1)],
        fallback: Some(Reply::text("done")),
    };
    let (server, clients) = start(script).await;
    let mut request = ask("add one");
    request.reasoning_effort = Some("low".into());
    request.tools = vec![ToolSpec {
        name: "add".into(),
        description: "Adds".into(),
        parameters: json!({ "type": "object" }),
    }];
    let (result, pieces) = send(&clients, &request).await;
    let response = result.expect("succeeds");
    assert!(pieces.is_empty(), "thinking is not content: {pieces:?}");
    assert_eq!(response.content, "");
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].arguments, r#"{"a":1}"#);

    request.messages.push(ChatMessage::Assistant {
        content: response.content.clone(),
        tool_calls: response.tool_calls.clone(),
    });
    request.messages.push(ChatMessage::Tool {
        tool_call_id: "toolu_t".into(),
        content: "2".into(),
        is_error: false,
    });
    let (result, _) = send(&clients, &request).await;
    assert_eq!(result.expect("succeeds").content, "done");
    let body = server.requests().pop().expect("second request").body;
    assert_eq!(body["thinking"]["budget_tokens"], 1024);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            { "type": "thinking", "thinking": "Use the tool.", "signature": "c2ln" },
            { "type": "tool_use", "id": "toolu_t", "name": "add", "input": { "a": 1 } },
        ])
    );
}

#[tokio::test]
async fn a_rate_limit_is_retried_honouring_retry_after() {
    let script = Script {
        rules: vec![
            Rule::always(Reply::Status {
                status: 429,
                body: json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "slow down" } }),
                headers: vec![("retry-after".into(), "0".into())],
            })
            .limit(1),
        ],
        fallback: Some(Reply::text("after the wait")),
    };
    let server = ScriptedLlm::start(script).await.expect("server starts");
    // Without Retry-After the backoff would be seconds long.
    let clients = LlmClients::new(ProviderSettings {
        anthropic_base_url: server.root_url(),
        anthropic_api_key: Some(Secret::new(KEY)),
        initial_backoff: Duration::from_secs(5),
        max_backoff: Duration::from_secs(10),
        ..ProviderSettings::default()
    });
    let started = Instant::now();
    let (result, _) = send(&clients, &ask("hi")).await;
    assert_eq!(
        result.expect("the retry succeeds").content,
        "after the wait"
    );
    assert_eq!(server.request_count(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn overloaded_and_server_error_storms_give_up_after_max_attempts() {
    for (status, kind, message) in [
        (529, "overloaded_error", "Overloaded"),
        (500, "api_error", "Internal server error"),
    ] {
        let (server, clients) = start(Script::always(api_error(status, kind, message))).await;
        let (result, _) = send(&clients, &ask("hi")).await;
        assert_eq!(
            result,
            Err(ProviderError::Http {
                provider: "anthropic",
                status,
                message: message.into(),
            })
        );
        assert_eq!(
            server.request_count(),
            4,
            "{status}: every attempt was made"
        );
    }
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let (server, clients) = start(Script::always(api_error(
        400,
        "invalid_request_error",
        "max_tokens: must be greater than thinking.budget_tokens",
    )))
    .await;
    let (result, _) = send(&clients, &ask("hi")).await;
    assert!(
        matches!(&result, Err(ProviderError::Http { status: 400, message, .. }) if message.starts_with("max_tokens")),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_cut_stream_is_malformed_and_not_retried() {
    let (server, clients) = start(Script::always(Reply::CutStream {
        content: "one two three four five six".into(),
        after_chunks: 2,
    }))
    .await;
    let (result, pieces) = send(&clients, &ask("hi")).await;
    assert_eq!(pieces, vec!["one ".to_string(), "two ".to_string()]);
    let message = malformed(result);
    assert!(message.contains("ended early"), "{message}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn garbage_is_malformed() {
    let (server, clients) = start(Script::always(Reply::Garbage {
        body: "{\"content\": not json".into(),
    }))
    .await;
    let (result, _) = send(&clients, &ask("hi")).await;
    let message = malformed(result);
    assert!(message.contains("not a valid message"), "{message}");
    assert!(message.contains("not json"), "{message}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn invalid_json_in_the_stream_is_malformed() {
    let reply = Reply::Status {
        status: 200,
        body: Value::String("event: message_start\ndata: {\"type\": oops\n\n".into()),
        headers: vec![("content-type".into(), "text/event-stream".into())],
    };
    let (_server, clients) = start(Script::always(reply)).await;
    let message = malformed(send(&clients, &ask("hi")).await.0);
    assert!(message.contains("invalid JSON"), "{message}");
}

#[tokio::test]
async fn an_error_event_mid_stream_is_reported_and_not_retried() {
    let events = [
        message_start(),
        text_start(0),
        text_delta(0, "Hel"),
        overloaded_event(),
    ];
    let (server, clients) = start(Script::always(event_stream(&events))).await;
    let (result, pieces) = send(&clients, &ask("hi")).await;
    assert_eq!(pieces, vec!["Hel".to_string()]);
    assert_eq!(
        result,
        Err(ProviderError::Http {
            provider: "anthropic",
            status: 529,
            message: "Overloaded".into(),
        })
    );
    assert_eq!(
        server.request_count(),
        1,
        "an answer that began is not asked again"
    );
}

#[tokio::test]
async fn an_overloaded_stream_that_said_nothing_is_retried() {
    let script = Script {
        rules: vec![Rule::always(event_stream(&[message_start(), overloaded_event()])).limit(1)],
        fallback: Some(Reply::text("second time lucky")),
    };
    let (server, clients) = start(script).await;
    let (result, _) = send(&clients, &ask("hi")).await;
    assert_eq!(
        result.expect("the retry succeeds").content,
        "second time lucky"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_stream_that_stops_after_its_stop_reason_is_complete() {
    let events = [
        message_start(),
        text_start(0),
        text_delta(0, "fine"),
        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn" }, "usage": { "output_tokens": 1 } }),
    ];
    let (_server, clients) = start(Script::always(event_stream(&events))).await;
    let response = send(&clients, &ask("hi")).await.0.expect("succeeds");
    assert_eq!(response.content, "fine");
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (7, 1));
}

#[tokio::test]
async fn web_search_adds_the_server_tool_and_returns_sources() {
    let (server, clients) = start(Script::always(Reply::WebSearch {
        content: "Rust 1.95 is out.".into(),
        sources: vec![
            SearchResult::new("https://blog.rust-lang.org/", "Rust Blog"),
            SearchResult::new("https://example.com/news", "News"),
        ],
    }))
    .await;
    let mut request = ask("rust news");
    request.web_search = true;
    let (result, pieces) = send(&clients, &request).await;
    let response = result.expect("succeeds");
    assert_eq!(response.content, "Rust 1.95 is out.");
    assert_eq!(pieces.concat(), "Rust 1.95 is out.");
    assert_eq!(
        response.sources,
        vec![
            WebSource {
                url: "https://blog.rust-lang.org/".into(),
                title: Some("Rust Blog".into()),
            },
            WebSource {
                url: "https://example.com/news".into(),
                title: Some("News".into()),
            },
        ]
    );
    let body = &server.requests()[0].body;
    assert_eq!(
        body["tools"],
        json!([{ "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }])
    );
    assert!(body.get("tool_choice").is_none());
}

#[tokio::test]
async fn a_response_schema_is_a_forced_tool_whose_input_is_the_answer() {
    let schema = json!({
        "type": "object",
        "properties": { "verdict": { "type": "string" }, "score": { "type": "number" } },
        "required": ["verdict"],
    });
    let answer =
        json!({ "verdict": "pass", "score": 0.9, "notes": "well argued, clearly written" });
    let (server, clients) = start(Script::always(Reply::tool_call("output", answer.clone()))).await;
    let mut request = ask("judge this");
    request.response_schema = Some(schema.clone());
    let (result, pieces) = send(&clients, &request).await;
    let response = result.expect("succeeds");
    assert!(
        response.tool_calls.is_empty(),
        "the answer is not a tool call"
    );
    let parsed: Value = serde_json::from_str(&response.content).expect("content is JSON");
    assert_eq!(parsed, answer);
    assert!(pieces.len() > 1, "the JSON streams: {pieces:?}");
    assert_eq!(pieces.concat(), response.content);

    let body = &server.requests()[0].body;
    assert_eq!(
        body["tools"],
        json!([{ "name": "output", "description": "Answer with the structured output", "input_schema": schema }])
    );
    assert_eq!(
        body["tool_choice"],
        json!({ "type": "tool", "name": "output" })
    );
}

#[tokio::test]
async fn a_missing_key_is_reported_by_name() {
    let clients = LlmClients::new(ProviderSettings::default());
    let (result, _) = send(&clients, &ask("hi")).await;
    let error = result.expect_err("not configured");
    assert_eq!(
        error,
        ProviderError::NotConfigured {
            provider: "anthropic",
            variable: "ANTHROPIC_API_KEY",
        }
    );
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
}

#[tokio::test]
async fn another_server_needs_no_key_and_a_v1_base_is_not_doubled() {
    let server = ScriptedLlm::start(Script::always(Reply::text("local")))
        .await
        .expect("server starts");
    let clients = LlmClients::new(ProviderSettings {
        anthropic_base_url: server.base_url(),
        ..ProviderSettings::default()
    });
    let (result, _) = send(&clients, &ask("hi")).await;
    assert_eq!(result.expect("succeeds").content, "local");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), None);
}

#[tokio::test]
async fn an_echoed_key_is_redacted() {
    let (server, clients) = start(Script::always(api_error(
        401,
        "authentication_error",
        "invalid x-api-key: sk-ant-test-key",
    )))
    .await;
    let error = send(&clients, &ask("hi")).await.0.expect_err("fails");
    let text = error.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(matches!(error, ProviderError::Http { status: 401, .. }));
    assert_eq!(server.request_count(), 1);
}
