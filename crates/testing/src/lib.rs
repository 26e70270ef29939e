//! Flow tests (docs/testing.md): cases beside a flow (`NAME.tests.json`, and datasets), each run
//! through
//! the same [`Engine`](crate::Engine) as any run and judged by its assertions: on the run's
//! status and result and on any node's output or skip, limits on tokens, cost and time, and
//! judges (an LLM rubric, or another flow). `--record` keeps every LLM answer a case got in
//! `NAME.recordings/`; afterwards the case runs offline from them, and a request with no
//! recording fails its case naming the node and how to record again.
//!
//! - [`file`]: the tests file as written, its datasets, and loading a checked [`TestSuite`].
//! - [`check`]: what one assertion says about one finished run.
//! - [`runner`]: running a suite's cases concurrently, repeated, recorded or offline.
//! - [`report`]: the results, and JUnit XML for CI.

pub mod check;
pub mod file;
#[cfg(test)]
mod fuzz;
mod lines;
pub mod recordings;
pub mod report;
pub mod runner;

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

pub use file::{
    AssertionSpec, CaseSpec, DatasetSpec, TestsFile, flow_of_tests, load_suite, read_tests_file,
    recordings_dir, save_case, tests_path,
};
pub use recordings::{
    Recording, read_recording, recording_path, remove_recording, write_recording,
};
pub use report::{AssertionOutcome, CaseReport, CaseRun, SuiteReport, junit_xml};
pub use runner::{RecordMode, TestOptions, case_from_run, recording_of_run, run_suite};

use weft_event::RunStatus;
use weft_nodes::Decision;

/// A tests file that cannot be used: which file, which line, and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|line| format!(":{line}")).unwrap_or_default())]
pub struct TestFileError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// A flow's cases, checked against the flow.
#[derive(Debug, Clone)]
pub struct TestSuite {
    pub flow_path: PathBuf,
    pub tests_path: PathBuf,
    pub recordings_dir: PathBuf,
    /// The model of rubric judges that name none.
    pub judge_model: Option<String>,
    pub cases: Vec<TestCase>,
}

/// One case, ready to run.
#[derive(Debug, Clone)]
pub struct TestCase {
    pub name: String,
    pub input: Option<Value>,
    pub decisions: HashMap<String, Decision>,
    pub assertions: Vec<Assertion>,
    /// What judges compare the output with.
    pub expected: Option<Value>,
    pub repeat: u32,
    /// The share of its runs that must pass.
    pub pass_rate: f64,
    /// Where it is written: `triage.tests.json:12`, `tickets.csv:4`.
    pub origin: String,
}

/// One assertion: what it is about and its check.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// A node (`draft`, `sub/draft` inside a subflow); `None` for the run's result.
    pub node: Option<String>,
    /// A dotted path inside the value.
    pub path: Option<String>,
    /// What a judge compares with (else the case's `expected`).
    pub expected: Option<Value>,
    pub check: Check,
    /// As written.
    pub spec: AssertionSpec,
}

/// What an assertion checks.
#[derive(Debug, Clone)]
pub enum Check {
    Status(RunStatus),
    Equals(Value),
    /// A text contains it; a list has it as an element.
    Contains(Value),
    Regex(regex::Regex),
    JsonSchema(Value),
    Gt(f64),
    Lt(f64),
    /// The node did (`true`: did not) run.
    Skipped(bool),
    MaxTokens(u64),
    /// US dollars.
    MaxCost(f64),
    MaxDurationMs(u64),
    /// An LLM judges the output against the rubric (empty model: the default model).
    Rubric {
        rubric: String,
        model: String,
        /// Tried in order when `model` fails for good (the gate's `fallbackModels`).
        fallbacks: Vec<String>,
    },
    /// A flow judges `{input, output, expected}`.
    Judge {
        flow_path: PathBuf,
    },
}

impl Check {
    /// Whether an LLM or another flow decides it (it runs after the case's run).
    pub fn is_judge(&self) -> bool {
        matches!(self, Check::Rubric { .. } | Check::Judge { .. })
    }
}

impl Assertion {
    /// What it says, in a line: `draft contains "refund"`, `result equals {…}`,
    /// `status is completed`.
    pub fn describe(&self) -> String {
        let target = match (&self.node, &self.path) {
            (Some(node), Some(path)) => format!("{node}.{path}"),
            (Some(node), None) => node.clone(),
            (None, Some(path)) => format!("result.{path}"),
            (None, None) => "result".to_string(),
        };
        let shown = |value: &Value| check::short(&check::text_of(value), 80);
        match &self.check {
            Check::Status(status) => format!("status is {status}"),
            Check::Equals(value) => format!("{target} equals {}", check::quoted(value)),
            Check::Contains(value) => format!("{target} contains {}", check::quoted(value)),
            Check::Regex(regex) => format!("{target} matches /{}/", regex.as_str()),
            Check::JsonSchema(_) => format!("{target} matches its JSON schema"),
            Check::Gt(bound) => format!("{target} > {bound}"),
            Check::Lt(bound) => format!("{target} < {bound}"),
            Check::Skipped(true) => format!("{target} is skipped"),
            Check::Skipped(false) => format!("{target} runs"),
            Check::MaxTokens(limit) => format!("{} uses at most {limit} tokens", self.scope()),
            Check::MaxCost(limit) => format!(
                "{} costs at most {}",
                self.scope(),
                weft_history::cost::usd_text(*limit)
            ),
            Check::MaxDurationMs(limit) => format!("{} takes at most {limit} ms", self.scope()),
            Check::Rubric { rubric, .. } => {
                format!(
                    "{target} passes the rubric \"{}\"",
                    shown(&Value::String(rubric.clone()))
                )
            }
            Check::Judge { flow_path } => format!(
                "{target} passes the judge {}",
                flow_path
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
        }
    }

    fn scope(&self) -> String {
        match &self.node {
            Some(node) => node.clone(),
            None => "the run".to_string(),
        }
    }
}
