//! Property tests over the tests file and its datasets: the example tests files of `flows/`
//! mutated at random (as JSON and as text), random bytes, and random datasets, beside their
//! flows, must load into a suite of at least one case or fail with an error naming a file and
//! saying what is wrong; never panic.
//!
//! As in `crates/engine/tests/it/fuzz.rs`, the test command runs a fixed number of cases from a
//! fixed seed; `scripts/fuzz.sh` runs many more from random seeds (`WEFT_FUZZ_CASES`,
//! `WEFT_FUZZ_SEED=random`), each case in a child process that catches aborts and hangs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use weft_flow::Flow;
use weft_fuzz::{Change, apply, config};

use crate::{TestFileError, TestSuite, load_suite};

/// The example flows with a tests file: the flow and the tests file's text.
fn examples() -> &'static [(Flow, String)] {
    static EXAMPLES: OnceLock<Vec<(Flow, String)>> = OnceLock::new();
    EXAMPLES.get_or_init(|| {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
        let mut examples = Vec::new();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&folder)
            .expect("the flows folder")
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.to_string_lossy().ends_with(".tests.json"))
            .collect();
        paths.sort();
        for tests in paths {
            let flow_path = crate::flow_of_tests(&tests).expect("a tests file name");
            let flow = Flow::load(&flow_path).expect("an example flow");
            let text = std::fs::read_to_string(&tests).expect("an example tests file");
            examples.push((flow, text));
        }
        assert!(examples.len() >= 5, "the examples were not found");
        examples
    })
}

/// Values that might break the reader or the checks.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!(true)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!("")),
        Just(json!("$expected")),
        Just(json!("approve")),
        Just(json!("reject: no")),
        Just(json!("completed")),
        Just(json!("rows.jsonl")),
        Just(json!("rows.csv")),
        Just(json!("/dev/zero")),
        Just(json!(".")),
        Just(json!("(")),
        Just(json!("(".repeat(10_000))),
        Just(json!("\u{0}\u{202e}\u{fffd}é")),
        Just(json!([])),
        Just(json!({})),
        Just(json!([[]])),
        Just(json!({"name": "a"})),
        Just(json!({"regex": "a"})),
        Just(json!({"node": "start", "equals": 1})),
        Just(json!({"rubric": " "})),
        Just(json!({"file": "rows.jsonl"})),
        Just(json!([{"file": "rows.csv", "expect": [{"contains": "$expected"}]}])),
        "[a-zA-Z_]{1,12}".prop_map(Value::String),
        ".{0,40}".prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| json!(number)),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (any::<Index>(), hostile_value()).prop_map(|(at, value)| Change::Replace(at, value)),
        1 => any::<Index>().prop_map(Change::Remove),
    ]
}
/// A dataset's text: rows that may be right, random text, or random bytes.
fn dataset() -> impl Strategy<Value = Vec<u8>> {
    let row = prop_oneof![
        Just("{\"input\": \"x\"}".to_string()),
        Just("{\"input\": {\"a\": 1}, \"name\": \"n\", \"expected\": \"x\"}".to_string()),
        Just("{\"input\": 1, \"expect\": [{\"status\": \"completed\"}]}".to_string()),
        Just("{\"input\": 1, \"decide\": {\"review\": \"approve\"}}".to_string()),
        Just("name,input,expected".to_string()),
        Just("a,x,y".to_string()),
        Just("\"a,b\",\"{\"\"k\"\": 1}\",".to_string()),
        Just("[]".to_string()),
        Just(String::new()),
        Just(" ".to_string()),
        ".{0,30}",
    ];
    prop_oneof![
        3 => prop::collection::vec(row, 0..6).prop_map(|rows| rows.join("\n").into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

/// Loads the tests file `tests` beside the flow `flow` (and the datasets `rows.jsonl` and
/// `rows.csv` beside it), and checks what came.
fn load_and_check(flow: &Flow, tests: &[u8], rows: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let flow_path = dir.path().join("f.json");
    std::fs::write(dir.path().join("f.tests.json"), tests).expect("write the tests file");
    std::fs::write(dir.path().join("rows.jsonl"), rows).expect("write a dataset");
    std::fs::write(dir.path().join("rows.csv"), rows).expect("write a dataset");
    check(load_suite(&flow_path, flow))
}

fn check(loaded: Result<TestSuite, TestFileError>) -> Result<(), TestCaseError> {
    match loaded {
        Ok(suite) => {
            prop_assert!(!suite.cases.is_empty(), "a suite of no cases loaded");
            for case in &suite.cases {
                prop_assert!(!case.name.trim().is_empty(), "a case without a name");
                prop_assert!(case.repeat >= 1);
            }
        }
        Err(error) => {
            prop_assert!(
                !error.file.as_os_str().is_empty(),
                "an error naming no file: {error}"
            );
            prop_assert!(
                !error.message.trim().is_empty(),
                "an error saying nothing: {error:?}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn mutated_tests_json_loads_or_fails_naming_the_file(
        example in any::<Index>(),
        changes in prop::collection::vec(change(), 1..6),
        datasets in prop::option::of(hostile_value()),
        rows in dataset(),
    ) {
        let (flow, text) = &examples()[example.index(examples().len())];
        let mut value: Value = serde_json::from_str(text).expect("an example is JSON");
        if let Some(datasets) = datasets {
            value["datasets"] = json!([{ "file": "rows.jsonl" }, { "file": "rows.csv", "expect": datasets }]);
        }
        for change in &changes {
            apply(&mut value, change);
        }
        load_and_check(flow, value.to_string().as_bytes(), &rows)?;
    }

    #[test]
    fn mutated_tests_text_loads_or_fails_naming_the_file(
        example in any::<Index>(),
        cut in any::<Index>(),
        length in 0usize..64,
        insert in prop::collection::vec(any::<u8>(), 0..16),
        rows in dataset(),
    ) {
        let (flow, text) = &examples()[example.index(examples().len())];
        let mut bytes = text.clone().into_bytes();
        let at = cut.index(bytes.len() + 1);
        let end = (at + length).min(bytes.len());
        bytes.splice(at..end, insert);
        load_and_check(flow, &bytes, &rows)?;
    }

    #[test]
    fn random_bytes_as_a_tests_file_fail_naming_the_file(
        example in any::<Index>(),
        tests in prop::collection::vec(any::<u8>(), 0..300),
        rows in dataset(),
    ) {
        let (flow, _) = &examples()[example.index(examples().len())];
        load_and_check(flow, &tests, &rows)?;
    }
}
