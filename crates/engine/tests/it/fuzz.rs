//! Property tests over the loader, the normaliser and the validator: flow files from the
//! repository (examples, fixtures, and the hostile reproductions) mutated at random, as text
//! and as JSON, must load or fail with an error, and validate without a panic; a flow that
//! loads saves to a file that loads again to the same flow.
//!
//! The sandbox's static check gets random Python-like bodies and field names the same way, and
//! the pins file reader random and mutated pins files.
//!
//! The test command runs a fixed number of cases from a fixed seed, so that it finds the same
//! thing every time; `scripts/fuzz.sh` runs many more from random seeds (`WEFT_FUZZ_CASES`,
//! `WEFT_FUZZ_SEED=random`), each case in a child process that catches aborts and hangs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use weft_flow::Flow;
use weft_fuzz::{Change, apply, config};

use weft_nodes::validate;
use weft_sandbox::{Sandbox, SandboxError};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The seed corpus: every JSON file under `flows/` and `tests/fixtures/`.
fn corpus() -> &'static [(PathBuf, String)] {
    static CORPUS: OnceLock<Vec<(PathBuf, String)>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut files = Vec::new();
        for dir in [
            "flows",
            "flows/parts",
            "tests/fixtures/valid",
            "tests/fixtures/invalid",
            "tests/fixtures/hostile",
        ] {
            let Ok(entries) = std::fs::read_dir(repository().join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "json") {
                    let text = std::fs::read_to_string(&path).expect("a corpus file");
                    files.push((path, text));
                }
            }
        }
        files.sort();
        assert!(files.len() > 20, "the corpus was not found");
        files
    })
}

/// Values that have broken parsers, normalisers and checkers before, or might.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!(true)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(i64::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!(-0.5)),
        Just(json!("")),
        Just(json!("start")),
        Just(json!("approve")),
        Just(json!("output")),
        Just(json!("/dev/zero")),
        Just(json!("../../../../etc/passwd")),
        Just(json!("{{ 'a\nb' | indent(1000000000000) }}")),
        Just(json!("{{ [1] * 100000000 }}")),
        Just(json!(format!("{{{{ {}1 }}}}", "-".repeat(20_000)))),
        Just(json!(format!(
            "{{% if {}x %}}{{% endif %}}",
            "(".repeat(5_000)
        ))),
        Just(json!("(".repeat(100_000))),
        Just(json!("while True:\n    pass")),
        Just(json!("return ().__class__")),
        Just(json!("\u{0}\u{202e}\u{fffd}é")),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"type": "agent", "id": "x"})),
        Just(json!([{"id": "a", "type": "start"}])),
        "[a-z_]{1,12}".prop_map(Value::String),
        ".{0,40}".prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| json!(number)),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (any::<Index>(), hostile_value()).prop_map(|(at, value)| Change::Replace(at, value)),
        2 => any::<Index>().prop_map(Change::Remove),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(from, to)| Change::Copy(from, to)),
        1 => (any::<Index>(), 1usize..100).prop_map(|(at, depth)| Change::Nest(at, depth)),
    ]
}

/// One change to the text of a file.
#[derive(Debug, Clone)]
enum Edit {
    Truncate(Index),
    Insert(Index, String),
    Delete(Index, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let fragment = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".repeat(200)),
        Just("\"".to_string()),
        Just(",".to_string()),
        Just("\\u0000".to_string()),
        Just("\\ud800".to_string()),
        Just("1e999999".to_string()),
        Just("\u{feff}".to_string()),
        ".{0,8}",
    ];
    prop_oneof![
        any::<Index>().prop_map(Edit::Truncate),
        (any::<Index>(), fragment).prop_map(|(at, text)| Edit::Insert(at, text)),
        (any::<Index>(), 1usize..64).prop_map(|(at, len)| Edit::Delete(at, len)),
    ]
}

fn edit_text(text: &mut String, edit: &Edit) {
    let boundary = |index: &Index, text: &String| {
        let mut at = index.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match edit {
        Edit::Truncate(at) => {
            let at = boundary(at, text);
            text.truncate(at);
        }
        Edit::Insert(at, fragment) => {
            let at = boundary(at, text);
            text.insert_str(at, fragment);
        }
        Edit::Delete(at, len) => {
            let start = boundary(at, text);
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.replace_range(start..end, "");
        }
    }
}

/// Loads `text` as the flow file at `path`, validates what loads, and checks that saving and
/// loading again keeps the flow.
fn load_and_check(text: &str, path: &Path) {
    let Ok(flow) = Flow::parse(text, &path.display().to_string()) else {
        return;
    };
    let problems = validate(&flow, Some(path));
    for problem in &problems {
        // Every problem is a sentence, not an empty string or a dump of the input.
        assert!(!problem.message.trim().is_empty(), "{problem:?}");
    }
    let saved = flow.to_file_string();
    let reloaded = Flow::parse(&saved, "saved").unwrap_or_else(|error| {
        panic!("a loaded flow saved to a file that does not load: {error}\n{saved}")
    });
    assert_eq!(reloaded.nodes.len(), flow.nodes.len());
    assert_eq!(reloaded.edges.len(), flow.edges.len());
    assert_eq!(reloaded.to_file_string(), saved, "saving is stable");
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn mutated_flow_json_loads_or_fails_and_validates_without_panic(
        file in any::<Index>(),
        changes in prop::collection::vec(change(), 1..6),
    ) {
        let (path, text) = &corpus()[file.index(corpus().len())];
        let Ok(mut value) = serde_json::from_str::<Value>(text) else {
            return Ok(());
        };
        for change in &changes {
            apply(&mut value, change);
        }
        load_and_check(&value.to_string(), path);
    }

    #[test]
    fn mutated_flow_text_loads_or_fails_without_panic(
        file in any::<Index>(),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let (path, text) = &corpus()[file.index(corpus().len())];
        let mut text = text.clone();
        for edit in &edits {
            edit_text(&mut text, edit);
        }
        load_and_check(&text, path);
    }
}

/// The flow pins are checked against: the triage example, which has nodes of every sort a pin
/// can and cannot be for.
fn pinned_flow() -> &'static Flow {
    static FLOW: OnceLock<Flow> = OnceLock::new();
    FLOW.get_or_init(|| Flow::load(&repository().join("flows/triage.json")).expect("triage"))
}

/// A pins file as the app writes it, for nodes of [`pinned_flow`] and one it lacks.
fn pins_seed() -> Value {
    json!({ "pins": {
        "classify": { "output": { "label": "refund" }, "from": "run 3f2a" },
        "draft": { "output": "Dear customer" },
        "ghost": { "output": null },
    } })
}

/// Reads `bytes` as the pins file beside a flow: an error names the pins file and says what is
/// wrong, and pins that load are checked against the flow without a panic.
fn load_pins_and_check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = weft_engine::pins::pins_path(&dir.path().join("triage.json"));
    std::fs::write(&path, bytes).expect("write the pins file");
    match weft_engine::pins::load_pins(&path) {
        Ok(pins) => {
            for problem in weft_engine::pins::check_pins(pinned_flow(), &pins) {
                prop_assert!(problem.starts_with("pin `"), "names the pin: {problem}");
            }
        }
        Err(error) => {
            let message = error.to_string();
            let prefix = format!("pins file {}: ", path.display());
            prop_assert!(message.starts_with(&prefix), "names the file: {message}");
            prop_assert!(
                !message[prefix.len()..].trim().is_empty(),
                "says what is wrong: {message}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn mutated_pins_json_loads_or_fails_naming_the_file(
        changes in prop::collection::vec(change(), 1..6),
    ) {
        let mut value = pins_seed();
        for change in &changes {
            apply(&mut value, change);
        }
        load_pins_and_check(value.to_string().as_bytes())?;
    }

    #[test]
    fn mutated_pins_text_loads_or_fails_naming_the_file(
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let mut text = serde_json::to_string_pretty(&pins_seed()).expect("JSON");
        for edit in &edits {
            edit_text(&mut text, edit);
        }
        load_pins_and_check(text.as_bytes())?;
    }

    #[test]
    fn random_bytes_as_a_pins_file_fail_naming_the_file(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        load_pins_and_check(&bytes)?;
    }
}

/// Pieces of Python, including what the check refuses and what once overflowed its stack.
const PYTHON: &[&str] = &[
    "return ",
    "x",
    "input",
    "initial",
    " = ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    ".",
    "\n",
    "    ",
    "\t",
    "if ",
    "else",
    "elif ",
    "while ",
    "for ",
    " in ",
    "range(10)",
    "pass",
    "try:",
    "except:",
    "finally:",
    "with ",
    "lambda ",
    "yield ",
    "def ",
    "class ",
    "async ",
    "await ",
    "@",
    "global ",
    "nonlocal ",
    "del ",
    "assert ",
    "import os",
    "from os import *",
    "__class__",
    "__import__",
    "_x",
    "getattr",
    "eval",
    "exec",
    "open",
    "type",
    "globals",
    ".format",
    "gi_frame",
    "f'",
    "{x}",
    "'",
    "\"",
    "\"\"\"",
    "#",
    ";",
    "\\",
    "*",
    "**",
    " + ",
    " - ",
    " << ",
    " % ",
    "not ",
    " and ",
    "1",
    "10**10",
    "1e999",
    "0x",
    "'a' * 99",
    "print(",
    "len(",
    "max(",
    "sorted(",
    "[i for i in x]",
    "(((((",
    ")))))",
    "-----",
    "é",
    "\u{0}",
];

const FIELDS: &[&str] = &[
    "a", "b", "initial", "input", "_secret", "class", "None", "a b", "1a", "größe", "", "a.b",
];

fn python_body() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(PYTHON);
    prop::collection::vec(piece, 1..48).prop_map(|pieces| pieces.concat())
}

fn field_names() -> impl Strategy<Value = Vec<String>> {
    let field = prop_oneof![
        6 => prop::sample::select(FIELDS).prop_map(str::to_string),
        1 => (1usize..20_000).prop_map(|depth| "(".repeat(depth)),
        1 => "[a-z(\\[ ]{0,12}",
    ];
    prop::collection::vec(field, 0..4)
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn the_sandbox_check_answers_every_body_without_panic(
        body in python_body(),
        fields in field_names(),
    ) {
        for problem in Sandbox::check(&body, &fields) {
            prop_assert!(
                !matches!(problem, SandboxError::Internal(_)),
                "the check failed inside: {problem}"
            );
            prop_assert!(problem.to_string().len() < 2_000, "a short message: {problem}");
        }
    }
}
