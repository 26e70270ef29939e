//! Schedules started by servers (SPEC §15), with the clock given: each occurrence starts one
//! run however many servers look (claimed in the store), records its trigger, and an
//! occurrence missed while no server ran starts once (`missed: once`) or not (`skip`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use weft_api::schedules::Schedules;
use weft_api::{Lifetime, StoreLocation, Weft};
use weft_providers::ProviderSettings;
use weft_store::TriggerKind;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("a time")
        .with_timezone(&Utc)
}

fn open(db: &std::path::Path) -> Weft {
    let location = StoreLocation::find(Some(&db.display().to_string())).expect("location");
    Weft::open(location, Lifetime::Service, ProviderSettings::default()).expect("store")
}

#[tokio::test(flavor = "multi_thread")]
async fn each_occurrence_starts_once_across_servers_and_a_missed_one_once_or_never() {
    let dir = tempfile::tempdir().expect("dir");
    let flows = dir.path().join("flows");
    std::fs::create_dir(&flows).expect("flows");
    let flow = json!({
        "version": 1,
        "name": "Report",
        "settings": {"schedules": [
            {"cron": "0 * * * *", "input": "hourly report"},
            {"cron": "30 * * * *", "missed": "skip"}
        ]},
        "nodes": [
            {"id": "start", "type": "start", "data": {"initialInput": "by hand"}},
            {"id": "say", "type": "template", "data": {"template": "{{ PREVIOUS_OUTPUT }}"}}
        ],
        "edges": [{"id": "a", "source": "start", "target": "say"}]
    });
    std::fs::write(flows.join("report.json"), flow.to_string()).expect("flow");
    let db = dir.path().join("runs.db");
    let (first, second) = (open(&db), open(&db));
    let one = Schedules::new(first.clone(), flows.clone(), None);
    let two = Schedules::new(second.clone(), flows.clone(), None);

    // Never claimed before: nothing was missed.
    assert!(one.catch_up(at("2026-11-27T09:40:00Z")).await.is_empty());
    assert!(two.catch_up(at("2026-11-27T09:40:00Z")).await.is_empty());
    // 10:00 comes: two servers look, one run starts.
    let (started, next) = one.tick(at("2026-11-27T10:00:00.200Z")).await;
    let (also, _) = two.tick(at("2026-11-27T10:00:00.300Z")).await;
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(
        also.is_empty(),
        "the second server started it again: {also:?}"
    );
    assert_eq!(started[0].1, at("2026-11-27T10:00:00Z"));
    assert_eq!(next, Some(at("2026-11-27T10:30:00Z")));
    let (half_past, _) = two.tick(at("2026-11-27T10:30:01Z")).await;
    assert_eq!(half_past.len(), 1);

    // The run records what started it, and got the schedule's input.
    let run_id = started[0].2.clone();
    let store = first.store().clone();
    for _ in 0..100 {
        if store.run(&run_id).expect("run").summary.status.as_str() == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let record = store.run(&run_id).expect("run");
    assert_eq!(record.result, Some(json!("hourly report")));
    let trigger = record.summary.trigger.expect("a trigger");
    assert_eq!(trigger.kind, TriggerKind::Schedule);
    assert_eq!(trigger.occurrence.as_deref(), Some("2026-11-27T10:00:00Z"));
    assert_eq!(trigger.schedule, Some(0));

    // Servers stop; one starts at 13:20. The hourly schedule missed 11:00 to 13:00: one run,
    // for 13:00. The half-past one missed 11:30 and 12:30, and skips them.
    let later = Schedules::new(open(&db), flows.clone(), None);
    let caught = later.catch_up(at("2026-11-27T13:20:00Z")).await;
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert_eq!(caught[0].1, at("2026-11-27T13:00:00Z"));
    let scheduled: Vec<_> = store
        .list_runs(10)
        .expect("runs")
        .into_iter()
        .filter(|run| {
            run.trigger
                .as_ref()
                .is_some_and(|trigger| trigger.kind == TriggerKind::Schedule)
        })
        .collect();
    assert_eq!(scheduled.len(), 3, "10:00, 10:30 and the missed 13:00");

    for weft in [first, second] {
        weft.engine().shutdown(Duration::from_secs(5)).await;
    }
}
