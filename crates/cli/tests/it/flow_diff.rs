//! `weft flow-diff` (SPEC §17): two flow files, or the flows two stored runs ran, compared node
//! by node and field by field, with exit 0 for the same flow, 1 when they differ and 2 for what
//! cannot be read; and `weft diff` of two runs saying first that their flows differ, and how.

use serde_json::{Value, json};

use crate::common::{Sandbox, edge, node};

pub(crate) fn shout(template: &str, extra_node: bool) -> Value {
    let mut nodes = vec![
        node("start", "start", json!({ "initialInput": "hi" })),
        node(
            "shout",
            "template",
            json!({ "label": "Shout", "template": template }),
        ),
    ];
    let mut edges = vec![edge("e1", "start", "shout", None)];
    if extra_node {
        nodes.push(node("out", "output", json!({})));
        edges.push(edge("e2", "shout", "out", None));
    }
    json!({ "version": 1, "name": "Shout", "nodes": nodes, "edges": edges })
}

#[test]
fn two_flow_files_differ_by_node_field_and_edge() {
    let sandbox = Sandbox::new();
    let a = sandbox.flow("a.json", &shout("{{ PREVIOUS_OUTPUT }}!\nLoudly.", false));
    let b = sandbox.flow("b.json", &shout("{{ PREVIOUS_OUTPUT }}!!\nLoudly.", true));

    let ran = sandbox.run(&["flow-diff", &a, &b]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    for line in [
        "+ node out (output)",
        "~ node shout (template) “Shout”",
        "    template:",
        "      - {{ PREVIOUS_OUTPUT }}!",
        "      + {{ PREVIOUS_OUTPUT }}!!",
        "+ edge shout → out",
    ] {
        assert!(ran.stdout.contains(line), "{line:?} in:\n{}", ran.stdout);
    }
    assert!(
        !ran.stdout.contains("Loudly"),
        "unchanged lines are not listed: {}",
        ran.stdout
    );

    let ran = sandbox.run(&["flow-diff", &a, &b, "--json"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(shown["equal"], false);
    let changed = &shown["changes"]["nodesChanged"][0];
    assert_eq!(changed["node"]["id"], "shout");
    assert_eq!(changed["fields"][0]["field"], "template");
    assert_eq!(changed["fields"][0]["a"], "{{ PREVIOUS_OUTPUT }}!\nLoudly.");
    assert_eq!(shown["changes"]["edgesAdded"][0]["target"], "out");

    let ran = sandbox.run(&["flow-diff", &a, &a]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("the same flow"), "{ran:?}");

    let db = sandbox.db_arg();
    let ran = sandbox.run(&["flow-diff", &a, "no-such-thing", "--db", &db]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr
            .contains("no-such-thing: neither a flow file, a flow version nor a run in the store"),
        "{ran:?}"
    );
}

#[test]
fn two_runs_of_different_versions_name_the_flow_changes_above_the_outputs() {
    let sandbox = Sandbox::new();
    let db = sandbox.db_arg();
    let path = sandbox.flow("shout.json", &shout("{{ PREVIOUS_OUTPUT }}!", false));
    let first = sandbox.run(&["run", &path, "--db", &db, "--events"]);
    assert_eq!(first.code, Some(0), "{first:?}");
    sandbox.flow("shout.json", &shout("{{ PREVIOUS_OUTPUT }}?", false));
    let second = sandbox.run(&["run", &path, "--db", &db, "--events"]);
    assert_eq!(second.code, Some(0), "{second:?}");
    let id = |ran: &crate::common::Ran| -> String {
        let first: Value =
            serde_json::from_str(ran.stdout.lines().next().expect("an event")).expect("JSON");
        first["runId"].as_str().expect("id").to_string()
    };
    let (a, b) = (id(&first), id(&second));

    let ran = sandbox.run(&["diff", &a, &b, "--db", &db]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let flow_at = ran
        .stdout
        .find("ran different versions of the flow")
        .unwrap_or_else(|| panic!("{}", ran.stdout));
    let field_at = ran
        .stdout
        .find("template: \"{{ PREVIOUS_OUTPUT }}!\" → \"{{ PREVIOUS_OUTPUT }}?\"")
        .unwrap_or_else(|| panic!("{}", ran.stdout));
    let outputs_at = ran.stdout.find("outputs differ").expect("the verdict");
    assert!(
        flow_at < field_at && field_at < outputs_at,
        "{}",
        ran.stdout
    );

    // The flows of the two runs, by run id.
    let ran = sandbox.run(&["flow-diff", &a[..8], &b, "--db", &db, "--json"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(
        shown["changes"]["nodesChanged"][0]["fields"][0]["b"],
        "{{ PREVIOUS_OUTPUT }}?"
    );

    // Two runs of the same flow say nothing of it.
    let third = sandbox.run(&["run", &path, "--db", &db, "--events"]);
    let ran = sandbox.run(&["diff", &b, &id(&third), "--db", &db]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(!ran.stdout.contains("different versions"), "{}", ran.stdout);
}
