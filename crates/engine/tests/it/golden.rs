//! Golden tests: every flow in `flows/` and every fixture in `tests/fixtures/` is validated
//! and (when valid) run against the scripted LLM server; the validation result, the outcome
//! and the normalized event trace are compared with a snapshot beside it.
//!
//! - `flows/<name>.json` → cases in `tests/golden/<name>.cases.json`, snapshot
//!   `tests/golden/<name>.snap`
//! - `tests/fixtures/{valid,invalid}/<name>.json` → `<name>.cases.json` and `<name>.snap` beside it
//!
//! Run with `WEFT_UPDATE_SNAPSHOTS=1` to write snapshots (and to rewrite `flows/` in the
//! normalized form); review the diff before committing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weft_nodes::{Decision, validate};
use weft_providers::{LlmClients, ProviderSettings, Secret};

use weft_engine::{Engine, ResumeOptions, RunOptions};

use weft_event::{EventType, RunEvent, RunStatus};

use weft_flow::Flow;

use weft_scripted_llm::{Script, ScriptedLlm};
use weft_store::Store;

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
    /// In place of the flow's `settings.mcpServers`: servers the test command installed
    /// (tests/mcp), where the flow itself names what a user runs (`npx …`).
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<serde_json::Value>,
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
            // Beside a flow: the golden cases, and its flow tests and pins (not flows).
            name.ends_with(".json")
                && ![".cases.json", ".tests.json", ".pins.json"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
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
/// A tool event's content without its `durationMs`, which differs from run to run.
fn without_duration(content: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(content) {
        Ok(serde_json::Value::Object(mut fields)) if fields.contains_key("durationMs") => {
            fields.insert("durationMs".into(), serde_json::Value::String("…".into()));
            serde_json::Value::Object(fields).to_string()
        }
        _ => content.to_string(),
    }
}

fn normalized_trace(flow: &Flow, events: &[RunEvent]) -> String {
    let mut top: Vec<(String, Vec<String>)> = vec![("(run)".into(), Vec::new())];
    top.extend(flow.nodes.iter().map(|node| (node.id.clone(), Vec::new())));
    let mut nested: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut deltas: HashMap<String, (usize, String)> = HashMap::new();
    let key_of = |event: &RunEvent| {
        let node = event.node_id.as_deref().unwrap_or("(run)").to_string();
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
        let from = match &event.from {
            Some(from) => format!(" (from {from})"),
            None => String::new(),
        };
        push(
            &mut top,
            &key,
            format!(
                "{}: {:?}{from}",
                event.kind,
                without_duration(&event.content)
            ),
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

/// The order between nodes that every trace keeps, whatever order concurrent branches finish
/// in (snapshots group events by node, so they cannot see it):
/// - a step starts after the step that started it (`from`) ended, or failed into an `error`
///   edge;
/// - a `join` starts after every branch it joined (the keys of its output) ended;
/// - while a run waits for a person (`wait_input` .. `input_received` of that node), only steps
///   that were ready before it paused may start: a step queued behind the pause must wait.
///
/// `joins` holds the `join` nodes by scope (`""` at the top, `sub` inside the subflow `sub`).
fn check_order_between_nodes(
    events: &[RunEvent],
    joins: &HashSet<(String, String)>,
) -> Result<(), String> {
    let scoped =
        |event: &RunEvent, node: &str| format!("{}/{node}", event.scope.as_deref().unwrap_or(""));
    // When each node's steps ended (or failed), by position in the trace.
    let mut ended: HashMap<String, Vec<usize>> = HashMap::new();
    for (position, event) in events.iter().enumerate() {
        if matches!(event.kind, EventType::StepEnd | EventType::Error)
            && let Some(node) = &event.node_id
        {
            ended.entry(scoped(event, node)).or_default().push(position);
        }
    }
    let ended_before = |node: &str, position: usize| -> Option<usize> {
        ended
            .get(node)?
            .iter()
            .copied()
            .filter(|end| *end < position)
            .max()
    };
    let mut pauses: Vec<(usize, usize)> = Vec::new();
    for (position, event) in events.iter().enumerate() {
        if event.kind == EventType::WaitInput {
            let answered = events[position..].iter().position(|later| {
                later.kind == EventType::InputReceived
                    && later.node_id == event.node_id
                    && later.scope == event.scope
            });
            pauses.push((
                position,
                answered.map_or(events.len(), |offset| position + offset),
            ));
        }
    }
    for (position, event) in events.iter().enumerate() {
        if event.kind != EventType::StepStart {
            continue;
        }
        let node = event.node_id.as_deref().unwrap_or("?");
        let sources: Vec<String> = match &event.from {
            Some(from) => vec![from.to_string()],
            None => {
                // A join's sources are the keys of the output it ends with.
                let end = events[position..].iter().find(|later| {
                    later.kind == EventType::StepEnd
                        && later.node_id == event.node_id
                        && later.scope == event.scope
                });
                let joined = end
                    .and_then(|end| serde_json::from_str::<serde_json::Value>(&end.content).ok());
                match joined {
                    Some(serde_json::Value::Object(map))
                        if joins.contains(&(
                            event.scope.clone().unwrap_or_default(),
                            node.to_string(),
                        )) =>
                    {
                        map.keys().cloned().collect()
                    }
                    _ => Vec::new(),
                }
            }
        };
        for source in &sources {
            let Some(end) = ended_before(&scoped(event, source), position) else {
                return Err(format!(
                    "step {node} (event {}) started before {source}, which it came from, ended",
                    event.seq
                ));
            };
            if let Some((paused, _)) = pauses
                .iter()
                .find(|(paused, answered)| *paused < position && position < *answered)
                && end > *paused
            {
                return Err(format!(
                    "step {node} (event {}) started while the run waited at event {}, though \
                     {source} ended only after the pause",
                    event.seq, events[*paused].seq
                ));
            }
        }
    }
    Ok(())
}

/// The `join` nodes of `flow` and of every flow it runs as a subflow or forEach, by scope as
/// events name it (forEach items by the node: `each[0]`, `each[1]`, ... share it).
fn join_nodes(flow: &Flow, flow_path: &Path, scope: &str, joins: &mut HashSet<(String, String)>) {
    for node in &flow.nodes {
        match node.kind.as_str() {
            "join" => {
                joins.insert((scope.to_string(), node.id.clone()));
            }
            "subflow" | "forEach" => {
                let Some(child) = node.data.get("flow").and_then(serde_json::Value::as_str) else {
                    continue;
                };
                let path = flow_path.parent().unwrap_or(Path::new("")).join(child);
                let Ok(child) = Flow::load(&path) else {
                    continue;
                };
                let prefix = if scope.is_empty() {
                    String::new()
                } else {
                    format!("{scope}/")
                };
                if node.kind == "subflow" {
                    join_nodes(&child, &path, &format!("{prefix}{}", node.id), joins);
                } else {
                    // Items are scoped `each[i]`; a handful covers every fixture.
                    for item in 0..64 {
                        join_nodes(
                            &child,
                            &path,
                            &format!("{prefix}{}[{item}]", node.id),
                            joins,
                        );
                    }
                }
            }
            _ => {}
        }
    }
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
    let mut flow = flow.clone();
    if let Some(servers) = &case.mcp_servers {
        flow.settings.insert("mcpServers".into(), servers.clone());
    }
    let flow = &flow;
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
    let mut joins = HashSet::new();
    join_nodes(flow, flow_path, "", &mut joins);
    check_order_between_nodes(&events, &joins)?;
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

/// The order checks catch what grouping events by node hides.
#[test]
fn order_checks_catch_a_join_that_fires_early_and_a_step_started_during_a_pause() {
    fn event(seq: u64, kind: EventType, node: &str, content: &str, from: Option<&str>) -> RunEvent {
        RunEvent {
            seq,
            run_id: "r".into(),
            ts: "2026-01-01T00:00:00.000Z".into(),
            kind,
            node_id: (!node.is_empty()).then(|| node.into()),
            content: content.into(),
            scope: None,
            item: None,
            from: from.map(Into::into),
            usage: None,
            model: None,
        }
    }
    use EventType::{InputReceived, StepEnd, StepStart, WaitInput};
    let joins: HashSet<(String, String)> = [(String::new(), "join".to_string())].into();
    let good = [
        event(1, StepStart, "a", "A", None),
        event(2, StepEnd, "a", "x", None),
        event(3, StepStart, "b", "B", Some("a")),
        event(4, StepStart, "c", "C", Some("a")),
        event(5, StepEnd, "c", "y", None),
        event(6, StepEnd, "b", "z", None),
        event(7, StepStart, "join", "J", None),
        event(8, StepEnd, "join", r#"{"b":"z","c":"y"}"#, None),
    ];
    assert_eq!(check_order_between_nodes(&good, &joins), Ok(()));

    let mut early_join = good.to_vec();
    early_join.swap(5, 6); // the join starts before `b` ended
    let error = check_order_between_nodes(&early_join, &joins).expect_err("early join");
    assert!(
        error.contains("step join") && error.contains("before b"),
        "{error}"
    );

    let before_source = [
        event(1, StepStart, "a", "A", None),
        event(2, StepStart, "b", "B", Some("a")),
        event(3, StepEnd, "a", "x", None),
    ];
    let error = check_order_between_nodes(&before_source, &joins).expect_err("too soon");
    assert!(error.contains("before a"), "{error}");

    // `review` pauses the run; `slow` was already running and ends during the pause, so the
    // step it leads to (`next`) must wait for the decision.
    let paused = [
        event(1, StepStart, "a", "A", None),
        event(2, StepEnd, "a", "x", None),
        event(3, StepStart, "slow", "S", Some("a")),
        event(4, StepStart, "review", "R", Some("a")),
        event(5, WaitInput, "review", "ok?", None),
        event(6, StepEnd, "slow", "s", None),
        event(7, StepStart, "next", "N", Some("slow")),
        event(8, InputReceived, "review", "{}", None),
    ];
    let error = check_order_between_nodes(&paused, &joins).expect_err("started during a pause");
    assert!(error.contains("while the run waited at event 5"), "{error}");
    let mut waited = paused.to_vec();
    waited.swap(6, 7); // `next` starts after the decision: fine
    assert_eq!(check_order_between_nodes(&waited, &joins), Ok(()));
}
