//! Hostile input against the real `weft`: each reproduction in `tests/fixtures/hostile/` (the
//! flows that once crashed or hung it) must end with a clear error and exit 1 or 2, never a
//! signal, a panic (101) or a hang, and leave no run `running`.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Ran, Sandbox, crashed, parse_events, paused_run_id, wait_within};
use serde_json::{Value, json};

/// Far above what any of these takes (well under a second each, in a debug build): reaching it
/// means a hang.
const HANG: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(name)
}

fn fixture_flow(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

/// `weft` with these arguments, failed if it hangs.
fn weft(sandbox: &Sandbox, args: &[&str]) -> Ran {
    sandbox.run_within(args, None, HANG)
}

/// Every run in the store with its status.
fn runs(sandbox: &Sandbox) -> Vec<Value> {
    sandbox.runs_within(HANG)
}

fn assert_clean_failure(ran: &Ran, code: i32, message: &str) {
    assert!(!crashed(ran), "crashed: {ran:?}");
    assert_eq!(ran.code, Some(code), "{ran:?}");
    assert!(
        ran.stderr.contains(message),
        "expected `{message}` in: {}",
        ran.stderr
    );
}

#[test]
fn filters_that_once_aborted_or_panicked_fail_the_run_with_the_limit() {
    for (name, message) in [
        (
            "template_indent_abort.json",
            "indent: a width of 1000000000000 is more than 10000",
        ),
        (
            "template_indent_panic.json",
            "indent: a width of 18446744073709551615 is more than 10000",
        ),
        (
            "template_list_1e8.json",
            "a list of 100000000 items is too long to print",
        ),
        (
            "template_ignores_timeout.json",
            "template did too much work",
        ),
    ] {
        let sandbox = Sandbox::new();
        let path = fixture(name).display().to_string();
        let ran = weft(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
        assert_clean_failure(&ran, 1, message);
        assert!(
            ran.stderr.contains("node `t` failed"),
            "names the node: {ran:?}"
        );
        let runs = runs(&sandbox);
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0]["status"], json!("failed"), "{name}: {runs:?}");
    }
}

/// `weft` with these arguments, with the peak of its resident memory (sampled from
/// `/proc/PID/status` while it runs; the peak is kept by the kernel, so the last sample is
/// at most one sampling interval short of it).
fn weft_measured(sandbox: &Sandbox, args: &[&str]) -> (Ran, u64) {
    let mut command = sandbox.command(args, None);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().expect("spawn weft");
    let status = format!("/proc/{}/status", child.id());
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let mut peak_kib = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let text = std::fs::read_to_string(&status).unwrap_or_default();
                let high_water = text
                    .lines()
                    .find_map(|line| line.strip_prefix("VmHWM:"))
                    .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok());
                peak_kib = peak_kib.max(high_water.unwrap_or(0));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak_kib
        })
    };
    let ran = wait_within(child, HANG, &args.join(" "));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    (ran, sampler.join().expect("sampler"))
}

#[test]
fn templates_whose_values_grow_stop_at_the_memory_limit_within_their_timeout() {
    // Each once aborted the process (a failed allocation of gigabytes) or went on rendering
    // for minutes past its `timeoutSeconds: 3` with over a gigabyte resident.
    for (name, message) in [
        (
            "template_replace_empty_memory.json",
            "replace: a result of 10001010000 bytes is more than 10 MiB",
        ),
        (
            "template_join_huge_separator_memory.json",
            "needed more than 128 MiB of memory",
        ),
        (
            "template_namespace_doubling_memory.json",
            "needed more than 128 MiB of memory",
        ),
        (
            "template_literal_loop_doubling_memory.json",
            "needed more than 128 MiB of memory",
        ),
        // Slower to grow: its step's time (3 s) is up first.
        (
            "template_recursive_loop_ignores_timeout.json",
            "still rendering when the step's time was up",
        ),
        (
            "template_macro_recursion_memory.json",
            "needed more than 128 MiB of memory",
        ),
    ] {
        let sandbox = Sandbox::new();
        let path = fixture(name).display().to_string();
        let (ran, peak_kib) = weft_measured(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
        assert_clean_failure(&ran, 1, message);
        assert!(ran.stderr.contains("node `t` failed"), "{name}: {ran:?}");
        // The hard limit (384 MiB) and what the process holds besides: far under the
        // gigabytes these once took.
        assert!(peak_kib < 900 * 1024, "{name}: peak {peak_kib} KiB");
        let runs = runs(&sandbox);
        assert_eq!(runs[0]["status"], json!("failed"), "{name}: {runs:?}");
    }
}

#[test]
fn a_run_is_bounded_in_visits_in_one_value_and_in_what_it_stores() {
    // A million visits allowed: refused before anything runs (it once grew a store to 630 MB
    // in 20 s, and on).
    let sandbox = Sandbox::new();
    let path = fixture("loop_maxnodevisits_1e6_disk_growth.json")
        .display()
        .to_string();
    let ran = weft(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
    assert_clean_failure(
        &ran,
        2,
        "settings.maxNodeVisits must be a whole number from 1 to 100000, found 1000000",
    );

    // Allowed as many as may be, a loop whose value grows by a kilobyte a visit: the run fails
    // once its outputs come to 256 MiB, and the store stays near that.
    let mut flow = fixture_flow("loop_maxnodevisits_1e6_disk_growth.json");
    flow["settings"]["maxNodeVisits"] = json!(100_000);
    flow["nodes"][1]["data"]["template"] = json!("{{ PREVIOUS_OUTPUT }}{{ 'x' * 1024 }}");
    let path = sandbox.flow("growing.json", &flow);
    let ran = weft(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
    assert_clean_failure(&ran, 1, "more than the 256 MiB one run may store");
    assert!(ran.stderr.contains("node `again`"), "{ran:?}");
    let stored = std::fs::metadata(sandbox.db()).expect("store").len();
    assert!(
        stored < 700 * 1024 * 1024,
        "the store grew to {stored} bytes"
    );
    let runs = runs(&sandbox);
    assert_eq!(runs[0]["status"], json!("failed"), "{runs:?}");

    // One value over 16 MiB (here a pin) fails the run naming the node and the limit.
    let sandbox = Sandbox::new();
    let flow = json!({"version": 1, "name": "pinned", "nodes": [
        {"id": "start", "type": "start", "position": {"x": 0, "y": 0}, "data": {"initialInput": "x"}},
        {"id": "big", "type": "template", "position": {"x": 1, "y": 0}, "data": {"template": "small"}},
        {"id": "out", "type": "output", "position": {"x": 2, "y": 0}, "data": {}}],
        "edges": [{"id": "e1", "source": "start", "target": "big"},
                  {"id": "e2", "source": "big", "target": "out"}]});
    let path = sandbox.flow("pinned.json", &flow);
    let pins = json!({"pins": {"big": {"output": "p".repeat(17 * 1024 * 1024)}}});
    std::fs::write(
        path.replace("pinned.json", "pinned.pins.json"),
        pins.to_string(),
    )
    .expect("pins");
    let ran = weft(
        &sandbox,
        &["run", &path, "--pins", "--db", &sandbox.db_arg()],
    );
    assert_clean_failure(
        &ran,
        1,
        "node `big` gave a value of 17 MiB, more than the 16 MiB one value may be",
    );
}

#[test]
fn a_large_value_passed_along_a_chain_is_held_once_not_once_a_step() {
    // A 6 MB pin of 45,000 small objects (about 40 MB as a value in memory) passed through
    // twelve `if` nodes to an output: each step once copied the value into the run's outputs,
    // its last result and the next step's input, and the run peaked at 1.26 GB.
    let sandbox = Sandbox::new();
    let mut nodes = vec![
        json!({"id": "start", "type": "start", "position": {"x": 0, "y": 0}, "data": {"initialInput": "go"}}),
        json!({"id": "big", "type": "template", "position": {"x": 1, "y": 0}, "data": {"template": "small"}}),
    ];
    let mut edges = vec![json!({"id": "e0", "source": "start", "target": "big"})];
    let mut previous = ("big".to_string(), "output");
    for index in 0..12 {
        let id = format!("pass{index}");
        nodes.push(
            json!({"id": id, "type": "if", "position": {"x": index + 2, "y": 0},
            "data": {"conditions": [{"operator": "is_not_empty", "value": ""}]}}),
        );
        edges.push(
            json!({"id": format!("e{}", index + 1), "source": previous.0,
            "target": id, "sourceHandle": previous.1}),
        );
        previous = (id, "condition-0");
    }
    nodes.push(json!({"id": "out", "type": "output", "position": {"x": 14, "y": 0}, "data": {}}));
    edges.push(
        json!({"id": "last", "source": previous.0, "target": "out", "sourceHandle": previous.1}),
    );
    let path = sandbox.flow(
        "chain.json",
        &json!({"version": 1, "name": "chain", "nodes": nodes, "edges": edges}),
    );
    let rows: Vec<Value> = (0..45_000)
        .map(|id| json!({"id": id, "name": format!("customer {id}"), "note": "lorem ipsum dolor sit amet ".repeat(3)}))
        .collect();
    std::fs::write(
        path.replace("chain.json", "chain.pins.json"),
        json!({"pins": {"big": {"output": rows}}}).to_string(),
    )
    .expect("pins");
    let (ran, peak_kib) = weft_measured(
        &sandbox,
        &["run", &path, "--pins", "--db", &sandbox.db_arg()],
    );
    assert!(!crashed(&ran), "crashed: {ran:?}");
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    // The value arrived whole at the end.
    let result: Value = serde_json::from_str(&ran.stdout).expect("the result as JSON");
    assert_eq!(result.as_array().map(Vec::len), Some(45_000));
    assert_eq!(result[44_999]["name"], json!("customer 44999"));
    // Held once, with each step's text on its way to the store: about 310 MB here.
    assert!(peak_kib < 640 * 1024, "peak {peak_kib} KiB");
}

#[test]
fn validate_refuses_what_once_overflowed_the_stack_naming_the_field() {
    for (name, message) in [
        (
            "template_deep_unary_validate_overflow.json",
            "more than 200 operators in one tag",
        ),
        (
            "code_inputfields_stack_overflow.json",
            "field `inputFields`: field `((((",
        ),
    ] {
        let sandbox = Sandbox::new();
        let path = fixture(name).display().to_string();
        let ran = weft(&sandbox, &["validate", &path]);
        assert!(!crashed(&ran), "{name}: {ran:?}");
        assert_eq!(ran.code, Some(2), "{name}: {ran:?}");
        let said = format!("{}{}", ran.stdout, ran.stderr);
        assert!(said.contains("node t"), "{name}: {said}");
        assert!(said.contains(message), "{name}: {said}");
        assert!(
            said.len() < 2_000,
            "{name}: the message is short, not the input echoed"
        );
        // `weft run` refuses it the same way, before starting a run.
        let ran = weft(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
        assert!(!crashed(&ran) && ran.code == Some(2), "{name}: {ran:?}");
    }
}

#[cfg(unix)]
#[test]
fn an_endless_flow_file_is_refused_as_no_regular_file() {
    let sandbox = Sandbox::new();
    let ran = weft(&sandbox, &["validate", "/dev/zero"]);
    assert_clean_failure(
        &ran,
        2,
        "cannot read /dev/zero: not a regular file but a character device",
    );
}

#[test]
fn a_failing_branch_stops_a_running_code_sibling_at_once() {
    let sandbox = Sandbox::new();
    let mut flow = fixture_flow("code_sibling_not_stopped.json");
    // The spinning sibling would run for two minutes on its own.
    flow["nodes"][1]["data"]["timeoutSeconds"] = json!(120);
    let path = sandbox.flow("sibling.json", &flow);
    let started = Instant::now();
    let ran = weft(&sandbox, &["run", &path, "--db", &sandbox.db_arg()]);
    assert_clean_failure(&ran, 1, "ZeroDivisionError");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the process waited for the spinning code: {:?}",
        started.elapsed()
    );
}

#[cfg(unix)]
#[test]
fn sigterm_stops_a_long_template_and_the_run_reads_cancelled() {
    let sandbox = Sandbox::new();
    let mut flow = fixture_flow("template_ignores_timeout.json");
    // Little fuel per item but a 5 MB copy each: hours of work without a checkpoint.
    flow["nodes"][1]["data"] = json!({
        "template": "{% set s = 'a' * 5000000 %}{% for i in range(100000) %}{% set t = s ~ 'b' %}{% endfor %}done",
        "timeoutSeconds": 600
    });
    let path = sandbox.flow("slow.json", &flow);
    let mut command = sandbox.command(&["run", &path, "--db", &sandbox.db_arg(), "--events"], None);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn weft");
    let stdout = child.stdout.take().expect("stdout");
    // Wait until the template step has started, then ask the process to stop.
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("a line");
        let started = line.contains("\"step_start\"") && line.contains("\"t\"");
        seen.push(line);
        if started {
            break;
        }
    }
    assert!(
        seen.iter().any(|line| line.contains("step_start")),
        "{seen:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let ran = wait_within(child, HANG, "weft run after SIGTERM");
    assert!(!crashed(&ran), "{ran:?}");
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(30),
        "stopped long after SIGTERM: {:?}",
        signalled.elapsed()
    );
    let events = parse_events(&rest.join("\n"));
    let end = events.last().expect("a run_end event");
    assert_eq!(end["type"], json!("run_end"), "{events:?}");
    assert_eq!(runs(&sandbox)[0]["status"], json!("cancelled"));
}

#[cfg(unix)]
#[test]
fn a_resume_killed_mid_way_leaves_a_run_that_can_be_continued() {
    let sandbox = Sandbox::new();
    let mut flow = fixture_flow("resume_killed.json");
    // The step after the approval spins until its timeout: kill -9 lands while it runs.
    flow["nodes"][2]["data"]["timeoutSeconds"] = json!(2);
    let path = sandbox.flow("resume_killed.json", &flow);
    let db = sandbox.db_arg();
    let run_id = paused_run_id(&weft(&sandbox, &["run", &path, "--db", &db]));

    let mut command = sandbox.command(
        &[
            "resume",
            &run_id,
            "--decision",
            "approve",
            "--db",
            &db,
            "--events",
        ],
        None,
    );
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn weft resume");
    let stdout = child.stdout.take().expect("stdout");
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.expect("a line");
        if line.contains("\"step_start\"") && line.contains("\"work\"") {
            break;
        }
    }
    child.kill().expect("kill -9");
    let killed = wait_within(child, HANG, "killed resume");
    assert_eq!(killed.code, None, "ended by the signal");

    // The next `weft` finds the resumer gone: the run reads interrupted, not running.
    let status = &runs(&sandbox)[0];
    assert_eq!(status["status"], json!("interrupted"), "{status}");
    // Answering the approval again is refused with the way forward...
    let ran = weft(
        &sandbox,
        &["resume", &run_id, "--decision", "approve", "--db", &db],
    );
    assert!(!crashed(&ran), "{ran:?}");
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("--retry"), "{ran:?}");
    // ...and `--retry` continues it: `work` runs again (and times out, as its code spins).
    let ran = weft(&sandbox, &["resume", &run_id, "--retry", "--db", &db]);
    assert_clean_failure(&ran, 1, "work");
    assert!(
        ran.stderr.contains("2 s"),
        "the step's own timeout: {ran:?}"
    );
    assert_eq!(runs(&sandbox)[0]["status"], json!("failed"));
}
