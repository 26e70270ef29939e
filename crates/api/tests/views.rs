//! The views a team's server answers (`GET /v1/runs`, `GET /v1/runs/{id}`) read back, in the
//! desktop app, as the runs they were: History lists them, the canvas shows them and Compare
//! sets them beside a local run, all from what the server sent.

use serde_json::json;
use weft_api::views::{RunDetail, RunListing, compare_details};
use weft_api::{Channel, Lifetime, People, ResumeOptions, StartRequest, StoreLocation, Weft};
use weft_event::RunStatus;
use weft_flow::Flow;
use weft_nodes::Decision;
use weft_providers::ProviderSettings;
use weft_store::{Trigger, TriggerKind};

fn open(db: &std::path::Path) -> Weft {
    let location = StoreLocation::find(Some(&db.display().to_string())).expect("location");
    Weft::open(location, Lifetime::Service, ProviderSettings::default())
        .expect("store")
        .with_people(
            People::parse("ada - finance\ngrace - finance\n", "people.txt").expect("people"),
        )
}

/// start → review (two of finance) → a template that says who approved.
fn payment_flow(template: &str) -> Flow {
    let flow = json!({
        "version": 1,
        "name": "Payment",
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "invoice 3"}},
            {"id": "review", "type": "approval", "data": {
                "message": "Pay {{ PREVIOUS_OUTPUT }}?",
                "approvers": ["group:finance"],
                "required": 2,
                "fields": [{"name": "reason", "type": "text", "required": false}]
            }},
            {"id": "paid", "type": "template", "data": {"template": template}}
        ],
        "edges": [
            {"id": "a", "source": "start", "target": "review"},
            {"id": "b", "source": "review", "sourceHandle": "approve", "target": "paid"}
        ]
    });
    Flow::parse(&flow.to_string(), "payment.json").expect("a flow")
}

async fn run_to_the_end(weft: &Weft, template: &str) -> String {
    let outcome = weft
        .start(
            payment_flow(template),
            StartRequest {
                trigger: Some(Trigger::of(TriggerKind::Manual).by(Some("sam".into()))),
                ..StartRequest::default()
            },
        )
        .await
        .expect("starts")
        .outcome()
        .await
        .expect("an outcome");
    assert_eq!(outcome.status, RunStatus::Paused);
    let run_id = outcome.run_id;
    for (person, reason) in [("ada", "checked"), ("grace", "fine")] {
        let decision = Decision {
            fields: [("reason".to_string(), json!(reason))]
                .into_iter()
                .collect(),
            ..Decision::parse("approve", "").expect("a decision")
        };
        let decided = weft
            .decide(
                &run_id,
                decision,
                Some(person.to_string()),
                Channel::Api,
                ResumeOptions::default(),
            )
            .await
            .expect("decided");
        if let weft_api::Decided::GoingOn(going) = decided {
            going.outcome().await.expect("an outcome");
        }
    }
    run_id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_runs_read_back_as_they_were_and_compare_as_the_store_compares_them() {
    let dir = tempfile::tempdir().expect("dir");
    let weft = open(&dir.path().join("runs.db"));
    let before = run_to_the_end(&weft, "paid {{ approval.by }}").await;
    let after = run_to_the_end(&weft, "paid by {{ approval.by }}").await;

    let detail = weft.run(&after).await.expect("the run");
    assert_eq!(detail.run.summary.status, RunStatus::Completed);
    assert_eq!(
        detail.decisions.len(),
        2,
        "both decisions are in the detail"
    );
    let sent = serde_json::to_string(&detail).expect("as the server sends it");
    let read: RunDetail = serde_json::from_str(&sent).expect("read back");
    assert_eq!(read, detail);

    let listed = weft.runs(10).await.expect("the runs");
    let sent = serde_json::to_string(&listed).expect("as the server lists them");
    assert!(
        !sent.contains("\"server\""),
        "a store's own runs name no server"
    );
    let read: Vec<RunListing> = serde_json::from_str(&sent).expect("read back");
    assert_eq!(read, listed);

    // A paused run (what it waits for, who approved so far) reads back too.
    let paused = weft
        .start(payment_flow("x"), StartRequest::default())
        .await
        .expect("starts")
        .outcome()
        .await
        .expect("an outcome")
        .run_id;
    let waiting = weft.run(&paused).await.expect("the run");
    assert!(waiting.waiting.is_some());
    let read: RunDetail =
        serde_json::from_value(serde_json::to_value(&waiting).expect("json")).expect("read back");
    assert_eq!(read, waiting);

    let stored = weft.compare(&before, &after).await.expect("compared");
    let first = weft.run(&before).await.expect("the run");
    let from_details = compare_details(&first, &detail);
    assert_eq!(from_details, stored);
    assert!(
        !from_details.equal,
        "the two templates said different things"
    );
    let paid = from_details
        .nodes
        .iter()
        .find(|node| node.node == "paid")
        .expect("the template compared");
    assert_eq!(paid.b.output, Some(json!("paid by grace")));
    assert!(
        from_details.flow_changes.is_some(),
        "the flow was edited between them"
    );
}
