//! The `weft` binary end to end: each test runs the real executable with its own temporary
//! run store and flow files, and a scripted LLM server on loopback for flows with agents.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{KEY, Ran, Sandbox, approval_flow, edge, node, parse_events, paused_run_id};
use serde_json::{Value, json};
use weft_scripted_llm::{Reply, Script, ScriptedLlm};

/// start → ask (agent) → out.
fn agent_flow() -> Value {
    json!({
        "version": 1,
        "name": "Ask",
        "nodes": [
            node("start", "start", json!({ "initialInput": "Ada" })),
            node("ask", "agent", json!({
                "label": "Greeter",
                "model": "gpt-4o-mini",
                "systemPrompt": "Be brief.",
                "userPrompt": "Greet {{PREVIOUS_OUTPUT}}"
            })),
            node("out", "output", json!({})),
        ],
        "edges": [edge("e1", "start", "ask", None), edge("e2", "ask", "out", None)]
    })
}

fn assert_plain(stderr: &str) {
    assert!(
        !stderr.contains('\r'),
        "no carriage returns off a terminal: {stderr:?}"
    );
    assert!(
        !stderr.contains('\x1b'),
        "no ANSI escapes off a terminal: {stderr:?}"
    );
}

#[test]
fn validate_accepts_a_valid_flow() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ok.json", &approval_flow());
    let ran = sandbox.run(&["validate", &flow]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert_eq!(ran.stderr.trim(), "valid");

    let ran = sandbox.run(&["validate", &flow, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let report: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(report["valid"], json!(true));
    assert_eq!(report["problems"], json!([]));
}

#[test]
fn a_run_warns_on_stderr_plainly_off_a_terminal_and_in_yellow_when_asked() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow(
        "branch.json",
        &json!({
            "version": 1,
            "name": "Branch",
            "nodes": [
                node("start", "start", json!({ "initialInput": "go" })),
                node("check", "if", json!({ "conditions": [{ "operator": "contains", "value": "go" }] })),
                node("yes", "template", json!({ "template": "yes" })),
            ],
            "edges": [
                edge("e1", "start", "check", None),
                edge("e2", "check", "yes", Some("condition-0")),
            ]
        }),
    );
    let warning = "node check: warning: branch false is not connected; the run simply ends there";
    let ran = sandbox.run(&["run", &flow]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stderr.lines().any(|line| line == warning), "{ran:?}");
    assert_plain(&ran.stderr);

    let ran: Ran = sandbox
        .command(&["run", &flow], None)
        .env("CLICOLOR_FORCE", "1")
        .output()
        .expect("weft runs")
        .into();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr
            .lines()
            .any(|line| line.starts_with("\x1b[33m") && line.contains(warning)),
        "{ran:?}"
    );
}

#[test]
fn validate_lists_each_problem_by_node_or_edge_and_exits_2() {
    let sandbox = Sandbox::new();
    let mut flow = approval_flow();
    flow["edges"]
        .as_array_mut()
        .expect("edges")
        .push(edge("e9", "draft", "ghost", None));
    flow["nodes"].as_array_mut().expect("nodes").push(node(
        "lonely",
        "template",
        json!({ "template": "x" }),
    ));
    let path = sandbox.flow("bad.json", &flow);
    let ran = sandbox.run(&["validate", &path]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("edge e9: error: ")),
        "{ran:?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("node lonely: warning: ")),
        "{ran:?}"
    );
    assert!(
        lines.iter().all(|line| line.starts_with("node ")
            || line.starts_with("edge ")
            || line.starts_with("flow: ")),
        "{ran:?}"
    );
    assert!(
        ran.stderr.contains("1 error") && ran.stderr.contains("1 warning"),
        "{ran:?}"
    );
    assert_plain(&ran.stderr);

    let ran = sandbox.run(&["validate", &path, "--json"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    let report: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(report["valid"], json!(false));
    let problems = report["problems"].as_array().expect("problems");
    assert!(
        problems.iter().any(
            |problem| problem["edgeId"] == json!("e9") && problem["severity"] == json!("error")
        )
    );
    assert!(
        problems
            .iter()
            .any(|problem| problem["nodeId"] == json!("lonely"))
    );

    // `weft run` refuses it the same way, on stderr, before creating any run.
    let ran = sandbox.run(&["run", &path, "--db", &sandbox.db_arg()]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert!(ran.stderr.contains("edge e9: error: "), "{ran:?}");
}

#[test]
fn a_file_that_is_not_a_flow_exits_2_naming_the_file() {
    let sandbox = Sandbox::new();
    let path = sandbox.dir.path().join("broken.json");
    std::fs::write(&path, "{ this is not json").expect("write");
    let path = path.display().to_string();
    for args in [
        vec!["validate", path.as_str()],
        vec!["run", path.as_str(), "--db", &sandbox.db_arg()],
    ] {
        let ran = sandbox.run(&args);
        assert_eq!(ran.code, Some(2), "{ran:?}");
        assert!(ran.stderr.contains(&path), "names the file: {ran:?}");
        assert_eq!(ran.stdout, "");
    }
    let ran = sandbox.run(&["validate", "missing.json"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("missing.json"), "{ran:?}");
}

#[test]
fn usage_errors_exit_2() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ok.json", &approval_flow());
    let db = sandbox.db_arg();
    for args in [
        vec!["run"],
        vec!["frobnicate"],
        vec!["run", &flow, "--db", &db, "--decide", "review"],
        vec!["run", &flow, "--db", &db, "--decide", "review=maybe"],
        vec!["run", &flow, "--db", &db, "--decide", "nobody=approve"],
        vec!["run", &flow, "--db", &db, "--decide", "draft=approve"],
        vec!["resume", "--db", &db, "1234"],
        vec!["show", "--db", &db, "no-such-run"],
    ] {
        let ran = sandbox.run(&args);
        assert_eq!(ran.code, Some(2), "{args:?}: {ran:?}");
        assert_eq!(ran.stdout, "", "{args:?}");
    }
    let ran = sandbox.run(&["--help"]);
    assert_eq!(ran.code, Some(0));
    for command in ["validate", "run", "resume", "runs", "show"] {
        assert!(ran.stdout.contains(command), "{ran:?}");
    }
}

#[test]
fn run_with_decisions_in_advance_completes_with_the_result_on_stdout() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--decide", "review=approve"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "APPROVED Draft: the plan\n");
    assert!(
        ran.stderr.contains("▸ draft"),
        "progress on stderr: {ran:?}"
    );
    assert_plain(&ran.stderr);

    let ran = sandbox.run(&[
        "run",
        &flow,
        "--db",
        &db,
        "--input",
        "my idea",
        "--decide",
        "review=reject:too vague",
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "REJECTED Draft: my idea (too vague)\n");

    // A JSON result is pretty-printed.
    let json_flow = json!({
        "version": 1, "name": "Json",
        "nodes": [
            node("start", "start", json!({})),
            node("make", "template", json!({ "template": "{\"answer\": 42}", "parseJson": true })),
        ],
        "edges": [edge("e1", "start", "make", None)]
    });
    let path = sandbox.flow("json.json", &json_flow);
    let ran = sandbox.run(&["run", &path, "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "{\n  \"answer\": 42\n}\n");
}

#[test]
fn a_paused_run_resumes_in_another_process_once() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let ran = sandbox.run(&["run", &flow, "--db", &db]);
    let id = paused_run_id(&ran);
    assert!(ran.stderr.contains("waits at review"), "{ran:?}");
    assert!(
        ran.stderr.contains("Ship Draft: the plan?"),
        "the message: {ran:?}"
    );
    assert!(ran.stderr.contains("--decision approve|reject"), "{ran:?}");

    // A unique prefix is enough.
    let ran = sandbox.run(&[
        "resume",
        &id[..8],
        "--decision",
        "approve",
        "--note",
        "go",
        "--db",
        &db,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "APPROVED Draft: the plan (go)\n");
    assert_plain(&ran.stderr);

    let ran = sandbox.run(&["resume", &id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("already finished"), "{ran:?}");
    assert_eq!(ran.stdout, "");
}

#[test]
fn a_bad_decision_leaves_the_run_paused() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let id = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));

    let ran = sandbox.run(&["resume", &id, "--decision", "maybe", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("`maybe` is not a decision"), "{ran:?}");

    let ran = sandbox.run(&["show", &id, "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("paused"), "{ran:?}");

    let ran = sandbox.run(&["resume", &id, "--decision", "REJECTED", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "REJECTED Draft: the plan\n");
}

#[test]
fn events_are_ndjson_numbered_across_pause_and_resume() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--events"]);
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let mut events = parse_events(&ran.stdout);
    let id = events[0]["runId"].as_str().expect("run id").to_string();
    assert!(ran.stderr.contains(&format!("weft resume {id}")), "{ran:?}");
    assert_eq!(events.last().expect("events")["type"], json!("wait_input"));

    let ran = sandbox.run(&[
        "resume",
        &id,
        "--decision",
        "approve",
        "--db",
        &db,
        "--events",
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let resumed = parse_events(&ran.stdout);
    assert_eq!(
        resumed[0]["seq"].as_u64(),
        events
            .last()
            .and_then(|event| event["seq"].as_u64())
            .map(|seq| seq + 1),
        "resume continues the numbering"
    );
    events.extend(resumed);
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"].as_u64(), Some(index as u64 + 1), "{event}");
        assert_eq!(event["runId"], json!(id));
        assert!(
            event["ts"].is_string() && event["content"].is_string(),
            "{event}"
        );
    }
    assert_eq!(events[0]["type"], json!("run_start"));
    let last = events.last().expect("events");
    assert_eq!(last["type"], json!("run_end"));
    let end: Value =
        serde_json::from_str(last["content"].as_str().expect("content")).expect("run_end content");
    assert_eq!(end["status"], json!("completed"));
    assert_eq!(end["result"], json!("APPROVED Draft: the plan"));

    // The store holds the same events.
    let ran = sandbox.run(&["show", &id, "--db", &db, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(shown["events"].as_array().map(Vec::len), Some(events.len()));
    assert_eq!(shown["run"]["summary"]["status"], json!("completed"));
    assert!(
        shown["nodeOutputs"]
            .as_array()
            .is_some_and(|outputs| !outputs.is_empty())
    );
}

#[test]
fn runs_and_show_tell_the_history() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let paused = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));
    let done = sandbox.run(&["run", &flow, "--db", &db, "--decide", "review=approve"]);
    assert_eq!(done.code, Some(0));

    let ran = sandbox.run(&["runs", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains(&paused), "{ran:?}");
    assert!(ran.stdout.contains("waiting at review"), "{ran:?}");
    assert!(
        ran.stdout.contains("completed") && ran.stdout.contains("Review"),
        "{ran:?}"
    );
    assert_eq!(
        ran.stdout.lines().count(),
        3,
        "header and two runs: {ran:?}"
    );

    let ran = sandbox.run(&["runs", "--db", &db, "--json", "--limit", "1"]);
    let runs: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(runs.as_array().map(Vec::len), Some(1));
    assert_eq!(runs[0]["flowName"], json!("Review"));

    let ran = sandbox.run(&["show", &paused[..6], "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    for needle in [
        "paused",
        "review: Ship Draft: the plan?",
        "wait_input",
        "step_start",
        "run_start",
        "Draft: the plan",
    ] {
        assert!(ran.stdout.contains(needle), "{needle}: {ran:?}");
    }
    assert!(!ran.stdout.contains('\x1b'));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_flow_runs_against_the_provider_and_never_leaks_the_key() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("Hello there, Ada!")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let db = sandbox.db_arg();
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "Hello there, Ada!\n");
    assert!(ran.stderr.contains("▸ ask (Greeter)"), "{ran:?}");
    assert!(ran.stderr.contains("✓ ask"), "{ran:?}");
    assert_plain(&ran.stderr);

    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(requests[0].last_user_text().as_deref(), Some("Greet Ada"));

    let events = sandbox
        .run_with(&["run", &flow, "--db", &db, "--events"], &llm)
        .await;
    assert_eq!(events.code, Some(0), "{events:?}");
    let parsed = parse_events(&events.stdout);
    assert!(
        parsed
            .iter()
            .any(|event| event["type"] == json!("llm_delta")),
        "streamed"
    );
    assert!(
        parsed
            .iter()
            .any(|event| event["type"] == json!("llm_response"))
    );

    let id = parsed[0]["runId"].as_str().expect("id").to_string();
    let shown = sandbox.run_with(&["show", &id, "--db", &db], &llm).await;
    assert!(
        shown.stdout.contains("3 llm_delta events hidden"),
        "says how many deltas are hidden: {shown:?}"
    );
    let delta_rows = |text: &str| {
        text.lines()
            .filter(|line| line.split_whitespace().nth(2) == Some("llm_delta"))
            .count()
    };
    assert_eq!(delta_rows(&shown.stdout), 0, "{shown:?}");
    let with_deltas = sandbox
        .run_with(&["show", &id, "--db", &db, "--deltas"], &llm)
        .await;
    assert_eq!(delta_rows(&with_deltas.stdout), 3, "{with_deltas:?}");

    for text in [
        &ran.stdout,
        &ran.stderr,
        &events.stdout,
        &events.stderr,
        &shown.stdout,
    ] {
        assert!(!text.contains(KEY), "the key leaked: {text}");
    }
    let bytes = sandbox.db_bytes();
    assert!(!bytes.is_empty());
    assert!(
        !bytes
            .windows(KEY.len())
            .any(|window| window == KEY.as_bytes()),
        "the key is in the store"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_provider_fails_the_run_with_its_status_and_message() {
    let llm = ScriptedLlm::start(Script::always(Reply::status(
        500,
        json!({ "error": { "message": "the scripted model is on fire", "type": "server_error" } }),
    )))
    .await
    .expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let ran = sandbox
        .run_with(&["run", &flow, "--db", &sandbox.db_arg()], &llm)
        .await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert!(ran.stderr.contains("500"), "names the status: {ran:?}");
    assert!(
        ran.stderr.contains("the scripted model is on fire"),
        "the provider's message: {ran:?}"
    );
    assert!(ran.stderr.contains("failed"), "{ran:?}");
    assert!(!ran.stderr.contains(KEY));
    assert_plain(&ran.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn colors_stay_off_without_a_terminal_even_with_no_color_empty() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("one two three four five")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let db = sandbox.db_arg();
    for no_color in [None, Some(""), Some("1")] {
        let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let ran: Ran = tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
            .await
            .expect("join")
            .into();
        assert_eq!(ran.code, Some(0), "{ran:?}");
        assert_eq!(ran.stdout, "one two three four five\n");
        assert_plain(&ran.stderr);
        assert!(!ran.stdout.contains('\x1b'));
    }
}

/// A model server that answers every request after a minute.
async fn model_answering_in_a_minute() -> ScriptedLlm {
    ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 60_000,
        content: "too late".into(),
    }))
    .await
    .expect("server")
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_cancels_the_run_and_the_store_says_cancelled() {
    let llm = model_answering_in_a_minute().await;
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let db = sandbox.db_arg();
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().expect("spawn weft");

    // Wait until the agent's request is in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    while llm.request_count() == 0 {
        assert!(
            Instant::now() < deadline,
            "the agent never called the provider"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let ran: Ran = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join")
        .into();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancelled promptly"
    );
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stderr.contains("cancelled"), "{ran:?}");
    assert_eq!(ran.stdout, "");

    let ran = sandbox.run(&["runs", "--db", &db, "--json"]);
    let runs: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(runs[0]["status"], json!("cancelled"), "{runs}");
    let id = runs[0]["id"].as_str().expect("id");
    let ran = sandbox.run(&["show", id, "--db", &db]);
    assert!(ran.stdout.contains("cancelled"), "{ran:?}");
}

/// A run that waits on its model shows what it did so far meanwhile: the step's start is on
/// stdout (stored first) while the request is still in flight, not once the answer comes.
#[tokio::test(flavor = "multi_thread")]
async fn while_an_agent_waits_for_its_model_its_start_is_shown() {
    let llm = model_answering_in_a_minute().await;
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let db = sandbox.db_arg();
    let mut command = sandbox.command(&["run", &flow, "--db", &db, "--events"], Some(&llm));
    command.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = command.spawn().expect("spawn weft");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut shown = Vec::new();
    let started = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) => {
                let started = line.contains("\"step_start\"") && line.contains("\"ask\"");
                shown.push(line);
                if started {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let still_waiting = child.try_wait().expect("wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        started,
        "the agent's start was not shown while it waited: {shown:?}"
    );
    assert!(still_waiting, "the run ended before its start was seen");
    assert!(
        shown.iter().all(|line| !line.contains("too late")),
        "{shown:?}"
    );
}

#[test]
fn the_store_path_comes_from_weft_db_when_db_is_not_given() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.dir.path().join("from-env.db");
    let ran: Ran = sandbox
        .command(&["run", &flow, "--decide", "review=approve"], None)
        .env("WEFT_DB", &db)
        .output()
        .expect("weft runs")
        .into();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(Path::new(&db).exists());
    let ran: Ran = sandbox
        .command(&["runs", "--json"], None)
        .env("WEFT_DB", &db)
        .output()
        .expect("runs")
        .into();
    let runs: Value = serde_json::from_str(&ran.stdout).expect("json");
    assert_eq!(runs.as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn show_reports_tokens_and_the_scope_of_nested_steps() {
    let llm = ScriptedLlm::start(Script::always(Reply::text("four words right here")))
        .await
        .expect("server");
    let sandbox = Sandbox::new();
    sandbox.flow("ask.json", &agent_flow());
    let outer = json!({
        "nodes": [
            node("start", "start", json!({"initialInput": "Ada"})),
            node("inner", "subflow", json!({"flow": "ask.json"})),
        ],
        "edges": [edge("e1", "start", "inner", None)],
    });
    let flow = sandbox.flow("outer.json", &outer);
    let db = sandbox.db_arg();
    let ran = sandbox.run_with(&["run", &flow, "--db", &db], &llm).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains("▸ inner/ask (Greeter)"),
        "progress names nested steps by scope: {ran:?}"
    );

    let runs = sandbox.run(&["runs", "--db", &db, "--json"]);
    let listed: Value = serde_json::from_str(&runs.stdout).expect("runs --json");
    let id = listed[0]["id"].as_str().expect("run id").to_string();
    let shown = sandbox.run(&["show", &id, "--db", &db, "--json"]);
    let record: Value = serde_json::from_str(&shown.stdout).expect("show --json");
    let input = record["run"]["usage"]["inputTokens"]
        .as_u64()
        .expect("run input tokens");
    let output = record["run"]["usage"]["outputTokens"]
        .as_u64()
        .expect("run output tokens");
    assert_eq!(
        output, 4,
        "the scripted server counts four completion tokens"
    );
    assert!(input > 0);
    let nested = record["nodeOutputs"]
        .as_array()
        .expect("node outputs")
        .iter()
        .find(|output| output["nodeId"] == "inner/ask")
        .expect("nested node stored under its scope");
    assert_eq!(nested["usage"]["outputTokens"], 4);

    let text = sandbox.run(&["show", &id, "--db", &db]);
    assert!(
        text.stdout.contains(&format!("{input} in / {output} out")),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("inner/ask"), "{}", text.stdout);
}

#[test]
fn validate_warns_about_a_missing_key_and_refuses_an_agent_with_no_model() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("ask.json", &agent_flow());
    let ran = sandbox.run(&["validate", &flow]);
    assert_eq!(
        ran.code,
        Some(0),
        "a missing key warns, it does not block: {ran:?}"
    );
    assert_eq!(
        ran.stdout,
        "node ask: warning: openai is not configured: set OPENAI_API_KEY\n"
    );
    let mut unset = agent_flow();
    unset["nodes"][1]["data"]["model"] = json!("");
    let flow = sandbox.flow("unset.json", &unset);
    // No model and no default model: an error naming the field, and the run is refused.
    let ran = sandbox.run(&["validate", &flow]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stdout
            .contains("node ask: error: model: no model is set")
            && ran.stdout.contains("Model field")
            && ran.stdout.contains("WEFT_DEFAULT_MODEL"),
        "{ran:?}"
    );
    let run = sandbox.run(&["run", &flow, "--db", &sandbox.db_arg()]);
    assert_eq!(run.code, Some(2), "{run:?}");
    // With a default model it is fine again.
    let ran = sandbox
        .command(&["validate", &flow], None)
        .env("WEFT_DEFAULT_MODEL", "gpt-4o-mini")
        .output()
        .expect("weft");
    assert_eq!(ran.status.code(), Some(0));
}

#[test]
fn decide_answers_an_approval_inside_a_subflow_by_its_scoped_name() {
    let sandbox = Sandbox::new();
    sandbox.flow("inner.json", &approval_flow());
    let outer = json!({
        "nodes": [
            node("start", "start", json!({"initialInput": "draft"})),
            node("sub", "subflow", json!({"flow": "inner.json"})),
        ],
        "edges": [edge("e1", "start", "sub", None)],
    });
    let flow = sandbox.flow("outer.json", &outer);
    let db = sandbox.db_arg();
    let approval = approval_flow()["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|node| node["type"] == "approval"))
        .and_then(|node| node["id"].as_str().map(str::to_string))
        .expect("the approval flow has an approval");
    let paused = sandbox.run(&["run", &flow, "--db", &db]);
    assert_eq!(paused.code, Some(3), "{paused:?}");
    assert!(
        paused.stderr.contains(&format!("waits at sub/{approval}")),
        "{paused:?}"
    );
    let decide = format!("sub/{approval}=approve");
    let done = sandbox.run(&["run", &flow, "--db", &db, "--decide", &decide]);
    assert_eq!(done.code, Some(0), "{done:?}");
    let wrong = sandbox.run(&["run", &flow, "--db", &db, "--decide", "start/x=approve"]);
    assert_eq!(wrong.code, Some(2), "{wrong:?}");
    assert!(wrong.stderr.contains("not a subflow"), "{wrong:?}");
}

#[test]
fn kinds_json_describes_every_kind_with_its_handles() {
    let sandbox = Sandbox::new();
    let ran = sandbox.run(&["kinds", "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let described: Value = serde_json::from_str(&ran.stdout).expect("kinds --json is JSON");
    let kinds = described["kinds"].as_array().expect("a list of kinds");
    let ids: Vec<&str> = kinds
        .iter()
        .filter_map(|kind| kind["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "start", "agent", "if", "approval", "template", "output", "note", "code", "http",
            "join", "forEach", "subflow", "gate"
        ]
    );
    let kind = |id: &str| {
        kinds
            .iter()
            .find(|kind| kind["id"] == id)
            .unwrap_or_else(|| panic!("no kind {id}"))
    };
    let handles = |id: &str| -> Vec<String> {
        kind(id)["handles"]
            .as_array()
            .expect("handles")
            .iter()
            .filter_map(|handle| handle["id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(handles("gate"), ["pass", "fail", "error"]);
    assert_eq!(handles("approval"), ["approve", "reject", "timeout"]);
    assert_eq!(handles("agent"), ["output", "subagent", "error"]);
    assert_eq!(handles("if"), ["condition-{i}", "false"]);
    assert_eq!(handles("http"), ["output", "error"]);
    assert!(handles("output").is_empty() && handles("note").is_empty());
    assert_eq!(kind("if")["handles"][0]["rows"], "conditions");
    assert_eq!(kind("agent")["handles"][1]["kind"], "subagent");
    assert_eq!(kind("note")["inputs"], false);
    assert_eq!(kind("forEach")["title"], "For each");
    let url = kind("http")["fields"]
        .as_array()
        .and_then(|fields| fields.iter().find(|field| field["name"] == "url"))
        .expect("http describes url");
    assert_eq!(url["required"], true);
    assert_eq!(url["fieldType"]["type"], "template");
    let common: Vec<&str> = described["commonFields"]
        .as_array()
        .expect("common fields")
        .iter()
        .filter_map(|field| field["name"].as_str())
        .collect();
    assert!(common.contains(&"timeoutSeconds") && common.contains(&"retry.maxAttempts"));

    let text = sandbox.run(&["kinds"]);
    assert_eq!(text.code, Some(0), "{text:?}");
    let gate = text
        .stdout
        .split("\n\n")
        .find(|block| block.starts_with("gate "))
        .expect("a gate block");
    assert!(
        gate.lines()
            .any(|line| line.trim() == "out: pass, fail, error (on failure)"),
        "{gate}"
    );
}

#[test]
fn from_and_only_rerun_part_of_a_flow_with_an_earlier_runs_outputs() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("review.json", &approval_flow());
    let first = sandbox.run(&[
        "run",
        &flow,
        "--db",
        &db,
        "--decide",
        "review=approve",
        "--events",
    ]);
    assert_eq!(first.code, Some(0), "{first:?}");
    let first_id = parse_events(&first.stdout)[0]["runId"]
        .as_str()
        .expect("run id")
        .to_string();

    // The person changes `yes` and re-runs from it: draft and review do not run again.
    let mut edited = approval_flow();
    edited["nodes"][3]["data"]["template"] = json!("SHIPPED {{PREVIOUS_OUTPUT}}");
    let edited = sandbox.flow("review.json", &edited);
    let ran = sandbox.run(&[
        "run", &edited, "--db", &db, "--from", "yes", "--after", &first_id,
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "SHIPPED Draft: the plan\n");

    let ran = sandbox.run(&[
        "run", &edited, "--db", &db, "--only", "yes", "--after", &first_id, "--events",
    ]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let started: Vec<String> = parse_events(&ran.stdout)
        .iter()
        .filter(|event| event["type"] == "step_start")
        .map(|event| event["nodeId"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(started, ["yes"], "only the node asked for ran");

    // Where nothing before the node has run yet, the refusal names the node: exit 2.
    let paused = sandbox.run(&["run", &flow, "--db", &db]);
    let paused_id = paused_run_id(&paused);
    let ran = sandbox.run(&[
        "run", &flow, "--db", &db, "--from", "yes", "--after", &paused_id,
    ]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("`yes`"), "{ran:?}");
    // --from without --after is a usage error.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--from", "yes"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
}

/// When `weft run` returns, a long run is in the store whole, and its log (past the bound a
/// process leaves for the next one) is folded into the database: the process does not end
/// before its store's writer has finished.
#[test]
fn a_long_run_is_stored_whole_and_its_log_folded_when_the_command_returns() {
    let sandbox = Sandbox::new();
    let mut nodes = vec![node("start", "start", json!({"initialInput": "go"}))];
    let mut edges = Vec::new();
    for index in 1..=3_000 {
        let id = format!("s{index}");
        let previous = nodes.last().expect("a node")["id"]
            .as_str()
            .expect("id")
            .to_string();
        nodes.push(node(
            &id,
            "template",
            json!({"template": "{{ PREVIOUS_OUTPUT }}"}),
        ));
        edges.push(edge(&format!("e{index}"), &previous, &id, None));
    }
    let flow = sandbox.flow(
        "long.json",
        &json!({"version": 1, "name": "long", "nodes": nodes, "edges": edges}),
    );
    let db = sandbox.db_arg();
    let ran = sandbox.run(&["run", &flow, "--events", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stderr, "", "nothing was lost or refused");
    let printed = parse_events(&ran.stdout);
    assert_eq!(printed.last().expect("events")["type"], json!("run_end"));

    let log = std::path::PathBuf::from(format!("{}-wal", sandbox.db().display()));
    let log_size = std::fs::metadata(&log).map_or(0, |meta| meta.len());
    assert_eq!(log_size, 0, "the long log was folded into the database");

    let run_id = printed[0]["runId"].as_str().expect("run id");
    let shown = sandbox.run(&["show", run_id, "--db", &db, "--json"]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let shown: Value = serde_json::from_str(&shown.stdout).expect("show JSON");
    assert_eq!(shown["run"]["summary"]["status"], json!("completed"));
    assert_eq!(
        shown["events"].as_array().map(Vec::len),
        Some(printed.len()),
        "every event printed is stored"
    );
    assert_eq!(shown["nodeOutputs"].as_array().map(Vec::len), Some(3_001));
}

/// docs/approvals.md: an approval whose `timeoutSeconds` ran out while no Weft process was running
/// takes its
/// `timeout` branch when the next command starts; one that has not run out, or that waits with
/// no timeout, stays paused. (The command skips the lookup when no paused run had a deadline
/// when it opened the store.)
#[test]
fn the_next_command_settles_an_approval_that_timed_out_while_nothing_ran() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let waits = |seconds: u64| {
        json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("review", "approval", json!({ "message": "ok?", "timeoutSeconds": seconds })),
                node("yes", "template", json!({ "template": "yes" })),
                node("late", "template", json!({ "template": "{{ approval.decision }} after {{ approval.note }}" })),
            ],
            "edges": [
                edge("e1", "start", "review", None),
                edge("e2", "review", "yes", Some("approve")),
                edge("e3", "review", "late", Some("timeout")),
            ]
        })
    };
    let soon = sandbox.flow("soon.json", &waits(1));
    let later = sandbox.flow("later.json", &waits(3600));
    let plain = sandbox.flow("plain.json", &approval_flow());
    let soon_id = paused_run_id(&sandbox.run(&["run", &soon, "--db", &db]));
    let later_id = paused_run_id(&sandbox.run(&["run", &later, "--db", &db]));
    let plain_id = paused_run_id(&sandbox.run(&["run", &plain, "--db", &db]));
    std::thread::sleep(Duration::from_millis(1_300));

    // Any command that runs flows settles it first, saying so on stderr.
    let other = sandbox.flow(
        "other.json",
        &json!({
            "version": 1,
            "nodes": [node("start", "start", json!({})), node("t", "template", json!({ "template": "done" }))],
            "edges": [edge("e1", "start", "t", None)]
        }),
    );
    let ran = sandbox.run(&["run", &other, "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "done\n");
    assert!(
        ran.stderr.contains(&format!(
            "run {soon_id}: nobody decided its approval in time; it went on: completed"
        )),
        "{ran:?}"
    );
    let status = |id: &str| {
        let ran = sandbox.run(&["show", id, "--db", &db, "--json"]);
        assert_eq!(ran.code, Some(0), "{ran:?}");
        let shown: Value = serde_json::from_str(&ran.stdout).expect("show JSON");
        (
            shown["run"]["summary"]["status"].clone(),
            shown["run"]["result"].clone(),
        )
    };
    assert_eq!(
        status(&soon_id),
        (
            json!("completed"),
            json!("timeout after nobody decided within 1 s")
        )
    );
    assert_eq!(status(&later_id).0, json!("paused"));
    assert_eq!(status(&plain_id).0, json!("paused"));

    // Once settled, the next command has nothing to say about it.
    let ran = sandbox.run(&["run", &other, "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(!ran.stderr.contains("in time"), "{ran:?}");
}

/// `weft runs` and `weft show` settle a deadline that passed like every other command: a paused
/// run past its approval's `timeoutSeconds` is never listed or shown as waiting.
#[test]
fn runs_and_show_settle_a_passed_deadline_before_they_list_or_show() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow(
        "soon.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("review", "approval", json!({ "message": "ok?", "timeoutSeconds": 1 })),
                node("yes", "template", json!({ "template": "yes" })),
                node("late", "template", json!({ "template": "too late" })),
            ],
            "edges": [
                edge("e1", "start", "review", None),
                edge("e2", "review", "yes", Some("approve")),
                edge("e3", "review", "late", Some("timeout")),
            ]
        }),
    );
    let listed = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));
    let shown = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));
    std::thread::sleep(Duration::from_millis(1_300));

    // `weft show` on one of them: both go on along `timeout` first, and it says so.
    let ran = sandbox.run(&["show", &shown, "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!(
            "run {shown}: nobody decided its approval in time; it went on: completed"
        )),
        "{ran:?}"
    );
    let summary: Vec<&str> = ran.stdout.lines().take(2).collect();
    assert_eq!(
        summary[1].split_whitespace().collect::<Vec<_>>(),
        ["status", "completed"],
        "{ran:?}"
    );
    assert!(!ran.stdout.contains("waiting"), "{ran:?}");

    // `weft runs` lists them as they stand: nothing waits any more.
    let ran = sandbox.run(&["runs", "--db", &db, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let runs: Value = serde_json::from_str(&ran.stdout).expect("runs JSON");
    let statuses: Vec<(&str, &str)> = runs
        .as_array()
        .expect("a list")
        .iter()
        .map(|run| {
            (
                run["id"].as_str().unwrap_or(""),
                run["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        statuses.contains(&(listed.as_str(), "completed")),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&(shown.as_str(), "completed")),
        "{statuses:?}"
    );

    // A new run past its deadline, then `weft runs` alone: listed completed, said on stderr.
    let late = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));
    std::thread::sleep(Duration::from_millis(1_300));
    let ran = sandbox.run(&["runs", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!("run {late}: nobody decided")),
        "{ran:?}"
    );
    let row = ran
        .stdout
        .lines()
        .find(|line| line.starts_with(&late))
        .unwrap_or_else(|| panic!("{late} is listed: {ran:?}"));
    assert!(
        row.contains("completed") && !row.contains("waiting"),
        "{row}"
    );
}

/// `weft cancel` ends a run waiting for a person, by the policy every host follows, and refuses
/// what cannot be cancelled (exit 2) leaving it as it was.
#[test]
fn cancel_ends_a_paused_run_and_refuses_a_finished_one() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let flow = sandbox.flow("review.json", &approval_flow());
    let run_id = paused_run_id(&sandbox.run(&["run", &flow, "--db", &db]));

    let ran = sandbox.run(&["cancel", &run_id[..8], "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!("run {run_id} cancelled")),
        "{ran:?}"
    );
    let shown = sandbox.run(&["show", &run_id, "--db", &db, "--json"]);
    let shown: Value = serde_json::from_str(&shown.stdout).expect("show JSON");
    assert_eq!(shown["run"]["summary"]["status"], "cancelled");
    let last = shown["events"]
        .as_array()
        .and_then(|events| events.last())
        .cloned();
    assert_eq!(
        last.as_ref().map(|event| event["type"].clone()),
        Some(json!("run_end"))
    );

    // Cancelled already: nothing to cancel, and a decision is refused too.
    let again = sandbox.run(&["cancel", &run_id, "--db", &db]);
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(
        again.stderr.contains(&format!(
            "run {run_id} is cancelled: there is nothing to cancel"
        )),
        "{again:?}"
    );
    let decided = sandbox.run(&["resume", &run_id, "--decision", "approve", "--db", &db]);
    assert_eq!(decided.code, Some(2), "{decided:?}");
    let unknown = sandbox.run(&["cancel", "no-such-run", "--db", &db]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown.stderr.contains("run no-such-run does not exist"),
        "{unknown:?}"
    );
}

/// The store is opened while the flow is checked when it exists, created only after when it
/// does not: a refused flow leaves no store behind, a file that is not a store is named and
/// left as it was, and an existing store works as ever.
#[test]
fn a_refused_flow_creates_no_store_and_a_file_that_is_not_one_is_named() {
    let sandbox = Sandbox::new();
    let good = sandbox.flow("good.json", &approval_flow());
    let broken = sandbox.flow(
        "broken.json",
        &json!({
            "version": 1,
            "nodes": [node("start", "start", json!({})), node("t", "template", json!({ "template": "{{ unclosed" }))],
            "edges": [edge("e1", "start", "t", None)]
        }),
    );
    let db = sandbox.db();
    let db_arg = sandbox.db_arg();

    let ran = sandbox.run(&["run", &broken, "--db", &db_arg]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(!db.exists(), "a refused flow created the store");

    std::fs::write(&db, "these are notes, not a run store\n").expect("write");
    let ran = sandbox.run(&["run", &good, "--db", &db_arg]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains("cannot open the run store") && ran.stderr.contains(&db_arg),
        "{ran:?}"
    );
    assert_eq!(
        ran.stderr.matches(&db_arg).count(),
        1,
        "named once: {ran:?}"
    );
    assert!(ran.stderr.contains("not a SQLite database"), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(&db).expect("read"),
        "these are notes, not a run store\n"
    );

    std::fs::remove_file(&db).expect("remove");
    let first = paused_run_id(&sandbox.run(&["run", &good, "--db", &db_arg]));
    // An existing store, a refused flow: nothing changes in it.
    let ran = sandbox.run(&["run", &broken, "--db", &db_arg]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    let second = paused_run_id(&sandbox.run(&["run", &good, "--db", &db_arg]));
    let runs = sandbox.runs_within(Duration::from_secs(60));
    let ids: Vec<&str> = runs.iter().filter_map(|run| run["id"].as_str()).collect();
    assert_eq!(ids.len(), 2, "{runs:?}");
    assert!(
        ids.contains(&first.as_str()) && ids.contains(&second.as_str()),
        "{runs:?}"
    );
}

#[test]
fn a_misspelt_key_is_a_warning_in_validate_and_run_and_the_run_goes_on() {
    let sandbox = Sandbox::new();
    let flow = json!({"version": 1, "name": "typo", "settings": {"maxNodeVisit": 3},
        "nodes": [node("start", "start", json!({"initialInput": "x"})),
                  node("t", "template", json!({"template": "hi", "timeoutSecond": 3}))],
        "edges": [edge("e", "start", "t", None)]});
    let path = sandbox.flow("typo.json", &flow);
    let warnings = [
        "flow: warning: `settings.maxNodeVisit` is not a field of the flow's settings (did you mean `settings.maxNodeVisits`?); it is ignored",
        "node t: warning: `timeoutSecond` is not a field of `template` nodes (did you mean `timeoutSeconds`?); it is ignored",
    ];
    let validated = sandbox.run(&["validate", &path]);
    assert_eq!(validated.code, Some(0), "{validated:?}");
    let ran = sandbox.run(&["run", &path, "--db", &sandbox.db_arg()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "hi\n");
    let told = format!("{}{}", validated.stdout, validated.stderr);
    for warning in warnings {
        assert!(told.contains(warning), "{validated:?}");
        assert!(ran.stderr.contains(warning), "{ran:?}");
    }
}
