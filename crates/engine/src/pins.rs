//! Pinned outputs (docs/debugging.md): a node's output fixed by the person, taken from a past run
//! or
//! typed. A pinned node does not run: its pin is its output, so an expensive or flaky step is
//! not asked again while the nodes after it are worked on. Pins are debugging state, kept beside
//! the flow in `NAME.pins.json`, never in the flow file:
//!
//! ```json
//! { "pins": { "classify": { "output": { "label": "bug" } } } }
//! ```
//!
//! An entry may carry more fields (where the pin came from, say); Weft keeps only `output`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use weft_flow::Flow;
use weft_flow::output_schema::OutputSchema;
use weft_nodes::NodeKind;

/// Pinned outputs by node id (nodes of the flow itself, not of its subflows).
pub type Pins = BTreeMap<String, Value>;

/// [`Pins`] as a run holds them: each pin shared with the outputs it becomes, not copied.
pub(crate) type SharedPins = BTreeMap<String, std::sync::Arc<Value>>;

/// `pins`, moved (not copied) into a run's [`SharedPins`].
pub(crate) fn shared(pins: Pins) -> SharedPins {
    pins.into_iter()
        .map(|(node_id, pin)| (node_id, std::sync::Arc::new(pin)))
        .collect()
}

/// The pins file of the flow at `flow_path`: `triage.json` → `triage.pins.json`.
pub fn pins_path(flow_path: &Path) -> PathBuf {
    let stem = flow_path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    flow_path.with_file_name(format!("{stem}.pins.json"))
}

/// Why a pins file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// Reading or writing the file failed.
    #[error("pins file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pins file {path}: line {line}, column {column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("pins file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The largest pins file Weft reads (pins are outputs a person looked at: a few KiB each).
pub const MAX_PINS_FILE_BYTES: u64 = weft_flow::MAX_FILE_BYTES;

/// Reads the pins file at `path`: a regular file (a named pipe or a device is refused, never
/// waited on or read without end) of at most [`MAX_PINS_FILE_BYTES`].
pub fn load_pins(path: &Path) -> Result<Pins, PinsError> {
    let text =
        weft_flow::read_text_file(path, MAX_PINS_FILE_BYTES).map_err(|source| PinsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    parse_pins(&text).map_err(|error| match error {
        ParseError::Syntax {
            line,
            column,
            message,
        } => PinsError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            message,
        },
        ParseError::Shape(message) => PinsError::Invalid {
            path: path.to_path_buf(),
            message,
        },
    })
}

/// Writes `pins` to the pins file at `path` (pretty JSON, one entry per node); with no pins the
/// file is removed, so a folder keeps no empty pins files.
pub fn write_pins(path: &Path, pins: &Pins) -> Result<(), PinsError> {
    let failed = |source: std::io::Error| PinsError::Io {
        path: path.to_path_buf(),
        source,
    };
    if pins.is_empty() {
        return match std::fs::remove_file(path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(failed(error)),
            _ => Ok(()),
        };
    }
    let entries: serde_json::Map<String, Value> = pins
        .iter()
        .map(|(node, output)| (node.clone(), serde_json::json!({ "output": output })))
        .collect();
    let text =
        serde_json::to_string_pretty(&serde_json::json!({ "pins": entries })).unwrap_or_default();
    weft_flow::replace_file(
        path,
        format!("{text}\n").as_bytes(),
        weft_flow::Access::AsBefore,
    )
    .map_err(failed)
}

enum ParseError {
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    Shape(String),
}

fn parse_pins(text: &str) -> Result<Pins, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|error| ParseError::Syntax {
        line: error.line(),
        column: error.column(),
        message: error.to_string(),
    })?;
    let shape =
        || ParseError::Shape("expected {\"pins\": {\"NODE\": {\"output\": VALUE}}}".to_string());
    // Taken apart rather than copied: a pin may be large.
    let Value::Object(mut file) = value else {
        return Err(shape());
    };
    let Some(Value::Object(entries)) = file.remove("pins") else {
        return Err(shape());
    };
    let mut pins = Pins::new();
    for (node, mut entry) in entries {
        match entry
            .as_object_mut()
            .and_then(|entry| entry.remove("output"))
        {
            Some(output) => {
                pins.insert(node, output);
            }
            _ => {
                return Err(ParseError::Shape(format!(
                    "pin `{node}`: expected {{\"output\": VALUE}}"
                )));
            }
        }
    }
    Ok(pins)
}

/// What is wrong with pinning `pins` in `flow`, one message per problem: a node that is not in
/// the flow, a kind whose route depends on running it (an `if`, an approval), or an output that
/// does not match the node's `outputSchema`.
pub fn check_pins(flow: &Flow, pins: &Pins) -> Vec<String> {
    let mut problems = Vec::new();
    for (node_id, output) in pins {
        let Some(node) = flow.nodes.iter().find(|node| &node.id == node_id) else {
            problems.push(format!("pin `{node_id}`: the flow has no such node"));
            continue;
        };
        let Some(kind) = NodeKind::of(node) else {
            problems.push(format!(
                "pin `{node_id}`: its type `{}` is unknown",
                node.kind
            ));
            continue;
        };
        let data = &node.data;
        let routes_by_output = kind.handles(data).iter().any(|handle| handle == "output");
        if !routes_by_output || kind == NodeKind::Output {
            problems.push(format!(
                "pin `{node_id}`: a `{}` node cannot be pinned (only nodes that go on by their `output` handle can)",
                node.kind
            ));
            continue;
        }
        if let Some(schema) = data.get("outputSchema").filter(|schema| !schema.is_null()) {
            // A schema that does not compile is the flow's own validation's to report.
            if let Ok(schema) = OutputSchema::compile(schema) {
                let found = schema.problems(output);
                if !found.is_empty() {
                    problems.push(format!(
                        "pin `{node_id}`: the output does not match its outputSchema: {}",
                        found.join("; ")
                    ));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_pins_file_sits_beside_the_flow() {
        assert_eq!(
            pins_path(Path::new("/a/flows/triage.json")),
            PathBuf::from("/a/flows/triage.pins.json")
        );
    }

    #[test]
    fn a_pins_file_reads_outputs_and_names_what_is_wrong() {
        let pins = parse_pins(r#"{"pins": {"a": {"output": {"x": 1}, "from": "run 3f2a"}}}"#)
            .ok()
            .expect("reads");
        assert_eq!(pins["a"], json!({"x": 1}));
        match parse_pins("{\n\"pins\": {\n\"a\": {\"output\": 1,}}}") {
            Err(ParseError::Syntax { line, .. }) => assert_eq!(line, 3),
            _ => panic!("a syntax error with its line"),
        }
        match parse_pins(r#"{"pins": {"a": 5}}"#) {
            Err(ParseError::Shape(message)) => assert!(message.contains("pin `a`"), "{message}"),
            _ => panic!("a shape error"),
        }
        assert!(matches!(parse_pins("[]"), Err(ParseError::Shape(_))));
    }

    #[test]
    fn written_pins_read_back_and_no_pins_leave_no_file() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("flow.pins.json");
        let pins = Pins::from([("a".to_string(), json!({"label": "bug"}))]);
        write_pins(&path, &pins).expect("writes");
        assert_eq!(load_pins(&path).expect("reads"), pins);
        write_pins(&path, &Pins::new()).expect("removes");
        assert!(!path.exists());
        write_pins(&path, &Pins::new()).expect("nothing to remove");
    }

    #[cfg(unix)]
    #[test]
    fn a_pins_file_that_is_no_file_or_too_large_is_refused_naming_it() {
        let error = load_pins(Path::new("/dev/zero")).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "pins file /dev/zero: not a regular file but a character device"
        );
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("flow.pins.json");
        std::fs::File::create(&path)
            .and_then(|file| file.set_len(MAX_PINS_FILE_BYTES + 1))
            .expect("sparse file");
        let error = load_pins(&path).expect_err("refused");
        assert_eq!(
            error.to_string(),
            format!(
                "pins file {}: larger than 32 MiB, the most Weft reads of such a file",
                path.display()
            )
        );
    }

    #[test]
    fn pins_are_checked_against_the_flow() {
        let flow = Flow::parse(
            &json!({
                "nodes": [
                    {"id": "start", "type": "start"},
                    {"id": "check", "type": "if", "data": {"conditions": [{"operator": "contains", "value": "x"}]}},
                    {"id": "classify", "type": "agent", "data": {"model": "m", "outputSchema": {
                        "type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]
                    }}},
                    {"id": "t", "type": "template", "data": {"template": "x"}}
                ],
                "edges": []
            })
            .to_string(),
            "test",
        )
        .expect("flow");
        let pins = Pins::from([
            ("ghost".to_string(), json!(1)),
            ("check".to_string(), json!(1)),
            ("classify".to_string(), json!({"label": 3})),
            ("t".to_string(), json!("fixed")),
        ]);
        let problems = check_pins(&flow, &pins);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`ghost`: the flow has no such node"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("a `if` node cannot be pinned"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`classify`: the output does not match"))
        );
        assert!(
            check_pins(
                &flow,
                &Pins::from([("classify".into(), json!({"label": "bug"}))])
            )
            .is_empty()
        );
    }
}
