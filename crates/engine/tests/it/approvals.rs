//! Approvals (docs/approvals.md): a timeout taken when nobody decides in time — also when the
//! deadline
//! passed while no process ran, and inside a subflow — forms whose answers reach the next
//! node's templates, and who decided, kept with the decision.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weft_nodes::Decision;
use weft_providers::{LlmClients, ProviderSettings};

use weft_engine::{Engine, ResumeOptions, RunError, RunOptions};

use weft_flow::Flow;

use weft_event::RunStatus;

use weft_store::{Store, StoreError};

fn engine(db: &Path) -> Engine {
    Engine::new(
        LlmClients::new(ProviderSettings::default()),
        Store::open(db).expect("store"),
    )
}

/// Settles the approvals that timed out, which must be exactly one run's, and waits for that
/// run to end or pause again.
async fn settle_the_one_due_run(engine: &Engine) -> weft_engine::RunOutcome {
    let handles = engine.settle_timeouts(None).await.expect("settles");
    assert_eq!(handles.len(), 1, "one run was due");
    let handle = handles.into_iter().next().expect("one");
    handle.outcome().await.expect("ends")
}

fn flow(value: Value) -> Flow {
    Flow::from_value(value, "test").expect("flow")
}

/// start → review (approval, waits `seconds`) → sent / dropped, and `timeout` → late when
/// `with_timeout_edge`.
fn review_flow(seconds: f64, with_timeout_edge: bool) -> Flow {
    let mut edges = vec![
        json!({"id": "a", "source": "start", "target": "review"}),
        json!({"id": "b", "source": "review", "sourceHandle": "approve", "target": "sent"}),
        json!({"id": "c", "source": "review", "sourceHandle": "reject", "target": "dropped"}),
    ];
    if with_timeout_edge {
        edges.push(
            json!({"id": "d", "source": "review", "sourceHandle": "timeout", "target": "late"}),
        );
    }
    flow(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "a draft"}},
            {"id": "review", "type": "approval", "data": {"message": "Send {{ PREVIOUS_OUTPUT }}?", "timeoutSeconds": seconds}},
            {"id": "sent", "type": "template", "data": {"template": "sent by {{ approval.by }}"}},
            {"id": "dropped", "type": "template", "data": {"template": "dropped"}},
            {"id": "late", "type": "template", "data": {"template": "{{ approval.decision }}: {{ approval.note }}"}}
        ],
        "edges": edges
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_nobody_decides_in_time_takes_its_timeout_edge() {
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(&dir.path().join("runs.db"));
    let paused = engine
        .start(review_flow(0.3, true), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    let waiting = paused.waiting.clone().expect("waits");
    let deadline = waiting.deadline.expect("a deadline");
    assert_eq!(waiting.input, json!("a draft"));

    // Not yet due: nothing is settled, and a timeout given by hand is refused.
    assert!(
        engine
            .settle_timeouts(None)
            .await
            .expect("settles")
            .is_empty()
    );
    let early = engine
        .resume(
            &paused.run_id,
            Decision::timeout(),
            ResumeOptions::default(),
        )
        .await;
    match early {
        Err(RunError::Store(StoreError::Refused { message, .. })) => {
            assert!(message.contains("has not timed out"), "{message}");
        }
        other => panic!("a timeout before the deadline is refused: {other:?}"),
    }
    assert_eq!(
        engine
            .store()
            .run(&paused.run_id)
            .expect("run")
            .summary
            .status,
        RunStatus::Paused
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(chrono::Utc::now().to_rfc3339() > deadline);
    let ended = settle_the_one_due_run(&engine).await;
    assert_eq!(ended.status, RunStatus::Completed, "{:?}", ended.error);
    assert_eq!(
        ended.result,
        Some(json!("timeout: nobody decided within 0.3 s").into())
    );
    let approval = engine
        .store()
        .node_outputs(&paused.run_id)
        .expect("outputs")
        .into_iter()
        .find(|output| output.node_id == "review")
        .and_then(|output| output.approval)
        .expect("the decision is kept");
    assert_eq!(approval["decision"], "timeout");
    assert_eq!(approval["by"], "weft");
    // Settled once: nothing is due any more.
    assert!(
        engine
            .settle_timeouts(None)
            .await
            .expect("settles")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_that_passed_while_no_process_ran_is_settled_by_the_next_one() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let first = engine(&db);
    let paused = first
        .start(review_flow(0.2, false), RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(paused.status, RunStatus::Paused);
    first.store().flush().expect("flush");
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The next process to start finds it due: without a timeout edge, the run fails naming it.
    let next = engine(&db);
    let ended = settle_the_one_due_run(&next).await;
    assert_eq!(ended.status, RunStatus::Failed);
    assert_eq!(
        ended.error.as_deref(),
        Some(
            "approval `review` timed out: nobody decided within 0.2 s, and it has no `timeout` edge"
        )
    );
    // A person answering afterwards is told the run ended.
    let late = next
        .resume(
            &paused.run_id,
            Decision::parse("approve", "").expect("ok"),
            ResumeOptions::default(),
        )
        .await;
    assert!(
        matches!(late, Err(RunError::Store(StoreError::Finished { .. }))),
        "{late:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_deciding_in_time_wins_over_the_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(&dir.path().join("runs.db"));
    let paused = engine
        .start(review_flow(0.3, true), RunOptions::default())
        .await
        .expect("runs");
    let decided = engine
        .resume(
            &paused.run_id,
            Decision::parse("approve", "")
                .expect("ok")
                .by(Some("ada".into())),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(decided.result, Some(json!("sent by ada").into()));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        engine
            .settle_timeouts(None)
            .await
            .expect("settles")
            .is_empty()
    );
    let record = engine.store().run(&paused.run_id).expect("run");
    assert_eq!(record.summary.status, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn form_answers_reach_the_next_nodes_templates_and_a_wrong_one_leaves_the_run_paused() {
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(&dir.path().join("runs.db"));
    let flow = flow(json!({
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "Dear Ada, we will refund you."}},
            {"id": "review", "type": "approval", "data": {
                "message": "Send it?",
                "fields": [
                    {"name": "tone", "type": "choice", "options": ["warm", "formal"]},
                    {"name": "amount", "type": "number", "required": true},
                    {"name": "reply", "type": "draft", "label": "The reply"}
                ]
            }},
            {"id": "send", "type": "template", "data": {
                "template": "{{ PREVIOUS_OUTPUT }} | {{ approval.tone }} | {{ approval.amount }} | {{ approval.by }} | {{ approval.decision }}"
            }},
            {"id": "drop", "type": "template", "data": {"template": "dropped"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "review"},
            {"id": "b", "source": "review", "sourceHandle": "approve", "target": "send"},
            {"id": "c", "source": "review", "sourceHandle": "reject", "target": "drop"}
        ]
    }));
    let paused = engine
        .start(flow, RunOptions::default())
        .await
        .expect("runs");
    let waiting = paused.waiting.clone().expect("waits");
    assert_eq!(
        waiting.fields.len(),
        3,
        "the form is told to whoever decides"
    );
    assert_eq!(waiting.input, json!("Dear Ada, we will refund you."));

    let answer = |fields: Value| Decision {
        fields: serde_json::from_value::<BTreeMap<String, Value>>(fields).expect("answers"),
        ..Decision::parse("approve", "")
            .expect("ok")
            .by(Some("bob".into()))
    };
    for (fields, wanted) in [
        (json!({"tone": "warm"}), "`amount` needs an answer"),
        (
            json!({"tone": "loud", "amount": 5}),
            "`tone` is one of warm, formal, not `loud`",
        ),
        (
            json!({"amount": 5, "colour": "red"}),
            "the form has no field `colour`",
        ),
    ] {
        let refused = engine
            .resume(&paused.run_id, answer(fields), ResumeOptions::default())
            .await;
        match refused {
            Err(RunError::Store(StoreError::Refused { message, .. })) => {
                assert!(message.contains(wanted), "{message}");
                assert!(message.contains("stays paused"), "{message}");
            }
            other => panic!("refused: {other:?}"),
        }
        let status = engine
            .store()
            .run(&paused.run_id)
            .expect("run")
            .summary
            .status;
        assert_eq!(status, RunStatus::Paused);
    }
    let done = engine
        .resume(
            &paused.run_id,
            answer(json!({"tone": "warm", "amount": "40", "reply": "Dear Ada, your 40 EUR are on their way."})),
            ResumeOptions::default(),
        )
        .await
        .expect("resumes");
    assert_eq!(
        done.result,
        Some(json!("Dear Ada, your 40 EUR are on their way. | warm | 40 | bob | approve").into())
    );
    let events = engine.store().events(&paused.run_id).expect("events");
    let received = events
        .iter()
        .find(|event| event.kind == weft_event::EventType::InputReceived)
        .expect("input_received");
    let said: Value = serde_json::from_str(&received.content).expect("JSON");
    assert_eq!(said["by"], "bob");
    assert!(said.get("at").is_none(), "the event's own time says when");
    let stored = engine
        .store()
        .node_outputs(&paused.run_id)
        .expect("outputs")
        .into_iter()
        .find(|output| output.node_id == "review")
        .and_then(|output| output.approval)
        .expect("kept");
    assert_eq!(stored["by"], "bob");
    assert!(
        stored["at"].as_str().is_some_and(|at| at.ends_with('Z')),
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_inside_a_subflow_times_out_by_its_own_limit() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("child.json"),
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "check", "type": "approval", "data": {"message": "ok?", "timeoutSeconds": 0.2}},
                {"id": "yes", "type": "template", "data": {"template": "yes"}},
                {"id": "no", "type": "template", "data": {"template": "no"}},
                {"id": "late", "type": "template", "data": {"template": "too late"}}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "check"},
                {"id": "b", "source": "check", "sourceHandle": "approve", "target": "yes"},
                {"id": "c", "source": "check", "sourceHandle": "reject", "target": "no"},
                {"id": "d", "source": "check", "sourceHandle": "timeout", "target": "late"}
            ]
        })
        .to_string(),
    )
    .expect("child");
    let path = dir.path().join("parent.json");
    std::fs::write(
        &path,
        json!({
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "sub", "type": "subflow", "data": {"flow": "child.json"}},
                {"id": "end", "type": "template", "data": {"template": "child said: {{ PREVIOUS_OUTPUT }}"}}
            ],
            "edges": [
                {"id": "a", "source": "start", "target": "sub"},
                {"id": "b", "source": "sub", "target": "end"}
            ]
        })
        .to_string(),
    )
    .expect("parent");
    let engine = engine(&dir.path().join("runs.db"));
    let paused = engine
        .start(
            Flow::load(&path).expect("flow"),
            RunOptions {
                flow_path: Some(path.clone()),
                ..RunOptions::default()
            },
        )
        .await
        .expect("runs");
    let waiting = paused.waiting.clone().expect("waits");
    assert_eq!(waiting.node_id, "sub/check");
    assert!(
        waiting.deadline.is_some(),
        "the child's deadline is the run's"
    );
    let pending: Vec<_> = engine
        .store()
        .paused_runs()
        .expect("paused runs")
        .iter()
        .filter_map(weft_engine::waiting_of)
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].node_id, "sub/check");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ended = settle_the_one_due_run(&engine).await;
    assert_eq!(
        ended.result,
        Some(json!("child said: too late").into()),
        "{:?}",
        ended.error
    );
    assert!(
        engine
            .store()
            .paused_runs()
            .expect("paused runs")
            .is_empty()
    );
}
