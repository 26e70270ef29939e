//! `weft restate` (docs/team-servers.md) with a real Restate server and a PostgreSQL run store on
//! loopback:
//! flows/triage.json run as a workflow, paused, decided through Restate's ingress and
//! completed; a worker killed with SIGKILL in the middle of a run, which another worker
//! completes without the LLM step that had finished being asked again; 200 runs over two
//! workers, none lost.

use crate::common;

use std::time::{Duration, Instant};

use common::restate::{Balancer, RestateServer, Worker};
use common::serve::{Server, TOKEN};
use common::{Sandbox, edge, every_second_flow, node, runs_by_occurrence, wait_for_scheduled_runs};
use serde_json::{Value, json};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};

/// `weft restate` on a free port over the sandbox's flows and store, for `server`'s ingress;
/// with `register`, it registers itself with `server`'s admin API.
fn worker(sandbox: &Sandbox, llm: &ScriptedLlm, server: &RestateServer, register: bool) -> Worker {
    let flows = sandbox.dir.path().join("flows");
    let db = sandbox.db_arg();
    let mut args = vec![
        "restate",
        "--flows",
        flows.to_str().expect("utf-8"),
        "--db",
        &db,
        "--addr",
        "127.0.0.1:0",
        "--ingress",
        &server.ingress,
        "--retry-after-ms",
        "200",
    ];
    if register {
        args.extend(["--register", &server.admin]);
    }
    Worker::spawn(sandbox.command(&args, Some(llm)))
}

/// Restate's ingress and admin API.
struct Ingress {
    http: reqwest::Client,
    server: RestateServer,
}

impl Ingress {
    fn new(server: RestateServer) -> Ingress {
        Ingress {
            http: reqwest::Client::new(),
            server,
        }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.server.ingress))
            .json(&body)
            .send()
            .await
            .expect("the ingress answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Starts run `id` of `flow` without waiting for it.
    async fn start(&self, id: &str, flow: &str) {
        let (status, answer) = self
            .post(&format!("/WeftRun/{id}/run/send"), json!({ "flow": flow }))
            .await;
        assert!(status == 200 || status == 202, "{status} {answer}");
    }

    /// Waits for the workflow `id` to end and returns its result.
    async fn result(&self, id: &str) -> Value {
        let response = tokio::time::timeout(
            Duration::from_secs(60),
            self.http
                .get(format!(
                    "{}/restate/workflow/WeftRun/{id}/attach",
                    self.server.ingress
                ))
                .send(),
        )
        .await
        .expect("the workflow ends within a minute")
        .expect("attach");
        assert_eq!(response.status().as_u16(), 200, "attach {id}");
        response.json().await.expect("the workflow's result")
    }

    async fn register(&self, uri: &str) {
        let response = self
            .http
            .post(format!("{}/deployments", self.server.admin))
            .json(&json!({ "uri": uri, "force": true }))
            .send()
            .await
            .expect("the admin API answers");
        assert!(
            response.status().is_success(),
            "{:?}",
            response.text().await
        );
    }
}

/// What `weft show --json` says of run `id`.
fn shown(sandbox: &Sandbox, id: &str) -> Value {
    let ran = sandbox.run(&["show", id, "--db", &sandbox.db_arg(), "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    serde_json::from_str(&ran.stdout).expect("show JSON")
}

/// Waits until the store says run `id` has `status`.
async fn wait_for_status(sandbox: &Sandbox, id: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let ran = sandbox.run(&["show", id, "--db", &sandbox.db_arg(), "--json"]);
        if ran.code == Some(0) {
            let shown: Value = serde_json::from_str(&ran.stdout).expect("show JSON");
            if shown["run"]["summary"]["status"] == status {
                return shown;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "run {id} never became {status}: {ran:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn triage_llm() -> Script {
    Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("Ticket:".into()),
                ..Match::default()
            },
            Reply::text("Refund"),
        ))
        .with_fallback(Reply::text("We are sorry your parcel was lost."))
}

/// flows/triage.json, its scripted LLM, a Restate server and one registered worker.
async fn triage_with_one_worker() -> (Sandbox, ScriptedLlm, Ingress, Worker) {
    let sandbox = triage_sandbox();
    let llm = ScriptedLlm::start(triage_llm())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let worker = worker(&sandbox, &llm, &ingress.server, true);
    (sandbox, llm, ingress, worker)
}

#[tokio::test(flavor = "multi_thread")]
async fn triage_runs_as_a_workflow_pauses_and_is_decided_through_the_ingress() {
    let (sandbox, _llm, ingress, _worker) = triage_with_one_worker().await;

    ingress.start("ticket-1", "triage").await;
    let paused = wait_for_status(&sandbox, "ticket-1", "paused").await;
    assert_eq!(paused["run"]["summary"]["waitingNodeId"], "review");

    // Answers that do not fit are refused, and the run stays paused.
    let (status, answer) = ingress
        .post("/WeftRun/ticket-1/decide", json!({ "decision": "maybe" }))
        .await;
    assert!((400..500).contains(&status), "{status} {answer}");
    assert_eq!(
        shown(&sandbox, "ticket-1")["run"]["summary"]["status"],
        "paused"
    );

    let (status, answer) = ingress
        .post(
            "/WeftRun/ticket-1/decide",
            json!({ "decision": "approve", "by": "ada" }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let result = ingress.result("ticket-1").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(
        result["result"], "SENT: We are sorry your parcel was lost.",
        "{result}"
    );

    // The run is in the shared store like any other: every event, the decision and who took it.
    let run = shown(&sandbox, "ticket-1");
    assert_eq!(run["run"]["summary"]["status"], "completed");
    assert_eq!(run["run"]["summary"]["flowName"], "Support triage");
    let kinds: Vec<&str> = run["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["type"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"run_start"));
    assert!(kinds.contains(&"wait_input"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_end"));
    let review = run["nodeOutputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|output| output["nodeId"] == "review")
        .expect("the review's output");
    assert_eq!(review["approval"]["by"], "ada", "{review}");

    // Nothing waits any more: another decision is refused.
    let (status, answer) = ingress
        .post("/WeftRun/ticket-1/decide", json!({ "decision": "reject" }))
        .await;
    assert_eq!(status, 409, "{answer}");
}

/// The sandbox with flows/triage.json in its flows folder.
fn triage_sandbox() -> Sandbox {
    let triage: Value = serde_json::from_str(include_str!("../../../../flows/triage.json"))
        .expect("flows/triage.json");
    sandbox_with_flow("triage", &triage)
}

/// A sandbox on PostgreSQL whose flows folder (the workers' `--flows`) holds `flow` as `name`.
fn sandbox_with_flow(name: &str, flow: &Value) -> Sandbox {
    let sandbox = Sandbox::on_postgres();
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    sandbox.flow(&format!("flows/{name}.json"), flow);
    sandbox
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restate_run_is_decided_with_weft_resume_or_weft_serve_through_the_ingress() {
    let (sandbox, llm, ingress, _worker) = triage_with_one_worker().await;
    ingress.start("ticket-a", "triage").await;
    ingress.start("ticket-b", "triage").await;
    wait_for_status(&sandbox, "ticket-a", "paused").await;
    wait_for_status(&sandbox, "ticket-b", "paused").await;
    let db = sandbox.db_arg();

    // `weft resume` hands the decision to the workflow and prints how the run ended.
    let ran = sandbox
        .run_with(
            &[
                "resume",
                "ticket-a",
                "--decision",
                "approve",
                "--by",
                "bob",
                "--db",
                &db,
            ],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout, "SENT: We are sorry your parcel was lost.\n",
        "{ran:?}"
    );
    let result = ingress.result("ticket-a").await;
    assert_eq!(
        result["status"], "completed",
        "the workflow took it: {result}"
    );
    // Continuing it here is refused: Restate does that.
    let ran = sandbox.run(&["resume", "ticket-a", "--decision", "reject", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");

    // `weft serve` lists the other one among its approvals and decides it the same way.
    let server = Server::start(&sandbox, &[], None);
    let (api, http) = (&server.url, &server.http);
    let approvals: Value = http
        .get(format!("{api}/v1/approvals"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("approvals")
        .json()
        .await
        .expect("json");
    assert!(
        approvals
            .as_array()
            .expect("a list")
            .iter()
            .any(|approval| approval["runId"] == "ticket-b"),
        "{approvals}"
    );
    // Cancelling it here is refused: its workflow would wait on.
    let cancelled = http
        .post(format!("{api}/v1/runs/ticket-b/cancel"))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .expect("cancel");
    let status = cancelled.status().as_u16();
    let refusal: Value = cancelled.json().await.expect("json");
    assert_eq!(status, 400, "{refusal}");
    assert!(
        refusal["message"]
            .as_str()
            .is_some_and(|message| message.contains("through Restate")),
        "{refusal}"
    );
    let decided = http
        .post(format!("{api}/v1/runs/ticket-b/decision"))
        .bearer_auth(TOKEN)
        .json(&json!({ "decision": "reject", "note": "check the courier" }))
        .send()
        .await
        .expect("decision");
    assert_eq!(decided.status().as_u16(), 200, "{:?}", decided.text().await);
    let result = ingress.result("ticket-b").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(
        result["result"],
        "NOT SENT (check the courier). Draft kept: We are sorry your parcel was lost.",
        "{result}"
    );
    let run = shown(&sandbox, "ticket-b");
    let review = run["nodeOutputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|output| output["nodeId"] == "review")
        .expect("the review's output")
        .clone();
    assert_eq!(
        review["approval"]["by"], "ada",
        "the token's name decided: {review}"
    );
}

/// start → first (agent) → second (agent) → out.
fn two_step_flow() -> Value {
    json!({
        "version": 1,
        "name": "Two steps",
        "nodes": [
            node("start", "start", json!({ "initialInput": "go" })),
            node("first", "agent", json!({ "model": "gpt-4o-mini", "userPrompt": "FIRST step: {{PREVIOUS_OUTPUT}}" })),
            node("second", "agent", json!({ "model": "gpt-4o-mini", "userPrompt": "SECOND step: {{PREVIOUS_OUTPUT}}" })),
            node("out", "output", json!({})),
        ],
        "edges": [
            edge("e1", "start", "first", None),
            edge("e2", "first", "second", None),
            edge("e3", "second", "out", None),
        ]
    })
}

/// start → greet (template).
fn greeting_flow() -> Value {
    json!({
        "version": 1,
        "name": "Greeting",
        "nodes": [
            node("start", "start", json!({ "initialInput": "world" })),
            node("greet", "template", json!({ "template": "hello {{PREVIOUS_OUTPUT}}" })),
        ],
        "edges": [edge("e1", "start", "greet", None)]
    })
}

/// The one text value `sql` selects from the sandbox's PostgreSQL store (on a thread of its
/// own: the client blocks, which a test's async thread cannot).
fn sql_text(sandbox: &Sandbox, sql: &str) -> String {
    let url = sandbox.db_arg();
    let sql = sql.to_string();
    std::thread::spawn(move || {
        postgres::Client::connect(&url, postgres::NoTls)
            .expect("postgres")
            .query_one(sql.as_str(), &[])
            .expect("query")
            .get::<_, String>(0)
    })
    .join()
    .expect("query thread")
}

/// Requests the scripted server received whose last user message contains `text`.
fn asked(llm: &ScriptedLlm, text: &str) -> usize {
    llm.requests()
        .iter()
        .filter(|request| {
            request
                .last_user_text()
                .is_some_and(|last| last.contains(text))
        })
        .count()
}

/// Two workers behind a balancer, registered as one deployment.
async fn two_workers(
    sandbox: &Sandbox,
    llm: &ScriptedLlm,
    ingress: &Ingress,
) -> (Vec<Worker>, Balancer) {
    let workers = vec![
        worker(sandbox, llm, &ingress.server, false),
        worker(sandbox, llm, &ingress.server, false),
    ];
    let balancer = Balancer::start(workers.iter().map(|worker| worker.addr).collect()).await;
    ingress.register(&balancer.url()).await;
    (workers, balancer)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_killed_mid_run_is_replaced_without_asking_a_finished_step_again() {
    let sandbox = sandbox_with_flow("two", &two_step_flow());
    let llm = ScriptedLlm::start(
        Script::default()
            .with_rule(Rule::on(
                Match {
                    last_user_contains: Some("SECOND step".into()),
                    ..Match::default()
                },
                Reply::Slow {
                    delay_ms: 1_500,
                    content: "second answer".into(),
                },
            ))
            .with_fallback(Reply::text("first answer")),
    )
    .await
    .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let (mut workers, _balancer) = two_workers(&sandbox, &llm, &ingress).await;

    ingress.start("crash-1", "two").await;
    // The first step has finished once the second one asks.
    let started = Instant::now();
    while asked(&llm, "SECOND step") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the second step never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Kill the worker running it (the run's lease names its process).
    let owner = sql_text(
        &sandbox,
        "SELECT lease_owner FROM runs WHERE id = 'crash-1'",
    );
    let pid: u32 = owner
        .rsplit(':')
        .nth(1)
        .and_then(|pid| pid.parse().ok())
        .expect("host:pid:start");
    let index = workers
        .iter()
        .position(|worker| worker.child.id() == pid)
        .unwrap_or_else(|| panic!("the owner {owner} is one of the workers"));
    let mut killed = workers.remove(index);
    killed.child.kill().expect("SIGKILL");
    killed.child.wait().expect("reaped");

    let result = ingress.result("crash-1").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], "second answer", "{result}");
    assert_eq!(
        asked(&llm, "FIRST step"),
        1,
        "the finished step was not asked again"
    );
    assert_eq!(
        asked(&llm, "SECOND step"),
        2,
        "the step cut off was asked again"
    );
    // The run's history is whole: one run_start, one run_end, the interruption recorded.
    let run = shown(&sandbox, "crash-1");
    assert_eq!(run["run"]["summary"]["status"], "completed");
    let kinds: Vec<&str> = run["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["type"].as_str())
        .collect();
    assert_eq!(
        kinds.iter().filter(|kind| **kind == "run_start").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"run_end"), "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_runs_over_two_workers_all_complete() {
    let sandbox = sandbox_with_flow("greeting", &greeting_flow());
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let (_workers, balancer) = two_workers(&sandbox, &llm, &ingress).await;

    let ids: Vec<String> = (0..200).map(|n| format!("many-{n:03}")).collect();
    futures_util::future::join_all(ids.iter().map(|id| ingress.start(id, "greeting"))).await;
    let results = futures_util::future::join_all(ids.iter().map(|id| ingress.result(id))).await;
    for (id, result) in ids.iter().zip(&results) {
        assert_eq!(result["status"], "completed", "{id}: {result}");
        assert_eq!(result["result"], "hello world", "{id}: {result}");
    }
    let completed = sql_text(
        &sandbox,
        "SELECT count(*)::text FROM runs WHERE status = 'completed'",
    );
    assert_eq!(completed, "200", "every run is in the store, completed");
    let counts = balancer.counts();
    assert!(
        counts.iter().all(|count| *count > 0),
        "both workers took runs: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_breakpoint_of_a_restate_run_is_a_durable_promise_too() {
    let sandbox = sandbox_with_flow("greeting", &greeting_flow());
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let _worker = worker(&sandbox, &llm, &ingress.server, true);

    // A flow that is not in the folder, or a name that would leave it, ends the workflow with
    // the reason.
    let (status, answer) = ingress
        .post("/WeftRun/bad-1/run", json!({ "flow": "nope" }))
        .await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer.to_string().contains("no flow `nope`"), "{answer}");
    let (status, answer) = ingress
        .post("/WeftRun/bad-2/run", json!({ "flow": "../outside" }))
        .await;
    assert_eq!(status, 400, "{answer}");

    for (id, answer) in [("stop-1", "ingress"), ("stop-2", "weft")] {
        let (status, started) = ingress
            .post(
                &format!("/WeftRun/{id}/run/send"),
                json!({ "flow": "greeting", "breakpoints": [{ "nodeId": "greet", "when": "after" }] }),
            )
            .await;
        assert!(status == 200 || status == 202, "{status} {started}");
        let paused = wait_for_status(&sandbox, id, "paused").await;
        assert_eq!(paused["run"]["summary"]["waitingNodeId"], "greet");
        // A decision is not what a breakpoint waits for.
        let (status, refused) = ingress
            .post(
                &format!("/WeftRun/{id}/decide"),
                json!({ "decision": "approve" }),
            )
            .await;
        assert_eq!(status, 400, "{refused}");
        if answer == "ingress" {
            let (status, answered) = ingress
                .post(
                    &format!("/WeftRun/{id}/proceed"),
                    json!({ "set": "hello restate" }),
                )
                .await;
            assert_eq!(status, 200, "{answered}");
        } else {
            // `weft resume --continue` sends it to the workflow as well.
            let db = sandbox.db_arg();
            let ran = sandbox
                .run_with(
                    &[
                        "resume",
                        id,
                        "--continue",
                        "--set",
                        "\"hello restate\"",
                        "--db",
                        &db,
                    ],
                    &llm,
                )
                .await;
            assert_eq!(ran.code, Some(0), "{ran:?}");
        }
        let result = ingress.result(id).await;
        assert_eq!(result["status"], "completed", "{result}");
        assert_eq!(
            result["result"], "hello restate",
            "the value set at the breakpoint: {result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_nobody_decides_times_out_on_a_durable_timer() {
    let sandbox = sandbox_with_flow(
        "waits",
        &json!({
            "version": 1,
            "name": "Waits",
            "nodes": [
                node("start", "start", json!({ "initialInput": "a draft" })),
                node("review", "approval", json!({ "message": "Send it?", "timeoutSeconds": 1 })),
                node("sent", "template", json!({ "template": "sent" })),
                node("held", "template", json!({ "template": "held" })),
                node("late", "template", json!({ "template": "nobody answered" })),
            ],
            "edges": [
                edge("e1", "start", "review", None),
                edge("e2", "review", "sent", Some("approve")),
                edge("e3", "review", "held", Some("reject")),
                edge("e4", "review", "late", Some("timeout")),
            ]
        }),
    );
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let _worker = worker(&sandbox, &llm, &ingress.server, true);
    // No other host of the store runs: only the workflow's timer can end the wait.
    ingress.start("waits-1", "waits").await;
    let result = ingress.result("waits-1").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], "nobody answered", "{result}");
    let (status, answer) = ingress
        .post("/WeftRun/waits-1/decide", json!({ "decision": "approve" }))
        .await;
    assert_eq!(status, 409, "too late: {answer}");
}

/// A reminder is added to the log of a run that waits in a workflow; the workflow's promise is
/// still found by the decision (it is named by the pause, not by the log's last event).
#[tokio::test(flavor = "multi_thread")]
async fn a_reminder_in_the_log_of_a_waiting_workflow_does_not_lose_its_decision() {
    let sandbox = sandbox_with_flow(
        "pay",
        &json!({
            "version": 1,
            "name": "Pay",
            "nodes": [
                node("start", "start", json!({ "initialInput": "40 EUR" })),
                node("review", "approval", json!({
                    "message": "Pay {{PREVIOUS_OUTPUT}}?",
                    "approvers": ["bob"],
                    "remindAfterSeconds": 1
                })),
                node("paid", "template", json!({ "template": "paid {{PREVIOUS_OUTPUT}}" })),
                node("held", "template", json!({ "template": "held" })),
            ],
            "edges": [
                edge("e1", "start", "review", None),
                edge("e2", "review", "paid", Some("approve")),
                edge("e3", "review", "held", Some("reject")),
            ]
        }),
    );
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let _worker = worker(&sandbox, &llm, &ingress.server, true);
    ingress.start("pay-1", "pay").await;
    wait_for_status(&sandbox, "pay-1", "paused").await;

    // The worker's keeper reminds bob, in the run's log.
    let started = Instant::now();
    loop {
        let run = shown(&sandbox, "pay-1");
        let reminded = run["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|event| {
                event["type"] == "approval_reminder" && event["content"] == "reminded bob"
            });
        if reminded {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "bob was never reminded: {run}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let db = sandbox.db_arg();
    let ran = sandbox
        .run_with(
            &[
                "resume",
                "pay-1",
                "--decision",
                "approve",
                "--by",
                "bob",
                "--db",
                &db,
            ],
            &llm,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "paid 40 EUR\n", "{ran:?}");
    let result = ingress.result("pay-1").await;
    assert_eq!(result["status"], "completed", "{result}");
    let run = shown(&sandbox, "pay-1");
    let numbers: Vec<u64> = run["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["seq"].as_u64())
        .collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_worker_that_cannot_register_or_has_no_flows_folder_says_why() {
    let sandbox = Sandbox::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let admin = format!("http://127.0.0.1:{port}");
    let db = sandbox.db_arg();
    let ran = sandbox.run(&[
        "restate",
        "--flows",
        ".",
        "--db",
        &db,
        "--addr",
        "127.0.0.1:0",
        "--register",
        &admin,
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .contains(&format!("cannot reach Restate's admin API at {admin}")),
        "{ran:?}"
    );
    let ran = sandbox.run(&["restate", "--flows", "no-such-folder", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("--flows no-such-folder: not a folder"),
        "{ran:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_workers_start_each_occurrence_of_a_schedule_once_as_a_workflow() {
    let sandbox = sandbox_with_flow(
        "ticker",
        &every_second_flow("* * * * * *", "from the schedule"),
    );
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let (workers, _balancer) = two_workers(&sandbox, &llm, &ingress).await;

    let runs = wait_for_scheduled_runs(&sandbox, 3).await;
    // Each ran as a Restate workflow keyed by its run id, with the schedule's input. (Read
    // while the workers are up: the store may say completed a moment before the workflow's
    // end is journaled, which needs its worker.)
    let completed = runs
        .iter()
        .find(|run| run["trigger"]["kind"] == "schedule" && run["status"] == "completed")
        .expect("a completed scheduled run");
    let id = completed["id"].as_str().expect("id");
    let result = ingress.result(id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], "tick: from the schedule", "{result}");
    drop(workers);

    let by_occurrence = runs_by_occurrence(&runs);
    assert!(by_occurrence.len() >= 3, "{by_occurrence:#?}");
    for (occurrence, runs) in &by_occurrence {
        assert_eq!(runs.len(), 1, "occurrence {occurrence}: {runs:#?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_desktop_app_continues_a_restate_run_at_a_breakpoint_through_weft_serve() {
    let sandbox = sandbox_with_flow("greeting", &greeting_flow());
    let llm = ScriptedLlm::start(Script::default())
        .await
        .expect("scripted LLM");
    let ingress = Ingress::new(RestateServer::start());
    let _worker = worker(&sandbox, &llm, &ingress.server, true);
    let (status, started) = ingress
        .post(
            "/WeftRun/desk-1/run/send",
            json!({ "flow": "greeting", "breakpoints": [{ "nodeId": "greet", "when": "after" }] }),
        )
        .await;
    assert!(status == 200 || status == 202, "{status} {started}");
    wait_for_status(&sandbox, "desk-1", "paused").await;

    // The team's `weft serve` over the workers' store, and a desktop app connected to it.
    let server = Server::start(&sandbox, &[], None);
    let desk = Sandbox::new();
    let app = crate::team_servers::desktop_app(&desk, &server.url);
    let history = app.history(10).await.expect("history");
    let listed = history
        .runs
        .iter()
        .find(|run| run.summary.id == "desk-1")
        .expect("the workflow's run is in History");
    assert_eq!(listed.server.as_deref(), Some("team"));
    let paused = app
        .run_detail("desk-1", Some("team"))
        .await
        .expect("opened");
    let waiting = paused.waiting.as_ref().expect("waits");
    assert_eq!(waiting.node_id, "greet");
    assert_eq!(waiting.input, json!("hello world"), "its output, after it");

    // Continued from the app with another value: the server hands it to the workflow.
    app.act_on_server(
        "team",
        "desk-1",
        &weft_app::servers::ServerAction::Continue(weft_engine::Continue {
            step: false,
            set: Some(json!("hello from the desk")),
        }),
    )
    .await
    .expect("went on");
    let result = ingress.result("desk-1").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], "hello from the desk", "{result}");
    let last = paused.events.last().expect("events").seq;
    let ended = app
        .follow_server_run("team", "desk-1", last, |_| {})
        .await
        .expect("followed")
        .expect("not stopped");
    assert_eq!(ended.run.summary.status, weft_event::RunStatus::Completed);
}
