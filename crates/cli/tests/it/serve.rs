//! `weft serve` (docs/serving.md) over real HTTP on loopback, through the real executable: every
//! route
//! and every refusal (401, 400, 404, 409, 413), server-sent events, approvals with forms decided
//! by a named token, webhooks, a timeout the server settles, `weft serve` and `weft resume`
//! racing to decide one run (exactly one wins), and SIGTERM storing what runs as cancelled.

use crate::common;

use std::io::BufReader;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::serve::{OTHER, Server, TOKEN};
use common::{Sandbox, edge, node};
use serde_json::{Value, json};
use weft_scripted_llm::{Reply, Script, ScriptedLlm};

/// A flow to approve: start → review (a form: tone, amount) → sent / dropped.
fn review_flow() -> Value {
    json!({
        "version": 1,
        "name": "Review",
        "nodes": [
            node("start", "start", json!({ "initialInput": "a draft" })),
            node("review", "approval", json!({
                "message": "Send {{ PREVIOUS_OUTPUT }}?",
                "fields": [
                    { "name": "tone", "type": "choice", "options": ["warm", "formal"] },
                    { "name": "amount", "type": "number", "required": true }
                ]
            })),
            node("sent", "template", json!({ "template": "sent {{ PREVIOUS_OUTPUT }} ({{ approval.tone }}, {{ approval.amount }}) by {{ approval.by }}" })),
            node("dropped", "template", json!({ "template": "dropped by {{ approval.by }}" })),
        ],
        "edges": [
            edge("e1", "start", "review", None),
            edge("e2", "review", "sent", Some("approve")),
            edge("e3", "review", "dropped", Some("reject")),
        ]
    })
}

/// A flow that echoes its input.
fn echo_flow() -> Value {
    json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("said", "template", json!({ "template": "got {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [edge("e1", "start", "said", None)]
    })
}

fn refusal(answer: &(u16, Value), status: u16, code: &str) {
    assert_eq!(answer.0, status, "{answer:?}");
    assert_eq!(answer.1["code"], code, "{answer:?}");
    assert!(
        answer.1["message"]
            .as_str()
            .is_some_and(|message| !message.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_answers_and_every_refusal_has_its_status() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &["--max-body", "2048"], None);
    let flows = sandbox.dir.path().join("flows");
    sandbox.flow("flows/review.json", &review_flow());
    sandbox.flow("flows/echo.json", &echo_flow());
    std::fs::write(
        flows.join("broken.json"),
        "{\"nodes\": [{\"id\": \"x\", \"type\": \"warp\"}]}",
    )
    .expect("broken");
    std::fs::write(
        sandbox.dir.path().join("outside.json"),
        echo_flow().to_string(),
    )
    .expect("outside");

    // The document, without a token.
    let (status, doc) = server
        .call(reqwest::Method::GET, "/openapi.json", None, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/runs",
        "/v1/runs/{id}/events",
        "/v1/runs/{id}/decision",
        "/v1/approvals",
        "/v1/hooks/{flow}",
    ] {
        assert!(doc["paths"][path].is_object(), "{path}");
    }

    // 401 without a token or with a wrong one, on every route.
    for (method, path) in [
        (reqwest::Method::GET, "/v1/runs"),
        (reqwest::Method::POST, "/v1/runs"),
        (reqwest::Method::GET, "/v1/approvals"),
        (reqwest::Method::POST, "/v1/hooks/echo"),
        (reqwest::Method::GET, "/v1/runs/x/events"),
    ] {
        refusal(
            &server.call(method.clone(), path, None, None).await,
            401,
            "unauthorized",
        );
        refusal(
            &server
                .call(method, path, Some("wrong-token-000000000000"), None)
                .await,
            401,
            "unauthorized",
        );
    }

    // 400 / 404 / 413 when starting.
    let start = |body: &str| {
        server.call(
            reqwest::Method::POST,
            "/v1/runs",
            Some(TOKEN),
            Some(body.to_string()),
        )
    };
    refusal(&start("{\"flow\": ").await, 400, "bad_request");
    refusal(&start("{\"input\": 1}").await, 400, "bad_request");
    refusal(&start("{\"flow\": \"nope\"}").await, 404, "not_found");
    refusal(
        &start("{\"flow\": \"../outside\"}").await,
        400,
        "bad_request",
    );
    refusal(
        &start("{\"flow\": \"/etc/passwd\"}").await,
        400,
        "bad_request",
    );
    refusal(&start("{\"flow\": \"broken\"}").await, 400, "invalid_flow");
    refusal(
        &start("{\"flow\": \"review\", \"decide\": {\"start\": \"approve\"}}").await,
        400,
        "bad_request",
    );
    let big = json!({ "flow": "echo", "input": "x".repeat(4096) }).to_string();
    refusal(&start(&big).await, 413, "too_large");

    // A run that pauses: its events stream until the pause, and it is listed as an approval.
    let (status, started) = server
        .post("/v1/runs", json!({ "flow": "review", "input": "the note" }))
        .await;
    assert_eq!(status, 201, "{started}");
    let id = started["runId"].as_str().expect("id").to_string();
    assert_eq!(started["status"], "running");
    let response = server
        .http
        .get(format!("{}/v1/runs/{id}/events", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("events");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let stream = tokio::time::timeout(Duration::from_secs(20), response.text())
        .await
        .expect("the stream ends at the pause")
        .expect("text");
    let events: Vec<Value> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("an event"))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|event| event["type"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"run_start"));
    assert_eq!(kinds.last(), Some(&"wait_input"), "{kinds:?}");
    assert!(
        events
            .windows(2)
            .all(|pair| pair[0]["seq"].as_u64() < pair[1]["seq"].as_u64())
    );

    let (status, approvals) = server.get("/v1/approvals").await;
    assert_eq!(status, 200);
    let approval = approvals
        .as_array()
        .expect("a list")
        .iter()
        .find(|approval| approval["runId"] == id)
        .expect("listed")
        .clone();
    assert_eq!(approval["nodeId"], "review");
    assert_eq!(approval["flow"], "review");
    assert_eq!(approval["message"], "Send the note?");
    assert_eq!(approval["input"], "the note");
    assert_eq!(approval["fields"][1]["name"], "amount");

    // Deciding: answers that do not fit the form are refused and the run stays paused.
    let decision_path = format!("/v1/runs/{id}/decision");
    let decide = |body: Value| server.post(&decision_path, body);
    refusal(
        &decide(json!({ "decision": "approve", "fields": { "tone": "warm" } })).await,
        400,
        "bad_request",
    );
    refusal(
        &decide(json!({ "decision": "maybe" })).await,
        400,
        "bad_request",
    );
    refusal(
        &decide(json!({ "decision": "timeout" })).await,
        400,
        "bad_request",
    );
    refusal(
        &server
            .post("/v1/runs/nope/decision", json!("approve"))
            .await,
        404,
        "not_found",
    );
    server.wait_for(&id, "paused").await;
    let (status, decided) =
        decide(json!({ "decision": "approve", "fields": { "tone": "warm", "amount": 40 } })).await;
    assert_eq!(
        (status, decided["status"].clone()),
        (200, json!("running")),
        "{decided}"
    );
    let run = server.wait_for(&id, "completed").await;
    assert_eq!(
        run["run"]["result"], "sent the note (warm, 40) by ada",
        "the token's name decided"
    );
    let review = run["nodeOutputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|output| output["nodeId"] == "review")
        .expect("review")
        .clone();
    assert_eq!(review["approval"]["by"], "ada");
    // Deciding twice: 409.
    refusal(&decide(json!("reject")).await, 409, "conflict");

    // Reading runs.
    let (status, listed) = server.get("/v1/runs?limit=1").await;
    assert_eq!((status, listed.as_array().map(Vec::len)), (200, Some(1)));
    assert!(listed[0]["cost"].is_object());
    refusal(&server.get("/v1/runs?limit=many").await, 400, "bad_request");
    refusal(&server.get("/v1/runs/nope").await, 404, "not_found");

    // Cancelling a paused run; an ended one is a conflict.
    let (_, second) = server.post("/v1/runs", json!({ "flow": "review" })).await;
    let second = second["runId"].as_str().expect("id").to_string();
    server.wait_for(&second, "paused").await;
    let (status, cancelled) = server
        .post(&format!("/v1/runs/{second}/cancel"), json!({}))
        .await;
    assert_eq!(
        (status, cancelled["status"].clone()),
        (200, json!("cancelled"))
    );
    server.wait_for(&second, "cancelled").await;
    refusal(
        &server
            .post(&format!("/v1/runs/{second}/cancel"), json!({}))
            .await,
        409,
        "conflict",
    );
    refusal(
        &server.post("/v1/runs/nope/cancel", json!({})).await,
        404,
        "not_found",
    );
    let (_, approvals) = server.get("/v1/approvals").await;
    assert!(
        approvals
            .as_array()
            .expect("list")
            .iter()
            .all(|approval| approval["runId"] != second)
    );

    // Webhooks: the body is the input, JSON or text.
    let (status, hooked) = server
        .call(
            reqwest::Method::POST,
            "/v1/hooks/echo",
            Some(OTHER),
            Some("{\"order\": 7}".into()),
        )
        .await;
    assert_eq!(status, 202, "{hooked}");
    let run = server
        .wait_for(hooked["runId"].as_str().expect("id"), "completed")
        .await;
    assert_eq!(run["run"]["input"], json!({ "order": 7 }));
    assert_eq!(run["run"]["result"], "got {\"order\":7}");
    let (_, hooked) = server
        .call(
            reqwest::Method::POST,
            "/v1/hooks/echo",
            Some(OTHER),
            Some("plain words".into()),
        )
        .await;
    let run = server
        .wait_for(hooked["runId"].as_str().expect("id"), "completed")
        .await;
    assert_eq!(run["run"]["result"], "got plain words");
    refusal(
        &server
            .call(reqwest::Method::POST, "/v1/hooks/.env", Some(TOKEN), None)
            .await,
        400,
        "bad_request",
    );
    refusal(
        &server
            .call(
                reqwest::Method::POST,
                "/v1/hooks/missing",
                Some(TOKEN),
                None,
            )
            .await,
        404,
        "not_found",
    );

    // Unknown routes and methods answer in the same shape.
    refusal(&server.get("/v2/nothing").await, 404, "not_found");
    refusal(
        &server
            .call(reqwest::Method::DELETE, "/v1/runs", Some(TOKEN), None)
            .await,
        405,
        "method_not_allowed",
    );

    // No token anywhere: not in what the server printed, not in the store.
    let mut server = server;
    let stderr = server.child.stderr.take().expect("stderr");
    let _ = server.child.kill();
    let _ = server.child.wait();
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut printed).expect("stderr");
    assert!(printed.contains("for ada, ci"), "{printed}");
    drop(server);
    let stored = sandbox.db_bytes();
    for token in [TOKEN, OTHER] {
        assert!(!printed.contains(token), "a token printed");
        assert!(
            !stored
                .windows(token.len())
                .any(|window| window == token.as_bytes()),
            "a token in the store"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_and_weft_resume_racing_to_decide_a_run_exactly_one_wins() {
    race_to_decide(Sandbox::new()).await;
}

/// The same race with the run store on PostgreSQL: the claim is a row lock there.
#[tokio::test(flavor = "multi_thread")]
async fn on_postgres_the_server_and_weft_resume_racing_to_decide_a_run_exactly_one_wins() {
    race_to_decide(Sandbox::on_postgres()).await;
}

async fn race_to_decide(sandbox: Sandbox) {
    let server = Server::start(&sandbox, &[], None);
    sandbox.flow("flows/review.json", &review_flow());
    for round in 0..5 {
        let (_, started) = server
            .post("/v1/runs", json!({ "flow": "review", "decide": {} }))
            .await;
        let id = started["runId"].as_str().expect("id").to_string();
        server.wait_for(&id, "paused").await;
        let resume = sandbox
            .command(
                &[
                    "resume",
                    &id,
                    "--decision",
                    "reject",
                    "--field",
                    "amount=1",
                    "--by",
                    "bob",
                    "--db",
                    &sandbox.db_arg(),
                ],
                None,
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("weft resume");
        let decision_path = format!("/v1/runs/{id}/decision");
        let (answer, resumed) = tokio::join!(
            server.post(
                &decision_path,
                json!({ "decision": "approve", "fields": { "tone": "formal", "amount": 2 } })
            ),
            tokio::task::spawn_blocking(move || resume.wait_with_output().expect("resume ends")),
        );
        let resumed = resumed.expect("join");
        let served = answer.0 == 200;
        let resumed_won = resumed.status.code() == Some(0);
        assert!(
            served != resumed_won,
            "round {round}: exactly one wins: server {answer:?}, resume {:?} {}",
            resumed.status,
            String::from_utf8_lossy(&resumed.stderr)
        );
        if !served {
            assert_eq!(answer.0, 409, "{answer:?}");
        } else {
            assert_eq!(
                resumed.status.code(),
                Some(2),
                "{}",
                String::from_utf8_lossy(&resumed.stderr)
            );
        }
        let run = server.wait_for(&id, "completed").await;
        let wanted = if served {
            "sent a draft (formal, 2) by ada"
        } else {
            "dropped by bob"
        };
        assert_eq!(run["run"]["result"], wanted, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_settles_a_timeout_and_sigterm_stores_what_runs_as_cancelled() {
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 20_000,
        content: "too late".into(),
    }))
    .await
    .expect("server");
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &[], Some(&llm));
    sandbox.flow(
        "flows/waits.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("review", "approval", json!({ "message": "ok?", "timeoutSeconds": 1 })),
                node("yes", "template", json!({ "template": "yes" })),
                node("no", "template", json!({ "template": "no" })),
                node("late", "template", json!({ "template": "{{ approval.decision }} after {{ approval.note }}" })),
            ],
            "edges": [
                edge("e1", "start", "review", None),
                edge("e2", "review", "yes", Some("approve")),
                edge("e3", "review", "no", Some("reject")),
                edge("e4", "review", "late", Some("timeout")),
            ]
        }),
    );
    sandbox.flow(
        "flows/slow.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("ask", "agent", json!({ "model": "gpt-4o-mini" })),
            ],
            "edges": [edge("e1", "start", "ask", None)]
        }),
    );
    let (_, started) = server.post("/v1/runs", json!({ "flow": "waits" })).await;
    let timed = started["runId"].as_str().expect("id").to_string();
    let (_, started) = server.post("/v1/runs", json!({ "flow": "waits" })).await;
    let kept = started["runId"].as_str().expect("id").to_string();
    let run = server.wait_for(&timed, "completed").await;
    assert_eq!(
        run["run"]["result"],
        "timeout after nobody decided within 1 s"
    );
    server.wait_for(&kept, "completed").await;

    // One paused (no timeout), one waiting for a slow model: SIGTERM.
    sandbox.flow("flows/review.json", &review_flow());
    let (_, paused) = server.post("/v1/runs", json!({ "flow": "review" })).await;
    let paused = paused["runId"].as_str().expect("id").to_string();
    server.wait_for(&paused, "paused").await;
    let (_, slow) = server.post("/v1/runs", json!({ "flow": "slow" })).await;
    let slow = slow["runId"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while llm.request_count() == 0 {
        assert!(Instant::now() < deadline, "the slow model was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = server.child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    let runs = sandbox.runs_within(Duration::from_secs(10));
    let status_of = |id: &str| {
        runs.iter()
            .find(|run| run["id"] == id)
            .map(|run| run["status"].clone())
            .unwrap_or_default()
    };
    assert_eq!(status_of(&slow), "cancelled");
    assert_eq!(status_of(&paused), "paused", "a paused run keeps its pause");
}

/// The events of what a run does inside its steps reach a client of the event stream too: an
/// agent's calls of its subagents (as tools), and the steps of a subflow (with their scope).
#[tokio::test(flavor = "multi_thread")]
async fn the_event_stream_carries_subagent_calls_and_the_steps_of_a_subflow() {
    use weft_scripted_llm::{Match, Rule, ToolCall};
    let script = Script::default()
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("user".into()),
                ..Match::default()
            },
            Reply::ToolCalls {
                calls: vec![ToolCall {
                    id: Some("call_a".into()),
                    name: "researcher".into(),
                    arguments: json!({"task": "facts about deltas"}),
                }],
                delay_ms: 0,
            },
        ))
        .with_rule(Rule::on(
            Match {
                has_tools: Some(true),
                last_role: Some("tool".into()),
                ..Match::default()
            },
            Reply::text("final answer"),
        ))
        .with_fallback(Reply::echo("facts for: "));
    let llm = ScriptedLlm::start(script).await.expect("llm");
    let sandbox = Sandbox::new();
    let flows = sandbox.dir.path().join("flows");
    std::fs::create_dir_all(&flows).expect("flows");
    let team = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows/team.json"),
    )
    .expect("flows/team.json");
    std::fs::write(flows.join("team.json"), team).expect("team");
    std::fs::write(flows.join("echo.json"), echo_flow().to_string()).expect("echo");
    let outer = json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({ "initialInput": "deltas" })),
            node("sub", "subflow", json!({ "flow": "echo.json" })),
            node("team", "subflow", json!({ "flow": "team.json" })),
        ],
        "edges": [edge("e1", "start", "sub", None), edge("e2", "sub", "team", None)]
    });
    std::fs::write(flows.join("outer.json"), outer.to_string()).expect("outer");
    let server = Server::start(&sandbox, &[], Some(&llm));
    let (status, started) = server.post("/v1/runs", json!({ "flow": "outer" })).await;
    assert_eq!(status, 201, "{started}");
    let id = started["runId"].as_str().expect("id").to_string();
    let stream = server
        .http
        .get(format!("{}/v1/runs/{id}/events", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("events");
    let text = tokio::time::timeout(Duration::from_secs(30), stream.text())
        .await
        .expect("the stream ends with the run")
        .expect("text");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("an event"))
        .collect();
    let last = events.last().expect("events");
    assert_eq!(last["type"], "run_end", "{last}");
    assert!(
        last["content"].as_str().unwrap_or("").contains("completed"),
        "{last}"
    );
    let scoped = |scope: &str, node: &str, kind: &str| {
        events.iter().any(|event| {
            event["scope"] == json!(scope)
                && event["nodeId"] == json!(node)
                && event["type"] == json!(kind)
        })
    };
    assert!(
        scoped("sub", "said", "step_end"),
        "the subflow's step: {text}"
    );
    assert!(
        scoped("team", "lead", "subagent_call_start"),
        "the subagent call: {text}"
    );
    assert!(
        scoped("team", "lead", "subagent_call_end"),
        "its end: {text}"
    );
    assert!(
        events
            .windows(2)
            .all(|pair| pair[0]["seq"].as_u64() < pair[1]["seq"].as_u64()),
        "in order, each once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_waits_gets_how_the_run_went_in_the_answer() {
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 2_000,
        content: "late".into(),
    }))
    .await
    .expect("scripted LLM");
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &[], Some(&llm));
    sandbox.flow("flows/echo.json", &echo_flow());
    sandbox.flow("flows/review.json", &review_flow());
    sandbox.flow(
        "flows/slow.json",
        &json!({"version": 1, "nodes": [
            node("start", "start", json!({})),
            node("ask", "agent", json!({"model": "gpt-4o-mini", "userPrompt": "{{ PREVIOUS_OUTPUT }}"}))],
            "edges": [edge("e1", "start", "ask", None)]}),
    );
    let call = |path: &'static str, body: &'static str| {
        server.call(
            reqwest::Method::POST,
            path,
            Some(TOKEN),
            Some(body.to_string()),
        )
    };

    // A webhook that waits answers with the result; so does POST /v1/runs.
    let (status, answer) = call("/v1/hooks/echo?wait=10", "the ping").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["result"], "got the ping");
    let id = answer["runId"].as_str().expect("id");
    let (_, shown) = server.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(shown["run"]["summary"]["trigger"]["kind"], "hook");
    let (status, answer) = call("/v1/runs?wait=10", r#"{"flow": "echo", "input": "x"}"#).await;
    assert_eq!(
        (status, &answer["result"]),
        (200, &json!("got x")),
        "{answer}"
    );

    // A run that pauses within the wait says what it waits for.
    let (status, answer) = call("/v1/runs?wait=10", r#"{"flow": "review"}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "paused");
    assert_eq!(answer["waiting"]["nodeId"], "review");
    assert_eq!(answer["waiting"]["message"], "Send a draft?");

    // One that goes on past the wait is answered as without it, and goes on.
    let (status, answer) = call("/v1/hooks/slow?wait=1", "hi").await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["runId"].as_str().expect("id").to_string();
    let run = server.wait_for(&id, "completed").await;
    assert_eq!(run["run"]["result"], "late");
    let (status, answer) = call("/v1/runs", r#"{"flow": "echo"}"#).await;
    assert_eq!(status, 201, "{answer}");

    // A wait that is not a number is refused before anything starts.
    let (_, before) = server.get("/v1/runs?limit=1000").await;
    let refused = call("/v1/hooks/echo?wait=soon", "x").await;
    refusal(&refused, 400, "bad_request");
    let (_, after) = server.get("/v1/runs?limit=1000").await;
    assert_eq!(
        before.as_array().map(Vec::len),
        after.as_array().map(Vec::len)
    );
}

/// `bench/servers` (the comparison with n8n and Flowise) keeps working: run on `weft serve`
/// alone, briefly, it checks every answer and prints its table. Speed is not asserted here.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_harness_runs_on_weft_serve_and_checks_every_answer() {
    let llm = ScriptedLlm::start(Script::always(Reply::Text {
        content: "LLM: ".into(),
        delay_ms: 50,
        echo: true,
        chunk_gap_ms: 0,
    }))
    .await
    .expect("scripted LLM");
    let harness =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/servers/run_servers.py");
    let ran = tokio::process::Command::new("python3")
        .arg(harness)
        .args(["--weft", env!("CARGO_BIN_EXE_weft"), "--llm-url"])
        .arg(llm.base_url())
        .args([
            "--systems",
            "weft-hook,weft-runs",
            "--clients",
            "1,4",
            "--rounds",
            "1",
            "--rest-s",
            "0.5",
        ])
        .output()
        .await
        .expect("python3 runs the harness");
    let table = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    for system in ["weft-hook", "weft-runs"] {
        for clients in [1, 4] {
            let row = table
                .lines()
                .find(|line| line.starts_with(&format!("| {system} | {clients} |")))
                .unwrap_or_else(|| panic!("no row of {system} at {clients}: {table}"));
            assert!(row.contains("| 0/40 |"), "{row}");
        }
    }
}
