//! Helpers shared by the `weft` end-to-end tests: a temporary directory with its own run store
//! and flow files, and the real executable run in it with a hermetic environment.

// Each test file uses its own share of these.
#![allow(dead_code)]

pub mod ports;
pub mod restate;
pub mod serve;

use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_scripted_llm::ScriptedLlm;

pub const KEY: &str = "sk-test-secret-key";

/// A sandbox: a temporary directory holding the run store and the test's flow files. With
/// [`Sandbox::on_postgres`], its run store is a database of the tests' PostgreSQL server instead.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    postgres: Option<String>,
}

/// What one invocation of `weft` did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(output: Output) -> Ran {
        Ran {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
            postgres: None,
        }
    }

    /// A sandbox whose run store is a new PostgreSQL database (`db_arg` is its URL).
    pub fn on_postgres() -> Sandbox {
        Sandbox {
            postgres: Some(weft_test_postgres::PostgresServer::shared().new_database()),
            ..Sandbox::new()
        }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("runs.db")
    }

    /// What `--db` is given: the SQLite file, or the PostgreSQL URL.
    pub fn db_arg(&self) -> String {
        match &self.postgres {
            Some(url) => url.clone(),
            None => self.db().display().to_string(),
        }
    }

    /// Writes a flow file and returns its path.
    pub fn flow(&self, name: &str, flow: &Value) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(flow).expect("json"))
            .expect("write flow");
        path.display().to_string()
    }

    /// `weft` with a hermetic environment: no provider settings, store or color settings
    /// inherited from the caller.
    pub fn command(&self, args: &[&str], llm: Option<&ScriptedLlm>) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command.args(args).current_dir(self.dir.path());
        for name in [
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "OLLAMA_HOST",
            "WEFT_DB",
            "WEFT_DEFAULT_MODEL",
            "WEFT_LOG",
            "WEFT_PRICES",
            "WEFT_PEOPLE_FILE",
            "NO_COLOR",
            // Traces only where a test asks for them (tests/it/traces.rs).
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "TRACEPARENT",
        ] {
            command.env_remove(name);
        }
        if let Some(llm) = llm {
            command
                .env("OPENAI_BASE_URL", llm.base_url())
                .env("OPENAI_API_KEY", KEY);
        }
        command
    }

    /// `weft` with these arguments, failed if it runs past `limit` (a hang).
    pub fn run_within(&self, args: &[&str], llm: Option<&ScriptedLlm>, limit: Duration) -> Ran {
        let mut command = self.command(args, llm);
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = command.spawn().expect("spawn weft");
        wait_within(child, limit, &args.join(" "))
    }

    /// `weft runs --json`: every run in the store, newest first.
    pub fn runs_within(&self, limit: Duration) -> Vec<Value> {
        let ran = self.run_within(&["runs", "--db", &self.db_arg(), "--json"], None, limit);
        assert_eq!(ran.code, Some(0), "{ran:?}");
        serde_json::from_str::<Value>(&ran.stdout)
            .expect("runs JSON")
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        self.command(args, None).output().expect("weft runs").into()
    }

    /// Runs `weft` off the async runtime's threads (the scripted server lives on them).
    pub async fn run_with(&self, args: &[&str], llm: &ScriptedLlm) -> Ran {
        let mut command = self.command(args, Some(llm));
        tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
            .await
            .expect("join")
            .into()
    }

    /// Every byte of the run store (the database and its WAL/SHM files).
    pub fn db_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(self.dir.path()).expect("read dir") {
            let path = entry.expect("entry").path();
            if path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("runs.db"))
            {
                bytes.extend(std::fs::read(&path).expect("read db"));
            }
        }
        bytes
    }
}

pub fn node(id: &str, kind: &str, data: Value) -> Value {
    json!({ "id": id, "type": kind, "position": { "x": 0, "y": 0 }, "data": data })
}

pub fn edge(id: &str, source: &str, target: &str, handle: Option<&str>) -> Value {
    let mut edge = json!({ "id": id, "source": source, "target": target });
    if let Some(handle) = handle {
        edge["sourceHandle"] = json!(handle);
    }
    edge
}

/// The id a paused `weft run` prints on stdout.
pub fn paused_run_id(ran: &Ran) -> String {
    assert_eq!(ran.code, Some(3), "{ran:?}");
    let id = ran.stdout.trim().to_string();
    assert_eq!(id.len(), 36, "a run id on stdout: {ran:?}");
    assert!(ran.stderr.contains(&format!("weft resume {id}")), "{ran:?}");
    id
}

pub fn parse_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"))
        })
        .collect()
}

/// Waits for `child` up to `limit`; a process still going then is killed and the test fails
/// (a hang is a defect, not a slow machine: limits are many times the expected time).
pub fn wait_within(child: Child, limit: Duration, what: &str) -> Ran {
    let id = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let output = child.wait_with_output().expect("wait for weft");
        let _ = done.send(());
        output
    });
    if finished.recv_timeout(limit).is_err() {
        let _ = Command::new("kill")
            .args(["-KILL", &id.to_string()])
            .status();
        let output: Ran = waiter.join().expect("waiter").into();
        panic!("{what}: weft still ran after {limit:?} and was killed: {output:?}");
    }
    waiter.join().expect("waiter").into()
}

/// Whether the process ended by a signal or a panic (exit 101) rather than an exit code of
/// its own.
pub fn crashed(ran: &Ran) -> bool {
    ran.code.is_none() || ran.code == Some(101)
}

/// The time since `started`, for messages.
pub fn since(started: Instant) -> Duration {
    started.elapsed()
}

/// start → draft (template) → review (approval) → yes / no (templates) → out.
pub fn approval_flow() -> Value {
    json!({
        "version": 1,
        "name": "Review",
        "nodes": [
            node("start", "start", json!({ "initialInput": "the plan" })),
            node("draft", "template", json!({ "template": "Draft: {{PREVIOUS_OUTPUT}}" })),
            node("review", "approval", json!({ "message": "Ship {{PREVIOUS_OUTPUT}}?" })),
            node("yes", "template", json!({ "template": "APPROVED {{PREVIOUS_OUTPUT}}{% if approval.note %} ({{ approval.note }}){% endif %}" })),
            node("no", "template", json!({ "template": "REJECTED {{PREVIOUS_OUTPUT}}{% if approval.note %} ({{ approval.note }}){% endif %}" })),
            node("out", "output", json!({})),
        ],
        "edges": [
            edge("e1", "start", "draft", None),
            edge("e2", "draft", "review", None),
            edge("e3", "review", "yes", Some("approve")),
            edge("e4", "review", "no", Some("reject")),
            edge("e5", "yes", "out", None),
            edge("e6", "no", "out", None),
        ]
    })
}

/// start → say (template) with one schedule, `cron` (seconds allowed), whose input is `input`.
pub fn every_second_flow(cron: &str, input: &str) -> Value {
    json!({
        "version": 1,
        "name": "Ticker",
        "settings": { "schedules": [{ "cron": cron, "input": input }] },
        "nodes": [
            node("start", "start", json!({ "initialInput": "by hand" })),
            node("say", "template", json!({ "template": "tick: {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [edge("e1", "start", "say", None)]
    })
}

/// The runs of `runs` (as `weft runs --json` lists them) that a schedule started, by the
/// occurrence they ran for.
pub fn runs_by_occurrence(runs: &[Value]) -> std::collections::BTreeMap<String, Vec<Value>> {
    let mut by_occurrence = std::collections::BTreeMap::<String, Vec<Value>>::new();
    for run in runs
        .iter()
        .filter(|run| run["trigger"]["kind"] == "schedule")
    {
        let occurrence = run["trigger"]["occurrence"]
            .as_str()
            .expect("a scheduled run names its occurrence");
        by_occurrence
            .entry(occurrence.to_string())
            .or_default()
            .push(run.clone());
    }
    by_occurrence
}

/// Waits until the store holds at least `count` completed runs started by a schedule, and
/// returns every run then stored.
pub async fn wait_for_scheduled_runs(sandbox: &Sandbox, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let runs = sandbox.runs_within(Duration::from_secs(30));
        let completed = runs
            .iter()
            .filter(|run| run["trigger"]["kind"] == "schedule" && run["status"] == "completed")
            .count();
        if completed >= count {
            return runs;
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "{completed} scheduled runs completed in 40 s: {runs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
