//! `cargo bench -p weft-server` — the API under load on loopback: 1,000 runs started over
//! `POST /v1/runs` that all pause at an approval, listed by `GET /v1/approvals`, decided by
//! `POST /v1/runs/{id}/decision`, then checked: every run completed, none lost. Prints
//! requests per second and the p50/p99 latency of each phase (32 requests in flight). First,
//! how long a tokens file of 160,000 tokens takes to load (`weft serve` loads it before it
//! listens). `cargo test --benches` runs it small.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use weft_api::{Lifetime, StoreLocation, Weft};
use weft_providers::ProviderSettings;
use weft_server::{ServeConfig, Tokens};

const TOKEN: &str = "bench-token-0123456789abcdef";
const IN_FLIGHT: usize = 32;

fn flow() -> Value {
    json!({
        "version": 1,
        "name": "Approve",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "a refund"}},
            {"id": "review", "type": "approval", "data": {"message": "Approve {{ PREVIOUS_OUTPUT }}?"}},
            {"id": "done", "type": "template", "data": {"template": "{{ approval.decision }} by {{ approval.by }}"}},
            {"id": "no", "type": "template", "data": {"template": "no"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "review"},
            {"id": "b", "source": "review", "sourceHandle": "approve", "target": "done"},
            {"id": "c", "source": "review", "sourceHandle": "reject", "target": "no"}
        ]
    })
}

/// Sends `count` requests made by `make` with at most `IN_FLIGHT` at once; returns each one's
/// latency and answer, and the whole phase's time.
async fn phase<F>(count: usize, make: F) -> (Vec<Duration>, Vec<(u16, Value)>, Duration)
where
    F: Fn(usize) -> reqwest::RequestBuilder,
{
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..count {
        let request = make(index);
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let sent = Instant::now();
            let response = request.send().await.expect("an answer");
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (index, sent.elapsed(), status, body)
        });
    }
    let mut results = vec![(Duration::ZERO, (0u16, Value::Null)); count];
    while let Some(done) = tasks.join_next().await {
        let (index, latency, status, body) = done.expect("a request task");
        results[index] = (latency, (status, body));
    }
    let took = started.elapsed();
    let (latencies, answers) = results.into_iter().unzip();
    (latencies, answers, took)
}

fn report(name: &str, latencies: &mut [Duration], took: Duration) {
    latencies.sort();
    let at = |share: f64| {
        latencies[((latencies.len() as f64 * share) as usize).min(latencies.len() - 1)]
    };
    println!(
        "{name}: {} requests in {:.2} s = {:.0} requests/s; latency p50 {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        took.as_secs_f64(),
        latencies.len() as f64 / took.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}

/// Loads a tokens file of `count` tokens, as `weft serve --tokens` does, and prints how long
/// that took.
fn load_tokens(dir: &std::path::Path, count: usize) {
    let path = dir.join("tokens.txt");
    let text: String = (0..count)
        .map(|index| format!("user{index}:token-{index:020}-abcdef\n"))
        .collect();
    std::fs::write(&path, text).expect("tokens file");
    let started = Instant::now();
    let tokens = Tokens::load(&path).expect("tokens");
    let took = started.elapsed();
    assert_eq!(tokens.names().len(), count);
    println!(
        "tokens: a file of {count} loaded in {:.1} ms",
        took.as_secs_f64() * 1e3
    );
    // What each request pays to be recognized, or refused, among them.
    let calls = 10_000;
    let last = format!("Bearer token-{:020}-abcdef", count - 1);
    let started = Instant::now();
    for call in 0..calls {
        let header = if call % 2 == 0 {
            last.as_str()
        } else {
            "Bearer not-a-token-of-anyone"
        };
        std::hint::black_box(tokens.caller(std::hint::black_box(header)));
    }
    println!(
        "tokens: a request's token found or refused among them in {:.2} µs",
        started.elapsed().as_secs_f64() * 1e6 / calls as f64
    );
}

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runs = if quick { 50 } else { 1_000 };
    {
        let dir = tempfile::tempdir().expect("dir");
        load_tokens(dir.path(), 160_000);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("dir");
        let flows = dir.path().join("flows");
        std::fs::create_dir_all(&flows).expect("flows");
        std::fs::write(flows.join("approve.json"), flow().to_string()).expect("flow");
        let weft = Weft::open(
            StoreLocation::from(dir.path().join("runs.db")),
            Lifetime::Service,
            ProviderSettings::default(),
        )
        .expect("store");
        let store = weft.store().clone();
        let config = ServeConfig::new(
            flows,
            Tokens::parse(&format!("bench:{TOKEN}"), "bench").expect("tokens"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(weft_server::serve(
            listener,
            weft,
            config,
            async move {
                let _ = stopped.await;
            },
            Duration::from_secs(5),
        ));
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(IN_FLIGHT)
            .build()
            .expect("client");

        let (mut latencies, answers, took) = phase(runs, |_| {
            http.post(format!("{url}/v1/runs"))
                .bearer_auth(TOKEN)
                .body(json!({ "flow": "approve" }).to_string())
        })
        .await;
        let ids: Vec<String> = answers
            .iter()
            .map(|(status, body)| {
                assert_eq!(*status, 201, "{body}");
                body["runId"].as_str().expect("id").to_string()
            })
            .collect();
        report("start (POST /v1/runs)", &mut latencies, took);

        // Every run pauses; the inbox lists them all.
        let listed = Instant::now();
        let pending = loop {
            let approvals: Value = http
                .get(format!("{url}/v1/approvals"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("approvals")
                .json()
                .await
                .expect("JSON");
            let pending = approvals.as_array().map_or(0, Vec::len);
            if pending == runs {
                break approvals;
            }
            assert!(
                listed.elapsed() < Duration::from_secs(120),
                "only {pending} of {runs} paused"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        println!(
            "all {runs} runs paused and listed by GET /v1/approvals {:.2} s after the last start",
            listed.elapsed().as_secs_f64()
        );
        assert_eq!(pending.as_array().map(Vec::len), Some(runs));

        let (mut latencies, answers, took) = phase(runs, |index| {
            http.post(format!("{url}/v1/runs/{}/decision", ids[index]))
                .bearer_auth(TOKEN)
                .body(json!({ "decision": "approve" }).to_string())
        })
        .await;
        for (status, body) in &answers {
            assert_eq!(*status, 200, "{body}");
        }
        report("decide (POST /v1/runs/{id}/decision)", &mut latencies, took);

        // Nothing lost: every run completed, decided by the token's name.
        let checked = Instant::now();
        loop {
            let done = ids
                .iter()
                .filter(|id| {
                    store.run(id).is_ok_and(|record| {
                        record.summary.status == weft_event::RunStatus::Completed
                            && record.result == Some(json!("approve by bench"))
                    })
                })
                .count();
            if done == runs {
                break;
            }
            assert!(
                checked.elapsed() < Duration::from_secs(120),
                "only {done} of {runs} completed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("all {runs} runs completed; none lost");
        let _ = stop.send(());
        server.await.expect("server task").expect("server");
    });
}
