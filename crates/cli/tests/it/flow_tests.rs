//! `weft test` (docs/testing.md) through the real executable: every assertion kind passing and
//! failing,
//! judges (an LLM rubric through the scripted server, a judge flow), datasets, repetitions with a
//! pass rate, recording then running offline (the scripted server sees no request), a recording
//! gone stale after a prompt edit, JUnit XML, and tests files that cannot be used (exit 2,
//! naming the file and line).

use crate::common;

use std::path::Path;

use common::{Ran, Sandbox, edge, node};
use serde_json::{Value, json};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm};

/// start → facts (JSON) → size (if amount > 100) → big / small (text).
fn facts_flow() -> Value {
    json!({
        "version": 1,
        "name": "Facts",
        "nodes": [
            node("start", "start", json!({ "initialInput": { "amount": 120, "name": "Ada" } })),
            node("facts", "template", json!({
                "template": "{\"amount\": {{ amount }}, \"label\": \"refund\", \"tags\": [\"late\", \"lost\"]}",
                "parseJson": true
            })),
            node("size", "if", json!({ "conditions": [{ "field": "amount", "operator": "gt", "value": "100" }] })),
            node("big", "template", json!({ "template": "Big refund of {{ amount }} for {{ nodes.start.name }}" })),
            node("small", "template", json!({ "template": "Small refund" })),
        ],
        "edges": [
            edge("e1", "start", "facts", None),
            edge("e2", "facts", "size", None),
            edge("e3", "size", "big", Some("condition-0")),
            edge("e4", "size", "small", Some("false")),
        ]
    })
}

fn write(dir: &Path, name: &str, value: &Value) {
    std::fs::write(
        dir.join(name),
        serde_json::to_string_pretty(value).expect("json"),
    )
    .expect("write");
}

fn json_of(ran: &Ran) -> Value {
    serde_json::from_str(&ran.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {ran:?}"))
}

/// The assertion outcomes of case `case` (its first run), by what they say.
fn outcomes(report: &Value, case: &str) -> Vec<Value> {
    let cases = report["suites"][0]["cases"].as_array().expect("cases");
    let case = cases
        .iter()
        .find(|candidate| candidate["name"] == case)
        .unwrap_or_else(|| panic!("no case {case} in {report}"));
    case["runs"][0]["assertions"]
        .as_array()
        .expect("assertions")
        .clone()
}

#[test]
fn every_assertion_kind_passes_and_fails_saying_what_was_expected_and_what_came() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("facts.json", &facts_flow());
    let checks = |pass: bool| -> Vec<Value> {
        // Each pair: an assertion that holds for the run, and one that does not.
        let pairs = [
            (
                json!({ "status": "completed" }),
                json!({ "status": "failed" }),
            ),
            (
                json!({ "node": "facts", "path": "label", "equals": "refund" }),
                json!({ "node": "facts", "path": "label", "equals": "bug" }),
            ),
            (
                json!({ "contains": "for Ada" }),
                json!({ "contains": "for Bob" }),
            ),
            (
                json!({ "node": "facts", "path": "tags", "contains": "lost" }),
                json!({ "node": "facts", "path": "tags", "contains": "found" }),
            ),
            (
                json!({ "node": "facts", "contains": { "label": "refund" } }),
                json!({ "node": "facts", "contains": { "label": "bug" } }),
            ),
            (
                json!({ "regex": "^Big refund of \\d+" }),
                json!({ "regex": "^Small" }),
            ),
            (
                json!({ "node": "facts", "jsonSchema": { "type": "object", "required": ["amount", "label"] } }),
                json!({ "node": "facts", "jsonSchema": { "type": "object", "required": ["reason"] } }),
            ),
            (
                json!({ "node": "facts", "path": "amount", "gt": 100 }),
                json!({ "node": "facts", "path": "amount", "gt": 200 }),
            ),
            (
                json!({ "node": "facts", "path": "amount", "lt": 200 }),
                json!({ "node": "facts", "path": "amount", "lt": 100 }),
            ),
            (
                json!({ "node": "small", "skipped": true }),
                json!({ "node": "big", "skipped": true }),
            ),
            (
                json!({ "maxTokens": 10 }),
                json!({ "node": "facts", "path": "nope", "equals": 1 }),
            ),
            (
                json!({ "maxCost": 0.01 }),
                json!({ "node": "small", "equals": "Small refund" }),
            ),
            (
                json!({ "maxDurationMs": 60000 }),
                json!({ "maxDurationMs": 0, "node": "small" }),
            ),
        ];
        pairs
            .into_iter()
            .map(|(good, bad)| if pass { good } else { bad })
            .collect()
    };
    write(
        sandbox.dir.path(),
        "facts.tests.json",
        &json!({
            "cases": [
                { "name": "holds", "expect": checks(true) },
                { "name": "does not hold", "expect": checks(false) },
            ]
        }),
    );
    let ran = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg(), "--json"]);
    assert_eq!(ran.code, Some(1), "one case fails: {ran:?}");
    let report = json_of(&ran);
    assert_eq!(
        (report["passed"].clone(), report["failed"].clone()),
        (json!(1), json!(1))
    );
    let held = outcomes(&report, "holds");
    assert_eq!(held.len(), 13);
    for outcome in &held {
        assert_eq!(outcome["passed"], true, "{outcome}");
    }
    let failed = outcomes(&report, "does not hold");
    for outcome in &failed {
        assert_eq!(outcome["passed"], false, "{outcome}");
    }
    let said = |index: usize| {
        format!(
            "{} | expected {} | got {}",
            failed[index]["assertion"].as_str().unwrap_or_default(),
            failed[index]["expected"].as_str().unwrap_or_default(),
            failed[index]["actual"].as_str().unwrap_or_default()
        )
    };
    assert_eq!(
        said(0),
        "status is failed | expected failed | got completed"
    );
    assert_eq!(
        said(1),
        "facts.label equals \"bug\" | expected \"bug\" | got \"refund\""
    );
    assert_eq!(
        said(2),
        "result contains \"for Bob\" | expected something containing \"for Bob\" | got \"Big refund of 120 for Ada\""
    );
    assert!(said(3).ends_with("got [\"late\",\"lost\"]"), "{}", said(3));
    assert!(
        said(4).contains("expected something containing {\"label\":\"bug\"}"),
        "{}",
        said(4)
    );
    assert!(
        said(5).contains("expected a match of /^Small/"),
        "{}",
        said(5)
    );
    assert!(
        said(6).contains("\"reason\" is a required property"),
        "{}",
        said(6)
    );
    assert_eq!(
        said(7),
        "facts.amount > 200 | expected more than 200 | got 120"
    );
    assert_eq!(
        said(8),
        "facts.amount < 100 | expected less than 100 | got 120"
    );
    assert_eq!(said(9), "big is skipped | expected skipped | got ran");
    assert!(said(10).contains("got no `nope` in {"), "{}", said(10));
    assert_eq!(
        said(11),
        "small equals \"Small refund\" | expected \"Small refund\" | got `small` did not run"
    );
    assert!(
        said(12).starts_with("small takes at most 0 ms"),
        "{}",
        said(12)
    );

    // The text summary names the failing case, its line, and each failing assertion.
    let text = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg()]);
    assert_eq!(text.code, Some(1));
    assert!(
        text.stdout.contains("✗ does not hold  facts.tests.json:"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("facts.amount > 200: expected more than 200, got 120"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.ends_with("1 passed, 1 failed\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stderr.contains("✓ facts.json: holds"),
        "{}",
        text.stderr
    );

    // One case alone.
    let one = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg(), "--case", "holds"]);
    assert_eq!(one.code, Some(0), "{one:?}");
    let none = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg(), "--case", "nope"]);
    assert_eq!(none.code, Some(2), "{none:?}");
    assert!(
        none.stderr.contains("no case is named \"nope\""),
        "{}",
        none.stderr
    );
}

/// Answers the rubric judge by its criteria, and the flow's agent with a fixed reply.
fn judging_script() -> Script {
    Script::default()
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("Criteria:\nThe reply is polite".into()),
                ..Match::default()
            },
            Reply::text(r#"{"pass": true, "reason": "it thanks the customer"}"#),
        ))
        .with_rule(Rule::on(
            Match {
                last_user_contains: Some("Criteria:\nThe reply names a price".into()),
                ..Match::default()
            },
            Reply::text(r#"{"pass": false, "reason": "no price is named"}"#),
        ))
        .with_fallback(Reply::text("Thank you for writing, we will help."))
}

fn reply_flow() -> Value {
    json!({
        "version": 1,
        "name": "Reply",
        "nodes": [
            node("start", "start", json!({ "initialInput": "Where is my parcel?" })),
            node("reply", "agent", json!({ "model": "gpt-4o-mini", "userPrompt": "Answer: {{ PREVIOUS_OUTPUT }}" })),
        ],
        "edges": [edge("e1", "start", "reply", None)]
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn judges_an_llm_rubric_through_the_provider_and_a_judge_flow() {
    let llm = ScriptedLlm::start(judging_script()).await.expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("reply.json", &reply_flow());
    // A judge flow: passes when the output says what `expected` says.
    sandbox.flow(
        "same.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("verdict", "template", json!({
                    "template": "{\"pass\": {{ (expected in output) | tojson }}, \"reason\": \"looked for {{ expected }}\"}",
                    "parseJson": true
                })),
            ],
            "edges": [edge("e1", "start", "verdict", None)]
        }),
    );
    write(
        sandbox.dir.path(),
        "reply.tests.json",
        &json!({
            "judgeModel": "gpt-4o-mini",
            "cases": [{
                "name": "judged",
                "expected": "we will help",
                "expect": [
                    { "node": "reply", "rubric": "The reply is polite." },
                    { "node": "reply", "rubric": "The reply names a price." },
                    { "judge": "same.json" },
                    { "judge": "same.json", "expected": "a refund" }
                ]
            }]
        }),
    );
    let ran = sandbox
        .run_with(&["test", &flow, "--db", &sandbox.db_arg(), "--json"], &llm)
        .await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let said: Vec<(bool, String)> = outcomes(&json_of(&ran), "judged")
        .iter()
        .map(|outcome| {
            (
                outcome["passed"].as_bool().expect("passed"),
                outcome["actual"].as_str().expect("actual").to_string(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            (true, "pass (it thanks the customer)".to_string()),
            (false, "fail (no price is named)".to_string()),
            (true, "pass (looked for we will help)".to_string()),
            (false, "fail (looked for a refund)".to_string()),
        ]
    );
    // The rubric judge saw the input and the output it judged.
    let judged: Vec<String> = llm
        .requests()
        .iter()
        .filter_map(|request| request.last_user_text())
        .filter(|text| text.starts_with("Criteria:"))
        .collect();
    assert_eq!(judged.len(), 2);
    assert!(
        judged[0].contains("Input given to the flow:\nWhere is my parcel?"),
        "{}",
        judged[0]
    );
    assert!(
        judged[0].contains("Output to judge:\nThank you for writing, we will help."),
        "{}",
        judged[0]
    );
    assert!(
        judged[0].contains("Expected output (for comparison):\nwe will help"),
        "{}",
        judged[0]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rubric_judge_whose_model_is_down_falls_back_to_the_next_model() {
    // The judges' model is down; the rule answering it comes before those that judge.
    let mut script = judging_script();
    script.rules.insert(
        0,
        Rule::on(
            Match {
                model: Some("judge-down".into()),
                ..Match::default()
            },
            Reply::Status {
                status: 503,
                body: json!({"error": {"message": "overloaded"}}),
                headers: Vec::new(),
            },
        ),
    );
    let llm = ScriptedLlm::start(script).await.expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("reply.json", &reply_flow());
    write(
        sandbox.dir.path(),
        "reply.tests.json",
        &json!({
            "judgeModel": "judge-down",
            "judgeFallbackModels": ["gpt-4o-mini"],
            "cases": [{
                "name": "judged",
                "expect": [
                    { "node": "reply", "rubric": "The reply is polite." },
                    { "node": "reply", "rubric": "The reply names a price.", "model": "judge-down", "fallbackModels": ["judge-down", "gpt-4o-mini"] }
                ]
            }]
        }),
    );
    let ran = sandbox
        .run_with(&["test", &flow, "--db", &sandbox.db_arg(), "--json"], &llm)
        .await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let said: Vec<String> = outcomes(&json_of(&ran), "judged")
        .iter()
        .map(|outcome| outcome["actual"].as_str().expect("actual").to_string())
        .collect();
    assert_eq!(
        said,
        ["pass (it thanks the customer)", "fail (no price is named)"]
    );
    let asked: Vec<String> = llm
        .requests()
        .iter()
        .filter(|request| {
            request
                .last_user_text()
                .is_some_and(|text| text.starts_with("Criteria:"))
        })
        .filter_map(|request| request.body["model"].as_str().map(str::to_string))
        .collect();
    assert!(asked.contains(&"judge-down".to_string()), "{asked:?}");
    assert_eq!(
        asked.iter().filter(|model| *model == "gpt-4o-mini").count(),
        2,
        "each judge was answered by its fallback: {asked:?}"
    );

    // Fallbacks without a rubric judge nothing: the tests file is refused, naming them.
    write(
        sandbox.dir.path(),
        "reply.tests.json",
        &json!({"cases": [{"name": "bare", "expect": [{ "contains": "help", "fallbackModels": ["gpt-4o-mini"] }]}]}),
    );
    let ran = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg()]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr
            .contains("fallbackModels are the models of a rubric judge")
            || ran
                .stdout
                .contains("fallbackModels are the models of a rubric judge"),
        "{ran:?}"
    );
}

#[test]
fn datasets_in_jsonl_and_csv_become_cases_with_their_expected_values() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow(
        "echo.json",
        &json!({
            "version": 1,
            "nodes": [
                node("start", "start", json!({})),
                node("say", "template", json!({ "template": "Hello {{ PREVIOUS_OUTPUT }}" })),
            ],
            "edges": [edge("e1", "start", "say", None)]
        }),
    );
    std::fs::write(
        sandbox.dir.path().join("names.jsonl"),
        "{\"name\": \"ada\", \"input\": \"Ada\", \"expected\": \"Hello Ada\"}\n\n{\"input\": \"Bob\", \"expected\": \"Hello Robert\"}\n",
    )
    .expect("jsonl");
    std::fs::write(
        sandbox.dir.path().join("more.csv"),
        "name,input,expected\ncy,Cy,Hello Cy\n,\"Dee, Esq.\",\"Hello Dee, Esq.\"\n",
    )
    .expect("csv");
    write(
        sandbox.dir.path(),
        "echo.tests.json",
        &json!({
            "datasets": [
                { "file": "names.jsonl", "expect": [{ "equals": "$expected" }] },
                { "file": "more.csv", "expect": [{ "equals": "$expected" }, { "contains": "Hello" }] }
            ]
        }),
    );
    let ran = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg(), "--json"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let report = json_of(&ran);
    let cases: Vec<(String, String, bool)> = report["suites"][0]["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|case| {
            (
                case["name"].as_str().expect("name").to_string(),
                case["origin"].as_str().expect("origin").to_string(),
                case["passed"].as_bool().expect("passed"),
            )
        })
        .collect();
    assert_eq!(
        cases,
        [
            ("ada".to_string(), "names.jsonl:1".to_string(), true),
            ("names #3".to_string(), "names.jsonl:3".to_string(), false),
            ("cy".to_string(), "more.csv:2".to_string(), true),
            ("more #3".to_string(), "more.csv:3".to_string(), true),
        ]
    );
    assert_eq!(
        outcomes(&report, "names #3")[0]["actual"],
        "\"Hello Bob\"",
        "the row's expected value was compared"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_case_passes_when_enough_of_its_runs_do() {
    // The first two answers are wrong, the rest right: 3 of 5 runs pass.
    let script = Script::default()
        .with_rule(Rule::always(Reply::text("wrong")).limit(2))
        .with_fallback(Reply::text("right"));
    let llm = ScriptedLlm::start(script).await.expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("reply.json", &reply_flow());
    write(
        sandbox.dir.path(),
        "reply.tests.json",
        &json!({ "cases": [{ "name": "flaky", "repeat": 5, "passRate": 0.6, "expect": [{ "equals": "right" }] }] }),
    );
    let ran = sandbox
        .run_with(&["test", &flow, "--db", &sandbox.db_arg()], &llm)
        .await;
    assert_eq!(ran.code, Some(0), "3 of 5 is 60%: {ran:?}");
    assert!(ran.stderr.contains("3/5 runs passed"), "{}", ran.stderr);
    assert_eq!(llm.request_count(), 5);

    llm.clear_requests();
    llm.push_rule(Rule::always(Reply::text("wrong")).limit(2));
    let strict = sandbox
        .run_with(
            &[
                "test",
                &flow,
                "--db",
                &sandbox.db_arg(),
                "--pass-rate",
                "0.8",
            ],
            &llm,
        )
        .await;
    assert_eq!(strict.code, Some(1), "{strict:?}");
    assert!(
        strict.stdout.contains("3 of 5 runs passed; 80% had to"),
        "{}",
        strict.stdout
    );
    assert!(
        strict
            .stdout
            .contains("run 1: result equals \"right\": expected \"right\", got \"wrong\""),
        "{}",
        strict.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn recorded_cases_run_offline_and_a_stale_recording_names_its_node() {
    let llm = ScriptedLlm::start(judging_script()).await.expect("server");
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("reply.json", &reply_flow());
    write(
        sandbox.dir.path(),
        "reply.tests.json",
        &json!({
            "judgeModel": "gpt-4o-mini",
            "cases": [{
                "name": "Polite reply",
                "expect": [
                    { "contains": "we will help" },
                    { "rubric": "The reply is polite." },
                    { "maxTokens": 1000 }
                ]
            }]
        }),
    );
    let db = sandbox.db_arg();
    // Without a recording, --offline asks nobody: the case fails at its first request.
    let offline = sandbox
        .run_with(&["test", &flow, "--db", &db, "--offline"], &llm)
        .await;
    assert_eq!(offline.code, Some(1), "{offline:?}");
    assert!(
        offline.stdout.contains("node `reply` failed: this request (visit 1, call 1) has no recorded answer: the case has no recording"),
        "{}",
        offline.stdout
    );
    assert!(
        offline.stdout.contains("--record --case 'Polite reply'"),
        "{}",
        offline.stdout
    );
    assert_eq!(llm.request_count(), 0);

    let recorded = sandbox
        .run_with(&["test", &flow, "--db", &db, "--record"], &llm)
        .await;
    assert_eq!(recorded.code, Some(0), "{recorded:?}");
    assert!(
        recorded.stderr.contains("(recorded)") || recorded.stderr.contains(", recorded)"),
        "{}",
        recorded.stderr
    );
    assert_eq!(llm.request_count(), 2, "the agent and the rubric judge");
    let recording = sandbox
        .dir
        .path()
        .join("reply.recordings/polite-reply.json");
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(&recording).expect("recording"))
            .expect("JSON");
    assert_eq!(kept["case"], "Polite reply");
    assert_eq!(kept["calls"][0]["nodeKey"], "reply");
    assert_eq!(kept["judges"]["1"][0]["nodeKey"], "verdict");
    let raw = std::fs::read_to_string(&recording).expect("recording");
    assert!(!raw.contains(common::KEY), "no key in a recording");

    // Offline from the recording: the same verdicts, no request at all (the server could be gone).
    llm.clear_requests();
    let replayed = sandbox.run_with(&["test", &flow, "--db", &db], &llm).await;
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    assert!(replayed.stderr.contains("offline"), "{}", replayed.stderr);
    assert_eq!(llm.request_count(), 0, "offline: the server saw nothing");
    let gone = sandbox.run(&["test", &flow, "--db", &db]);
    assert_eq!(
        gone.code,
        Some(0),
        "no provider configured at all: {gone:?}"
    );

    // An edited prompt no longer matches the recording: the case fails naming the node and how
    // to record again, and still asks nobody.
    let mut edited = reply_flow();
    edited["nodes"][1]["data"]["userPrompt"] = json!("Answer kindly: {{ PREVIOUS_OUTPUT }}");
    sandbox.flow("reply.json", &edited);
    let stale = sandbox.run_with(&["test", &flow, "--db", &db], &llm).await;
    assert_eq!(stale.code, Some(1), "{stale:?}");
    assert!(
        stale.stdout.contains(
            "node `reply` failed: this request (visit 1, call 1) differs from the one recorded"
        ),
        "{}",
        stale.stdout
    );
    assert!(
        stale.stdout.contains(&format!(
            "record it again: weft test {flow} --record --case 'Polite reply'"
        )),
        "{}",
        stale.stdout
    );
    assert_eq!(llm.request_count(), 0);
}

#[test]
fn junit_xml_lists_every_case_with_the_failures() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("facts.json", &facts_flow());
    write(
        sandbox.dir.path(),
        "facts.tests.json",
        &json!({ "cases": [
            { "name": "big", "expect": [{ "regex": "^Big" }] },
            { "name": "small <one>", "expect": [{ "regex": "^Small" }] }
        ] }),
    );
    let junit = sandbox.dir.path().join("out/junit.xml");
    std::fs::create_dir_all(junit.parent().expect("dir")).expect("dir");
    let ran = sandbox.run(&[
        "test",
        &flow,
        "--db",
        &sandbox.db_arg(),
        "--junit",
        &junit.display().to_string(),
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let xml = std::fs::read_to_string(&junit).expect("junit file");
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<testcase name=\"big\""), "{xml}");
    assert!(
        xml.contains("<testcase name=\"small &lt;one&gt;\""),
        "{xml}"
    );
    assert!(xml.contains("result matches /^Small/: expected a match of /^Small/, got &quot;Big refund of 120 for Ada&quot;"), "{xml}");
}

#[test]
fn tests_files_that_cannot_be_used_exit_2_naming_file_and_line() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow("facts.json", &facts_flow());
    let tests = sandbox.dir.path().join("facts.tests.json");
    let refused = |text: &str, wanted: &str| {
        std::fs::write(&tests, text).expect("write");
        let ran = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg()]);
        assert_eq!(ran.code, Some(2), "{text}: {ran:?}");
        assert!(
            ran.stderr.contains(wanted),
            "{text}: wanted {wanted:?} in {}",
            ran.stderr
        );
        assert!(!common::crashed(&ran));
    };
    refused(
        "{\n  \"cases\": [\n    {\"name\": \"a\",}\n  ]\n}\n",
        "facts.tests.json:3: trailing comma",
    );
    refused(
        "{\n  \"cases\": [\n    {\"name\": \"a\", \"expect\": [\n      {\"node\": \"facts\", \"equal\": 1}\n    ]}\n  ]\n}\n",
        "facts.tests.json:4: cases[0].expect[0].equal: unknown field `equal`, expected one of `node`",
    );
    refused(
        "{\n  \"cases\": [\n    {\"name\": \"a\", \"expect\": [\n      {\"status\": \"completed\"},\n      {\"node\": \"draft\", \"contains\": \"x\"}\n    ]}\n  ]\n}\n",
        "facts.tests.json:5: case \"a\": expect[1]: the flow has no node `draft`",
    );
    refused(
        "{\"cases\": [{\"name\": \"a\", \"expect\": [{\"equals\": 1, \"regex\": \"x\"}]}]}",
        "one check per assertion, this one has equals and regex",
    );
    refused(
        "{\"cases\": [{\"name\": \"a\", \"expect\": [{\"regex\": \"(\"}]}]}",
        "regex `(` does not compile",
    );
    refused(
        "{\"cases\": [{\"name\": \"a\", \"decide\": {\"size\": \"approve\"}}]}",
        "decide `size`: node `size` is a if node, not an approval",
    );
    refused(
        "{\"cases\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}",
        "two cases are named \"a\"",
    );
    std::fs::write(
        sandbox.dir.path().join("rows.jsonl"),
        "{\"input\": \"x\"}\n[\"not\", \"an object\"]\n",
    )
    .expect("jsonl");
    refused(
        "{\"datasets\": [{\"file\": \"rows.jsonl\"}]}",
        "rows.jsonl:2: a row is a JSON object with `input`",
    );
    std::fs::write(
        sandbox.dir.path().join("rows.csv"),
        "name,input\na,x\nb,y,z\n",
    )
    .expect("csv");
    refused(
        "{\"datasets\": [{\"file\": \"rows.csv\"}]}",
        "rows.csv:3: this row has 3 fields, the header 2",
    );
    std::fs::write(sandbox.dir.path().join("cols.csv"), "question\nx\n").expect("csv");
    refused(
        "{\"datasets\": [{\"file\": \"cols.csv\"}]}",
        "cols.csv:1: unknown column `question`",
    );
    refused(
        "{\"datasets\": [{\"file\": \"missing.jsonl\"}]}",
        "missing.jsonl: cannot read the dataset",
    );
    std::fs::remove_file(&tests).expect("remove");
    let ran = sandbox.run(&["test", &flow, "--db", &sandbox.db_arg()]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("there is no tests file for"),
        "{}",
        ran.stderr
    );
}

#[test]
fn the_example_flows_pass_their_tests_offline() {
    // flows/*.tests.json with the recordings beside them (scripts/record-examples.sh makes
    // them): no provider is configured, and --offline would fail any request without one.
    let sandbox = Sandbox::new();
    let flows = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
    let ran = sandbox.run(&[
        "test",
        &flows.display().to_string(),
        "--offline",
        "--db",
        &sandbox.db_arg(),
        "--json",
    ]);
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let report = json_of(&ran);
    let suites = report["suites"].as_array().expect("suites");
    let flows_tested: Vec<&str> = suites
        .iter()
        .filter_map(|suite| suite["flow"].as_str())
        .filter_map(|flow| Path::new(flow).file_name()?.to_str())
        .collect();
    for example in [
        "hello.json",
        "triage.json",
        "team.json",
        "offline.json",
        "seed004_research.json",
    ] {
        assert!(
            flows_tested.contains(&example),
            "{example} has tests: {flows_tested:?}"
        );
    }
    assert!(report["passed"].as_u64().expect("passed") >= 20, "{report}");
    // The LLM flows ran from their recordings.
    let triage = suites
        .iter()
        .find(|suite| {
            suite["flow"]
                .as_str()
                .is_some_and(|flow| flow.ends_with("triage.json"))
        })
        .expect("triage");
    for case in triage["cases"].as_array().expect("cases") {
        assert_eq!(case["runs"][0]["offline"], true, "{case}");
    }
}
