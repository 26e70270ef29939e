//! `cargo bench -p weft-otel` — what traces cost a run (not a pass/fail test): the engine's
//! per-step time on a chain of template nodes and a trivial flow's run time, untraced and
//! traced to a local collector (a loopback HTTP server that takes every OTLP request).
//! Targets (docs/benchmarks.md): at most 2 µs more per step, the trivial flow at most 1 ms
//! slower. Under `cargo test --benches` it runs each once on a short chain.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_engine::{Engine, RunOptions};
use weft_flow::Flow;
use weft_history::cost::Prices;
use weft_otel::Telemetry;
use weft_providers::{LlmClients, ProviderSettings};
use weft_store::Store;

fn chain(length: usize) -> Flow {
    let mut nodes = vec![json!({"id": "start", "type": "start", "data": {"initialInput": "go"}})];
    let mut edges = Vec::new();
    let mut previous = "start".to_string();
    for index in 0..length {
        let id = format!("n{index}");
        nodes.push(
            json!({"id": id, "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}"}}),
        );
        edges.push(json!({"id": format!("e{index}"), "source": previous, "target": id}));
        previous = id;
    }
    nodes.push(json!({"id": "end", "type": "output", "data": {}}));
    edges.push(json!({"id": "e-end", "source": previous, "target": "end"}));
    Flow::from_value(
        json!({"name": "chain", "nodes": nodes, "edges": edges}),
        "bench",
    )
    .expect("chain flow")
}

/// A collector that answers every request 200 and forgets it: what is measured is the run's
/// side of exporting.
fn local_collector() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1/traces", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(value) = lower.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn engine(dir: &std::path::Path, telemetry: Option<&Telemetry>) -> Engine {
    let engine = Engine::new(
        LlmClients::new(ProviderSettings::default()),
        Store::open(&dir.join("bench.db")).expect("store"),
    );
    match telemetry {
        Some(telemetry) => engine.with_tracer(telemetry.tracer(&Prices::shipped())),
        None => engine,
    }
}

/// The best of `rounds` runs of `flow`.
async fn best_run(engine: &Engine, flow: &Flow, rounds: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        let outcome = engine
            .start(flow.clone(), RunOptions::default())
            .await
            .expect("run");
        assert_eq!(outcome.status, weft_event::RunStatus::Completed);
        best = best.min(started.elapsed());
    }
    best
}

fn main() {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let (length, rounds) = if quick { (20, 1) } else { (5_000, 15) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let telemetry = Telemetry::to_url(&local_collector(), false).expect("exporter");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let (off_dir, on_dir) = (dir.path().join("off"), dir.path().join("on"));
        std::fs::create_dir_all(&off_dir).expect("dir");
        std::fs::create_dir_all(&on_dir).expect("dir");
        let off = engine(&off_dir, None);
        let on = engine(&on_dir, Some(&telemetry));
        let flow = chain(length);
        // Interleaved, so both meet the same machine.
        let mut untraced = Duration::MAX;
        let mut traced = Duration::MAX;
        for _ in 0..rounds.max(1) {
            untraced = untraced.min(best_run(&off, &flow, 1).await);
            traced = traced.min(best_run(&on, &flow, 1).await);
        }
        let steps = (length + 2) as f64;
        let per_step = |time: Duration| time.as_secs_f64() * 1e6 / steps;
        println!(
            "chain of {length} templates: {:.2} µs per step untraced, {:.2} µs traced ({:+.2} µs)",
            per_step(untraced),
            per_step(traced),
            per_step(traced) - per_step(untraced)
        );
        let trivial = chain(0);
        let rounds = if quick { 1 } else { 200 };
        let untraced = best_run(&off, &trivial, rounds).await;
        let traced = best_run(&on, &trivial, rounds).await;
        println!(
            "trivial flow (start → output): {:.3} ms untraced, {:.3} ms traced ({:+.3} ms)",
            untraced.as_secs_f64() * 1e3,
            traced.as_secs_f64() * 1e3,
            (traced.as_secs_f64() - untraced.as_secs_f64()) * 1e3
        );
    });
    telemetry.shutdown();
}
