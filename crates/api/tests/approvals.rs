//! Approvals people can trust (SPEC §16), through the calls every host makes: who may decide
//! (`approvers`, groups of the people file, `allowSelf`), how many must (`required`, one reject
//! rejects), refusals that change nothing, racing answers counted once, and every decision kept
//! in the store's chain.

use serde_json::{Value, json};
use weft_api::{
    Channel, Decided, ErrorKind, Lifetime, People, ResumeOptions, StartRequest, StoreLocation, Weft,
};
use weft_event::{EventType, RunStatus};
use weft_flow::Flow;
use weft_nodes::Decision;
use weft_providers::ProviderSettings;
use weft_store::{ChainCheck, Trigger, TriggerKind};

const PEOPLE: &str = "\
# name  email              groups
ada     ada@example.com    finance
grace   grace@example.com  finance
bob     bob@example.com    finance ops
eve     -                  ops
";

fn open(db: &std::path::Path, people: &str) -> Weft {
    let location = StoreLocation::find(Some(&db.display().to_string())).expect("location");
    Weft::open(location, Lifetime::Service, ProviderSettings::default())
        .expect("store")
        .with_people(People::parse(people, "people.txt").expect("people"))
}

/// start → review (an approval with `quorum`) → approved / rejected (templates).
fn review_flow(quorum: Value) -> Flow {
    let mut data = json!({"message": "Pay {{ PREVIOUS_OUTPUT }}?"});
    for (key, value) in quorum.as_object().expect("an object") {
        data[key] = value.clone();
    }
    let flow = json!({
        "version": 1,
        "name": "Payment",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "the invoice"}},
            {"id": "review", "type": "approval", "data": data},
            {"id": "paid", "type": "template", "data": {"template": "paid, {{ approval.by }} last"}},
            {"id": "refused", "type": "template", "data": {"template": "refused by {{ approval.by }}"}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "review"},
            {"id": "b", "source": "review", "sourceHandle": "approve", "target": "paid"},
            {"id": "c", "source": "review", "sourceHandle": "reject", "target": "refused"}
        ]
    });
    Flow::parse(&flow.to_string(), "payment.json").expect("a flow")
}

fn started_by(name: &str) -> StartRequest {
    StartRequest {
        trigger: Some(Trigger::of(TriggerKind::Manual).by(Some(name.to_string()))),
        ..StartRequest::default()
    }
}

async fn paused_run(weft: &Weft, flow: Flow, starter: &str) -> String {
    let outcome = weft
        .start(flow, started_by(starter))
        .await
        .expect("starts")
        .outcome()
        .await
        .expect("an outcome");
    assert_eq!(outcome.status, RunStatus::Paused);
    outcome.run_id
}

async fn decide(
    weft: &Weft,
    run_id: &str,
    answer: &str,
    by: &str,
) -> Result<Decided, weft_api::Error> {
    weft.decide(
        run_id,
        Decision::parse_text(answer).expect("an answer"),
        Some(by.to_string()),
        Channel::Api,
        ResumeOptions::default(),
    )
    .await
}

async fn result_of(decided: Decided) -> (RunStatus, Value) {
    let Decided::GoingOn(handle) = decided else {
        panic!("the decision was only counted");
    };
    let outcome = handle.outcome().await.expect("an outcome");
    (
        outcome.status,
        outcome
            .result
            .map(|value| (*value).clone())
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn two_of_finance_must_approve_and_whoever_started_the_run_may_not() {
    let dir = tempfile::tempdir().expect("dir");
    let weft = open(&dir.path().join("runs.db"), PEOPLE);
    let flow =
        review_flow(json!({"approvers": ["group:finance"], "required": 2, "allowSelf": false}));
    let run_id = paused_run(&weft, flow, "ada").await;

    // eve is not in finance; ada started the run: both refused, nothing kept.
    let refused = decide(&weft, &run_id, "approve", "eve")
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.kind, ErrorKind::Forbidden);
    assert!(
        refused.message.contains("eve may not decide `review`"),
        "{}",
        refused.message
    );
    assert!(
        refused.message.contains("group:finance"),
        "{}",
        refused.message
    );
    let refused = decide(&weft, &run_id, "approve", "ada")
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.kind, ErrorKind::Forbidden);
    assert!(
        refused.message.contains("allowSelf: false"),
        "{}",
        refused.message
    );
    let refused = decide(&weft, &run_id, "approve", "mallory")
        .await
        .err()
        .expect("refused");
    assert!(
        refused.message.contains("not in people.txt"),
        "{}",
        refused.message
    );
    assert!(
        weft.store()
            .decisions(Some(&run_id))
            .expect("decisions")
            .is_empty()
    );

    // grace approves: counted, and the run still waits for one more of finance (not ada).
    let Decided::Counted {
        progress, node_id, ..
    } = decide(&weft, &run_id, "approve", "grace")
        .await
        .expect("counted")
    else {
        panic!("one approval of two settled the approval");
    };
    assert_eq!(node_id, "review");
    assert_eq!(progress.approved_by, ["grace"]);
    assert_eq!(progress.still_needed, 1);
    assert_eq!(progress.may_still_approve, ["bob"]);
    assert_eq!(
        weft.run(&run_id).await.expect("run").run.summary.status,
        RunStatus::Paused
    );
    let inbox = weft.pending_approvals(None).await.expect("inbox");
    let pending = inbox
        .iter()
        .find(|pending| pending.run_id == run_id)
        .expect("listed");
    assert_eq!(
        pending
            .approval
            .as_ref()
            .map(|progress| progress.still_needed),
        Some(1)
    );
    // The inbox says each person whether they may decide it, and why not (what the app's
    // disabled buttons and the API's `refusal` show).
    let refusal = |by: Option<&str>| {
        let weft = weft.clone();
        let (run_id, by) = (run_id.clone(), by.map(str::to_string));
        async move {
            weft.pending_approvals(by)
                .await
                .expect("inbox")
                .into_iter()
                .find(|pending| pending.run_id == run_id)
                .expect("listed")
                .refusal
        }
    };
    assert_eq!(refusal(Some("bob")).await, None);
    let said = refusal(Some("ada")).await.expect("ada started it");
    assert!(said.contains("allowSelf: false"), "{said}");
    let said = refusal(Some("grace")).await.expect("grace approved");
    assert!(
        said.contains("grace answered it already (approve at"),
        "{said}"
    );
    let said = refusal(Some("eve")).await.expect("eve is not in finance");
    assert!(said.contains("eve may not decide `review`"), "{said}");
    let said = refusal(None).await.expect("nobody named");
    assert!(said.contains("name yourself"), "{said}");

    // Her approval again counts once; changing her answer is refused.
    let Decided::Counted { progress, .. } = decide(&weft, &run_id, "approve", "grace")
        .await
        .expect("counted")
    else {
        panic!("grace's second approval counted as another person's");
    };
    assert_eq!(progress.approved_by, ["grace"]);
    let refused = decide(&weft, &run_id, "reject", "grace")
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.kind, ErrorKind::Conflict);
    assert!(
        refused.message.contains("grace already answered"),
        "{}",
        refused.message
    );

    // bob makes two: the run goes on along approve.
    let (status, result) = result_of(
        decide(&weft, &run_id, "approve", "bob")
            .await
            .expect("decided"),
    )
    .await;
    assert_eq!(
        (status, result),
        (RunStatus::Completed, json!("paid, bob last"))
    );

    // The store keeps both decisions, chained, with who and how.
    let kept = weft.store().decisions(Some(&run_id)).expect("decisions");
    let said: Vec<(&str, &str, &str)> = kept
        .iter()
        .map(|decision| {
            (
                decision.by.as_str(),
                decision.decision.as_str(),
                decision.channel.as_str(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [("grace", "approve", "api"), ("bob", "approve", "api")]
    );
    assert_eq!(kept[1].prev_hash, kept[0].hash);
    assert_eq!(
        weft.store().verify_decisions().expect("walked"),
        ChainCheck::Intact { count: 2 }
    );
    let detail = weft.run(&run_id).await.expect("run");
    assert_eq!(detail.decisions.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_reject_rejects_whatever_was_approved() {
    let dir = tempfile::tempdir().expect("dir");
    let weft = open(&dir.path().join("runs.db"), PEOPLE);
    let flow = review_flow(json!({"approvers": ["grace", "group:ops"], "required": 2}));
    let run_id = paused_run(&weft, flow, "ada").await;
    assert!(matches!(
        decide(&weft, &run_id, "approve", "grace")
            .await
            .expect("counted"),
        Decided::Counted { .. }
    ));
    let (status, result) = result_of(
        decide(&weft, &run_id, "reject: not this month", "eve")
            .await
            .expect("decided"),
    )
    .await;
    assert_eq!(
        (status, result),
        (RunStatus::Completed, json!("refused by eve"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_second_approval_sent_twice_at_once_counts_once_and_the_run_goes_on_once() {
    let dir = tempfile::tempdir().expect("dir");
    let weft = open(&dir.path().join("runs.db"), PEOPLE);
    let flow = review_flow(json!({"approvers": ["group:finance"], "required": 2}));
    let run_id = paused_run(&weft, flow, "eve").await;
    decide(&weft, &run_id, "approve", "grace")
        .await
        .expect("counted");
    // Two processes' Wefts on one store, as two servers or an app and a server.
    let other = open(&dir.path().join("runs.db"), PEOPLE);
    let (one, two) = tokio::join!(
        decide(&weft, &run_id, "approve", "bob"),
        decide(&other, &run_id, "approve", "bob")
    );
    let (going, refused): (Vec<_>, Vec<_>) = [one, two].into_iter().partition(Result::is_ok);
    assert_eq!(going.len(), 1, "exactly one of the two goes on");
    let refused = refused
        .into_iter()
        .next()
        .expect("one refused")
        .err()
        .expect("an error");
    assert_eq!(refused.kind, ErrorKind::Conflict, "{}", refused.message);
    let decided = going.into_iter().next().expect("one").expect("ok");
    let (status, _) = result_of(decided).await;
    assert_eq!(status, RunStatus::Completed);
    let kept = weft.store().decisions(Some(&run_id)).expect("decisions");
    assert_eq!(
        kept.len(),
        2,
        "bob's two answers are one decision: {kept:?}"
    );
    let ends = weft
        .store()
        .events(&run_id)
        .expect("events")
        .iter()
        .filter(|event| event.kind == weft_event::EventType::RunEnd)
        .count();
    assert_eq!(ends, 1, "the run ended once");
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_the_people_cannot_decide_are_refused_before_the_run_starts() {
    let dir = tempfile::tempdir().expect("dir");
    let weft = open(&dir.path().join("runs.db"), PEOPLE);
    let refusal = |quorum: Value, starter: &'static str| {
        let weft = weft.clone();
        async move {
            weft.start(review_flow(quorum), started_by(starter))
                .await
                .err()
                .expect("refused")
        }
    };
    let error = refusal(json!({"approvers": ["group:legal"]}), "ada").await;
    assert_eq!(error.kind, ErrorKind::Invalid);
    assert!(
        error
            .message
            .contains("approval `review`: nobody is in group `legal`"),
        "{}",
        error.message
    );
    let error = refusal(
        json!({"approvers": ["group:finance"], "required": 4}),
        "eve",
    )
    .await;
    assert!(
        error
            .message
            .contains("4 approvals are required, but only 3 people may approve (ada, bob, grace)"),
        "{}",
        error.message
    );
    let error = refusal(
        json!({"approvers": ["group:finance"], "required": 3, "allowSelf": false}),
        "ada",
    )
    .await;
    assert!(
        error
            .message
            .contains("ada started the run and may not decide it"),
        "{}",
        error.message
    );
    let error = refusal(json!({"approvers": ["mallory"]}), "ada").await;
    assert!(
        error.message.contains("`mallory` is not in people.txt"),
        "{}",
        error.message
    );
    // Nor may it be answered in advance, whoever starts the run.
    let error = weft
        .start(
            review_flow(json!({"approvers": ["grace"]})),
            StartRequest {
                decisions: [(
                    "review".to_string(),
                    Decision::parse_text("approve").expect("an answer"),
                )]
                .into_iter()
                .collect(),
                ..started_by("grace")
            },
        )
        .await
        .err()
        .expect("refused");
    assert_eq!(error.kind, ErrorKind::Forbidden);
    assert!(
        error.message.contains("`review` names who may decide it"),
        "{}",
        error.message
    );
    // Without a people file, a group cannot be resolved, and says so.
    let nobody = open(&dir.path().join("runs.db"), "");
    let error = nobody
        .start(
            review_flow(json!({"approvers": ["group:finance"]})),
            started_by("ada"),
        )
        .await
        .err()
        .expect("refused");
    assert!(
        error.message.contains("no people file is set"),
        "{}",
        error.message
    );
    assert!(
        weft.runs(10).await.expect("runs").is_empty(),
        "nothing was stored"
    );
    // `required` above the people named, with no people file.
    let error = nobody
        .start(
            review_flow(json!({"approvers": ["ada"], "required": 2})),
            started_by("eve"),
        )
        .await
        .err()
        .expect("refused");
    assert!(
        error
            .message
            .contains("2 approvals are required, but only 1 person may approve (ada)"),
        "{}",
        error.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reminder_and_an_escalation_come_once_when_due_whichever_process_looks() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("runs.db");
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listening = |weft: Weft| {
        let heard = std::sync::Arc::clone(&heard);
        weft.on_follow_up(std::sync::Arc::new(
            move |follow_up: &weft_api::FollowedUp| {
                heard.lock().expect("heard").push(follow_up.clone());
            },
        ))
    };
    let weft = listening(open(&db, PEOPLE));
    let flow = review_flow(json!({
        "approvers": ["grace"],
        "remindAfterSeconds": 0.4,
        "escalateAfterSeconds": 2.5,
        "escalateTo": ["group:ops"]
    }));
    let run_id = paused_run(&weft, flow, "ada").await;
    assert!(
        weft.settle_follow_ups().await.expect("settled").is_empty(),
        "nothing is due yet"
    );
    let refused = decide(&weft, &run_id, "approve", "bob")
        .await
        .err()
        .expect("refused");
    assert_eq!(
        refused.kind,
        ErrorKind::Forbidden,
        "bob is not an approver before the escalation"
    );

    // Due: of two processes looking at once (the second opened after the pause, as after a
    // restart), one reminds grace, once.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let other = listening(open(&db, PEOPLE));
    let (one, two) = tokio::join!(weft.settle_follow_ups(), other.settle_follow_ups());
    let reminded: Vec<_> = one
        .expect("one")
        .into_iter()
        .chain(two.expect("two"))
        .collect();
    assert_eq!(reminded.len(), 1, "{reminded:?}");
    assert_eq!(
        (reminded[0].kind.as_str(), reminded[0].to.clone()),
        ("remind", vec!["grace".to_string()])
    );
    assert_eq!(reminded[0].message, "Pay the invoice?");
    assert!(
        other.settle_follow_ups().await.expect("settled").is_empty(),
        "reminded once"
    );
    let detail = weft.run(&run_id).await.expect("run");
    let progress = detail.approval.expect("progress");
    assert!(
        progress.reminded_at.is_some() && progress.escalated_at.is_none(),
        "{progress:?}"
    );

    // Escalated: ops (bob, eve) may decide now, and bob does.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let escalated = other.settle_follow_ups().await.expect("settled");
    assert_eq!(escalated.len(), 1, "{escalated:?}");
    assert_eq!(
        (escalated[0].kind.as_str(), escalated[0].to.clone()),
        ("escalate", vec!["group:ops".to_string()])
    );
    let inbox = weft.pending_approvals(None).await.expect("inbox");
    let progress = inbox[0].approval.clone().expect("progress");
    assert_eq!(progress.may_still_approve, ["grace", "bob", "eve"]);
    assert!(progress.escalated_at.is_some());
    assert_eq!(
        heard.lock().expect("heard").len(),
        2,
        "each listener heard what its process did"
    );
    let (status, result) = result_of(
        decide(&weft, &run_id, "approve", "bob")
            .await
            .expect("decided"),
    )
    .await;
    assert_eq!(
        (status, result),
        (RunStatus::Completed, json!("paid, bob last"))
    );
    assert!(
        weft.settle_follow_ups().await.expect("settled").is_empty(),
        "a decided run is not followed up"
    );

    // Both are in the run's log, where it waited, once each; the run went on numbering its
    // events after them (no number twice, none skipped).
    let events = weft.store().events(&run_id).expect("events");
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .filter(|event| {
            matches!(
                event.kind,
                EventType::ApprovalReminder | EventType::ApprovalEscalated
            )
        })
        .map(|event| (event.kind.as_str(), event.content.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("approval_reminder", "reminded grace"),
            (
                "approval_escalated",
                "escalated: group:ops may decide it now"
            ),
        ]
    );
    let numbers: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(numbers, (1..=events.len() as u64).collect::<Vec<_>>());
    let position = |kind: EventType| events.iter().position(|event| event.kind == kind);
    assert!(
        position(EventType::WaitInput) < position(EventType::ApprovalReminder)
            && position(EventType::ApprovalEscalated) < position(EventType::InputReceived),
        "{events:?}"
    );
}
