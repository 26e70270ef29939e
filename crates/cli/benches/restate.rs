//! `cargo bench -p weft-cli --bench restate` — runs through Restate (`weft restate` workers, a
//! real Restate server, a PostgreSQL run store, all on loopback) against the embedded engine on
//! the same kind of store:
//! - runs per second of a two-node flow, 32 in flight: the engine in one process, then one and
//!   two Restate workers (started with the ingress's synchronous call, which returns the result);
//! - a chain of 100 `template` steps, one run at a time: what a run and what a step cost more
//!   through Restate (a run is journaled per segment, so a step should cost nothing more).
//!
//! `cargo test --benches` runs it small.

// The Restate server's helper finds its ports through this one, as its `super::ports`.
#[path = "../tests/it/common/ports.rs"]
mod ports;
#[path = "../tests/it/common/restate.rs"]
#[allow(dead_code)]
mod restate_server;

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use restate_server::{Balancer, RestateServer, Worker};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use weft_engine::{Engine, RunOptions};
use weft_providers::{LlmClients, ProviderSettings};

use weft_flow::Flow;

use weft_event::RunStatus;

use weft_store::Store;
use weft_test_postgres::PostgresServer;

const IN_FLIGHT: usize = 32;
/// The two chain lengths: the extra time a step costs through Restate is the difference of the
/// two chains' extra times, per step between them.
const SHORT_CHAIN: usize = 10;
const CHAIN: usize = 100;

fn greeting() -> Value {
    json!({
        "version": 1,
        "name": "Greeting",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "world"}},
            {"id": "greet", "type": "template", "data": {"template": "hello {{ PREVIOUS_OUTPUT }}"}}
        ],
        "edges": [{"id": "e", "source": "start", "target": "greet"}]
    })
}

fn chain(steps: usize) -> Value {
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "x"}})];
    let mut edges = Vec::new();
    for step in 0..steps {
        let id = format!("t{step}");
        let previous = if step == 0 {
            "start".to_string()
        } else {
            format!("t{}", step - 1)
        };
        nodes.push(
            json!({"id": id, "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}"}}),
        );
        edges.push(json!({"id": format!("e{step}"), "source": previous, "target": id}));
    }
    json!({"version": 1, "name": "Chain", "nodes": nodes, "edges": edges})
}

fn worker(flows: &std::path::Path, db: &str, ingress: &str) -> Worker {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(["restate", "--flows"])
        .arg(flows)
        .args(["--db", db, "--addr", "127.0.0.1:0", "--ingress", ingress])
        .env_remove("WEFT_DB");
    Worker::spawn(command)
}

async fn register(http: &reqwest::Client, admin: &str, uri: &str) {
    let answer = http
        .post(format!("{admin}/deployments"))
        .json(&json!({"uri": uri, "force": true}))
        .send()
        .await
        .expect("admin API");
    assert!(answer.status().is_success(), "register {uri}");
}

/// `count` runs of flow `flow` through the ingress, `IN_FLIGHT` at once; the seconds they took.
async fn through_restate(
    http: &reqwest::Client,
    ingress: &str,
    prefix: &str,
    flow: &str,
    count: usize,
) -> f64 {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..count {
        let request = http
            .post(format!("{ingress}/WeftRun/{prefix}-{index}/run"))
            .json(&json!({"flow": flow}));
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let answer: Value = request
                .send()
                .await
                .expect("the ingress answers")
                .json()
                .await
                .expect("a result");
            assert_eq!(answer["status"], "completed", "{answer}");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a run");
    }
    started.elapsed().as_secs_f64()
}

/// `count` runs of `flow` on `engine`, `IN_FLIGHT` at once; the seconds they took.
async fn embedded(engine: &Engine, flow: &Flow, count: usize) -> f64 {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (engine, flow, permits) = (engine.clone(), flow.clone(), permits.clone());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let outcome = engine
                .start(flow, RunOptions::default())
                .await
                .expect("a run");
            assert_eq!(outcome.status, RunStatus::Completed);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a run");
    }
    started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runs = if quick { 40 } else { 500 };
    let repeats = if quick { 1 } else { 9 };
    let postgres = PostgresServer::start().expect("a PostgreSQL server");
    let restate = RestateServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let flows = dir.path().join("flows");
    std::fs::create_dir_all(&flows).expect("flows");
    std::fs::write(flows.join("greeting.json"), greeting().to_string()).expect("flow");
    std::fs::write(flows.join("chain.json"), chain(CHAIN).to_string()).expect("flow");
    std::fs::write(flows.join("short.json"), chain(SHORT_CHAIN).to_string()).expect("flow");
    let embedded_db = postgres.new_database();
    let restate_db = postgres.new_database();
    let store = Store::open_postgres(&embedded_db).expect("store");
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let engine = Engine::new(LlmClients::new(ProviderSettings::default()), store);
        let greeting = Flow::load(&flows.join("greeting.json")).expect("greeting");

        let seconds = embedded(&engine, &greeting, runs).await;
        println!(
            "embedded engine (PostgreSQL store): {runs} runs in {seconds:.2} s, {:.0} runs/s",
            runs as f64 / seconds
        );

        let first = worker(&flows, &restate_db, &restate.ingress);
        register(&http, &restate.admin, &format!("http://{}", first.addr)).await;
        let seconds = through_restate(&http, &restate.ingress, "one", "greeting", runs).await;
        println!(
            "Restate, 1 worker: {runs} runs in {seconds:.2} s, {:.0} runs/s",
            runs as f64 / seconds
        );

        let second = worker(&flows, &restate_db, &restate.ingress);
        let balancer = Balancer::start(vec![first.addr, second.addr]).await;
        register(&http, &restate.admin, &balancer.url()).await;
        let seconds = through_restate(&http, &restate.ingress, "two", "greeting", runs).await;
        println!(
            "Restate, 2 workers: {runs} runs in {seconds:.2} s, {:.0} runs/s (connections per worker: {:?})",
            runs as f64 / seconds,
            balancer.counts()
        );

        // One run at a time: chains of SHORT_CHAIN and CHAIN steps.
        let mut extra = Vec::new();
        for (name, steps) in [("short", SHORT_CHAIN), ("chain", CHAIN)] {
            let flow = Flow::load(&flows.join(format!("{name}.json"))).expect("chain");
            let mut local = Vec::new();
            let mut remote = Vec::new();
            for repeat in 0..repeats {
                let started = Instant::now();
                let outcome = engine
                    .start(flow.clone(), RunOptions::default())
                    .await
                    .expect("a chain run");
                assert_eq!(outcome.status, RunStatus::Completed);
                local.push(started.elapsed().as_secs_f64());
                let started = Instant::now();
                let answer: Value = http
                    .post(format!("{}/WeftRun/{name}-{repeat}/run", restate.ingress))
                    .json(&json!({"flow": name}))
                    .send()
                    .await
                    .expect("ingress")
                    .json()
                    .await
                    .expect("result");
                assert_eq!(answer["status"], "completed", "{answer}");
                remote.push(started.elapsed().as_secs_f64());
            }
            let (local, remote) = (median(local), median(remote));
            println!(
                "chain of {steps} steps, one run: embedded {:.1} ms, through Restate {:.1} ms (+{:.1} ms)",
                local * 1e3,
                remote * 1e3,
                (remote - local) * 1e3
            );
            extra.push(remote - local);
        }
        println!(
            "through Restate, a run costs {:.1} ms more and a step {:.3} ms more",
            extra[0] * 1e3,
            (extra[1] - extra[0]) * 1e3 / (CHAIN - SHORT_CHAIN) as f64
        );
        drop(second);
        drop(first);
    });
}
