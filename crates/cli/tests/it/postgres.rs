//! The `weft` command with its run store on PostgreSQL (`--db postgres://…`,
//! docs/team-servers.md): a run
//! paused by one process is listed, shown and resumed by others; `weft diff` compares two runs
//! of the history; the password of the URL never shows; a server that does not answer
//! is a clear error.

use crate::common;

use common::{Sandbox, approval_flow, edge, node};
use serde_json::Value;

/// The run id in `weft run --events` output's first event.
fn run_id_of(stdout: &str) -> String {
    let first: Value =
        serde_json::from_str(stdout.lines().next().expect("an event")).expect("json");
    first["runId"].as_str().expect("run id").to_string()
}

/// start → a1 → … → aN, each agent asked the output before it.
fn agent_chain(agents: usize) -> Value {
    let mut nodes = vec![node(
        "start",
        "start",
        serde_json::json!({ "initialInput": "go" }),
    )];
    let mut edges = Vec::new();
    for index in 1..=agents {
        let id = format!("a{index}");
        nodes.push(node(
            &id,
            "agent",
            serde_json::json!({ "model": "gpt-4o-mini", "userPrompt": "{{ PREVIOUS_OUTPUT }}" }),
        ));
        let source = if index == 1 {
            "start".to_string()
        } else {
            format!("a{}", index - 1)
        };
        edges.push(edge(&format!("e{index}"), &source, &id, None));
    }
    serde_json::json!({ "version": 1, "name": format!("{agents} agents"), "nodes": nodes, "edges": edges })
}

#[test]
fn a_run_paused_on_postgres_is_listed_shown_and_resumed_by_other_processes() {
    let sandbox = Sandbox::on_postgres();
    let flow = sandbox.flow("review.json", &approval_flow());
    // The URL with a password (the test server trusts loopback, so any password is accepted):
    // it must never be printed.
    let db = sandbox.db_arg().replacen("weft@", "weft:pg-secret-7@", 1);

    // An empty store is named without the password, and so is WEFT_DB in the help.
    let ran = sandbox.run(&["runs", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains("no runs in postgres://weft:***@"),
        "{ran:?}"
    );
    let help = sandbox
        .command(&["runs", "--help"], None)
        .env("WEFT_DB", &db)
        .output()
        .expect("weft runs --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("WEFT_DB"), "{help}");
    assert!(!help.contains("pg-secret"), "{help}");

    let ran = sandbox.run(&["run", &flow, "--db", &db, "--events"]);
    assert_eq!(ran.code, Some(3), "paused: {ran:?}");
    let id = run_id_of(&ran.stdout);
    assert!(ran.stderr.contains(&format!("weft resume {id}")), "{ran:?}");
    assert!(ran.stderr.contains("weft:***@"), "{ran:?}");

    let ran = sandbox.run(&["runs", "--db", &db, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let runs: Value = serde_json::from_str(&ran.stdout).expect("runs JSON");
    assert_eq!(runs[0]["id"], id.as_str());
    assert_eq!(runs[0]["status"], "paused");
    assert_eq!(runs[0]["waitingNodeId"], "review");

    // Another process decides, by a prefix of the id.
    let ran = sandbox.run(&["resume", &id[..8], "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "APPROVED Draft: the plan\n");
    let ran = sandbox.run(&["resume", &id, "--decision", "approve", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("already finished"), "{ran:?}");

    // The history: every event in order across the pause, and each node's output.
    let ran = sandbox.run(&["show", &id, "--db", &db, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("show JSON");
    assert_eq!(shown["run"]["summary"]["status"], "completed");
    assert_eq!(shown["run"]["result"], "APPROVED Draft: the plan");
    let events = shown["events"].as_array().expect("events");
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|event| event["seq"].as_u64())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(events.iter().any(|event| event["type"] == "wait_input"));
    assert_eq!(events.last().expect("last")["type"], "run_end");

    // A second run of the same flow, rejected, and the two compared.
    let ran = sandbox.run(&["run", &flow, "--db", &db, "--decide", "review=reject"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "REJECTED Draft: the plan\n");
    let ran = sandbox.run(&["runs", "--db", &db, "--json"]);
    let runs: Value = serde_json::from_str(&ran.stdout).expect("runs JSON");
    let second = runs[0]["id"].as_str().expect("id").to_string();
    let ran = sandbox.run(&["diff", &id, &second, "--db", &db]);
    assert_eq!(ran.code, Some(1), "the runs differ: {ran:?}");
    assert!(
        ran.stdout.contains("+ REJECTED Draft: the plan"),
        "the differing output is shown: {ran:?}"
    );
    assert!(
        ran.stdout.contains("outputs differ at 3 nodes of 6"),
        "{ran:?}"
    );

    // Nothing went to a SQLite file, and the password is nowhere in what was stored.
    assert!(!sandbox.db().exists(), "no runs.db beside the flow");
    let mut client =
        postgres::Client::connect(&sandbox.db_arg(), postgres::NoTls).expect("postgres");
    for (table, column) in [
        ("event_batches", "events_json"),
        ("runs", "state_json"),
        ("runs", "input_json"),
        ("flow_versions", "flow_json"),
        ("flow_version_uses", "path"),
        ("node_outputs", "output_json"),
    ] {
        let sql = format!("SELECT count(*) FROM {table} WHERE {column} LIKE '%pg-secret%'");
        let found: i64 = client.query_one(sql.as_str(), &[]).expect("query").get(0);
        assert_eq!(found, 0, "{table}.{column}");
    }
}

#[test]
fn a_postgres_server_that_does_not_answer_is_named_without_its_password() {
    let sandbox = Sandbox::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let db = format!("postgres://weft:pg-secret-7@127.0.0.1:{port}/runs");
    let ran = sandbox.run(&["runs", "--db", &db]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stderr.contains("cannot open the run store"), "{ran:?}");
    assert!(ran.stderr.contains(&format!("127.0.0.1:{port}")), "{ran:?}");
    assert!(ran.stderr.contains("cannot connect"), "{ran:?}");
    assert!(!ran.stderr.contains("pg-secret"), "{ran:?}");
    assert!(!ran.stdout.contains("pg-secret"), "{ran:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgres_outage_mid_run_loses_nothing_and_asks_nothing_twice() {
    use weft_scripted_llm::{Reply, Script, ScriptedLlm};
    // A server of its own: the test stops and starts it.
    let server = tokio::task::spawn_blocking(weft_test_postgres::PostgresServer::start)
        .await
        .expect("join")
        .expect("a PostgreSQL server");
    let server = std::sync::Arc::new(server);
    let db = {
        let server = std::sync::Arc::clone(&server);
        tokio::task::spawn_blocking(move || server.new_database())
            .await
            .expect("join")
    };
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 700,
        content: "said".into(),
    }))
    .await
    .expect("scripted LLM");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("four.json", &agent_chain(4));
    // The server goes away for 3 s while the first agent is answering, as a restart or a
    // failover would take it.
    let outage = {
        let server = std::sync::Arc::clone(&server);
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(std::time::Duration::from_millis(400));
            server.outage(std::time::Duration::from_secs(3))
        })
    };
    let ran = sandbox
        .run_with(&["run", &flow, "--db", &db, "--events"], &llm)
        .await;
    outage.await.expect("join").expect("the outage");
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout
            .lines()
            .last()
            .map(|line| line.contains("run_end")),
        Some(true)
    );
    // Each agent asked once: nothing was asked again for an answer the store lost.
    assert_eq!(llm.requests().len(), 4, "{ran:?}");

    // Everything printed was stored.
    let id = run_id_of(&ran.stdout);
    let shown = sandbox.run(&["show", &id, "--db", &db, "--json"]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let shown: Value = serde_json::from_str(&shown.stdout).expect("show JSON");
    assert_eq!(shown["run"]["summary"]["status"], "completed", "{shown}");
    let printed = ran.stdout.lines().count();
    let stored = shown["events"].as_array().map_or(0, Vec::len);
    assert_eq!(stored, printed, "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_is_not_asked_while_the_answer_before_it_is_not_stored() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use weft_scripted_llm::{Reply, Script, ScriptedLlm};
    let db =
        tokio::task::spawn_blocking(|| weft_test_postgres::PostgresServer::shared().new_database())
            .await
            .expect("join");
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 800,
        content: "said".into(),
    }))
    .await
    .expect("scripted LLM");
    let llm = std::sync::Arc::new(llm);
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("two.json", &agent_chain(2));
    // While the first agent waits for its answer, another client locks the table answers are
    // kept in, for 2 s: the answer arrives but cannot be stored meanwhile (as on a database
    // server that is slow to commit, or a worker killed before it did).
    let asked_while_unstored = std::sync::Arc::new(AtomicBool::new(false));
    let locker = {
        let llm = std::sync::Arc::clone(&llm);
        let asked_while_unstored = std::sync::Arc::clone(&asked_while_unstored);
        let db = db.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            while llm.request_count() == 0 {
                assert!(
                    started.elapsed().as_secs() < 30,
                    "the first agent never asked"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let mut client = postgres::Client::connect(&db, postgres::NoTls).expect("connect");
            let mut lock = client.transaction().expect("begin");
            lock.batch_execute("LOCK TABLE llm_calls IN EXCLUSIVE MODE")
                .expect("lock");
            let held = std::time::Instant::now();
            while held.elapsed() < std::time::Duration::from_secs(2) {
                if llm.request_count() > 1 {
                    asked_while_unstored.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            lock.rollback().expect("unlock");
        })
    };
    let ran = sandbox
        .run_with(&["run", &flow, "--db", &db, "--events"], &llm)
        .await;
    locker.await.expect("the lock");
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        !asked_while_unstored.load(Ordering::SeqCst),
        "the second agent asked before the first one's answer was stored"
    );
    assert_eq!(llm.request_count(), 2, "{ran:?}");
}
