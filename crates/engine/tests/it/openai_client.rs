//! The OpenAI Chat Completions client against a real HTTP server on loopback
//! (`weft_scripted_llm`): streaming, tool calls, retries, timeouts, cancellation, redaction.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, LlmClients, ModelRoute, ProviderError,
    ProviderSettings, Secret, ToolSpec, WebSource, route_model,
};
use weft_scripted_llm::{Reply, Rule, Script, ScriptedLlm, SearchResult, ToolCall};

const KEY: &str = "sk-test-key";

fn settings(server: &ScriptedLlm) -> ProviderSettings {
    ProviderSettings {
        openai_base_url: server.base_url(),
        openai_api_key: Some(Secret::new(KEY)),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(200),
        read_timeout: Duration::from_secs(10),
        ..ProviderSettings::default()
    }
}

async fn serve(script: Script) -> ScriptedLlm {
    ScriptedLlm::start(script).await.expect("server starts")
}

fn chat(route: &ModelRoute, user: &str) -> ChatRequest {
    ChatRequest {
        model: route.model.clone(),
        messages: vec![
            ChatMessage::System {
                content: "You are terse.".into(),
            },
            ChatMessage::User {
                content: user.into(),
            },
        ],
        tools: Vec::new(),
        reasoning_effort: None,
        temperature: None,
        web_search: false,
        response_schema: None,
    }
}

/// One call through [`LlmClients`]; returns its result and the streamed pieces.
async fn call(
    clients: &LlmClients,
    model: &str,
    request: Option<ChatRequest>,
    cancel: &CancellationToken,
) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
    let route = route_model(model, clients.settings()).expect("model routes");
    let request = request.unwrap_or_else(|| chat(&route, "hello"));
    let deltas = Mutex::new(Vec::new());
    let on_delta = |piece: &str| {
        deltas.lock().expect("lock").push(piece.to_string());
    };
    let result = clients.complete(&route, &request, &on_delta, cancel).await;
    (result, deltas.into_inner().expect("lock"))
}

async fn simple_call(clients: &LlmClients) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
    call(clients, "gpt-test", None, &CancellationToken::new()).await
}

fn error_reply(status: u16, message: &str) -> Reply {
    Reply::status(
        status,
        json!({ "error": { "message": message, "type": "test_error", "code": null } }),
    )
}

/// A 200 answer whose body is sent verbatim with `content_type`.
fn raw_reply(content_type: &str, body: &str) -> Reply {
    Reply::Status {
        status: 200,
        body: Value::String(body.into()),
        headers: vec![("content-type".into(), content_type.into())],
    }
}

fn malformed_message(result: Result<ChatResponse, ProviderError>) -> String {
    match result {
        Err(ProviderError::Malformed { message, .. }) => message,
        other => panic!("expected a malformed answer, got {other:?}"),
    }
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces() {
    let text = "The quick brown fox jumps over the lazy dog.";
    let server = serve(Script::always(Reply::text(text))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, deltas) = simple_call(&clients).await;
    let response = result.expect("the call succeeds");
    assert!(deltas.len() > 1, "several deltas: {deltas:?}");
    assert_eq!(deltas.concat(), text);
    assert_eq!(response.content, text);
    assert!(response.tool_calls.is_empty());
    let usage = response.usage.expect("usage is reported");
    assert_eq!(usage.output_tokens, 9);
    assert!(usage.input_tokens > 0);
}

#[tokio::test]
async fn request_carries_model_messages_tools_effort_and_key() {
    let server = serve(Script::always(Reply::text("ok"))).await;
    let clients = LlmClients::new(settings(&server));
    let route = route_model("openai/gpt-test", clients.settings()).expect("routes");
    let mut request = chat(&route, "what is 2+2?");
    request.reasoning_effort = Some("low".into());
    request.temperature = Some(0.25);
    request.tools = vec![ToolSpec {
        name: "add".into(),
        description: "Adds two numbers".into(),
        parameters: json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
            "required": ["a", "b"],
        }),
    }];
    request.messages.push(ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![weft_providers::ToolCall {
            id: "call_9".into(),
            name: "add".into(),
            arguments: r#"{"a":2,"b":2}"#.into(),
        }],
    });
    request.messages.push(ChatMessage::Tool {
        tool_call_id: "call_9".into(),
        content: "4".into(),
        is_error: false,
    });
    let (result, _) = call(
        &clients,
        "openai/gpt-test",
        Some(request),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(result.expect("succeeds").content, "ok");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key"));
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({ "include_usage": true }));
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(
        body["messages"],
        json!([
            { "role": "system", "content": "You are terse." },
            { "role": "user", "content": "what is 2+2?" },
            {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "call_9",
                    "type": "function",
                    "function": { "name": "add", "arguments": "{\"a\":2,\"b\":2}" },
                }],
            },
            { "role": "tool", "tool_call_id": "call_9", "content": "4" },
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "add",
                "description": "Adds two numbers",
                "parameters": {
                    "type": "object",
                    "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
                    "required": ["a", "b"],
                },
            },
        }])
    );
}

#[tokio::test]
async fn optional_fields_are_left_out_and_ollama_sends_no_key() {
    let server = serve(Script::always(Reply::text("ok"))).await;
    let clients = LlmClients::new(ProviderSettings {
        ollama_host: server.root_url(),
        ..settings(&server)
    });
    let (result, _) = call(
        &clients,
        "ollama/llama-test",
        None,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(result.expect("succeeds").content, "ok");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["model"], "llama-test");
    for absent in [
        "tools",
        "reasoning_effort",
        "temperature",
        "web_search_options",
        "response_format",
    ] {
        assert!(sent.body.get(absent).is_none(), "{absent} is left out");
    }
}

#[tokio::test]
async fn streamed_tool_calls_are_assembled() {
    let long_arguments = json!({
        "query": "weather in Amsterdam tomorrow morning",
        "units": "metric",
        "days": 2,
    });
    let server = serve(Script::always(Reply::ToolCalls {
        calls: vec![
            ToolCall {
                id: Some("call_a".into()),
                name: "search".into(),
                arguments: long_arguments.clone(),
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
    let clients = LlmClients::new(settings(&server));
    let (result, deltas) = simple_call(&clients).await;
    let response = result.expect("succeeds");
    assert!(deltas.is_empty());
    assert_eq!(response.content, "");
    assert_eq!(response.tool_calls.len(), 2);
    let first = &response.tool_calls[0];
    assert_eq!(first.id, "call_a");
    assert_eq!(first.name, "search");
    let parsed: Value = serde_json::from_str(&first.arguments).expect("arguments are JSON");
    assert_eq!(parsed, long_arguments);
    let second = &response.tool_calls[1];
    assert_eq!(second.name, "clock");
    assert!(!second.id.is_empty());
    assert_eq!(second.arguments, "{}");
    assert!(response.usage.is_some());
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted() {
    let completion = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hi there",
                "tool_calls": [{
                    "id": "call_x",
                    "type": "function",
                    "function": { "name": "note", "arguments": "{\"text\":\"hi\"}" },
                }],
            },
            "finish_reason": "tool_calls",
        }],
        "usage": { "prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15 },
    });
    let server = serve(Script::always(Reply::status(200, completion))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, deltas) = simple_call(&clients).await;
    let response = result.expect("succeeds");
    assert_eq!(response.content, "Hi there");
    assert_eq!(deltas, vec!["Hi there".to_string()]);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "call_x");
    assert_eq!(response.tool_calls[0].name, "note");
    assert_eq!(response.tool_calls[0].arguments, "{\"text\":\"hi\"}");
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (12, 3));
}

#[tokio::test]
async fn sse_with_crlf_comments_and_multiline_data_is_parsed() {
    let stream = concat!(
        ": this is a comment\r\n",
        "retry: 1000\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\r\n",
        "data: \"delta\":{\"content\":\"lo\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\r\n\r\n",
        "data: [DONE]\r\n\r\n",
    );
    let server = serve(Script::always(raw_reply("text/event-stream", stream))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, deltas) = simple_call(&clients).await;
    let response = result.expect("succeeds");
    assert_eq!(deltas, vec!["Hel".to_string(), "lo".to_string()]);
    assert_eq!(response.content, "Hello");
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (4, 2));
}

#[tokio::test]
async fn a_stream_with_a_finish_reason_but_no_done_is_complete() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fine\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    let server = serve(Script::always(raw_reply("text/event-stream", stream))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    assert_eq!(result.expect("succeeds").content, "fine");
}

#[tokio::test]
async fn a_stream_that_stops_without_finishing_is_malformed() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n";
    let server = serve(Script::always(raw_reply("text/event-stream", stream))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.contains("ended early"), "{message}");
}

#[tokio::test]
async fn an_error_inside_the_stream_is_reported() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"model overloaded\",\"type\":\"server_error\"}}\n\n",
    );
    let server = serve(Script::always(raw_reply("text/event-stream", stream))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.contains("model overloaded"), "{message}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn invalid_json_in_the_stream_is_malformed() {
    let stream = "data: {\"choices\": [oops\n\ndata: [DONE]\n\n";
    let server = serve(Script::always(raw_reply("text/event-stream", stream))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.contains("invalid JSON"), "{message}");
    assert!(message.contains("[oops"), "{message}");
}

#[tokio::test]
async fn a_rate_limit_is_retried_honouring_retry_after() {
    let script = Script {
        rules: vec![Rule {
            when: None,
            reply: Reply::Status {
                status: 429,
                body: json!({ "error": { "message": "slow down" } }),
                headers: vec![("Retry-After".into(), "0".into())],
            },
            times: Some(1),
        }],
        fallback: Some(Reply::text("after the wait")),
    };
    let server = serve(script).await;
    // Without Retry-After the backoff would be seconds long.
    let clients = LlmClients::new(ProviderSettings {
        initial_backoff: Duration::from_secs(5),
        max_backoff: Duration::from_secs(10),
        ..settings(&server)
    });
    let started = Instant::now();
    let (result, _) = simple_call(&clients).await;
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
async fn a_server_error_storm_gives_up_after_max_attempts() {
    let server = serve(Script::always(error_reply(500, "upstream exploded"))).await;
    let clients = LlmClients::new(ProviderSettings {
        max_attempts: 3,
        ..settings(&server)
    });
    let (result, _) = simple_call(&clients).await;
    match result {
        Err(ProviderError::Http {
            provider,
            status,
            message,
        }) => {
            assert_eq!(provider, "openai");
            assert_eq!(status, 500);
            assert_eq!(message, "upstream exploded");
        }
        other => panic!("expected HTTP 500, got {other:?}"),
    }
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let server = serve(Script::always(error_reply(400, "unknown model gpt-test"))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    assert!(
        matches!(
            &result,
            Err(ProviderError::Http { status: 400, message, .. }) if message == "unknown model gpt-test"
        ),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_plain_text_error_body_becomes_the_message() {
    let server = serve(Script::always(Reply::status(
        404,
        Value::String("  no such route\n".into()),
    )))
    .await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    assert!(
        matches!(
            &result,
            Err(ProviderError::Http { status: 404, message, .. }) if message == "no such route"
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn garbage_json_is_malformed() {
    let server = serve(Script::always(Reply::Garbage {
        body: "{\"choices\": this is not json".into(),
    }))
    .await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.contains("this is not json"), "{message}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_huge_garbage_body_is_quoted_briefly() {
    let body = "x".repeat(100_000);
    let server = serve(Script::always(Reply::Garbage { body })).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.len() < 600, "{} bytes", message.len());
}

#[tokio::test]
async fn an_oversized_answer_is_refused() {
    let body = format!("{{\"pad\": \"{}\"}}", "x".repeat(9 * 1024 * 1024));
    let server = serve(Script::always(raw_reply("application/json", &body))).await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let message = malformed_message(result);
    assert!(message.contains("larger than 8 MiB"), "{message}");
}

#[tokio::test]
async fn a_cut_stream_is_malformed() {
    let server = serve(Script::always(Reply::CutStream {
        content: "one two three four five six".into(),
        after_chunks: 2,
    }))
    .await;
    let clients = LlmClients::new(settings(&server));
    let (result, deltas) = simple_call(&clients).await;
    assert_eq!(deltas, vec!["one ".to_string(), "two ".to_string()]);
    let message = malformed_message(result);
    assert!(message.contains("the stream ended early"), "{message}");
    assert_eq!(
        server.request_count(),
        1,
        "a stream that began is not retried"
    );
}

#[tokio::test]
async fn a_slow_first_byte_times_out() {
    let server = serve(Script::always(Reply::Slow {
        delay_ms: 3_000,
        content: "too late".into(),
    }))
    .await;
    let clients = LlmClients::new(ProviderSettings {
        read_timeout: Duration::from_millis(200),
        max_attempts: 2,
        ..settings(&server)
    });
    let started = Instant::now();
    let (result, _) = simple_call(&clients).await;
    assert!(
        matches!(
            result,
            Err(ProviderError::Timeout {
                provider: "openai",
                ..
            })
        ),
        "{result:?}"
    );
    // Nothing had arrived, so the timeout was retried once.
    assert_eq!(server.request_count(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let base_url = format!("http://{address}/v1");
    let clients = LlmClients::new(ProviderSettings {
        openai_base_url: base_url.clone(),
        openai_api_key: Some(Secret::new(KEY)),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_attempts: 2,
        ..ProviderSettings::default()
    });
    let (result, _) = simple_call(&clients).await;
    match result {
        Err(ProviderError::Connect { url, message, .. }) => {
            assert_eq!(url, base_url);
            assert!(!message.is_empty());
            assert!(!message.contains(KEY));
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn cancelling_a_slow_call_returns_at_once() {
    let server = serve(Script::always(Reply::Slow {
        delay_ms: 10_000,
        content: "never".into(),
    }))
    .await;
    let clients = LlmClients::new(settings(&server));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let (result, _) = call(&clients, "gpt-test", None, &cancel).await;
    assert_eq!(result, Err(ProviderError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn cancelling_during_backoff_returns_at_once() {
    let server = serve(Script::always(Reply::Status {
        status: 503,
        body: json!({ "error": { "message": "busy" } }),
        headers: vec![("retry-after".into(), "30".into())],
    }))
    .await;
    let clients = LlmClients::new(ProviderSettings {
        max_backoff: Duration::from_secs(60),
        ..settings(&server)
    });
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let (result, _) = call(&clients, "gpt-test", None, &cancel).await;
    assert_eq!(result, Err(ProviderError::Cancelled));
    assert_eq!(server.request_count(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_echoed_key_is_redacted() {
    let server = serve(Script::always(error_reply(
        401,
        "Incorrect API key provided: sk-test-key. Find your key in your account.",
    )))
    .await;
    let clients = LlmClients::new(settings(&server));
    let (result, _) = simple_call(&clients).await;
    let error = result.expect_err("the call fails");
    let text = error.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(matches!(error, ProviderError::Http { status: 401, .. }));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn web_search_sends_its_option_and_returns_the_cited_pages() {
    let server = serve(Script::always(Reply::WebSearch {
        content: "Rust 1.95 is out.".into(),
        sources: vec![
            SearchResult::new("https://blog.rust-lang.org/", "Rust Blog"),
            SearchResult::new("https://example.com/news", "News"),
        ],
    }))
    .await;
    let clients = LlmClients::new(settings(&server));
    let route = route_model("gpt-test-search", clients.settings()).expect("routes");
    let mut request = chat(&route, "rust news");
    request.web_search = true;
    let (result, deltas) = call(
        &clients,
        "gpt-test-search",
        Some(request),
        &CancellationToken::new(),
    )
    .await;
    let response = result.expect("succeeds");
    assert_eq!(deltas.concat(), "Rust 1.95 is out.");
    assert_eq!(response.content, "Rust 1.95 is out.");
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
    assert_eq!(server.requests()[0].body["web_search_options"], json!({}));
}

#[tokio::test]
async fn plain_answer_citations_are_deduplicated() {
    let citation = |url: &str, start: u64| {
        json!({
            "type": "url_citation",
            "url_citation": { "url": url, "title": "Page", "start_index": start, "end_index": start + 2 },
        })
    };
    let completion = json!({
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "a b c",
                "annotations": [
                    citation("https://a.example", 0),
                    citation("https://b.example", 2),
                    citation("https://a.example", 4),
                ],
            },
            "finish_reason": "stop",
        }],
    });
    let server = serve(Script::always(Reply::status(200, completion))).await;
    let clients = LlmClients::new(settings(&server));
    let response = simple_call(&clients).await.0.expect("succeeds");
    let urls: Vec<&str> = response
        .sources
        .iter()
        .map(|source| source.url.as_str())
        .collect();
    assert_eq!(urls, vec!["https://a.example", "https://b.example"]);
}

#[tokio::test]
async fn a_response_schema_asks_for_json_schema_output() {
    let answer = r#"{"verdict":"pass"}"#;
    let server = serve(Script::always(Reply::text(answer))).await;
    let clients = LlmClients::new(settings(&server));
    let route = route_model("gpt-test", clients.settings()).expect("routes");
    let schema = json!({
        "type": "object",
        "properties": { "verdict": { "type": "string" } },
        "required": ["verdict"],
    });
    let mut request = chat(&route, "judge");
    request.response_schema = Some(schema.clone());
    let (result, _) = call(
        &clients,
        "gpt-test",
        Some(request),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(result.expect("succeeds").content, answer);
    assert_eq!(
        server.requests()[0].body["response_format"],
        json!({
            "type": "json_schema",
            "json_schema": { "name": "output", "schema": schema, "strict": false },
        })
    );
}
