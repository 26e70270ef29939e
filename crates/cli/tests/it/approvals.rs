//! Approvals people can trust from the command line (SPEC §16): an approval of two of a group
//! decided with `weft resume` (refused for whoever started the run and for people not in the
//! group, exit 2, nothing changed), shown with who is still needed, and every decision listed and
//! verified by `weft audit`, which names a decision altered or removed in the store.

use serde_json::{Value, json};

use crate::common::{Ran, Sandbox, approval_flow, paused_run_id};

const PEOPLE: &str = "\
# name  email              groups
ada     ada@example.com    finance
grace   grace@example.com  finance
bob     bob@example.com    finance
eve     -                  ops
";

/// The approval flow with `review` needing two of finance, not whoever started the run.
fn two_of_finance() -> Value {
    let mut flow = approval_flow();
    let review = flow["nodes"]
        .as_array_mut()
        .and_then(|nodes| nodes.iter_mut().find(|node| node["id"] == "review"))
        .expect("review");
    review["data"]["approvers"] = json!(["group:finance"]);
    review["data"]["required"] = json!(2);
    review["data"]["allowSelf"] = json!(false);
    flow
}

fn weft(sandbox: &Sandbox, people: &str, user: &str, args: &[&str]) -> Ran {
    let mut command = sandbox.command(args, None);
    command
        .env("WEFT_PEOPLE_FILE", people)
        .env("WEFT_USER", user);
    command.output().expect("weft runs").into()
}

#[test]
fn two_of_a_group_decide_with_weft_resume_and_weft_audit_lists_and_verifies_it() {
    let sandbox = Sandbox::new();
    let people = sandbox.dir.path().join("people.txt");
    std::fs::write(&people, PEOPLE).expect("people");
    let people = people.display().to_string();
    let flow = sandbox.flow("pay.json", &two_of_finance());
    let db = sandbox.db_arg();

    let ran = weft(&sandbox, &people, "ada", &["run", &flow, "--db", &db]);
    let id = paused_run_id(&ran);
    assert!(
        ran.stderr.contains("needs 2 approvals from group:finance"),
        "{ran:?}"
    );

    // Whoever started it, and people outside finance, are refused; nothing changes.
    let resume = |by: &str, answer: &str| {
        weft(
            &sandbox,
            &people,
            "nobody",
            &["resume", &id, "--decision", answer, "--by", by, "--db", &db],
        )
    };
    let ran = resume("ada", "approve");
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("ada started run"), "{ran:?}");
    assert!(ran.stderr.contains("allowSelf: false"), "{ran:?}");
    let ran = resume("eve", "reject");
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("eve may not decide `review`"),
        "{ran:?}"
    );
    let ran = resume("mallory", "approve");
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("mallory is not in"), "{ran:?}");

    // grace's approval is kept; the run still waits (exit 3) and says for whom.
    let ran = resume("grace", "approve");
    assert_eq!(ran.code, Some(3), "{ran:?}");
    assert!(
        ran.stderr.contains("approved by grace (1 of 2 needed)"),
        "{ran:?}"
    );
    assert!(
        ran.stderr.contains("still needed: 1 more, from bob"),
        "{ran:?}"
    );
    let shown = weft(&sandbox, &people, "ada", &["show", &id, "--db", &db]);
    assert!(shown.stdout.contains("status"), "{shown:?}");
    assert!(
        shown
            .stdout
            .contains("1 of 2 (approved by grace); still needed: 1 more, from bob"),
        "{shown:?}"
    );

    // bob's makes two: the run goes on.
    let ran = resume("bob", "approve");
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "APPROVED Draft: the plan\n");

    // The audit lists both, with who and how, and the chain is intact.
    let listed = weft(&sandbox, &people, "ada", &["audit", "--db", &db]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(
        lines[0].starts_with("#1 ") && lines[0].contains("approve by grace (cli)"),
        "{listed:?}"
    );
    assert!(
        lines[1].starts_with("#2 ") && lines[1].contains("approve by bob (cli)"),
        "{listed:?}"
    );
    let exported = weft(
        &sandbox,
        &people,
        "ada",
        &["audit", "--run", &id[..8], "--json", "--db", &db],
    );
    let exported: Value = serde_json::from_str(&exported.stdout).expect("JSON");
    assert_eq!(exported.as_array().map(Vec::len), Some(2));
    assert_eq!(exported[1]["prevHash"], exported[0]["hash"]);
    let verify = || {
        weft(
            &sandbox,
            &people,
            "ada",
            &["audit", "--verify", "--db", &db],
        )
    };
    let ran = verify();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("2 decisions"), "{ran:?}");
    assert!(ran.stdout.contains("the chain is intact"), "{ran:?}");

    // Edited in the store, a decision is named; put back, the chain is whole again.
    let store = rusqlite::Connection::open(sandbox.db()).expect("the store");
    store
        .execute(
            "UPDATE decisions SET decided_by = 'mallory' WHERE seq = 1",
            [],
        )
        .expect("edited");
    let ran = verify();
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stdout.contains("decision #1 (run "), "{ran:?}");
    assert!(ran.stdout.contains("was altered"), "{ran:?}");
    store
        .execute(
            "UPDATE decisions SET decided_by = 'grace' WHERE seq = 1",
            [],
        )
        .expect("put back");
    assert_eq!(verify().code, Some(0));
    store
        .execute("DELETE FROM decisions WHERE seq = 2", [])
        .expect("deleted");
    let ran = verify();
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stdout.contains("decision #2 was removed"), "{ran:?}");
}

#[test]
fn a_people_file_that_does_not_parse_is_refused_naming_the_line() {
    let sandbox = Sandbox::new();
    let people = sandbox.dir.path().join("people.txt");
    std::fs::write(&people, "ada ada@example.com finance\ngrace finance\n").expect("people");
    let flow = sandbox.flow("pay.json", &two_of_finance());
    let ran = weft(
        &sandbox,
        &people.display().to_string(),
        "ada",
        &["run", &flow, "--db", &sandbox.db_arg()],
    );
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr
            .contains("people.txt line 2: `finance` is not an email address"),
        "{ran:?}"
    );
}

#[test]
fn an_answer_given_in_advance_is_kept_in_the_audit_as_it_is_applied() {
    let sandbox = Sandbox::new();
    let people = sandbox.dir.path().join("people.txt");
    std::fs::write(&people, PEOPLE).expect("people");
    let people = people.display().to_string();
    let flow = sandbox.flow("review.json", &approval_flow());
    let db = sandbox.db_arg();
    let ran = weft(
        &sandbox,
        &people,
        "grace",
        &[
            "run",
            &flow,
            "--db",
            &db,
            "--decide",
            "review=approve:ship it",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "APPROVED Draft: the plan (ship it)\n");

    let runs = weft(&sandbox, &people, "grace", &["runs", "--db", &db, "--json"]);
    let runs: Value = serde_json::from_str(&runs.stdout).expect("runs");
    let id = runs[0]["id"].as_str().expect("id").to_string();
    let audit = weft(
        &sandbox,
        &people,
        "grace",
        &["audit", "--run", &id, "--json", "--db", &db],
    );
    let audit: Value = serde_json::from_str(&audit.stdout).expect("audit");
    let kept: Vec<(&str, &str, &str, &str, &str)> = audit
        .as_array()
        .expect("decisions")
        .iter()
        .map(|decision| {
            (
                decision["nodeId"].as_str().unwrap_or_default(),
                decision["decision"].as_str().unwrap_or_default(),
                decision["by"].as_str().unwrap_or_default(),
                decision["channel"].as_str().unwrap_or_default(),
                decision["note"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(kept, [("review", "approve", "grace", "cli", "ship it")]);
    // Numbered by the event that applied it.
    let shown = weft(
        &sandbox,
        &people,
        "grace",
        &["show", &id, "--json", "--db", &db],
    );
    let shown: Value = serde_json::from_str(&shown.stdout).expect("show");
    let applied = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|event| event["type"] == "input_received")
        .expect("applied");
    assert_eq!(audit[0]["pause"], applied["seq"]);
    let verified = weft(
        &sandbox,
        &people,
        "grace",
        &["audit", "--verify", "--db", &db],
    );
    assert_eq!(verified.code, Some(0), "{verified:?}");
}
