//! The files handed to `weft` — a flow, a pins file (`weft run --pins`), a tests file and its
//! datasets (`weft test`), a price table (`WEFT_PRICES`) — through the real executable: a
//! named pipe, a symlink to `/dev/zero` and a file over the size limit each end `weft` at once
//! with exit 2 and a message naming the file and what is wrong (never a wait for a writer, or a
//! read until memory runs out); an empty tests file or dataset is refused the same way rather
//! than passing as 0 cases.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Ran, Sandbox, edge, node, wait_within};
use serde_json::{Value, json};

/// Far above what refusing a file takes (milliseconds): reaching it means `weft` waited on a
/// pipe or read a device.
const LIMIT: Duration = Duration::from_secs(60);

/// The limit on these files (docs/testing.md, docs/debugging.md).
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// start → t (template) → out.
fn flow() -> Value {
    json!({
        "version": 1,
        "name": "F",
        "nodes": [
            node("start", "start", json!({ "initialInput": "x" })),
            node("t", "template", json!({ "template": "hi {{PREVIOUS_OUTPUT}}" })),
            node("out", "output", json!({})),
        ],
        "edges": [edge("e1", "start", "t", None), edge("e2", "t", "out", None)]
    })
}

/// A file that is not one to read, made at a path, and what the refusal says about it.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// A named pipe no one writes to: opening it to read would wait forever.
    Fifo,
    /// A symlink to `/dev/zero`: reading it would never end.
    DevZero,
    /// A regular (sparse) file one byte over the limit.
    TooLarge,
}

const HOSTILE: [Hostile; 3] = [Hostile::Fifo, Hostile::DevZero, Hostile::TooLarge];

impl Hostile {
    fn make(self, path: &Path) {
        let _ = std::fs::remove_file(path);
        match self {
            Hostile::Fifo => {
                let made = std::process::Command::new("mkfifo")
                    .arg(path)
                    .status()
                    .expect("mkfifo runs");
                assert!(made.success(), "mkfifo {}", path.display());
            }
            Hostile::DevZero => {
                std::os::unix::fs::symlink("/dev/zero", path).expect("symlink");
            }
            Hostile::TooLarge => {
                std::fs::File::create(path)
                    .and_then(|file| file.set_len(MAX_FILE_BYTES + 1))
                    .expect("sparse file");
            }
        }
    }

    fn says(self) -> &'static str {
        match self {
            Hostile::Fifo => "not a regular file but a named pipe (FIFO)",
            Hostile::DevZero => "not a regular file but a character device",
            Hostile::TooLarge => "larger than 32 MiB, the most Weft reads of such a file",
        }
    }
}

/// `ran` is a usage error (exit 2, no crash) whose message names `file` and says `says`.
fn assert_refused(ran: &Ran, file: &Path, says: &str, what: &str) {
    assert!(!common::crashed(ran), "{what}: crashed: {ran:?}");
    assert_eq!(ran.code, Some(2), "{what}: {ran:?}");
    let file = file.display().to_string();
    assert!(
        ran.stderr.contains(&file),
        "{what}: wanted the file {file} named in: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains(says),
        "{what}: wanted {says:?} in: {}",
        ran.stderr
    );
}

fn sandbox_with_flow() -> (Sandbox, String) {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("f.json", &flow());
    (sandbox, flow)
}

#[test]
fn a_flow_file_that_is_a_pipe_a_device_or_too_large_is_refused_at_once() {
    let sandbox = Sandbox::new();
    let path = sandbox.dir.path().join("f.json");
    for hostile in HOSTILE {
        hostile.make(&path);
        let flow = path.display().to_string();
        for args in [
            vec!["validate", &flow],
            vec!["run", &flow, "--db", &sandbox.db_arg()],
        ] {
            let ran = sandbox.run_within(&args, None, LIMIT);
            // A flow too large has its own words (docs/flows.md).
            let says = match hostile {
                Hostile::TooLarge => "is larger than 32 MiB, too large for a flow file",
                _ => hostile.says(),
            };
            assert_refused(
                &ran,
                &path,
                says,
                &format!("flow {hostile:?}, weft {}", args[0]),
            );
        }
    }
}

#[test]
fn a_pins_file_that_is_a_pipe_a_device_or_too_large_is_refused_at_once() {
    let (sandbox, flow) = sandbox_with_flow();
    let pins = sandbox.dir.path().join("f.pins.json");
    for hostile in HOSTILE {
        hostile.make(&pins);
        let ran = sandbox.run_within(
            &["run", &flow, "--pins", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        );
        assert_refused(&ran, &pins, hostile.says(), &format!("pins {hostile:?}"));
        assert!(
            ran.stderr
                .contains(&format!("pins file {}: {}", pins.display(), hostile.says())),
            "{}",
            ran.stderr
        );
    }
    // And a right one still pins.
    std::fs::remove_file(&pins).expect("remove");
    std::fs::write(&pins, r#"{"pins": {"t": {"output": "pinned"}}}"#).expect("pins");
    let ran = sandbox.run_within(
        &["run", &flow, "--pins", "--db", &sandbox.db_arg()],
        None,
        LIMIT,
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("pinned"), "{ran:?}");
}

#[test]
fn a_tests_file_that_is_a_pipe_a_device_or_too_large_is_refused_at_once() {
    let (sandbox, flow) = sandbox_with_flow();
    let tests = sandbox.dir.path().join("f.tests.json");
    for hostile in HOSTILE {
        hostile.make(&tests);
        let ran = sandbox.run_within(
            &["test", &flow, "--offline", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        );
        assert_refused(&ran, &tests, hostile.says(), &format!("tests {hostile:?}"));
        // The folder form reads the same file.
        let dir = sandbox.dir.path().display().to_string();
        let ran = sandbox.run_within(
            &["test", &dir, "--offline", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        );
        assert_refused(
            &ran,
            &tests,
            hostile.says(),
            &format!("tests in a folder {hostile:?}"),
        );
    }
}

#[test]
fn a_dataset_that_is_a_pipe_a_device_or_too_large_is_refused_at_once() {
    let (sandbox, flow) = sandbox_with_flow();
    std::fs::write(
        sandbox.dir.path().join("f.tests.json"),
        r#"{"cases": [], "datasets": [{"file": "rows.jsonl"}, {"file": "rows.csv"}]}"#,
    )
    .expect("tests");
    let jsonl = sandbox.dir.path().join("rows.jsonl");
    let csv = sandbox.dir.path().join("rows.csv");
    std::fs::write(&csv, "input\nx\n").expect("csv");
    for hostile in HOSTILE {
        hostile.make(&jsonl);
        let ran = sandbox.run_within(
            &["test", &flow, "--offline", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        );
        assert_refused(&ran, &jsonl, hostile.says(), &format!("jsonl {hostile:?}"));
        assert!(
            ran.stderr.contains("named by f.tests.json:1"),
            "{}",
            ran.stderr
        );
    }
    std::fs::remove_file(&jsonl).expect("remove");
    std::fs::write(&jsonl, "{\"input\": \"y\"}\n").expect("jsonl");
    for hostile in HOSTILE {
        hostile.make(&csv);
        let ran = sandbox.run_within(
            &["test", &flow, "--offline", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        );
        assert_refused(&ran, &csv, hostile.says(), &format!("csv {hostile:?}"));
    }
}

#[test]
fn a_prices_file_that_is_a_pipe_a_device_or_too_large_is_refused_at_once() {
    let (sandbox, flow) = sandbox_with_flow();
    let prices = sandbox.dir.path().join("prices.json");
    let with_prices = |args: &[&str]| {
        let mut command = sandbox.command(args, None);
        command
            .env("WEFT_PRICES", &prices)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        wait_within(command.spawn().expect("spawn weft"), LIMIT, &args.join(" "))
    };
    let db = sandbox.db_arg();
    for hostile in HOSTILE {
        hostile.make(&prices);
        for args in [
            vec!["runs", "--db", &db],
            vec!["test", &flow, "--offline", "--db", &db],
        ] {
            let ran = with_prices(&args);
            let what = format!("WEFT_PRICES {hostile:?}, weft {}", args[0]);
            assert_refused(&ran, &prices, hostile.says(), &what);
            assert!(
                ran.stderr.contains("(set by WEFT_PRICES)"),
                "{what}: {}",
                ran.stderr
            );
        }
    }
}

#[test]
fn empty_tests_files_and_datasets_are_refused_not_passed_as_no_cases() {
    let (sandbox, flow) = sandbox_with_flow();
    let tests = sandbox.dir.path().join("f.tests.json");
    let test = || {
        sandbox.run_within(
            &["test", &flow, "--offline", "--db", &sandbox.db_arg()],
            None,
            LIMIT,
        )
    };
    for (text, says) in [
        ("[]", "a tests file is a JSON object"),
        ("[[{\"name\": \"a\"}]]", "a tests file is a JSON object"),
        ("{}", "no cases"),
        ("{\"cases\": []}", "no cases"),
        ("{\"cases\": [], \"datasets\": []}", "no cases"),
    ] {
        std::fs::write(&tests, text).expect("tests");
        assert_refused(&test(), &tests, says, text);
    }
    let rows: PathBuf = sandbox.dir.path().join("rows.jsonl");
    std::fs::write(&tests, r#"{"datasets": [{"file": "rows.jsonl"}]}"#).expect("tests");
    for text in ["", "\n\n  \n"] {
        std::fs::write(&rows, text).expect("rows");
        assert_refused(
            &test(),
            &rows,
            "the dataset has no rows",
            &format!("{text:?}"),
        );
    }
    let rows = sandbox.dir.path().join("rows.csv");
    std::fs::write(&tests, r#"{"datasets": [{"file": "rows.csv"}]}"#).expect("tests");
    std::fs::write(&rows, "name,input\n").expect("rows");
    assert_refused(&test(), &rows, "the dataset has no rows", "a header only");
    // One row is a case, and it passes.
    std::fs::write(&rows, "name,input\none,x\n").expect("rows");
    let ran = test();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("1 passed"), "{ran:?}");
}
