//! A run stuck in one long builtin call (which the VM cannot interrupt) still answers soon
//! after its timeout, and the sandbox keeps working. Its own file: it uses a lot of memory,
//! which would disturb the memory watchdog in other tests running at the same time.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_sandbox::{Limits, Sandbox, SandboxError};

#[test]
fn a_long_builtin_call_is_abandoned_after_the_grace_period() {
    let sandbox = Sandbox::new();
    let limits = Limits {
        timeout: Duration::from_millis(300),
        // Room for the list, so that the clock is what stops it.
        max_memory_bytes: 1 << 30,
        ..Limits::default()
    };
    let started = Instant::now();
    let result = sandbox.run(
        "x = [0.5] * 20000000\nreturn len(str(x))",
        &[],
        &json!({}),
        &Value::Null,
        &limits,
    );
    let took = started.elapsed();
    eprintln!("answered after {took:?}");
    assert!(
        matches!(result, Err(SandboxError::Timeout { .. })),
        "{result:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    let result = sandbox.run(
        "return 6 * 7",
        &[],
        &json!({}),
        &Value::Null,
        &Limits::default(),
    );
    assert_eq!(result.map(|r| r.value), Ok(json!(42)));
}
