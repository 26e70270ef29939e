//! Golden tests: every flow in `flows/` and every fixture in `tests/fixtures/` is validated
//! and (when valid) run against the scripted LLM server; the validation result, the outcome
//! and the normalized event trace are compared with a snapshot beside it.
//!
//! - `flows/<name>.json` → cases in `tests/golden/<name>.cases.json`, snapshot `tests/golden/<name>.snap`
//! - `tests/fixtures/{valid,invalid}/<name>.json` → `<name>.cases.json` and `<name>.snap` beside it
//!
//! Run with `WEFT_UPDATE_SNAPSHOTS=1` to write snapshots (and to rewrite `flows/` in the
//! normalized form); review the diff before committing.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weft_engine::providers::{LlmClients, ProviderSettings, Secret};
use weft_engine::{
    Decision, Engine, EventType, Flow, ResumeOptions, RunEvent, RunOptions, RunStatus, Store,
    validate,
};
use weft_scripted_llm::{Script, ScriptedLlm};

const SECRET: &str = "sk-golden-secret-key";

#[derive(Debug, Deserialize, Default)]
struct Cases {
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize, Default)]
struct Case {
    name: String,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    decide: HashMap<String, String>,
    #[serde(default)]
    resume: Vec<ResumeStep>,
    #[serde(default)]
    script: Script,
}

#[derive(Debug, Deserialize)]
struct ResumeStep {
    decision: String,
    #[serde(default)]
    note: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn updating() -> bool {
    std::env::var_os("WEFT_UPDATE_SNAPSHOTS").is_some()
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            name.ends_with(".json") && !name.ends_with(".cases.json")
        })
        .collect();
    files.sort();
    files
}

/// Compares `actual` with the snapshot at `path` (or writes it when updating).
fn check_snapshot(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if updating() {
        std::fs::write(path, actual)
            .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs.\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{} is missing (run with WEFT_UPDATE_SNAPSHOTS=1).\n--- actual\n{actual}",
            path.display()
        )),
    }
}

fn settings(base_url: String) -> ProviderSettings {
    ProviderSettings {
        openai_base_url: base_url,
        openai_api_key: Some(Secret::new(SECRET)),
        max_attempts: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        read_timeout: Duration::from_secs(10),
        ..ProviderSettings::default()
    }
}

/// The trace with run ids, times and `seq` left out, events grouped by node (run-level first,
/// then nodes in file order, then the nodes of nested runs by scope, e.g. `each[2]/grade`) so
/// concurrent branches do not reorder the snapshot. Consecutive `llm_delta` events of a node
/// are shown as one line with their count.
fn normalized_trace(flow: &Flow, events: &[RunEvent]) -> String {
    let mut top: Vec<(String, Vec<String>)> = vec![("(run)".into(), Vec::new())];
    top.extend(flow.nodes.iter().map(|node| (node.id.clone(), Vec::new())));
    let mut nested: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut deltas: HashMap<String, (usize, String)> = HashMap::new();
    let key_of = |event: &RunEvent| {
        let node = event.node_id.clone().unwrap_or_else(|| "(run)".into());
        match &event.scope {
            Some(scope) => format!("{scope}/{node}"),
            None => node,
        }
    };
    let mut push = |top: &mut Vec<(String, Vec<String>)>, key: &str, line: String| match top
        .iter_mut()
        .find(|(id, _)| id == key)
    {
        Some((_, lines)) => lines.push(line),
        None => nested.entry(key.to_string()).or_default().push(line),
    };
    for event in events {
        let key = key_of(event);
        if event.kind == EventType::LlmDelta {
            let entry = deltas.entry(key).or_default();
            entry.0 += 1;
            entry.1.push_str(&event.content);
            continue;
        }
        if let Some((count, text)) = deltas.remove(&key) {
            push(&mut top, &key, format!("llm_delta x{count}: {text:?}"));
        }
        push(
            &mut top,
            &key,
            format!("{}: {:?}", event.kind, event.content),
        );
    }
    let mut pending: Vec<(String, (usize, String))> = deltas.into_iter().collect();
    pending.sort();
    for (key, (count, text)) in pending {
        push(&mut top, &key, format!("llm_delta x{count}: {text:?}"));
    }
    let mut out = String::new();
    let groups = top.into_iter().chain(nested);
    for (node, lines) in groups.filter(|(_, lines)| !lines.is_empty()) {
        let _ = writeln!(out, "  [{node}]");
        for line in lines {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// Invariants every trace keeps: one run id, seq 1..n without gaps, run_start first and, for a
/// finished run, run_end last; the key never appears.
fn check_trace_invariants(events: &[RunEvent], status: RunStatus) -> Result<(), String> {
    for (index, event) in events.iter().enumerate() {
        if event.seq != index as u64 + 1 {
            return Err(format!(
                "event {index} has seq {} (expected {})",
                event.seq,
                index + 1
            ));
        }
        if event.run_id != events[0].run_id {
            return Err("events of two runs mixed".into());
        }
        if event.content.contains(SECRET) {
            return Err(format!("the API key leaked into event {}", event.seq));
        }
        chrono_like(&event.ts).map_err(|error| format!("event {}: {error}", event.seq))?;
    }
    if events.first().map(|event| event.kind) != Some(EventType::RunStart) {
        return Err("the first event is not run_start".into());
    }
    let ends = events
        .iter()
        .filter(|event| event.kind == EventType::RunEnd)
        .count();
    let expected_ends = usize::from(status.is_finished());
    if ends != expected_ends
        || (expected_ends == 1 && events.last().map(|event| event.kind) != Some(EventType::RunEnd))
    {
        return Err(format!(
            "expected {expected_ends} run_end as the last event, found {ends}"
        ));
    }
    Ok(())
}

fn chrono_like(ts: &str) -> Result<(), String> {
    // RFC 3339 with milliseconds in UTC: 2026-11-21T18:06:19.123Z
    let ok = ts.len() == 24
        && ts.ends_with('Z')
        && ts.as_bytes()[10] == b'T'
        && ts.as_bytes()[19] == b'.';
    if ok {
        Ok(())
    } else {
        Err(format!("ts {ts:?} is not RFC 3339 with milliseconds"))
    }
}

async fn run_case(
    flow: &Flow,
    flow_path: &Path,
    case: &Case,
    out: &mut String,
) -> Result<(), String> {
    let server = ScriptedLlm::start(case.script.clone())
        .await
        .map_err(|error| error.to_string())?;
    let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let db_path = dir.path().join("runs.db");
    let store = Store::open(&db_path).map_err(|error| error.to_string())?;
    let engine = Engine::new(LlmClients::new(settings(server.base_url())), store.clone());
    let decisions = case
        .decide
        .iter()
        .map(|(node, answer)| {
            let (answer, note) = answer.split_once(':').unwrap_or((answer, ""));
            Decision::parse(answer, note).map(|decision| (node.clone(), decision))
        })
        .collect::<Result<HashMap<_, _>, _>>()?;
    let mut outcome = engine
        .start(
            flow.clone(),
            RunOptions {
                input: case.input.clone(),
                decisions,
                flow_path: Some(flow_path.to_path_buf()),
                ..RunOptions::default()
            },
        )
        .await
        .map_err(|error| error.to_string())?;
    let _ = writeln!(out, "## case: {}", case.name);
    for step in &case.resume {
        let Some(waiting) = &outcome.waiting else {
            return Err(format!(
                "case `{}` resumes, but the run did not pause",
                case.name
            ));
        };
        let _ = writeln!(out, "paused at {}: {:?}", waiting.node_id, waiting.message);
        let decision = Decision::parse(&step.decision, step.note.clone())?;
        outcome = engine
            .resume(&outcome.run_id, decision, ResumeOptions::default())
            .await
            .map_err(|error| error.to_string())?;
    }
    if let Some(waiting) = &outcome.waiting {
        let _ = writeln!(out, "paused at {}: {:?}", waiting.node_id, waiting.message);
    }
    let _ = writeln!(out, "status: {}", outcome.status);
    if let Some(result) = &outcome.result {
        let _ = writeln!(out, "result: {result}");
    }
    if let Some(error) = &outcome.error {
        let _ = writeln!(out, "error: {error}");
    }
    let events = store
        .events(&outcome.run_id)
        .map_err(|error| error.to_string())?;
    check_trace_invariants(&events, outcome.status)?;
    let record = store
        .run(&outcome.run_id)
        .map_err(|error| error.to_string())?;
    if record.summary.status != outcome.status {
        return Err(format!(
            "the store says {} but the run ended {}",
            record.summary.status, outcome.status
        ));
    }
    let _ = writeln!(out, "llm requests: {}", server.requests().len());
    let _ = write!(out, "events:\n{}", normalized_trace(flow, &events));
    drop(store);
    drop(engine);
    let bytes = std::fs::read(&db_path).map_err(|error| error.to_string())?;
    let wal = std::fs::read(db_path.with_extension("db-wal")).unwrap_or_default();
    let leaked = [bytes, wal].iter().any(|bytes| {
        bytes
            .windows(SECRET.len())
            .any(|window| window == SECRET.as_bytes())
    });
    if leaked {
        return Err("the API key is in the run store".into());
    }
    for request in server.requests() {
        if request.header("authorization") != Some(&format!("Bearer {SECRET}")) {
            return Err("a request went out without the configured key".into());
        }
    }
    Ok(())
}

async fn golden_text(flow_path: &Path, cases_path: &Path) -> Result<String, String> {
    let mut out = String::new();
    let flow = match Flow::load(flow_path) {
        Ok(flow) => flow,
        Err(error) => {
            let message = error
                .to_string()
                .replace(&repo_root().display().to_string(), "<repo>");
            let _ = writeln!(out, "load error: {message}");
            return Ok(out);
        }
    };
    let problems = validate(&flow, Some(flow_path));
    let _ = writeln!(out, "# validation");
    if problems.is_empty() {
        let _ = writeln!(out, "no problems");
    }
    for problem in &problems {
        let _ = writeln!(out, "{problem}");
    }
    if problems.iter().any(|problem| problem.is_error()) {
        return Ok(out);
    }
    let cases: Cases = match std::fs::read_to_string(cases_path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|error| format!("{}: {error}", cases_path.display()))?,
        Err(_) => Cases {
            cases: vec![Case {
                name: "default".into(),
                ..Case::default()
            }],
        },
    };
    let _ = writeln!(out, "# runs");
    for case in &cases.cases {
        run_case(&flow, flow_path, case, &mut out)
            .await
            .map_err(|error| format!("case `{}`: {error}", case.name))?;
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_flows_match_their_snapshots() {
    let root = repo_root();
    let mut failures = Vec::new();
    let files = json_files(&root.join("flows"));
    assert!(files.len() >= 4, "flows/ should hold the example flows");
    for path in files {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default()
            .to_string();
        // Examples are saved in the normalized form, as the canvas would save them.
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        match Flow::parse(&text, &name) {
            Ok(flow) if flow.to_file_string() != text => {
                if updating() {
                    flow.save(&path)
                        .unwrap_or_else(|error| panic!("save {name}: {error}"));
                } else {
                    failures.push(format!("{} is not in the normalized form", path.display()));
                }
            }
            Ok(_) => {}
            Err(error) => failures.push(format!("{}: {error}", path.display())),
        }
        let golden = root.join("tests/golden");
        match golden_text(&path, &golden.join(format!("{name}.cases.json"))).await {
            Ok(actual) => {
                check_snapshot(&golden.join(format!("{name}.snap")), &actual, &mut failures)
            }
            Err(error) => failures.push(format!("{}: {error}", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_match_their_snapshots() {
    let root = repo_root();
    let mut failures = Vec::new();
    for folder in ["valid", "invalid"] {
        let dir = root.join("tests/fixtures").join(folder);
        for path in json_files(&dir) {
            let stem = path
                .file_stem()
                .and_then(|stem| stem.to_str())
                .unwrap_or_default()
                .to_string();
            match golden_text(&path, &dir.join(format!("{stem}.cases.json"))).await {
                Ok(actual) => {
                    let has_error =
                        actual.contains(": error: ") || actual.starts_with("load error");
                    if folder == "invalid" && stem != "warnings_only" && !has_error {
                        failures.push(format!("invalid/{stem}.json produced no error:\n{actual}"));
                    }
                    if folder == "valid" && has_error {
                        failures.push(format!("valid/{stem}.json did not validate:\n{actual}"));
                    }
                    check_snapshot(&dir.join(format!("{stem}.snap")), &actual, &mut failures);
                }
                Err(error) => failures.push(format!("{folder}/{stem}.json: {error}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
