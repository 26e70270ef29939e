//! The tests file beside a flow (`NAME.tests.json`, docs/testing.md) as written, its datasets
//! (JSONL
//! or CSV, one case a row), and how both become checked [`TestCase`]s.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::lines::{line_of, value_lines};
use super::{Assertion, Check, TestCase, TestFileError, TestSuite};
use weft_engine::run::check_decisions;
use weft_event::RunStatus;
use weft_flow::output_schema::OutputSchema;
use weft_flow::{Flow, read_text_file};
use weft_nodes::Decision;

/// A tests file as written.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestsFile {
    #[serde(default)]
    pub cases: Vec<CaseSpec>,
    /// Cases read from dataset files, one a row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datasets: Vec<DatasetSpec>,
    /// The model of rubric judges that name none (else `WEFT_DEFAULT_MODEL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_model: Option<String>,
    /// The models rubric judges that name none try, in order, when theirs fails for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_fallback_models: Option<Vec<String>>,
}

/// One case as written.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaseSpec {
    pub name: String,
    /// The run's input (a text, or JSON); else the start node's `initialInput`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Answers for approvals, by node (`sub/review` inside a subflow).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decide: BTreeMap<String, Decision>,
    #[serde(default)]
    pub expect: Vec<AssertionSpec>,
    /// What a judge compares the output with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// Runs of the case (`weft test --repeat` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// The share of runs that must pass, 0 to 1 (default 1: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate: Option<f64>,
}

/// Cases from a dataset file: each row gives a case's `input` (and `name`, `expected`, and in
/// JSONL its own `decide` and `expect`), and these fields apply to every row.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetSpec {
    /// A `.jsonl` or `.csv` file, relative to the tests file.
    pub file: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decide: BTreeMap<String, Decision>,
    /// Assertions for every row; a string `"$expected"` in `equals`, `contains` or `regex`
    /// stands for the row's `expected`.
    #[serde(default)]
    pub expect: Vec<AssertionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate: Option<f64>,
}

/// One assertion as written: what it is about (the run's result, or `node`, and a `path`
/// inside the value) and exactly one check.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssertionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A dotted path into the value (`label`, `scores.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "specta", specta(type = Option<Value>))]
    pub equals: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "specta", specta(type = Option<Value>))]
    pub contains: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_ms: Option<u64>,
    /// An LLM judge: what a passing output must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
    /// The rubric judge's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The models the rubric judge tries, in order, when its model fails for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Vec<String>>,
    /// A judge flow (relative to the tests file), given `{input, output, expected}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// What a judge compares with (else the case's `expected`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "specta", specta(type = Option<Value>))]
    pub expected: Option<Value>,
}

/// A field that is present, `null` included (absent fields take their default, `None`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The tests file of `flow_path`: `triage.json` → `triage.tests.json`.
pub fn tests_path(flow_path: &Path) -> PathBuf {
    sibling(flow_path, "tests.json")
}

/// Where the recorded answers of `flow_path`'s cases are kept: `triage.recordings/`.
pub fn recordings_dir(flow_path: &Path) -> PathBuf {
    sibling(flow_path, "recordings")
}

fn sibling(flow_path: &Path, suffix: &str) -> PathBuf {
    let stem = flow_path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    flow_path.with_file_name(format!("{stem}.{suffix}"))
}

/// The flow a tests file is about: `triage.tests.json` → `triage.json`.
pub fn flow_of_tests(tests_path: &Path) -> Option<PathBuf> {
    let name = tests_path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".tests.json")?;
    Some(tests_path.with_file_name(format!("{stem}.json")))
}

/// The largest tests file Weft reads (a case is some hundred bytes; many cases belong in a
/// dataset). Tests files and datasets are read by [`read_text_file`]: a named pipe or a device
/// is refused, never waited on or read without end.
pub const MAX_TESTS_FILE_BYTES: u64 = weft_flow::MAX_FILE_BYTES;

/// The largest dataset Weft reads (a row a case: tens of thousands of rows).
pub const MAX_DATASET_FILE_BYTES: u64 = weft_flow::MAX_FILE_BYTES;

/// Reads a tests file as written (a syntax or type error names its line).
pub fn read_tests_file(path: &Path) -> Result<TestsFile, TestFileError> {
    let text = read_text_file(path, MAX_TESTS_FILE_BYTES).map_err(|error| TestFileError {
        file: path.to_path_buf(),
        line: None,
        message: format!("cannot read it: {error}"),
    })?;
    parse_tests_file(&text, path).map(|(file, _)| file)
}

fn parse_tests_file(
    text: &str,
    path: &Path,
) -> Result<(TestsFile, HashMap<String, usize>), TestFileError> {
    // serde reads a struct from an array too (its fields in order): `[]` would be a file of no
    // cases, `[[...]]` one whose cases are the first element.
    let start = text.trim_start_matches([' ', '\t', '\n', '\r']);
    if start.starts_with('[') {
        return Err(TestFileError {
            file: path.to_path_buf(),
            line: Some(text[..text.len() - start.len()].matches('\n').count() + 1),
            message: "a tests file is a JSON object, {\"cases\": [...]}, not an array".into(),
        });
    }
    let lines = value_lines(text);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed: Result<TestsFile, _> = serde_path_to_error::deserialize(&mut deserializer);
    if parsed.is_ok()
        && let Err(error) = deserializer.end()
    {
        return Err(TestFileError {
            file: path.to_path_buf(),
            line: Some(error.line()),
            message: without_position(&error),
        });
    }
    match parsed {
        Ok(file) => Ok((file, lines)),
        Err(error) => {
            let where_ = error.path().to_string();
            let inner = error.into_inner();
            let line = if inner.is_syntax() || inner.is_eof() || where_ == "." {
                Some(inner.line())
            } else {
                line_of(&lines, &where_).or(Some(inner.line()))
            };
            // A syntax error is about the text, not about a field.
            let message = if inner.is_syntax() || inner.is_eof() || where_ == "." {
                without_position(&inner)
            } else {
                format!("{where_}: {}", without_position(&inner))
            };
            Err(TestFileError {
                file: path.to_path_buf(),
                line,
                message,
            })
        }
    }
}

/// serde_json's message without its " at line L column C" (the line is said apart).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// Reads `flow_path`'s tests file and datasets and checks every case against `flow`: decisions
/// name approvals, assertions name nodes of the flow, each assertion has one check, regexes and
/// schemas compile, judge flows load. Every problem names its file and line.
pub fn load_suite(flow_path: &Path, flow: &Flow) -> Result<TestSuite, TestFileError> {
    let tests_path = tests_path(flow_path);
    let text = read_text_file(&tests_path, MAX_TESTS_FILE_BYTES).map_err(|error| TestFileError {
        file: tests_path.clone(),
        line: None,
        message: if error.kind() == std::io::ErrorKind::NotFound {
            format!(
                "there is no tests file for {} (write one, or save a past run as a test case in the app)",
                flow_path.display()
            )
        } else {
            format!("cannot read it: {error}")
        },
    })?;
    let (file, lines) = parse_tests_file(&text, &tests_path)?;
    if file.cases.is_empty() && file.datasets.is_empty() {
        // Else a file with nothing in it would pass, as 0 of 0 cases.
        return Err(TestFileError {
            file: tests_path,
            line: None,
            message: "no cases: give `cases` (or `datasets`), at least one".into(),
        });
    }
    let base = tests_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut cases = Vec::new();
    for (index, spec) in file.cases.iter().enumerate() {
        let at = format!("cases[{index}]");
        let problem = |path: &str, message: String| TestFileError {
            file: tests_path.clone(),
            line: line_of(&lines, path),
            message: format!("case \"{}\": {message}", spec.name),
        };
        let case = build_case(
            flow,
            &base,
            &file,
            CaseParts {
                name: spec.name.clone(),
                input: spec.input.clone(),
                decide: &spec.decide,
                expect: spec.expect.clone(),
                expected: spec.expected.clone(),
                repeat: spec.repeat,
                pass_rate: spec.pass_rate,
                origin: format!(
                    "{}:{}",
                    file_name(&tests_path),
                    line_of(&lines, &at).unwrap_or(1)
                ),
            },
        )
        .map_err(|(field, message)| problem(&format!("{at}.{field}"), message))?;
        cases.push(case);
    }
    for (index, dataset) in file.datasets.iter().enumerate() {
        let at = format!("datasets[{index}]");
        let rows = read_dataset(&base.join(&dataset.file)).map_err(|mut error| {
            if error.line.is_none() && error.file == base.join(&dataset.file) {
                // The file itself is missing: say where it is named.
                error.message = format!(
                    "{} (named by {}:{})",
                    error.message,
                    file_name(&tests_path),
                    line_of(&lines, &format!("{at}.file")).unwrap_or(1)
                );
            }
            error
        })?;
        let data_path = base.join(&dataset.file);
        for row in rows {
            let expect = dataset
                .expect
                .iter()
                .map(|spec| with_expected(spec, row.expected.as_ref()))
                .chain(row.expect.iter().cloned())
                .collect();
            let mut decide = dataset.decide.clone();
            decide.extend(row.decide.clone());
            let case = build_case(
                flow,
                &base,
                &file,
                CaseParts {
                    name: row.name.clone(),
                    input: Some(row.input.clone()),
                    decide: &decide,
                    expect,
                    expected: row.expected.clone(),
                    repeat: dataset.repeat,
                    pass_rate: dataset.pass_rate,
                    origin: format!("{}:{}", file_name(&data_path), row.line),
                },
            )
            .map_err(|(_, message)| TestFileError {
                file: data_path.clone(),
                line: Some(row.line),
                message: format!("case \"{}\": {message}", row.name),
            })?;
            cases.push(case);
        }
    }
    let recordings = recordings_dir(flow_path);
    let mut seen: HashMap<PathBuf, &str> = HashMap::new();
    for case in &cases {
        let file = super::recordings::recording_path(&recordings, &case.name);
        if let Some(other) = seen.insert(file, &case.name) {
            let message = if other == case.name {
                format!(
                    "two cases are named \"{}\" (at {}); names must differ, they name the recordings",
                    case.name, case.origin
                )
            } else {
                format!(
                    "the cases \"{other}\" and \"{}\" (at {}) would share a recording file; rename one",
                    case.name, case.origin
                )
            };
            return Err(TestFileError {
                file: tests_path.clone(),
                line: None,
                message,
            });
        }
    }
    Ok(TestSuite {
        flow_path: flow_path.to_path_buf(),
        recordings_dir: recordings_dir(flow_path),
        tests_path,
        judge_model: file.judge_model.clone(),
        cases,
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// `spec` with every `"$expected"` in `equals`, `contains` and `regex` replaced by `expected`.
fn with_expected(spec: &AssertionSpec, expected: Option<&Value>) -> AssertionSpec {
    let marker =
        |value: &Option<Value>| value.as_ref().and_then(Value::as_str) == Some("$expected");
    let mut spec = spec.clone();
    let expected = expected.cloned().unwrap_or(Value::Null);
    if marker(&spec.equals) {
        spec.equals = Some(expected.clone());
    }
    if marker(&spec.contains) {
        spec.contains = Some(expected.clone());
    }
    if spec.regex.as_deref() == Some("$expected") {
        spec.regex = Some(regex::escape(&weft_template::output_text(&expected)));
    }
    spec
}

struct CaseParts<'a> {
    name: String,
    input: Option<Value>,
    decide: &'a BTreeMap<String, Decision>,
    expect: Vec<AssertionSpec>,
    expected: Option<Value>,
    repeat: Option<u32>,
    pass_rate: Option<f64>,
    origin: String,
}

/// A checked case, or the field (relative to the case) and what is wrong with it.
fn build_case(
    flow: &Flow,
    base: &Path,
    file: &TestsFile,
    parts: CaseParts<'_>,
) -> Result<TestCase, (String, String)> {
    if parts.name.trim().is_empty() {
        return Err(("name".into(), "a case needs a name".into()));
    }
    let mut decisions = HashMap::new();
    for (node, decision) in parts.decide {
        decisions.insert(node.clone(), decision.clone());
    }
    check_decisions(flow, &decisions).map_err(|error| {
        (
            format!("decide.{}", error.target),
            format!("decide `{}`: {}", error.target, error.problem),
        )
    })?;
    if let Some(repeat) = parts.repeat
        && repeat == 0
    {
        return Err(("repeat".into(), "repeat must be 1 or more".into()));
    }
    if let Some(rate) = parts.pass_rate
        && !(0.0..=1.0).contains(&rate)
    {
        return Err((
            "passRate".into(),
            format!("passRate must be between 0 and 1, not {rate}"),
        ));
    }
    let mut assertions = Vec::new();
    for (index, spec) in parts.expect.into_iter().enumerate() {
        let assertion = assertion(flow, base, file, spec).map_err(|message| {
            (
                format!("expect[{index}]"),
                format!("expect[{index}]: {message}"),
            )
        })?;
        assertions.push(assertion);
    }
    Ok(TestCase {
        name: parts.name,
        input: parts.input,
        decisions,
        assertions,
        expected: parts.expected,
        repeat: parts.repeat.unwrap_or(1),
        pass_rate: parts.pass_rate.unwrap_or(1.0),
        origin: parts.origin,
    })
}

/// The one check of `spec`, checked against the flow.
fn assertion(
    flow: &Flow,
    base: &Path,
    file: &TestsFile,
    spec: AssertionSpec,
) -> Result<Assertion, String> {
    let mut checks: Vec<(&str, Check)> = Vec::new();
    if let Some(status) = spec.status {
        checks.push(("status", Check::Status(status)));
    }
    if let Some(value) = &spec.equals {
        checks.push(("equals", Check::Equals(value.clone())));
    }
    if let Some(value) = &spec.contains {
        checks.push(("contains", Check::Contains(value.clone())));
    }
    if let Some(pattern) = &spec.regex {
        let regex = regex::Regex::new(pattern)
            .map_err(|error| format!("regex `{pattern}` does not compile: {error}"))?;
        checks.push(("regex", Check::Regex(regex)));
    }
    if let Some(schema) = &spec.json_schema {
        OutputSchema::compile(schema).map_err(|error| format!("jsonSchema {error}"))?;
        checks.push(("jsonSchema", Check::JsonSchema(schema.clone())));
    }
    if let Some(bound) = spec.gt {
        checks.push(("gt", Check::Gt(bound)));
    }
    if let Some(bound) = spec.lt {
        checks.push(("lt", Check::Lt(bound)));
    }
    if let Some(skipped) = spec.skipped {
        checks.push(("skipped", Check::Skipped(skipped)));
    }
    if let Some(limit) = spec.max_tokens {
        checks.push(("maxTokens", Check::MaxTokens(limit)));
    }
    if let Some(limit) = spec.max_cost {
        if !(limit.is_finite() && limit >= 0.0) {
            return Err(format!(
                "maxCost must be a number of US dollars, 0 or more, not {limit}"
            ));
        }
        checks.push(("maxCost", Check::MaxCost(limit)));
    }
    if let Some(limit) = spec.max_duration_ms {
        checks.push(("maxDurationMs", Check::MaxDurationMs(limit)));
    }
    if let Some(rubric) = &spec.rubric {
        if rubric.trim().is_empty() {
            return Err("rubric is empty: say what a passing output must satisfy".into());
        }
        let model = spec
            .model
            .clone()
            .or_else(|| file.judge_model.clone())
            .unwrap_or_default();
        let fallbacks = spec
            .fallback_models
            .clone()
            .or_else(|| file.judge_fallback_models.clone())
            .unwrap_or_default();
        checks.push((
            "rubric",
            Check::Rubric {
                rubric: rubric.clone(),
                model,
                fallbacks,
            },
        ));
    }
    if let Some(judge) = &spec.judge {
        let path = base.join(judge);
        let judge_flow = Flow::load(&path).map_err(|error| format!("judge {judge}: {error}"))?;
        let problems: Vec<String> = weft_nodes::validate::validate(&judge_flow, Some(&path))
            .into_iter()
            .filter(weft_nodes::validate::Problem::is_error)
            .map(|problem| problem.to_string())
            .collect();
        if !problems.is_empty() {
            return Err(format!(
                "judge {judge} is not a valid flow: {}",
                problems.join("; ")
            ));
        }
        checks.push(("judge", Check::Judge { flow_path: path }));
    }
    if spec.model.is_some() && spec.rubric.is_none() {
        return Err("model is the model of a rubric judge; this assertion has no rubric".into());
    }
    if spec.fallback_models.is_some() && spec.rubric.is_none() {
        return Err(
            "fallbackModels are the models of a rubric judge; this assertion has no rubric".into(),
        );
    }
    let check = match checks.len() {
        1 => checks.pop().map(|(_, check)| check),
        0 => None,
        _ => {
            let names: Vec<&str> = checks.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "one check per assertion, this one has {}: split it in two",
                names.join(" and ")
            ));
        }
    };
    let Some(check) = check else {
        return Err("no check: give one of status, equals, contains, regex, jsonSchema, gt, lt, skipped, maxTokens, maxCost, maxDurationMs, rubric, judge".into());
    };
    if let Some(node) = &spec.node {
        let head = node.split('/').next().unwrap_or(node);
        let head = head.split_once('[').map_or(head, |(node, _)| node);
        if flow.node(head).is_none() {
            return Err(format!("the flow has no node `{head}`"));
        }
    }
    match (&check, &spec.node, &spec.path) {
        (Check::Status(_), Some(_), _) | (Check::Status(_), _, Some(_)) => {
            return Err("status is the run's: it takes no node or path".into());
        }
        (Check::Skipped(_), None, _) => {
            return Err("skipped needs a node: the one that should (not) have run".into());
        }
        (
            Check::MaxTokens(_) | Check::MaxCost(_) | Check::MaxDurationMs(_) | Check::Skipped(_),
            _,
            Some(_),
        ) => {
            return Err("path points into a value; this check is not about one".into());
        }
        _ => {}
    }
    if spec.expected.is_some() && !matches!(check, Check::Rubric { .. } | Check::Judge { .. }) {
        return Err("expected is for judges (rubric, judge); compare with equals instead".into());
    }
    Ok(Assertion {
        node: spec.node.clone(),
        path: spec.path.clone(),
        expected: spec.expected.clone(),
        check,
        spec,
    })
}

/// One row of a dataset.
struct Row {
    name: String,
    input: Value,
    expected: Option<Value>,
    decide: BTreeMap<String, Decision>,
    expect: Vec<AssertionSpec>,
    line: usize,
}

fn read_dataset(path: &Path) -> Result<Vec<Row>, TestFileError> {
    let refused = |message: String| TestFileError {
        file: path.to_path_buf(),
        line: None,
        message,
    };
    let text = read_text_file(path, MAX_DATASET_FILE_BYTES)
        .map_err(|error| refused(format!("cannot read the dataset: {error}")))?;
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let no_rows = || {
        // Else a dataset with nothing in it would add no case and fail nothing.
        refused("the dataset has no rows (a .jsonl dataset has a JSON object a line, a .csv dataset a header row and a row a case)".into())
    };
    if text.trim().is_empty() {
        return Err(no_rows());
    }
    let rows = match path.extension().and_then(|extension| extension.to_str()) {
        Some("jsonl") => jsonl_rows(&text, path, &stem),
        Some("csv") => csv_rows(&text, path, &stem),
        _ => Err(refused(
            "a dataset is a .jsonl file (a JSON object a line) or a .csv file (with a header row)"
                .into(),
        )),
    }?;
    if rows.is_empty() {
        return Err(no_rows());
    }
    Ok(rows)
}

/// A row of a JSONL dataset.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JsonRow {
    #[serde(default)]
    name: Option<String>,
    input: Value,
    #[serde(default, deserialize_with = "present")]
    expected: Option<Value>,
    #[serde(default)]
    decide: BTreeMap<String, Decision>,
    #[serde(default)]
    expect: Vec<AssertionSpec>,
}

fn jsonl_rows(text: &str, path: &Path, stem: &str) -> Result<Vec<Row>, TestFileError> {
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let refused = |message: String| TestFileError {
            file: path.to_path_buf(),
            line: Some(number),
            message,
        };
        let value: Value = serde_json::from_str(line)
            .map_err(|error| refused(format!("not JSON: {}", without_position(&error))))?;
        if !value.is_object() {
            return Err(refused(
                "a row is a JSON object with `input` (and `name`, `expected`, `decide`, `expect`)"
                    .into(),
            ));
        }
        let row: JsonRow = serde_json::from_value(value).map_err(|error| {
            refused(format!(
                "{error} (a row has `input`, and may have `name`, `expected`, `decide`, `expect`)"
            ))
        })?;
        rows.push(Row {
            name: row.name.unwrap_or_else(|| format!("{stem} #{number}")),
            input: row.input,
            expected: row.expected,
            decide: row.decide,
            expect: row.expect,
            line: number,
        });
    }
    Ok(rows)
}

fn csv_rows(text: &str, path: &Path, stem: &str) -> Result<Vec<Row>, TestFileError> {
    let refused = |line: Option<usize>, message: String| TestFileError {
        file: path.to_path_buf(),
        line,
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|error| refused(Some(1), format!("the header row: {error}")))?
        .clone();
    let column = |name: &str| headers.iter().position(|header| header.trim() == name);
    if let Some(unknown) = headers
        .iter()
        .find(|header| !matches!(header.trim(), "name" | "input" | "expected"))
    {
        return Err(refused(
            Some(1),
            format!("unknown column `{unknown}` (the columns are name, input, expected)"),
        ));
    }
    let Some(input) = column("input") else {
        return Err(refused(
            Some(1),
            "no `input` column (the columns are name, input, expected)".into(),
        ));
    };
    let (name, expected) = (column("name"), column("expected"));
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| {
            let line = error.position().map(|position| position.line() as usize);
            let message = match error.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!(
                    "this row has {len} fields, the header {expected_len}: a comma in a value needs quotes"
                ),
                _ => error.to_string(),
            };
            refused(line, message)
        })?;
        let line = record
            .position()
            .map_or(rows.len() + 2, |position| position.line() as usize);
        let field = |index: usize| record.get(index).unwrap_or_default().to_string();
        rows.push(Row {
            name: name
                .map(field)
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| format!("{stem} #{line}")),
            input: cell_value(&field(input)),
            expected: expected.map(field).map(|text| cell_value(&text)),
            decide: BTreeMap::new(),
            expect: Vec::new(),
            line,
        });
    }
    Ok(rows)
}

/// A CSV cell as a value: a JSON object or array is read as JSON, anything else is text.
fn cell_value(text: &str) -> Value {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(value) = serde_json::from_str(text)
    {
        return value;
    }
    Value::String(text.to_string())
}

/// Adds `case` to `flow_path`'s tests file (creating the file), in place of a case of the same
/// name. The file is then checked against `flow`; when the case does not fit (it names a node
/// the flow lacks, say), the file is left as it was and the error says why.
pub fn save_case(flow_path: &Path, flow: &Flow, case: CaseSpec) -> Result<(), TestFileError> {
    let path = tests_path(flow_path);
    let before = match read_text_file(&path, MAX_TESTS_FILE_BYTES) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(TestFileError {
                file: path,
                line: None,
                message: format!("cannot read it: {error}"),
            });
        }
    };
    let mut file = match &before {
        Some(text) => parse_tests_file(text, &path)?.0,
        None => TestsFile::default(),
    };
    match file
        .cases
        .iter_mut()
        .find(|existing| existing.name == case.name)
    {
        Some(existing) => *existing = case,
        None => file.cases.push(case),
    }
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    let write = |text: &str| {
        std::fs::write(&path, text).map_err(|error| TestFileError {
            file: path.clone(),
            line: None,
            message: format!("cannot write it: {error}"),
        })
    };
    write(&text)?;
    if let Err(error) = load_suite(flow_path, flow) {
        match &before {
            Some(text) => write(text)?,
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        return Err(error);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tests_files_and_datasets_are_refused_naming_the_file() {
        let flow = Flow::parse(
            r#"{"nodes": [{"id": "start", "type": "start"}, {"id": "out", "type": "output"}],
                "edges": [{"id": "e", "source": "start", "target": "out"}]}"#,
            "f.json",
        )
        .expect("a flow");
        let dir = tempfile::tempdir().expect("temp dir");
        let flow_path = dir.path().join("f.json");
        let tests_path = dir.path().join("f.tests.json");
        let refused = |tests: &str, rows: &str, file: &Path, wanted: &str| {
            std::fs::write(&tests_path, tests).expect("write");
            std::fs::write(dir.path().join("rows.jsonl"), rows).expect("write");
            std::fs::write(dir.path().join("rows.csv"), rows).expect("write");
            let error = load_suite(&flow_path, &flow).expect_err(tests);
            assert_eq!(error.file, file, "{tests} / {rows:?}: {error}");
            assert!(
                error.message.contains(wanted),
                "{tests} / {rows:?}: wanted {wanted:?} in {error}"
            );
        };
        let rows_jsonl = dir.path().join("rows.jsonl");
        let rows_csv = dir.path().join("rows.csv");
        for empty in ["{}", "{\"cases\": []}", "{\"cases\": [], \"datasets\": []}"] {
            refused(empty, "", &tests_path, "no cases");
        }
        refused("[]", "", &tests_path, "not an array");
        refused("\n  [[{\"name\": \"a\"}]]", "", &tests_path, "not an array");
        let jsonl = "{\"datasets\": [{\"file\": \"rows.jsonl\"}]}";
        let csv = "{\"datasets\": [{\"file\": \"rows.csv\"}]}";
        for rows in ["", "\n\n", "  \n"] {
            refused(jsonl, rows, &rows_jsonl, "the dataset has no rows");
            refused(csv, rows, &rows_csv, "the dataset has no rows");
        }
        refused(csv, "name,input\n", &rows_csv, "the dataset has no rows");
        let error = {
            std::fs::write(&tests_path, jsonl).expect("write");
            std::fs::write(&rows_jsonl, "").expect("write");
            load_suite(&flow_path, &flow).expect_err("empty")
        };
        assert!(
            error.to_string().contains("(named by f.tests.json:1)"),
            "{error}"
        );
    }
}
