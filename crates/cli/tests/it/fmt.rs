//! `weft fmt` (SPEC §17, canonical files): a flow written by hand is rewritten in the one form
//! the app saves, `--check` lists what is not in it without writing, a file that is not a flow
//! is named and left alone, and every example flow is canonical already.

use std::path::Path;

use crate::common::Sandbox;

/// A flow as a person might write it: keys out of order, 4-space indent, a fractional position,
/// no newline at the end; and an unknown field, which must survive.
const HANDWRITTEN: &str = r#"{
    "nodes": [
        {"type": "start", "id": "start", "position": {"y": 10.4, "x": 0}, "data": {"initialInput": "hi"}},
        {"data": {"template": "{{ PREVIOUS_OUTPUT }}!", "label": "Shout"}, "id": "shout", "type": "template", "position": {"x": 240.6, "y": 10}}
    ],
    "version": 1,
    "name": "Shout",
    "x-owner": "ada",
    "edges": [{"target": "shout", "source": "start", "id": "e1"}]
}"#;

#[test]
fn rewrites_a_handwritten_flow_in_canonical_form_and_check_lists_what_is_not() {
    let sandbox = Sandbox::new();
    let path = sandbox.dir.path().join("shout.json");
    std::fs::write(&path, HANDWRITTEN).expect("flow");
    let file = path.display().to_string();

    let ran = sandbox.run(&["fmt", "--check", &file]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stdout.contains("shout.json: not in canonical form"),
        "{ran:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        HANDWRITTEN,
        "--check writes nothing"
    );

    let ran = sandbox.run(&["fmt", &file]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("formatted"), "{ran:?}");
    let written = std::fs::read_to_string(&path).expect("read");
    assert!(written.ends_with("}\n"), "{written}");
    assert!(
        written.contains("\n  \"nodes\": ["),
        "2-space indent: {written}"
    );
    assert!(
        written.contains("\"x\": 241"),
        "positions are whole: {written}"
    );
    assert!(
        written.contains("\"x-owner\": \"ada\""),
        "unknown fields are kept: {written}"
    );
    let before: serde_json::Value = serde_json::from_str(HANDWRITTEN).expect("json");
    let after: serde_json::Value = serde_json::from_str(&written).expect("json");
    assert_eq!(after["nodes"][1]["data"], before["nodes"][1]["data"]);
    assert_eq!(after["edges"][0]["target"], "shout");
    // Nothing left beside it.
    let names: Vec<String> = std::fs::read_dir(sandbox.dir.path())
        .expect("dir")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    assert_eq!(names, ["shout.json"], "{names:?}");

    // Canonical now: checking passes, formatting again changes no byte.
    let ran = sandbox.run(&["fmt", "--check", &file]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let ran = sandbox.run(&["fmt", &file]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "", "{ran:?}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), written);

    // A tests file beside it is passed over (a shell's `*.json` names it too).
    let tests = sandbox.dir.path().join("shout.tests.json");
    std::fs::write(&tests, "{\"cases\": []}").expect("tests");
    let ran = sandbox.run(&["fmt", &tests.display().to_string(), &file]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(&tests).expect("read"),
        "{\"cases\": []}"
    );
    std::fs::remove_file(&tests).expect("remove");

    // Not a flow: named, exit 2, left as it was; the other files are still done.
    let broken = sandbox.dir.path().join("broken.json");
    std::fs::write(&broken, "{\"nodes\": 3").expect("broken");
    let other = sandbox.dir.path().join("package.json");
    std::fs::write(&other, "{\"name\": \"not a flow\"}").expect("other");
    std::fs::write(&path, HANDWRITTEN).expect("flow");
    let ran = sandbox.run(&[
        "fmt",
        &broken.display().to_string(),
        &other.display().to_string(),
        &file,
    ]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("broken.json"), "{ran:?}");
    assert!(
        ran.stderr
            .contains("package.json: not a flow file (it has no `nodes` list)"),
        "{ran:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&broken).expect("read"),
        "{\"nodes\": 3"
    );
    assert_eq!(
        std::fs::read_to_string(&other).expect("read"),
        "{\"name\": \"not a flow\"}"
    );
    assert_eq!(std::fs::read_to_string(&path).expect("read"), written);
}

/// A flow kept elsewhere and linked into a project is formatted where it is, the link kept; a
/// read-only flow is named and left as it was.
#[cfg(unix)]
#[test]
fn a_linked_flow_is_formatted_through_its_link_and_a_read_only_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let shared = sandbox.dir.path().join("shared");
    std::fs::create_dir(&shared).expect("folder");
    let real = shared.join("shout.json");
    std::fs::write(&real, HANDWRITTEN).expect("flow");
    let link = sandbox.dir.path().join("shout.json");
    std::os::unix::fs::symlink("shared/shout.json", &link).expect("symlink");
    let ran = sandbox.run(&["fmt", &link.display().to_string()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("stat")
            .file_type()
            .is_symlink(),
        "the link is still a link"
    );
    let written = std::fs::read_to_string(&real).expect("read");
    assert!(written.contains("\n  \"nodes\": ["), "{written}");

    let locked = sandbox.dir.path().join("locked.json");
    std::fs::write(&locked, HANDWRITTEN).expect("flow");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).expect("mode");
    let ran = sandbox.run(&["fmt", &locked.display().to_string()]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("locked.json") && ran.stderr.contains("read-only"),
        "{ran:?}"
    );
    assert_eq!(std::fs::read_to_string(&locked).expect("read"), HANDWRITTEN);
}

#[test]
fn every_example_flow_is_in_canonical_form() {
    let flows = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
    // The examples and the subflows they run.
    let mut files: Vec<String> = std::fs::read_dir(&flows)
        .expect("flows")
        .chain(std::fs::read_dir(flows.join("parts")).expect("flows/parts"))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            (name.ends_with(".json")
                && !name.ends_with(".tests.json")
                && !name.ends_with(".pins.json"))
            .then(|| path.display().to_string())
        })
        .collect();
    files.sort();
    assert!(files.len() > 10, "{files:?}");
    let mut args = vec!["fmt", "--check"];
    args.extend(files.iter().map(String::as_str));
    let ran = Sandbox::new().run(&args);
    assert_eq!(ran.code, Some(0), "run `weft fmt flows/*.json`: {ran:?}");
}
