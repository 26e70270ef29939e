//! End-to-end tests of the scripted LLM server through a raw TCP HTTP/1.1 client.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, SearchResult, ToolCall};

/// A parsed HTTP response.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    /// The body (chunked bodies de-chunked).
    body: Vec<u8>,
    /// The HTTP chunks of a chunked body, in order.
    chunks: Vec<String>,
    /// Whether a chunked body ended with its terminating zero-length chunk.
    complete: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("response body is JSON")
    }

    /// The JSON payloads of `data:` events, `[DONE]` excluded.
    fn sse_payloads(&self) -> Vec<Value> {
        let text = String::from_utf8(self.body.clone()).expect("utf-8 body");
        text.split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).expect("SSE payload is JSON"))
            .collect()
    }

    /// The `(event name, JSON data)` of each event of an event stream with named events.
    fn sse_events(&self) -> Vec<(String, Value)> {
        let text = String::from_utf8(self.body.clone()).expect("utf-8 body");
        text.split_terminator("\n\n")
            .map(|event| {
                let (name, data) = event.split_once('\n').expect("event and data lines");
                let name = name.strip_prefix("event: ").expect("event line");
                let data = data.strip_prefix("data: ").expect("data line");
                (
                    name.to_string(),
                    serde_json::from_str(data).expect("SSE data is JSON"),
                )
            })
            .collect()
    }
}

/// A keep-alive client connection.
struct Client {
    conn: BufReader<TcpStream>,
}

impl Client {
    async fn connect(llm: &ScriptedLlm) -> Client {
        let stream = TcpStream::connect(llm.addr()).await.expect("connect");
        Client {
            conn: BufReader::new(stream),
        }
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&Value>,
    ) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (name, value) in extra {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.conn
            .get_mut()
            .write_all(req.as_bytes())
            .await
            .expect("write request");
    }

    async fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        let n = self.conn.read_line(&mut line).await.expect("read line");
        if n == 0 {
            return None;
        }
        Some(line.trim_end_matches(['\r', '\n']).to_string())
    }

    async fn read_response(&mut self) -> Response {
        let status_line = self.line().await.expect("status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status code");
        let mut headers = Vec::new();
        loop {
            let line = self.line().await.expect("header line");
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header colon");
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
            chunks: Vec::new(),
            complete: true,
        };
        if response.header("transfer-encoding") == Some("chunked") {
            response.complete = false;
            while let Some(size_line) = self.line().await {
                let size = usize::from_str_radix(size_line.trim(), 16).expect("chunk size");
                if size == 0 {
                    assert_eq!(self.line().await.as_deref(), Some(""));
                    response.complete = true;
                    break;
                }
                let mut chunk = vec![0; size + 2];
                self.conn.read_exact(&mut chunk).await.expect("chunk data");
                chunk.truncate(size);
                response.body.extend_from_slice(&chunk);
                response
                    .chunks
                    .push(String::from_utf8(chunk).expect("utf-8 chunk"));
            }
        } else {
            let len: usize = response
                .header("content-length")
                .expect("content-length")
                .parse()
                .expect("numeric content-length");
            let mut body = vec![0; len];
            self.conn.read_exact(&mut body).await.expect("body");
            response.body = body;
        }
        response
    }

    async fn chat(&mut self, body: &Value) -> Response {
        self.send("POST", "/v1/chat/completions", &[], Some(body))
            .await;
        self.read_response().await
    }

    /// An Anthropic Messages request.
    async fn messages(&mut self, body: &Value) -> Response {
        self.send("POST", "/v1/messages", &[], Some(body)).await;
        self.read_response().await
    }
}

fn user(text: &str) -> Value {
    json!({ "model": "gpt-test", "messages": [{ "role": "user", "content": text }] })
}

fn user_streamed(text: &str) -> Value {
    json!({
        "model": "gpt-test",
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": [{ "role": "user", "content": text }],
    })
}

#[tokio::test]
async fn plain_json_reply_and_keep_alive() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("Hello there, friend.")))
        .await
        .expect("start");
    assert!(llm.base_url().starts_with("http://127.0.0.1:"));
    assert!(llm.base_url().ends_with("/v1"));
    let mut client = Client::connect(&llm).await;

    let res = client.chat(&user("say hello please")).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("application/json"));
    let body = res.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["id"], "chatcmpl-scripted-1");
    assert_eq!(body["created"], 1_700_000_000);
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello there, friend."
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["prompt_tokens"], 3);
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["usage"]["total_tokens"], 6);

    // Same connection, second request.
    let res = client.chat(&user("again")).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["id"], "chatcmpl-scripted-2");
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn streamed_reply_arrives_as_sse_chunks() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("The quick brown fox")))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;
    let res = client.chat(&user_streamed("go")).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("text/event-stream"));
    assert!(res.complete);
    // 4 words + finish + usage + [DONE], one SSE event per HTTP chunk.
    assert_eq!(res.chunks.len(), 7, "{:?}", res.chunks);
    assert!(
        res.chunks
            .iter()
            .all(|c| c.starts_with("data: ") && c.ends_with("\n\n"))
    );
    assert_eq!(
        res.chunks.last().map(String::as_str),
        Some("data: [DONE]\n\n")
    );

    let payloads = res.sse_payloads();
    assert!(
        payloads
            .iter()
            .all(|p| p["object"] == "chat.completion.chunk")
    );
    assert_eq!(payloads[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = payloads
        .iter()
        .filter_map(|p| p["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "The quick brown fox");
    assert_eq!(payloads[1]["choices"][0]["delta"]["content"], "quick ");
    assert!(payloads[0]["choices"][0]["finish_reason"].is_null());
    assert_eq!(payloads[4]["choices"][0]["finish_reason"], "stop");
    assert_eq!(payloads[5]["choices"], json!([]));
    assert_eq!(payloads[5]["usage"]["completion_tokens"], 4);

    // The connection stays usable after a stream.
    let res = client.chat(&user("plain")).await;
    assert_eq!(
        res.json()["choices"][0]["message"]["content"],
        "The quick brown fox"
    );
}

#[tokio::test]
async fn stream_without_usage_option_has_no_usage_chunk() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("a b")))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;
    let res = client
        .chat(&json!({ "stream": true, "messages": [{ "role": "user", "content": "x" }] }))
        .await;
    let payloads = res.sse_payloads();
    assert_eq!(payloads.len(), 3);
    assert!(payloads.iter().all(|p| p.get("usage").is_none()));
    assert_eq!(payloads[0]["model"], "scripted");
}

#[tokio::test]
async fn rules_match_in_order_with_times() {
    let weather = Match {
        last_user_contains: Some("weather".into()),
        ..Match::default()
    };
    let script = Script::default()
        .with_rule(Rule::on(weather.clone(), Reply::text("sunny")).limit(1))
        .with_rule(Rule::on(weather, Reply::text("rainy")))
        .with_rule(Rule::on(
            Match {
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::text("thanks for the tool result"),
        ))
        .with_fallback(Reply::text("default"));
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;
    let content = |res: Response| {
        res.json()["choices"][0]["message"]["content"]
            .as_str()
            .expect("content")
            .to_string()
    };

    assert_eq!(
        content(client.chat(&user("what's the weather?")).await),
        "sunny"
    );
    assert_eq!(content(client.chat(&user("weather again")).await), "rainy");
    assert_eq!(content(client.chat(&user("hello")).await), "default");
    let tool_turn = json!({ "messages": [
        { "role": "user", "content": "weather?" },
        { "role": "assistant", "content": null, "tool_calls": [] },
        { "role": "tool", "tool_call_id": "call_1", "content": "72F" },
    ]});
    // The last user/tool message is the tool one, so "weather" does not match.
    assert_eq!(
        content(client.chat(&tool_turn).await),
        "thanks for the tool result"
    );

    llm.push_rule(Rule::on(
        Match {
            any_message_contains: Some("pushed".into()),
            ..Match::default()
        },
        Reply::text("runtime rule"),
    ));
    assert_eq!(
        content(client.chat(&user("pushed at runtime")).await),
        "runtime rule"
    );
}

#[tokio::test]
async fn unmatched_request_without_fallback_is_500() {
    let script = Script::default().with_rule(Rule::on(
        Match {
            model: Some("other".into()),
            has_tools: Some(true),
            ..Match::default()
        },
        Reply::text("never"),
    ));
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;
    let res = client.chat(&user("hi")).await;
    assert_eq!(res.status, 500);
    let body = res.json();
    assert_eq!(body["error"]["type"], "server_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .starts_with("scripted-llm: no rule matches")
    );
    // Recorded even though unmatched.
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn requests_are_recorded() {
    let llm = ScriptedLlm::start(Script::always(Reply::echo("echo: ")))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;
    let body = json!({
        "model": "gpt-test",
        "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": [
                { "type": "text", "text": "Hello " },
                { "type": "text", "text": "templated world" },
            ]},
        ],
    });
    client
        .send(
            "POST",
            "/v1/chat/completions",
            &[("Authorization", "Bearer sk-test"), ("X-Custom", "yes")],
            Some(&body),
        )
        .await;
    let res = client.read_response().await;
    assert_eq!(
        res.json()["choices"][0]["message"]["content"],
        "echo: Hello templated world"
    );

    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.header("X-CUSTOM"), Some("yes"));
    assert!(
        req.headers
            .iter()
            .any(|(n, v)| n == "x-custom" && v == "yes")
    );
    assert_eq!(req.body, body);
    assert_eq!(
        req.last_user_text().as_deref(),
        Some("Hello templated world")
    );
    assert_eq!(req.model(), Some("gpt-test"));

    llm.clear_requests();
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn status_429_with_retry_after() {
    let llm = ScriptedLlm::start(Script::always(Reply::Status {
        status: 429,
        body: json!({ "error": { "message": "Rate limit reached" } }),
        headers: vec![("Retry-After".into(), "2".into())],
    }))
    .await
    .expect("start");
    let mut client = Client::connect(&llm).await;
    let res = client.chat(&user("hi")).await;
    assert_eq!(res.status, 429);
    assert_eq!(res.header("retry-after"), Some("2"));
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.json()["error"]["message"], "Rate limit reached");
}

#[tokio::test]
async fn tool_calls_plain_and_streamed() {
    let llm = ScriptedLlm::start(Script::always(Reply::ToolCalls {
        calls: vec![
            ToolCall {
                id: None,
                name: "get_weather".into(),
                arguments: json!({ "city": "Paris", "unit": "celsius" }),
            },
            ToolCall {
                id: Some("call_custom".into()),
                name: "noop".into(),
                arguments: json!({}),
            },
        ],
        delay_ms: 0,
    }))
    .await
    .expect("start");
    let mut client = Client::connect(&llm).await;

    let body = client.chat(&user("weather in Paris")).await.json();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "call_1");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().expect("string"))
            .expect("arguments JSON");
    assert_eq!(args, json!({ "city": "Paris", "unit": "celsius" }));
    assert_eq!(calls[1]["id"], "call_custom");

    let res = client.chat(&user_streamed("weather in Paris")).await;
    assert!(res.complete);
    let payloads = res.sse_payloads();
    assert_eq!(payloads[0]["choices"][0]["delta"]["role"], "assistant");
    let first = &payloads[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["id"], "call_2");
    assert_eq!(first["function"]["name"], "get_weather");
    assert_eq!(first["function"]["arguments"], "");
    let mut args = [String::new(), String::new()];
    let mut fragments = 0;
    for p in &payloads {
        for tc in p["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = tc["index"].as_u64().expect("index") as usize;
            if let Some(fragment) = tc["function"]["arguments"].as_str() {
                args[index].push_str(fragment);
                fragments += 1;
            }
        }
    }
    assert!(fragments > 4, "arguments arrive in several fragments");
    let parsed: Value = serde_json::from_str(&args[0]).expect("joined arguments JSON");
    assert_eq!(parsed, json!({ "city": "Paris", "unit": "celsius" }));
    assert_eq!(args[1], "{}");
    let finish = payloads
        .iter()
        .find_map(|p| p["choices"][0]["finish_reason"].as_str())
        .expect("finish reason");
    assert_eq!(finish, "tool_calls");
}

#[tokio::test]
async fn cut_stream_closes_without_done() {
    let llm = ScriptedLlm::start(Script::always(Reply::CutStream {
        content: "one two three four five".into(),
        after_chunks: 2,
    }))
    .await
    .expect("start");
    let mut client = Client::connect(&llm).await;
    let res = client.chat(&user_streamed("go")).await;
    assert_eq!(res.status, 200);
    assert!(!res.complete, "no terminating chunk");
    assert_eq!(res.chunks.len(), 2);
    let text = String::from_utf8(res.body.clone()).expect("utf-8");
    assert!(!text.contains("[DONE]"));
    assert!(!text.contains("finish_reason\":\"stop"));
    let payloads = res.sse_payloads();
    assert_eq!(payloads[1]["choices"][0]["delta"]["content"], "two ");
}

#[tokio::test]
async fn garbage_slow_models_and_404() {
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("garbage".into()),
                ..Match::default()
            },
            Reply::Garbage {
                body: "<html>oops".into(),
            },
        ))
        .with_fallback(Reply::Slow {
            delay_ms: 150,
            content: "finally".into(),
        });
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;

    let res = client.chat(&user("garbage please")).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.body, b"<html>oops");

    let started = Instant::now();
    let res = client.chat(&user("slow")).await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(res.json()["choices"][0]["message"]["content"], "finally");

    client.send("GET", "/v1/models", &[], None).await;
    let res = client.read_response().await;
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["data"][0]["id"], "scripted");

    client.send("GET", "/nope", &[], None).await;
    let res = client.read_response().await;
    assert_eq!(res.status, 404);
    assert!(res.json()["error"]["message"].is_string());
}

#[tokio::test]
async fn chunked_request_body_is_accepted() {
    let llm = ScriptedLlm::start(Script::always(Reply::echo("")))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;
    let body = user("chunked hello").to_string();
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    client
        .conn
        .get_mut()
        .write_all(req.as_bytes())
        .await
        .expect("write");
    let res = client.read_response().await;
    assert_eq!(
        res.json()["choices"][0]["message"]["content"],
        "chunked hello"
    );
}

#[tokio::test]
async fn script_round_trips_through_json() {
    let script: Script = serde_json::from_value(json!({
        "rules": [
            { "when": { "lastUserContains": "hi" }, "reply": { "kind": "text", "content": "hello" }, "times": 1 },
            { "reply": { "kind": "status", "status": 503, "body": { "error": { "message": "down" } } } },
        ],
        "fallback": { "kind": "toolCalls", "calls": [{ "name": "f", "arguments": { "a": 1 } }] },
    }))
    .expect("script JSON");
    assert_eq!(script.rules.len(), 2);
    assert_eq!(script.rules[0].times, Some(1));
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;
    assert_eq!(client.chat(&user("hi")).await.status, 200);
    assert_eq!(client.chat(&user("hi")).await.status, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_delayed_requests_are_served_in_parallel() {
    let llm = ScriptedLlm::start(Script::always(Reply::Text {
        content: "done".into(),
        delay_ms: 50,
        echo: false,
        chunk_gap_ms: 0,
    }))
    .await
    .expect("start");
    let addr = llm.addr();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        tasks.spawn(async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let mut client = Client {
                conn: BufReader::new(stream),
            };
            let res = client.chat(&user(&format!("request {i}"))).await;
            assert_eq!(res.status, 200);
            res.json()["choices"][0]["message"]["content"].clone()
        });
    }
    let mut done = 0;
    while let Some(result) = tasks.join_next().await {
        assert_eq!(result.expect("task"), "done");
        done += 1;
    }
    let elapsed = started.elapsed();
    assert_eq!(done, 200);
    assert_eq!(llm.request_count(), 200);
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[tokio::test]
async fn dropping_stops_the_server() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("x")))
        .await
        .expect("start");
    let addr = llm.addr();
    drop(llm);
    let mut refused = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "server still accepting after drop");
}

/// An Anthropic request: a system prompt and one user message.
fn anthropic(text: &str, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "be very brief",
        "messages": [{ "role": "user", "content": text }],
        "stream": stream,
    })
}

/// The names of the events of an Anthropic stream, and each event's `type` matching its name.
fn event_names(events: &[(String, Value)]) -> Vec<&str> {
    for (name, data) in events {
        assert_eq!(data["type"], name.as_str(), "event name and type agree");
    }
    events.iter().map(|(name, _)| name.as_str()).collect()
}

#[tokio::test]
async fn anthropic_plain_and_streamed_text() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("The quick brown fox")))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;

    let res = client.messages(&anthropic("say hello please", false)).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(
        res.json(),
        json!({
            "id": "msg_scripted_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{ "type": "text", "text": "The quick brown fox" }],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            // "be very brief" + "say hello please"
            "usage": { "input_tokens": 6, "output_tokens": 4 },
        })
    );

    let res = client.messages(&anthropic("go", true)).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("text/event-stream"));
    assert!(res.complete);
    let events = res.sse_events();
    assert_eq!(
        event_names(&events),
        vec![
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(res.chunks.len(), events.len(), "one event per HTTP chunk");
    let start = &events[0].1["message"];
    assert_eq!(start["id"], "msg_scripted_2");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["usage"]["input_tokens"], 4);
    assert_eq!(
        events[2].1["content_block"],
        json!({ "type": "text", "text": "" })
    );
    let text: String = events
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .map(|(_, data)| {
            assert_eq!(data["delta"]["type"], "text_delta");
            data["delta"]["text"].as_str().expect("text").to_string()
        })
        .collect();
    assert_eq!(text, "The quick brown fox");
    let delta = &events[8].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"], json!({ "output_tokens": 4 }));
}

#[tokio::test]
async fn anthropic_tool_use_plain_and_streamed() {
    let llm = ScriptedLlm::start(Script::always(Reply::ToolCalls {
        calls: vec![
            ToolCall {
                id: None,
                name: "get_weather".into(),
                arguments: json!({ "city": "Paris", "unit": "celsius" }),
            },
            ToolCall {
                id: Some("toolu_custom".into()),
                name: "noop".into(),
                arguments: json!({}),
            },
        ],
        delay_ms: 0,
    }))
    .await
    .expect("start");
    let mut client = Client::connect(&llm).await;

    let body = client.messages(&anthropic("weather", false)).await.json();
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["content"],
        json!([
            { "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": { "city": "Paris", "unit": "celsius" } },
            { "type": "tool_use", "id": "toolu_custom", "name": "noop", "input": {} },
        ])
    );

    let res = client.messages(&anthropic("weather", true)).await;
    let events = res.sse_events();
    event_names(&events);
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| &data["content_block"])
        .collect();
    assert_eq!(
        starts,
        vec![
            &json!({ "type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {} }),
            &json!({ "type": "tool_use", "id": "toolu_custom", "name": "noop", "input": {} }),
        ]
    );
    let mut inputs = [String::new(), String::new()];
    let mut fragments = 0;
    for (name, data) in &events {
        if name == "content_block_delta" {
            assert_eq!(data["delta"]["type"], "input_json_delta");
            let index = data["index"].as_u64().expect("index") as usize;
            inputs[index].push_str(data["delta"]["partial_json"].as_str().expect("fragment"));
            fragments += 1;
        }
    }
    assert!(fragments > 3, "input arrives in several fragments");
    let parsed: Value = serde_json::from_str(&inputs[0]).expect("joined input JSON");
    assert_eq!(parsed, json!({ "city": "Paris", "unit": "celsius" }));
    assert_eq!(inputs[1], "{}");
    let delta = events
        .iter()
        .find(|(name, _)| name == "message_delta")
        .expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn rules_read_the_anthropic_request_shape() {
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                has_web_search: Some(true),
                has_tools: Some(false),
                ..Match::default()
            },
            Reply::text("searching alone"),
        ))
        .with_rule(Rule::on(
            Match {
                last_role: Some("tool".into()),
                last_user_contains: Some("sunny".into()),
                has_tools: Some(true),
                ..Match::default()
            },
            Reply::text("after the tool"),
        ))
        .with_rule(Rule::on(
            Match {
                any_message_contains: Some("pirate".into()),
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::text("arr"),
        ));
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;
    let text = |res: Response| res.json()["content"][0]["text"].clone();

    let body = json!({
        "model": "claude-test",
        "system": [{ "type": "text", "text": "You are a pirate." }],
        "messages": [{ "role": "user", "content": [{ "type": "text", "text": "hello" }] }],
    });
    assert_eq!(text(client.messages(&body).await), "arr");

    let body = json!({
        "model": "claude-test",
        "tools": [
            { "name": "weather", "description": "d", "input_schema": { "type": "object" } },
            { "type": "web_search_20250305", "name": "web_search", "max_uses": 5 },
        ],
        "messages": [
            { "role": "user", "content": "weather?" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "t1", "name": "weather", "input": {} }] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "t1", "content": [{ "type": "text", "text": "sunny" }] },
            ] },
        ],
    });
    assert_eq!(text(client.messages(&body).await), "after the tool");
    let recorded = &llm.requests()[1];
    assert_eq!(recorded.last_user_text().as_deref(), Some("sunny"));
    assert_eq!(
        recorded.conversation().last(),
        Some(&("tool".to_string(), "sunny".to_string()))
    );

    let body = json!({
        "model": "claude-test",
        "tools": [{ "type": "web_search_20250305", "name": "web_search" }],
        "messages": [{ "role": "user", "content": "news" }],
    });
    assert_eq!(text(client.messages(&body).await), "searching alone");
    // The same rule reads OpenAI's web search option.
    let body = json!({
        "model": "gpt-test",
        "web_search_options": {},
        "messages": [{ "role": "user", "content": "news" }],
    });
    let res = client.chat(&body).await;
    assert_eq!(
        res.json()["choices"][0]["message"]["content"],
        "searching alone"
    );

    // Unmatched: an Anthropic error body.
    let res = client.messages(&anthropic("nothing", false)).await;
    assert_eq!(res.status, 500);
    let body = res.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .starts_with("scripted-llm: no rule matches")
    );
}

fn search_reply() -> Reply {
    Reply::WebSearch {
        content: "Rust 1.95 is out.".into(),
        sources: vec![
            SearchResult::new("https://blog.rust-lang.org/", "Rust Blog"),
            SearchResult::new("https://example.com/news", "News"),
        ],
    }
}

#[tokio::test]
async fn web_search_in_openai_format() {
    let llm = ScriptedLlm::start(Script::always(search_reply()))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;
    let annotation = json!({
        "type": "url_citation",
        "url_citation": {
            "url": "https://blog.rust-lang.org/",
            "title": "Rust Blog",
            "start_index": 0,
            "end_index": 17,
        },
    });

    let body = client.chat(&user("rust news")).await.json();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "Rust 1.95 is out.");
    assert_eq!(message["annotations"][0], annotation);
    assert_eq!(
        message["annotations"][1]["url_citation"]["url"],
        "https://example.com/news"
    );

    let res = client.chat(&user_streamed("rust news")).await;
    let payloads = res.sse_payloads();
    let annotations: Vec<&Value> = payloads
        .iter()
        .filter_map(|p| p["choices"][0]["delta"].get("annotations"))
        .collect();
    assert_eq!(annotations.len(), 1);
    assert_eq!(annotations[0][0], annotation);
    let text: String = payloads
        .iter()
        .filter_map(|p| p["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Rust 1.95 is out.");
}

#[tokio::test]
async fn web_search_in_anthropic_format() {
    let llm = ScriptedLlm::start(Script::always(search_reply()))
        .await
        .expect("start");
    let mut client = Client::connect(&llm).await;

    let body = client.messages(&anthropic("rust news", false)).await.json();
    let content = body["content"].as_array().expect("content");
    assert_eq!(content.len(), 3);
    assert_eq!(
        content[0],
        json!({ "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": { "query": "rust news" } })
    );
    assert_eq!(content[1]["type"], "web_search_tool_result");
    assert_eq!(content[1]["tool_use_id"], "srvtoolu_1");
    assert_eq!(content[1]["content"][0]["type"], "web_search_result");
    assert_eq!(
        content[1]["content"][0]["url"],
        "https://blog.rust-lang.org/"
    );
    assert_eq!(content[1]["content"][0]["title"], "Rust Blog");
    assert!(content[1]["content"][0]["encrypted_content"].is_string());
    assert_eq!(content[2]["type"], "text");
    assert_eq!(content[2]["text"], "Rust 1.95 is out.");
    let citation = &content[2]["citations"][1];
    assert_eq!(citation["type"], "web_search_result_location");
    assert_eq!(citation["url"], "https://example.com/news");
    assert_eq!(citation["title"], "News");
    assert_eq!(body["usage"]["server_tool_use"]["web_search_requests"], 1);

    let res = client.messages(&anthropic("rust news", true)).await;
    let events = res.sse_events();
    event_names(&events);
    let starts: Vec<&str> = events
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| data["content_block"]["type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        starts,
        vec!["server_tool_use", "web_search_tool_result", "text"]
    );
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .map(|(_, data)| &data["delta"])
        .collect();
    let query: String = deltas
        .iter()
        .filter(|d| d["type"] == "input_json_delta")
        .map(|d| d["partial_json"].as_str().expect("fragment"))
        .collect();
    assert_eq!(query, r#"{"query":"rust news"}"#);
    let cited: Vec<&Value> = deltas
        .iter()
        .filter(|d| d["type"] == "citations_delta")
        .map(|d| &d["citation"]["url"])
        .collect();
    assert_eq!(
        cited,
        vec![
            &json!("https://blog.rust-lang.org/"),
            &json!("https://example.com/news")
        ]
    );
    let text: String = deltas
        .iter()
        .filter(|d| d["type"] == "text_delta")
        .map(|d| d["text"].as_str().expect("text"))
        .collect();
    assert_eq!(text, "Rust 1.95 is out.");
}

#[tokio::test]
async fn anthropic_cut_stream_and_status() {
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("cut".into()),
                ..Match::default()
            },
            Reply::CutStream {
                content: "one two three four".into(),
                after_chunks: 2,
            },
        ))
        .with_fallback(Reply::status(
            529,
            json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ));
    let llm = ScriptedLlm::start(script).await.expect("start");
    let mut client = Client::connect(&llm).await;

    let res = client.messages(&anthropic("cut", true)).await;
    assert!(!res.complete, "no terminating chunk");
    let events = res.sse_events();
    assert_eq!(
        event_names(&events),
        vec![
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
        ]
    );
    assert_eq!(events[4].1["delta"]["text"], "two ");

    let mut client = Client::connect(&llm).await;
    let res = client.messages(&anthropic("busy?", true)).await;
    assert_eq!(res.status, 529);
    assert_eq!(res.json()["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn paced_stream_spreads_chunks_over_time() {
    let llm = ScriptedLlm::start(Script::always(Reply::Text {
        content: "one two three".into(),
        delay_ms: 0,
        echo: false,
        chunk_gap_ms: 60,
    }))
    .await
    .expect("start");
    let mut client = Client::connect(&llm).await;
    let started = Instant::now();
    let res = client.chat(&user_streamed("go")).await;
    // 3 words + finish + usage + [DONE]: six chunks, each written after a 60 ms pause.
    assert_eq!(res.chunks.len(), 6, "{:?}", res.chunks);
    assert!(started.elapsed() >= Duration::from_millis(6 * 60));
    let text: String = res
        .sse_payloads()
        .iter()
        .filter_map(|p| p["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "one two three");
}
