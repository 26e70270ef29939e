//! Call times for the seed-000 `code` node example:
//! `cargo bench -p weft-sandbox`.
//!
//! - cold: the first call in the process (starts a worker thread, builds an interpreter,
//!   checks and compiles the body);
//! - new body: a body not seen before, on a warm interpreter (check and compile);
//! - warm: the same body again (cached code; fresh globals for every call).

use std::time::{Duration, Instant};

use serde_json::json;
use weft_sandbox::{Limits, Sandbox};

const BODY: &str =
    "full = first_name + \" \" + last_name\nreturn {\"full_name\": full, \"is_adult\": age >= 18}";

fn main() {
    let fields: Vec<String> = ["first_name", "last_name", "age"]
        .iter()
        .map(|f| f.to_string())
        .collect();
    let initial = json!({});
    let input = json!({"first_name": "Ada", "last_name": "Lovelace", "age": 36});
    let limits = Limits::default();
    let expected = json!({"full_name": "Ada Lovelace", "is_adult": true});
    let sandbox = Sandbox::new();

    let started = Instant::now();
    let first = sandbox.run(BODY, &fields, &initial, &input, &limits);
    let cold = started.elapsed();
    assert_eq!(first.map(|r| r.value), Ok(expected.clone()));

    let mut new_body = Vec::new();
    for i in 0..20 {
        let body = format!("{BODY}\n# variant {i}");
        let started = Instant::now();
        let result = sandbox.run(&body, &fields, &initial, &input, &limits);
        new_body.push(started.elapsed());
        assert_eq!(result.map(|r| r.value), Ok(expected.clone()));
    }

    for _ in 0..200 {
        let _ = sandbox.run(BODY, &fields, &initial, &input, &limits);
    }
    let mut warm = Vec::new();
    for _ in 0..5000 {
        let started = Instant::now();
        let result = sandbox.run(BODY, &fields, &initial, &input, &limits);
        warm.push(started.elapsed());
        assert!(result.is_ok());
    }

    println!("sandbox, seed-000 example (fields first_name, last_name, age)");
    println!("  cold (first call in the process): {}", ms(cold));
    report("new body (check + compile)", &mut new_body);
    report("warm (cached code)", &mut warm);
}

fn report(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let total: Duration = samples.iter().sum();
    let mean = total / samples.len() as u32;
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "  {name}: mean {}, median {}, p99 {} over {} calls",
        ms(mean),
        ms(at(0.5)),
        ms(at(0.99)),
        samples.len()
    );
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}
