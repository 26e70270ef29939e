//! End-to-end tests of the scripted LLM server through a raw TCP HTTP/1.1 client.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, ToolCall};

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
