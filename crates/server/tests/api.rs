//! The API against its own OpenAPI document, over real HTTP on loopback: every documented
//! operation is served and answers with a documented status, every answer's body is valid
//! against the schema documented for that status, and `docs/openapi.json` is the document the
//! server serves. Then what bounds reading a request: the header and body timeouts, a declared
//! length over the limit, several `Authorization` headers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weft_api::{Lifetime, StoreLocation, Weft};
use weft_providers::ProviderSettings;
use weft_server::{ServeConfig, Tokens};

const TOKEN: &str = "ada-token-0123456789abcdef";

fn node(id: &str, kind: &str, data: Value) -> Value {
    json!({ "id": id, "type": kind, "position": { "x": 0, "y": 0 }, "data": data })
}

/// start → review (a form) → sent / dropped; and a flow that echoes its input.
fn write_flows(flows: &Path) {
    std::fs::create_dir_all(flows).expect("flows");
    let review = json!({
        "version": 1,
        "name": "Review",
        "nodes": [
            node("start", "start", json!({ "initialInput": "a draft" })),
            node("review", "approval", json!({
                "message": "Send {{ PREVIOUS_OUTPUT }}?",
                "fields": [{ "name": "amount", "type": "number", "required": true }]
            })),
            node("sent", "template", json!({ "template": "sent ({{ approval.amount }}) by {{ approval.by }}" })),
            node("dropped", "template", json!({ "template": "dropped" })),
        ],
        "edges": [
            { "id": "e1", "source": "start", "target": "review" },
            { "id": "e2", "source": "review", "target": "sent", "sourceHandle": "approve" },
            { "id": "e3", "source": "review", "target": "dropped", "sourceHandle": "reject" },
        ]
    });
    let echo = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("said", "template", json!({ "template": "got {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [{ "id": "e1", "source": "start", "target": "said" }]
    });
    // A step that goes on for seconds (until its timeout): a run to pause meanwhile.
    let busy = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("spin", "code", json!({ "code": "while True:\n    pass", "timeoutSeconds": 3 })),
        ],
        "edges": [{ "id": "e1", "source": "start", "target": "spin" }]
    });
    std::fs::write(flows.join("review.json"), review.to_string()).expect("review");
    std::fs::write(flows.join("echo.json"), echo.to_string()).expect("echo");
    std::fs::write(flows.join("busy.json"), busy.to_string()).expect("busy");
}

/// Waits (a while at most) until run `run_id` reads `status`; its detail then.
async fn wait_for_status(http: &reqwest::Client, url: &str, run_id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let run: Value = http
            .get(format!("{url}/v1/runs/{run_id}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("the run")
            .json()
            .await
            .expect("JSON");
        if run["run"]["summary"]["status"] == json!(status) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {run_id} never read {status}");
}

/// The server on a free port, and its URL: bodies of at most 4 KiB that arrive within a
/// second, request heads within `header_timeout`.
async fn serve(dir: &Path, header_timeout: Duration) -> String {
    let flows = dir.join("flows");
    write_flows(&flows);
    let weft = Weft::open(
        StoreLocation::from(dir.join("runs.db")),
        Lifetime::Service,
        ProviderSettings::default(),
    )
    .expect("store");
    let config = ServeConfig {
        max_body: 4096,
        header_timeout,
        body_timeout: Duration::from_secs(1),
        ..ServeConfig::new(
            flows,
            Tokens::parse(&format!("ada:{TOKEN}"), "tokens").expect("tokens"),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(weft_server::serve(
        listener,
        weft,
        config,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    url
}

/// Sends `request` as it is on a new connection, then reads until the server closes it:
/// what came back (nothing when it closed without an answer), or `None` when it was still open
/// after `limit`.
async fn raw(url: &str, request: &str, limit: Duration) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(count) => answer.extend_from_slice(&buffer[..count]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&answer).into_owned())
}

/// The status, content type and body of a raw answer (the body not chunked: a JSON error).
fn parse_answer(answer: &str) -> (u16, String, String) {
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an answer: {answer:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer}"));
    let content_type = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type").then(|| {
                value
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// The document's answers, checked as they come: each (operation, status) met, with its body
/// valid against the schema documented for it.
struct Checked {
    document: Value,
    met: BTreeSet<(String, String, u16)>,
}

impl Checked {
    /// The documented operation `method` `template` (an OpenAPI path) answering `status` with
    /// `body`: refused when either is not documented or the body does not fit.
    fn check(&mut self, method: &str, template: &str, status: u16, content_type: &str, body: &str) {
        let operation = &self.document["paths"][template][method];
        assert!(
            operation.is_object(),
            "{method} {template} is not documented"
        );
        let answer = &operation["responses"][status.to_string()];
        assert!(
            answer.is_object(),
            "{method} {template} answered {status}, which its description does not list: {body}"
        );
        let content = answer["content"]
            .as_object()
            .and_then(|content| content.get(content_type))
            .unwrap_or_else(|| {
                panic!("{method} {template} {status}: no {content_type} documented")
            });
        let instances: Vec<(Value, &Value)> = if content_type == "text/event-stream" {
            body.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| {
                    (
                        serde_json::from_str(data.trim()).expect("an event's data is JSON"),
                        &content["itemSchema"],
                    )
                })
                .collect()
        } else {
            vec![(
                serde_json::from_str(body).expect("a JSON body"),
                &content["schema"],
            )]
        };
        assert!(
            !instances.is_empty(),
            "{method} {template} {status}: nothing to check"
        );
        for (instance, schema) in instances {
            let mut root = schema.clone();
            root["components"] = self.document["components"].clone();
            let validator = jsonschema::validator_for(&root).expect("a valid schema");
            let errors: Vec<String> = validator
                .iter_errors(&instance)
                .map(|error| format!("{} at {}", error, error.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{method} {template} {status}: the body does not fit its schema: {errors:?}\n{instance}"
            );
        }
        self.met
            .insert((method.to_string(), template.to_string(), status));
    }
}

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: bool,
    body: Option<&str>,
) -> (u16, String, String) {
    let mut request = http.request(method, url);
    if token {
        request = request.bearer_auth(TOKEN);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let answer = request.send().await.expect("the server answers");
    let status = answer.status().as_u16();
    let content_type = answer
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    (status, content_type, answer.text().await.expect("a body"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_operation_is_served_and_answers_as_documented() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    let http = reqwest::Client::new();
    let document: Value = http
        .get(format!("{url}/openapi.json"))
        .send()
        .await
        .expect("document")
        .json()
        .await
        .expect("JSON");
    assert_eq!(document, weft_server::openapi_document());
    let mut checked = Checked {
        document,
        met: BTreeSet::new(),
    };
    use reqwest::Method;
    let (get, post) = (Method::GET, Method::POST);
    // One exchange: (method, the documented path, the path called, with a token, body).
    type Exchange<'a> = (&'a Method, &'a str, &'a str, bool, Option<&'a str>);
    let mut exchange = async |(method, template, path, token, body): Exchange<'_>| {
        let (status, content_type, text) =
            call(&http, method.clone(), &format!("{url}{path}"), token, body).await;
        let method = method.as_str().to_lowercase();
        checked.check(&method, template, status, &content_type, &text);
        (status, text)
    };
    let id_of = |text: &str| -> String {
        let answer: Value = serde_json::from_str(text).expect("JSON");
        answer["runId"].as_str().expect("an id").to_string()
    };
    let big = format!("\"{}\"", "x".repeat(5000));
    let review = Some(r#"{"flow": "review"}"#);

    assert_eq!(
        exchange((&get, "/openapi.json", "/openapi.json", false, None))
            .await
            .0,
        200
    );
    // The folder's flows, one of them a file that does not load.
    std::fs::write(dir.path().join("flows/broken.json"), "{ not a flow").expect("broken");
    let (status, flows) = exchange((&get, "/v1/flows", "/v1/flows", true, None)).await;
    assert_eq!(status, 200, "{flows}");
    let flows: Value = serde_json::from_str(&flows).expect("JSON");
    let names: Vec<&str> = flows
        .as_array()
        .expect("a list")
        .iter()
        .map(|flow| flow["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["broken", "busy", "echo", "review"]);
    assert!(
        flows[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("broken.json"))
            && flows[0].get("version").is_none(),
        "{flows}"
    );
    assert_eq!(flows[3]["title"], json!("Review"));
    let version = flows[3]["version"].as_str().expect("a version").to_string();
    assert_eq!(version.len(), 64, "{version}");
    assert_eq!(
        exchange((&get, "/v1/flows", "/v1/flows", false, None))
            .await
            .0,
        401
    );
    let (status, review_flow) =
        exchange((&get, "/v1/flows/{name}", "/v1/flows/review", true, None)).await;
    assert_eq!(status, 200, "{review_flow}");
    let review_flow: Value = serde_json::from_str(&review_flow).expect("JSON");
    assert_eq!(review_flow["name"], json!("review"));
    assert_eq!(review_flow["version"], json!(version));
    assert_eq!(
        review_flow["flow"]["nodes"].as_array().map(Vec::len),
        Some(4)
    );
    for (path, status) in [
        ("/v1/flows/review.json", 200),
        ("/v1/flows/nowhere", 404),
        ("/v1/flows/.hidden", 400),
        ("/v1/flows/broken", 422),
    ] {
        assert_eq!(
            exchange((&get, "/v1/flows/{name}", path, true, None))
                .await
                .0,
            status,
            "{path}"
        );
    }
    assert_eq!(
        exchange((&get, "/v1/flows/{name}", "/v1/flows/review", false, None))
            .await
            .0,
        401
    );
    // A run that pauses at its approval, and one to cancel.
    let (status, started) = exchange((&post, "/v1/runs", "/v1/runs", true, review)).await;
    assert_eq!(status, 201, "{started}");
    let run_id = id_of(&started);
    let other = id_of(
        &exchange((&post, "/v1/runs", "/v1/runs", true, review))
            .await
            .1,
    );
    for (call, status) in [
        (
            (
                &post,
                "/v1/runs",
                "/v1/runs",
                true,
                Some(r#"{"flow": "nowhere"}"#),
            ),
            404,
        ),
        (
            (
                &post,
                "/v1/runs",
                "/v1/runs",
                true,
                Some(r#"{"flw": "review"}"#),
            ),
            400,
        ),
        (
            (&post, "/v1/runs", "/v1/runs", true, Some(big.as_str())),
            413,
        ),
        ((&post, "/v1/runs", "/v1/runs", false, review), 401),
    ] {
        assert_eq!(exchange(call).await.0, status, "{call:?}");
    }

    // Both wait at the approval before anything reads them.
    for _ in 0..100 {
        let answer = http
            .get(format!("{url}/v1/approvals"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("approvals");
        if answer.json::<Vec<Value>>().await.expect("a list").len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (status, approvals) = exchange((&get, "/v1/approvals", "/v1/approvals", true, None)).await;
    assert_eq!(status, 200);
    assert!(approvals.contains(&run_id), "{approvals}");
    let one = format!("/v1/runs/{run_id}");
    let (status, shown) = exchange((&get, "/v1/runs/{id}", &one, true, None)).await;
    assert_eq!(status, 200);
    let shown: Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(shown["waiting"]["nodeId"], "review");

    // A prefix that names several runs: started until two ids share a first digit (at most 17).
    let mut firsts = BTreeSet::new();
    let shared = loop {
        let answer = http
            .post(format!("{url}/v1/hooks/echo"))
            .bearer_auth(TOKEN)
            .body("x")
            .send()
            .await
            .expect("hook");
        let first = id_of(&answer.text().await.expect("a body"))[..1].to_string();
        if !firsts.insert(first.clone()) {
            break first;
        }
    };
    // An approval only grace may decide: the token's name (ada) is refused, nothing changes.
    let only_grace = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("review", "approval", json!({ "message": "Pay?", "approvers": ["grace"] })),
            node("paid", "template", json!({ "template": "paid" })),
        ],
        "edges": [
            { "id": "e1", "source": "start", "target": "review" },
            { "id": "e2", "source": "review", "target": "paid", "sourceHandle": "approve" },
        ]
    });
    std::fs::write(dir.path().join("flows/grace.json"), only_grace.to_string()).expect("grace");
    let (status, answer) = exchange((
        &post,
        "/v1/runs",
        "/v1/runs",
        true,
        Some(r#"{"flow": "grace"}"#),
    ))
    .await;
    assert_eq!(status, 201, "{answer}");
    let grace_run = id_of(&answer);
    let (status, refused) = exchange((
        &post,
        "/v1/runs",
        "/v1/runs",
        true,
        Some(r#"{"flow": "grace", "decide": {"review": "approve"}}"#),
    ))
    .await;
    assert_eq!(status, 403, "{refused}");
    wait_for_status(&http, &url, &grace_run, "paused").await;
    let (status, answer) = exchange((
        &post,
        "/v1/runs/{id}/decision",
        &format!("/v1/runs/{grace_run}/decision"),
        true,
        Some(r#""approve""#),
    ))
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer.contains("ada may not decide `review`: its approvers are grace"),
        "{answer}"
    );
    wait_for_status(&http, &url, &grace_run, "paused").await;
    let decision = format!("/v1/runs/{run_id}/decision");
    let events = format!("/v1/runs/{run_id}/events");
    let cancel = format!("/v1/runs/{other}/cancel");
    let several = format!("/v1/runs/{shared}");
    let several_events = format!("/v1/runs/{shared}/events");
    let several_cancel = format!("/v1/runs/{shared}/cancel");
    for (call, status) in [
        ((&get, "/v1/approvals", "/v1/approvals", false, None), 401),
        ((&get, "/v1/runs", "/v1/runs", true, None), 200),
        ((&get, "/v1/runs", "/v1/runs?limit=many", true, None), 400),
        ((&get, "/v1/runs", "/v1/runs", false, None), 401),
        (
            (&get, "/v1/runs/{id}", "/v1/runs/no-such-run", true, None),
            404,
        ),
        ((&get, "/v1/runs/{id}", several.as_str(), true, None), 400),
        ((&get, "/v1/runs/{id}", one.as_str(), false, None), 401),
        // Decided: a form that does not fit first, then the answer; twice is a conflict.
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                decision.as_str(),
                true,
                Some(r#"{"decision": "approve"}"#),
            ),
            400,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                decision.as_str(),
                true,
                Some(r#"{"decision": "approve", "fields": {"amount": 40}}"#),
            ),
            200,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                decision.as_str(),
                true,
                Some(r#""reject""#),
            ),
            409,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                "/v1/runs/no-such-run/decision",
                true,
                Some(r#""approve""#),
            ),
            404,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                decision.as_str(),
                true,
                Some(big.as_str()),
            ),
            413,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/decision",
                decision.as_str(),
                false,
                Some(r#""approve""#),
            ),
            401,
        ),
        // Its events, as server-sent events, to its end.
        (
            (&get, "/v1/runs/{id}/events", events.as_str(), true, None),
            200,
        ),
        (
            (
                &get,
                "/v1/runs/{id}/events",
                "/v1/runs/no-such-run/events",
                true,
                None,
            ),
            404,
        ),
        (
            (
                &get,
                "/v1/runs/{id}/events",
                several_events.as_str(),
                true,
                None,
            ),
            400,
        ),
        (
            (&get, "/v1/runs/{id}/events", events.as_str(), false, None),
            401,
        ),
        // Cancelled while it waits; once ended, a conflict.
        (
            (&post, "/v1/runs/{id}/cancel", cancel.as_str(), true, None),
            200,
        ),
        (
            (&post, "/v1/runs/{id}/cancel", cancel.as_str(), true, None),
            409,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/cancel",
                "/v1/runs/no-such-run/cancel",
                true,
                None,
            ),
            404,
        ),
        (
            (
                &post,
                "/v1/runs/{id}/cancel",
                several_cancel.as_str(),
                true,
                None,
            ),
            400,
        ),
        (
            (&post, "/v1/runs/{id}/cancel", cancel.as_str(), false, None),
            401,
        ),
        // Webhooks.
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/echo",
                true,
                Some(r#"{"customer": "Bo"}"#),
            ),
            202,
        ),
        // A caller that waits is answered with how the run went.
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/echo?wait=30",
                true,
                Some(r#"{"customer": "Al"}"#),
            ),
            200,
        ),
        (
            (
                &post,
                "/v1/runs",
                "/v1/runs?wait=30",
                true,
                Some(r#"{"flow": "echo", "input": "x"}"#),
            ),
            200,
        ),
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/..%2Fsecret",
                true,
                Some("x"),
            ),
            400,
        ),
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/nowhere",
                true,
                Some("x"),
            ),
            404,
        ),
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/echo",
                true,
                Some(big.as_str()),
            ),
            413,
        ),
        (
            (
                &post,
                "/v1/hooks/{flow}",
                "/v1/hooks/echo",
                false,
                Some("x"),
            ),
            401,
        ),
    ] {
        let (answered, body) = exchange(call).await;
        assert_eq!(answered, status, "{call:?}: {body}");
        if call.2 == events && answered == 200 {
            assert!(body.contains("event: run_end"), "{body}");
        }
    }

    // A run started with a breakpoint stops there, and goes on with the value replaced.
    let (status, started) = exchange((
        &post,
        "/v1/runs",
        "/v1/runs",
        true,
        Some(r#"{"flow": "echo", "input": "hi", "breakpoints": [{"nodeId": "said"}]}"#),
    ))
    .await;
    assert_eq!(status, 201, "{started}");
    let stopped = id_of(&started);
    wait_for_status(&http, &url, &stopped, "paused").await;
    let go_on = format!("/v1/runs/{stopped}/continue");
    let continued = "/v1/runs/{id}/continue";
    for (token, body, status) in [
        (false, Some(r#"{"set": "changed"}"#), 401),
        (true, Some("not json"), 400),
        (true, Some(big.as_str()), 413),
        (true, Some(r#"{"set": "changed"}"#), 200),
    ] {
        let (answered, text) = exchange((&post, continued, go_on.as_str(), token, body)).await;
        assert_eq!(answered, status, "{body:?}: {text}");
    }
    let run = wait_for_status(&http, &url, &stopped, "completed").await;
    assert_eq!(run["run"]["result"], json!("got changed"), "{run}");
    // Its events, each with its number as its id; a client that reconnects after one of them
    // gets the rest, none missed and none twice.
    let stream_of = async |last: Option<&str>| {
        let mut request = http
            .get(format!("{url}/v1/runs/{stopped}/events"))
            .bearer_auth(TOKEN);
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last);
        }
        let answer = request.send().await.expect("events");
        let status = answer.status().as_u16();
        let text = answer.text().await.expect("a body");
        let ids: Vec<u64> = text
            .lines()
            .filter_map(|line| {
                line.strip_prefix("id: ")
                    .or_else(|| line.strip_prefix("id:"))
            })
            .map(|id| id.trim().parse().expect("a number"))
            .collect();
        (status, ids, text)
    };
    let (status, all, text) = stream_of(None).await;
    assert_eq!(status, 200, "{text}");
    assert!(all.len() > 4, "{text}");
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>(), "{text}");
    let (status, rest, text) = stream_of(Some("3")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(rest, all[3..], "{text}");
    assert!(text.contains("event: run_end"), "{text}");
    let answer = http
        .get(format!("{url}/v1/runs/{stopped}/events"))
        .bearer_auth(TOKEN)
        .header("Last-Event-ID", "three")
        .send()
        .await
        .expect("an answer");
    let status = answer.status().as_u16();
    let text = answer.text().await.expect("a body");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("Last-Event-ID"), "{text}");
    for (path, status) in [
        (go_on.as_str(), 409),
        ("/v1/runs/no-such-run/continue", 404),
    ] {
        assert_eq!(
            exchange((&post, continued, path, true, None)).await.0,
            status,
            "{path}"
        );
    }
    // A run going in the server is asked to pause; one that has ended cannot be.
    let busy = id_of(
        &exchange((
            &post,
            "/v1/runs",
            "/v1/runs",
            true,
            Some(r#"{"flow": "busy"}"#),
        ))
        .await
        .1,
    );
    let pause = format!("/v1/runs/{busy}/pause");
    let paused = "/v1/runs/{id}/pause";
    assert_eq!(
        exchange((&post, paused, pause.as_str(), false, None))
            .await
            .0,
        401
    );
    assert_eq!(
        exchange((&post, paused, pause.as_str(), true, None))
            .await
            .0,
        202
    );
    let ended = format!("/v1/runs/{stopped}/pause");
    assert_eq!(
        exchange((&post, paused, ended.as_str(), true, None))
            .await
            .0,
        409
    );

    // Several `Authorization` headers, on every route that takes one: 400, whichever is right.
    for (method, template, path) in [
        (&post, "/v1/runs", "/v1/runs"),
        (&get, "/v1/runs", "/v1/runs"),
        (&get, "/v1/runs/{id}", one.as_str()),
        (&get, "/v1/runs/{id}/events", events.as_str()),
        (&post, "/v1/runs/{id}/decision", decision.as_str()),
        (&post, "/v1/runs/{id}/cancel", cancel.as_str()),
        (&post, "/v1/runs/{id}/continue", go_on.as_str()),
        (&post, "/v1/runs/{id}/pause", pause.as_str()),
        (&get, "/v1/flows", "/v1/flows"),
        (&get, "/v1/flows/{name}", "/v1/flows/review"),
        (&get, "/v1/approvals", "/v1/approvals"),
        (&post, "/v1/hooks/{flow}", "/v1/hooks/echo"),
    ] {
        let answer = http
            .request(method.clone(), format!("{url}{path}"))
            .bearer_auth(TOKEN)
            .bearer_auth("someone-else-0123456789")
            .body("\"approve\"")
            .send()
            .await
            .expect("an answer");
        let status = answer.status().as_u16();
        let text = answer.text().await.expect("a body");
        assert_eq!(status, 400, "{method} {path}: {text}");
        let method = method.as_str().to_lowercase();
        checked.check(&method, template, status, "application/json", &text);
    }

    // A body that does not all arrive within the body timeout: 408.
    for (template, path) in [
        ("/v1/runs", "/v1/runs"),
        ("/v1/runs/{id}/decision", decision.as_str()),
        ("/v1/runs/{id}/continue", go_on.as_str()),
        ("/v1/hooks/{flow}", "/v1/hooks/echo"),
    ] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n{{\"flow\""
        );
        let answer = raw(&url, &request, Duration::from_secs(10))
            .await
            .expect("answered and closed");
        let (status, content_type, body) = parse_answer(&answer);
        assert_eq!(status, 408, "{answer}");
        checked.check("post", template, status, &content_type, &body);
    }

    // Every documented operation was served, with every status it documents.
    let documented: BTreeMap<(String, String), BTreeSet<u16>> = checked.document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, methods)| {
            methods
                .as_object()
                .expect("methods")
                .iter()
                .map(move |(method, operation)| {
                    let statuses = operation["responses"]
                        .as_object()
                        .expect("responses")
                        .keys()
                        .map(|status| status.parse::<u16>().expect("a status"))
                        .collect();
                    ((method.clone(), path.clone()), statuses)
                })
        })
        .collect();
    for ((method, path), statuses) in &documented {
        for status in statuses {
            assert!(
                checked
                    .met
                    .contains(&(method.clone(), path.clone(), *status)),
                "{method} {path} was never seen answering {status}"
            );
        }
    }
}

#[test]
fn the_document_in_docs_is_the_one_served() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("docs/openapi.json"))
            .expect("JSON");
    assert!(
        written == weft_server::openapi_document(),
        "docs/openapi.json is stale: cargo run -p weft-server --bin openapi > docs/openapi.json"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_not_sent_within_the_header_timeout_is_closed() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), Duration::from_secs(1)).await;
    // Half a request (without a token), and nothing at all: both closed, unanswered.
    for request in ["GET /v1/runs HTTP/1.1\r\nHost: x\r\n", "GET /v1/ru", ""] {
        let answer = raw(&url, request, Duration::from_secs(10)).await;
        assert_eq!(answer.as_deref(), Some(""), "{request:?}");
    }
    // Meanwhile, and after, whole requests are answered.
    let answer = reqwest::Client::new()
        .get(format!("{url}/v1/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declared_length_over_the_limit_is_refused_before_the_body_is_sent() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    for authorization in [format!("Authorization: Bearer {TOKEN}\r\n"), String::new()] {
        let request = format!(
            "POST /v1/runs HTTP/1.1\r\nHost: x\r\n{authorization}Content-Length: 99999999999\r\n\r\n"
        );
        // Answered and closed well before the body timeout would have passed.
        let answer = raw(&url, &request, Duration::from_millis(900))
            .await
            .expect("answered at once");
        let (status, content_type, body) = parse_answer(&answer);
        assert_eq!(
            (status, content_type.as_str()),
            (413, "application/json"),
            "{answer}"
        );
        let body: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(body["code"], "too_large", "{body}");
    }
    // Just at the limit, it is read.
    let body = format!(
        "{{\"flow\": \"echo\", \"input\": \"{}\"}}",
        "x".repeat(4000)
    );
    let body = format!("{body:<4096}");
    let answer = reqwest::Client::new()
        .post(format!("{url}/v1/runs"))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status().as_u16(), 201);
}

#[tokio::test(flavor = "multi_thread")]
async fn several_authorization_headers_are_refused_whichever_comes_first() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    let http = reqwest::Client::new();
    let wrong = "wrong-token-0123456789";
    for tokens in [[TOKEN, wrong], [wrong, TOKEN], [TOKEN, TOKEN]] {
        let answer = http
            .get(format!("{url}/v1/runs"))
            .bearer_auth(tokens[0])
            .bearer_auth(tokens[1])
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status().as_u16(), 400, "{tokens:?}");
        let body: Value = answer.json().await.expect("JSON");
        assert_eq!(body["code"], "bad_request", "{body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|message| message.contains("Authorization")),
            "{body}"
        );
    }
    let answer = http
        .get(format!("{url}/v1/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status().as_u16(), 200);
}

/// Found by the fuzz properties: a path parameter that is not UTF-8 once decoded was refused
/// with a `text/plain` 400 rather than `{code, message}`.
#[tokio::test(flavor = "multi_thread")]
async fn a_path_that_is_not_utf8_is_refused_with_a_json_error() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    let http = reqwest::Client::new();
    use reqwest::Method;
    for (method, path) in [
        (Method::POST, "/v1/hooks/%FF"),
        (Method::POST, "/v1/hooks/echo%C0"),
        (Method::GET, "/v1/runs/%FF"),
        (Method::GET, "/v1/runs/%FF/events"),
        (Method::POST, "/v1/runs/%FF/decision"),
        (Method::POST, "/v1/runs/%FF/cancel"),
    ] {
        let (status, content_type, body) = call(
            &http,
            method.clone(),
            &format!("{url}{path}"),
            true,
            Some("\"approve\""),
        )
        .await;
        assert_eq!(
            (status, content_type.as_str()),
            (400, "application/json"),
            "{method} {path}: {body}"
        );
        let body: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(body["code"], "bad_request", "{body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|message| message.contains("UTF-8")),
            "{body}"
        );
    }
}

/// Found by the fuzz properties: a webhook's body as deep as a body may be was stored in its
/// run's state deeper than the store read back, and the run, and every listing of approvals,
/// answered 500 from then on.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_of_a_body_nested_as_deep_as_json_is_read_stays_readable() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    let http = reqwest::Client::new();
    let deepest = format!("{}1{}", "[".repeat(127), "]".repeat(127));
    assert!(
        serde_json::from_str::<Value>(&deepest).is_ok(),
        "read as JSON"
    );
    let (status, _, started) = call(
        &http,
        reqwest::Method::POST,
        &format!("{url}/v1/hooks/review"),
        true,
        Some(&deepest),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id: Value = serde_json::from_str(&started).expect("JSON");
    let id = id["runId"].as_str().expect("an id").to_string();
    // Once it waits at its approval, it is listed and shown.
    let mut listed = String::new();
    for _ in 0..100 {
        let (status, _, body) = call(
            &http,
            reqwest::Method::GET,
            &format!("{url}/v1/approvals"),
            true,
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        if body.contains(&id) {
            listed = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed.contains(&id), "never listed: {listed}");
    let (status, _, shown) = call(
        &http,
        reqwest::Method::GET,
        &format!("{url}/v1/runs/{id}"),
        true,
        None,
    )
    .await;
    assert_eq!(status, 200, "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_listed_a_page_at_a_time_each_once_by_the_cursor_of_the_page_before() {
    let dir = tempfile::tempdir().expect("dir");
    let url = serve(dir.path(), weft_server::DEFAULT_HEADER_TIMEOUT).await;
    let http = reqwest::Client::new();
    let mut started = Vec::new();
    for n in 0..5 {
        let answer: Value = http
            .post(format!("{url}/v1/runs"))
            .bearer_auth(TOKEN)
            .json(&json!({ "flow": "echo", "input": format!("run {n}") }))
            .send()
            .await
            .expect("started")
            .json()
            .await
            .expect("JSON");
        started.push(answer["runId"].as_str().expect("an id").to_string());
    }
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut address = format!("{url}/v1/runs?limit=2");
        if let Some(cursor) = &cursor {
            address.push_str(&format!("&cursor={cursor}"));
        }
        let answer = http
            .get(address)
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("a page");
        assert_eq!(answer.status(), 200);
        cursor = answer
            .headers()
            .get("next-cursor")
            .map(|value| value.to_str().expect("text").to_string());
        let page: Vec<Value> = answer.json().await.expect("JSON");
        pages += 1;
        listed.extend(
            page.iter()
                .map(|run| run["id"].as_str().expect("id").to_string()),
        );
        if cursor.is_none() {
            break;
        }
        assert_eq!(page.len(), 2, "a page with more after it is full");
    }
    assert_eq!(pages, 3);
    let mut sorted = listed.clone();
    sorted.sort();
    sorted.dedup();
    started.sort();
    assert_eq!(sorted, started, "each run once: {listed:?}");
    let answer = http
        .get(format!("{url}/v1/runs?cursor=nowhere"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("refused");
    assert_eq!(answer.status(), 400);
    let error: Value = answer.json().await.expect("JSON");
    assert_eq!(error["message"], json!("the cursor `nowhere` names no run"));
}
