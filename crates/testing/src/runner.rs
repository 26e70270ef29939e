//! Running a suite: every case through the engine as an ordinary run (stored, so it can be
//! opened and compared like any other), its cases side by side, each repeated as asked; then its
//! assertions, judges included. With a recording a case runs offline; `Record` asks the
//! providers and keeps what they answered.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::check::{RunFacts, check, subject, text_of};
use super::file::{AssertionSpec, CaseSpec};
use super::recordings::{
    Recording, read_recording, recording_path, remove_recording, write_recording,
};
use super::{
    AssertionOutcome, CaseReport, CaseRun, Check, SuiteReport, TestCase, TestFileError, TestSuite,
};
use weft_engine::run::{Engine, RecordedAnswers, RunOptions, RunOutcome};
use weft_event::{EventType, RunStatus};
use weft_flow::Flow;
use weft_history::cost::Prices;
use weft_history::visits::node_visits;
use weft_nodes::validate::CheckedFlow;
use weft_nodes::{Decision, NodeKind};
use weft_store::{RecordedCall, Store, StoreError};

/// Where a case's LLM answers come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecordMode {
    /// From the case's recording when it has one (offline), else from the providers.
    #[default]
    Auto,
    /// From the providers, and recorded for the next runs (`weft test --record`).
    Record,
    /// From recordings only: a case without one fails at its first LLM request.
    Offline,
}

/// How to run a suite.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// Only the case of this name.
    pub case: Option<String>,
    /// Runs of each case, instead of the cases' own `repeat`.
    pub repeat: Option<u32>,
    /// The share of runs that must pass, instead of the cases' own `passRate`.
    pub pass_rate: Option<f64>,
    pub mode: RecordMode,
    /// Cases run at the same time.
    pub jobs: usize,
    pub prices: Prices,
    /// The command that runs this suite, for messages saying how to record again
    /// (`weft test flows/triage.json`).
    pub command: String,
}

impl Default for TestOptions {
    fn default() -> TestOptions {
        TestOptions {
            case: None,
            repeat: None,
            pass_rate: None,
            mode: RecordMode::Auto,
            jobs: 8,
            prices: Prices::shipped(),
            command: "weft test FLOW".into(),
        }
    }
}

/// Runs the cases of `suite` (a flow already checked: `flow`), calling `on_case` as each case
/// ends; the report lists the cases in the file's order.
pub async fn run_suite(
    engine: &Engine,
    flow: &CheckedFlow,
    suite: &TestSuite,
    options: &TestOptions,
    on_case: Arc<dyn Fn(&CaseReport) + Send + Sync>,
) -> Result<SuiteReport, TestFileError> {
    let cases: Vec<TestCase> = match &options.case {
        Some(name) => {
            let chosen: Vec<TestCase> = suite
                .cases
                .iter()
                .filter(|case| &case.name == name)
                .cloned()
                .collect();
            if chosen.is_empty() {
                let names: Vec<String> = suite
                    .cases
                    .iter()
                    .map(|case| format!("\"{}\"", case.name))
                    .collect();
                return Err(TestFileError {
                    file: suite.tests_path.clone(),
                    line: None,
                    message: format!(
                        "no case is named \"{name}\" (the cases: {})",
                        names.join(", ")
                    ),
                });
            }
            chosen
        }
        None => suite.cases.clone(),
    };
    let started = Instant::now();
    let shared = Arc::new(Shared {
        engine: engine.clone(),
        flow: flow.clone(),
        suite: suite.clone(),
        options: options.clone(),
    });
    let permits = Arc::new(Semaphore::new(options.jobs.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, case) in cases.into_iter().enumerate() {
        let shared = shared.clone();
        let permits = permits.clone();
        let on_case = on_case.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let report = shared.run_case(&case).await;
            on_case(&report);
            (index, report)
        });
    }
    let mut reports: Vec<(usize, CaseReport)> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(done) => reports.push(done),
            Err(error) => tracing::error!("a test case's task stopped: {error}"),
        }
    }
    reports.sort_by_key(|(index, _)| *index);
    Ok(SuiteReport {
        flow: suite.flow_path.display().to_string(),
        tests_file: suite.tests_path.display().to_string(),
        cases: reports.into_iter().map(|(_, report)| report).collect(),
        duration_ms: millis(started),
    })
}

struct Shared {
    engine: Engine,
    flow: CheckedFlow,
    suite: TestSuite,
    options: TestOptions,
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Shared {
    async fn run_case(&self, case: &TestCase) -> CaseReport {
        let path = recording_path(&self.suite.recordings_dir, &case.name);
        let recording = match self.options.mode {
            RecordMode::Record => Ok(None),
            _ => read_recording(&path),
        };
        let repeat = self.options.repeat.unwrap_or(case.repeat).max(1);
        let pass_rate = self.options.pass_rate.unwrap_or(case.pass_rate);
        let mut runs = Vec::new();
        for attempt in 0..repeat {
            let run = match &recording {
                Err(message) => CaseRun {
                    run_id: None,
                    status: None,
                    error: Some(message.clone()),
                    assertions: Vec::new(),
                    passed: false,
                    duration_ms: 0,
                    offline: true,
                    recorded: false,
                },
                Ok(recording) => {
                    let record = self.options.mode == RecordMode::Record && attempt == 0;
                    self.run_once(case, &path, recording.as_ref(), record).await
                }
            };
            runs.push(run);
        }
        let passed_runs = runs.iter().filter(|run| run.passed).count() as u32;
        // A small tolerance so that 0.8 of 5 runs asks for 4, not 4.000000001.
        let passed = f64::from(passed_runs) + 1e-9 >= pass_rate * f64::from(repeat);
        CaseReport {
            name: case.name.clone(),
            origin: case.origin.clone(),
            runs,
            passed_runs,
            pass_rate,
            passed,
        }
    }

    /// What a request with no recorded answer says: where the recording is and how to make it.
    fn missing_hint(&self, case: &TestCase, path: &Path, recorded: bool) -> String {
        let again = format!(
            "{} --record --case '{}'",
            self.options.command,
            case.name.replace('\'', "'\\''")
        );
        if recorded {
            format!(
                "the recording {} was made before the flow or the case changed; record it again: {again}",
                path.display()
            )
        } else {
            format!(
                "the case has no recording ({}); record one: {again}",
                path.display()
            )
        }
    }

    async fn run_once(
        &self,
        case: &TestCase,
        path: &Path,
        recording: Option<&Recording>,
        record: bool,
    ) -> CaseRun {
        let started = Instant::now();
        let offline = !record && (recording.is_some() || self.options.mode == RecordMode::Offline);
        let answers = offline.then(|| RecordedAnswers {
            calls: recording
                .map(|recording| recording.calls.clone())
                .unwrap_or_default(),
            missing: self.missing_hint(case, path, recording.is_some()),
        });
        let options = RunOptions {
            input: case.input.as_ref().map(text_of),
            decisions: case.decisions.clone(),
            flow_path: Some(self.suite.flow_path.clone()),
            recorded: answers,
            ..RunOptions::default()
        };
        let failed_to_start = |error: String| CaseRun {
            run_id: None,
            status: None,
            error: Some(error),
            assertions: Vec::new(),
            passed: false,
            duration_ms: millis(started),
            offline,
            recorded: false,
        };
        let outcome = match self.engine.start(self.flow.clone(), options).await {
            Ok(outcome) => outcome,
            Err(error) => return failed_to_start(error.to_string()),
        };
        let facts = match self.facts(&outcome).await {
            Ok(facts) => facts,
            Err(error) => return failed_to_start(format!("cannot read the run back: {error}")),
        };
        let mut assertions = Vec::new();
        let mut judge_calls: BTreeMap<String, Vec<RecordedCall>> = BTreeMap::new();
        for (index, assertion) in case.assertions.iter().enumerate() {
            if !assertion.check.is_judge() {
                assertions.push(check(assertion, &facts));
                continue;
            }
            let recorded = recording.and_then(|recording| recording.judges.get(&index.to_string()));
            let (outcome, judge_run) = self
                .judge(case, index, &facts, offline.then_some((recorded, path)))
                .await;
            if record && let Some(run_id) = judge_run {
                judge_calls.insert(index.to_string(), self.calls_of(&run_id).await);
            }
            assertions.push(outcome);
        }
        let asserts_status = case
            .assertions
            .iter()
            .any(|assertion| matches!(assertion.check, Check::Status(_)));
        let mut error = outcome.error.clone();
        if let Some(waiting) = &outcome.waiting {
            error = Some(format!(
                "the run paused at `{}`, waiting for a decision; give one in the case: \"decide\": {{\"{}\": \"approve\"}}",
                waiting.node_id, waiting.node_id
            ));
        }
        let ended_well = outcome.status == RunStatus::Completed || asserts_status;
        let passed = ended_well && assertions.iter().all(|outcome| outcome.passed);
        let mut recorded = false;
        if record {
            let calls = self.calls_of(&outcome.run_id).await;
            let recording = Recording {
                case: case.name.clone(),
                recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                calls,
                judges: judge_calls,
            };
            // A case that asks no model needs no recording (and loses one it no longer needs).
            let result = if recording.calls.is_empty() && recording.judges.is_empty() {
                remove_recording(path)
            } else {
                write_recording(path, &recording).map(|()| recorded = true)
            };
            if let Err(message) = result {
                error = Some(message);
            }
        }
        CaseRun {
            run_id: Some(outcome.run_id.clone()),
            status: Some(outcome.status),
            error,
            assertions,
            passed,
            duration_ms: millis(started),
            offline,
            recorded,
        }
    }

    /// Everything the assertions read about the finished run.
    async fn facts(&self, outcome: &RunOutcome) -> Result<RunFacts, StoreError> {
        let store = self.engine.store().clone();
        let prices = self.options.prices.clone();
        let outcome = outcome.clone();
        blocking(move || {
            let record = store.run(&outcome.run_id)?;
            let events = store.events(&outcome.run_id)?;
            let outputs = store.node_outputs(&outcome.run_id)?;
            let cost = weft_history::cost::run_cost(&store, &record, &prices)?;
            let visits = node_visits(&record, &events, &outputs, &cost);
            Ok(RunFacts::of(
                record.input.clone(),
                outcome.status,
                outcome.result.map(Arc::unwrap_or_clone),
                outcome.error,
                &events,
                outputs,
                &visits,
                cost,
            ))
        })
        .await
    }

    async fn calls_of(&self, run_id: &str) -> Vec<RecordedCall> {
        let store = self.engine.store().clone();
        let run_id = run_id.to_string();
        blocking(move || store.llm_calls(&run_id))
            .await
            .unwrap_or_default()
    }

    /// Runs the judge of assertion `index` on the case's run; `offline` holds its recorded calls
    /// (and where the recording is) when it runs from them. Returns the verdict and the judge's
    /// run.
    async fn judge(
        &self,
        case: &TestCase,
        index: usize,
        facts: &RunFacts,
        offline: Option<(Option<&Vec<RecordedCall>>, &Path)>,
    ) -> (AssertionOutcome, Option<String>) {
        let assertion = &case.assertions[index];
        let verdict = |passed: bool, actual: String| AssertionOutcome {
            assertion: assertion.describe(),
            passed,
            expected: "pass".into(),
            actual,
        };
        let output = match subject(assertion, facts) {
            Ok(output) => output,
            Err(missing) => return (verdict(false, missing), None),
        };
        let expected = assertion.expected.clone().or_else(|| case.expected.clone());
        let input = facts.input.clone();
        let (flow, flow_path, judge_input) = match &assertion.check {
            Check::Rubric {
                rubric,
                model,
                fallbacks,
            } => (
                match rubric_judge(model, fallbacks) {
                    Ok(flow) => flow,
                    Err(error) => return (verdict(false, error), None),
                },
                None,
                json!({
                    "rubric": rubric,
                    "input": text_of(&input),
                    "output": text_of(&output),
                    "expected": expected.as_ref().map(text_of),
                }),
            ),
            Check::Judge { flow_path } => match Flow::load(flow_path) {
                Ok(flow) => (
                    flow,
                    Some(flow_path.clone()),
                    json!({ "input": input, "output": output, "expected": expected }),
                ),
                Err(error) => return (verdict(false, format!("the judge flow: {error}")), None),
            },
            _ => return (verdict(false, "not a judge".into()), None),
        };
        let recorded = offline.map(|(calls, path)| RecordedAnswers {
            calls: calls.cloned().unwrap_or_default(),
            missing: format!(
                "{} (its judge, expect[{index}])",
                self.missing_hint(case, path, calls.is_some())
            ),
        });
        let options = RunOptions {
            input: Some(judge_input.to_string()),
            flow_path,
            recorded,
            ..RunOptions::default()
        };
        let outcome = match self.engine.start(flow, options).await {
            Ok(outcome) => outcome,
            Err(error) => {
                return (
                    verdict(false, format!("the judge could not run: {error}")),
                    None,
                );
            }
        };
        let run_id = Some(outcome.run_id.clone());
        if outcome.status != RunStatus::Completed {
            let why = outcome
                .error
                .clone()
                .unwrap_or_else(|| outcome.status.to_string());
            return (
                verdict(false, format!("the judge's run {}: {why}", outcome.status)),
                run_id,
            );
        }
        let said = match &assertion.check {
            Check::Rubric { .. } => self.rubric_verdict(&outcome).await,
            _ => flow_verdict(outcome.result.as_deref()),
        };
        match said {
            Ok((passed, reason)) => {
                let word = if passed { "pass" } else { "fail" };
                let actual = if reason.is_empty() {
                    word.to_string()
                } else {
                    format!("{word} ({reason})")
                };
                (verdict(passed, actual), run_id)
            }
            Err(message) => (verdict(false, message), run_id),
        }
    }

    /// The rubric judge's verdict: its result (`pass`/`fail`) and the reason its gate logged.
    async fn rubric_verdict(&self, outcome: &RunOutcome) -> Result<(bool, String), String> {
        let passed = outcome.result.as_deref().and_then(Value::as_str) == Some("pass");
        let store = self.engine.store().clone();
        let run_id = outcome.run_id.clone();
        let events = blocking(move || store.events(&run_id))
            .await
            .map_err(|error| error.to_string())?;
        // The gate's verdict is its last check: a model that failed for good was logged
        // before it, with its fallback.
        let reason = events
            .iter()
            .rev()
            .filter(|event| {
                event.kind == EventType::LogicCheck && event.node_id.as_deref() == Some("verdict")
            })
            .find_map(|event| {
                event
                    .content
                    .split_once(": ")
                    .map(|(_, reason)| reason.to_string())
            })
            .unwrap_or_default();
        Ok((passed, reason))
    }
}

/// What a judge flow's result says: `{pass: bool, reason}`, or a text starting with pass or fail.
fn flow_verdict(result: Option<&Value>) -> Result<(bool, String), String> {
    let refused = |shown: String| {
        Err(format!(
            "the judge flow's result is {shown}; a judge answers {{\"pass\": true|false, \"reason\": \"…\"}} or a text starting with pass or fail"
        ))
    };
    match result {
        Some(Value::Object(fields)) => match fields.get("pass").and_then(Value::as_bool) {
            Some(passed) => Ok((
                passed,
                fields.get("reason").map(text_of).unwrap_or_default(),
            )),
            None => refused(Value::Object(fields.clone()).to_string()),
        },
        Some(Value::String(text)) => {
            let lower = text.trim_start().to_lowercase();
            let reason = |word: &str| {
                text.trim_start()[word.len()..]
                    .trim_start_matches([':', ' ', '-', '.', ','])
                    .trim()
                    .to_string()
            };
            if lower.starts_with("pass") {
                Ok((true, reason("pass")))
            } else if lower.starts_with("fail") {
                Ok((false, reason("fail")))
            } else {
                refused(format!("\"{}\"", super::check::short(text, 80)))
            }
        }
        Some(other) => refused(other.to_string()),
        None => refused("empty".into()),
    }
}

/// The flow an LLM rubric judge is: a gate judging the output by the rubric, then `pass` or
/// `fail` as the result.
fn rubric_judge(model: &str, fallbacks: &[String]) -> Result<Flow, String> {
    let flow = json!({
        "version": 1,
        "name": "rubric judge",
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "shown", "type": "template", "data": {
                "template": "Input given to the flow:\n{{ initial.input }}\n\nOutput to judge:\n{{ initial.output }}{% if initial.expected %}\n\nExpected output (for comparison):\n{{ initial.expected }}{% endif %}"
            }},
            {"id": "verdict", "type": "gate", "data": {
                "criteria": "{{ initial.rubric }}",
                "model": model,
                "fallbackModels": fallbacks
            }},
            {"id": "pass", "type": "template", "data": {"template": "pass"}},
            {"id": "fail", "type": "template", "data": {"template": "fail"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "shown"},
            {"id": "b", "source": "shown", "target": "verdict"},
            {"id": "c", "source": "verdict", "target": "pass", "sourceHandle": "pass"},
            {"id": "d", "source": "verdict", "target": "fail", "sourceHandle": "fail"}
        ]
    });
    Flow::from_value(flow, "the rubric judge").map_err(|error| error.to_string())
}

/// A past run as a new case: its input, the decisions it was given, and what it did as
/// expectations — its status and result, each node's output, the nodes it skipped — for the
/// person to edit. The run's LLM answers can become the case's recording ([`recording_of_run`]).
pub fn case_from_run(store: &Store, run_id: &str) -> Result<CaseSpec, StoreError> {
    let run_id = store.resolve_run_id(run_id)?;
    let record = store.run(&run_id)?;
    let flow =
        Flow::parse(&record.flow_json, "the stored flow").map_err(|error| StoreError::Corrupt {
            run_id: run_id.clone(),
            message: error.to_string(),
        })?;
    let outputs = store.node_outputs(&run_id)?;
    let events = store.events(&run_id)?;
    let by_node: HashMap<&str, &weft_store::NodeOutputRecord> = outputs
        .iter()
        .map(|output| (output.node_id.as_str(), output))
        .collect();
    let mut decide = BTreeMap::new();
    let mut expect = vec![AssertionSpec {
        status: Some(record.summary.status),
        ..AssertionSpec::default()
    }];
    if let Some(result) = &record.result {
        expect.push(AssertionSpec {
            equals: Some(result.clone()),
            ..AssertionSpec::default()
        });
    }
    for node in &flow.nodes {
        let kind = NodeKind::of(node);
        if matches!(kind, Some(NodeKind::Note) | None) {
            continue;
        }
        let stored = by_node.get(node.id.as_str());
        if kind == Some(NodeKind::Approval)
            && let Some(approval) = stored.and_then(|stored| stored.approval.as_ref())
        {
            let choice = approval
                .get("decision")
                .and_then(Value::as_str)
                .unwrap_or("approve");
            let note = approval
                .get("note")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Ok(decision) = Decision::parse(choice, note) {
                decide.insert(node.id.clone(), decision);
            }
        }
        let ran = events.iter().any(|event| {
            event.kind == EventType::StepStart
                && event.scope.is_none()
                && event.node_id.as_deref() == Some(node.id.as_str())
        });
        if !ran {
            expect.push(AssertionSpec {
                node: Some(node.id.clone()),
                skipped: Some(true),
                ..AssertionSpec::default()
            });
            continue;
        }
        let output = stored
            .map(|stored| &stored.output)
            .filter(|output| !output.is_null());
        if let Some(output) = output
            && !matches!(kind, Some(NodeKind::Start | NodeKind::Output))
        {
            expect.push(AssertionSpec {
                node: Some(node.id.clone()),
                equals: Some(output.clone()),
                ..AssertionSpec::default()
            });
        }
    }
    let name = if record.summary.flow_name.is_empty() {
        "run"
    } else {
        record.summary.flow_name.as_str()
    };
    Ok(CaseSpec {
        name: format!("{name} {}", &run_id[..run_id.len().min(8)]),
        input: Some(record.input),
        decide,
        expect,
        expected: None,
        repeat: None,
        pass_rate: None,
    })
}

/// The LLM answers run `run_id` got, as the recording of case `name`: the case then runs offline
/// with them.
pub fn recording_of_run(store: &Store, run_id: &str, name: &str) -> Result<Recording, StoreError> {
    let run_id = store.resolve_run_id(run_id)?;
    Ok(Recording {
        case: name.to_string(),
        recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        calls: store.llm_calls(&run_id)?,
        judges: BTreeMap::new(),
    })
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or(Err(StoreError::WriterStopped))
}
