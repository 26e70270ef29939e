//! Approval follow-ups: when a paused run's next one is due, and each kept once across stores;
//! the migration that adds them.

use super::*;

on_both_backends!(
    a_paused_runs_follow_up_is_due_from_its_time_until_cleared_claimed_or_finished,
    of_several_stores_keeping_the_same_follow_up_at_once_exactly_one_keeps_it,
);

/// Run `run_id`, paused with its next follow-up due at `follow_up`, stored.
fn paused(store: &Store, run_id: &str, follow_up: Option<String>) {
    store.create_run(&new_run(run_id, &ts(0)));
    let pause = PauseRecord {
        follow_up,
        ..pause_record()
    };
    store.save_pause(run_id, &pause, &ts(1));
    store.flush().expect("flush");
}

fn people(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| name.to_string()).collect()
}

fn a_paused_runs_follow_up_is_due_from_its_time_until_cleared_claimed_or_finished(at: &Location) {
    let store = at.open();
    assert_eq!(store.next_follow_up().expect("next"), None);
    paused(&store, "later", Some(ts(40)));
    paused(&store, "sooner", Some(ts(20)));
    paused(&store, "none", None);
    let due = |now: u64| store.due_follow_ups(&ts(now)).expect("due");

    assert!(due(19).is_empty(), "not before its time");
    assert_eq!(due(20), ["sooner"], "at its time");
    assert_eq!(due(59), ["sooner", "later"], "earliest first");
    assert_eq!(store.next_follow_up().expect("next"), Some(ts(20)));
    // The deadline is another time: a follow-up is not one, nor the other way round.
    assert!(store.due_approvals(&ts(59)).expect("due").is_empty());

    // Moved on, and set on a run that had none, without changing when they paused.
    let updated = |id: &str| store.run(id).expect("run").summary.updated_at;
    store.set_follow_up("sooner", Some(&ts(30))).expect("set");
    store.set_follow_up("none", Some(&ts(35))).expect("set");
    assert_eq!(updated("sooner"), ts(1));
    assert_eq!(updated("none"), ts(1));
    assert!(due(29).is_empty());
    assert_eq!(due(59), ["sooner", "none", "later"]);
    store.set_follow_up("sooner", None).expect("clear");
    assert_eq!(due(59), ["none", "later"]);
    assert_eq!(store.next_follow_up().expect("next"), Some(ts(35)));

    // A claim clears it; a run set afterwards (not paused) is left as it is, as is an unknown.
    store.claim_paused("none", &ts(2), None).expect("claim");
    assert_eq!(due(59), ["later"]);
    store
        .set_follow_up("none", Some(&ts(10)))
        .expect("not paused");
    store
        .set_follow_up("missing", Some(&ts(10)))
        .expect("unknown");
    assert_eq!(due(59), ["later"]);
    assert_eq!(store.next_follow_up().expect("next"), Some(ts(40)));
    assert_eq!(
        at.count("SELECT count(*) FROM runs WHERE follow_up_at IS NOT NULL"),
        1,
        "the claimed run's follow-up is cleared, not only hidden"
    );

    // A run finished is never listed.
    store.finish_run("later", RunStatus::Cancelled, None, None, &ts(3));
    store.flush().expect("flush");
    assert!(due(59).is_empty());
    assert_eq!(store.next_follow_up().expect("next"), None);
    store
        .set_follow_up("later", Some(&ts(10)))
        .expect("finished");
    assert!(due(59).is_empty());
    assert_eq!(
        at.count("SELECT count(*) FROM runs WHERE follow_up_at IS NOT NULL"),
        0
    );

    // Paused again with a follow-up: due again, in another store too.
    let pause = PauseRecord {
        follow_up: Some(ts(50)),
        deadline: Some(ts(55)),
        ..pause_record()
    };
    store.save_pause("none", &pause, &ts(4));
    store.flush().expect("flush");
    let other = at.open();
    assert_eq!(other.due_follow_ups(&ts(50)).expect("due"), ["none"]);
    assert_eq!(other.next_follow_up().expect("next"), Some(ts(50)));
    assert_eq!(other.next_deadline().expect("deadline"), Some(ts(55)));
}

fn of_several_stores_keeping_the_same_follow_up_at_once_exactly_one_keeps_it(at: &Location) {
    const STORES: usize = 6;
    let store = at.open();
    paused(&store, "run", Some(ts(10)));
    let stores: Vec<Store> = (0..STORES).map(|_| at.open()).collect();
    let start = std::sync::Barrier::new(STORES);
    let to = people(&["ana", "bo"]);
    let kept: Vec<bool> = std::thread::scope(|scope| {
        let racing: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(index, store)| {
                let (start, to) = (&start, &to);
                scope.spawn(move || {
                    start.wait();
                    let at = ts(10 + index as u64);
                    store.claim_follow_up(&FollowUp {
                        run_id: "run",
                        pause: 3,
                        kind: "remind",
                        at: &at,
                        to,
                    })
                })
            })
            .collect();
        racing
            .into_iter()
            .map(|racer| racer.join().expect("racer").expect("claim"))
            .collect()
    });
    assert_eq!(kept.iter().filter(|kept| **kept).count(), 1, "{kept:?}");
    let winner = kept.iter().position(|kept| *kept).expect("a winner");

    // Once kept, the same again is not, from any store.
    let remind = FollowUp {
        run_id: "run",
        pause: 3,
        kind: "remind",
        at: "2025-01-01T00:01:00.000Z",
        to: &to,
    };
    assert!(!store.claim_follow_up(&remind).expect("again"));
    // Another kind, another pause, another run: kept too.
    let added = people(&["cy"]);
    let escalate = FollowUp {
        kind: "escalate",
        at: "2025-01-01T00:00:05.000Z",
        to: &added,
        ..remind
    };
    assert!(store.claim_follow_up(&escalate).expect("escalate"));
    assert!(
        store
            .claim_follow_up(&FollowUp { pause: 4, ..remind })
            .expect("next pause")
    );
    assert!(
        store
            .claim_follow_up(&FollowUp {
                run_id: "other",
                to: &[],
                ..remind
            })
            .expect("other run")
    );
    assert!(!store.claim_follow_up(&escalate).expect("escalate again"));

    // Read back in the order kept (by time, then kind), with whom they went to.
    let stored = |kind: &str, at: String, to: &[&str]| StoredFollowUp {
        run_id: "run".into(),
        pause: 3,
        kind: kind.into(),
        at,
        to: people(to),
    };
    let at_three = vec![
        stored("escalate", ts(5), &["cy"]),
        stored("remind", ts(10 + winner as u64), &["ana", "bo"]),
    ];
    assert_eq!(store.follow_ups("run", 3).expect("read"), at_three);
    assert_eq!(stores[0].follow_ups("run", 3).expect("read"), at_three);
    let next = store.follow_ups("run", 4).expect("read");
    assert_eq!(next.len(), 1);
    assert_eq!((next[0].pause, next[0].kind.as_str()), (4, "remind"));
    let other = store.follow_ups("other", 3).expect("read");
    assert_eq!(other.len(), 1);
    assert!(other[0].to.is_empty());
    assert!(store.follow_ups("run", 5).expect("read").is_empty());
    assert_eq!(at.count("SELECT count(*) FROM approval_follow_ups"), 4);

    // As JSON (camelCase), and read back.
    let printed = serde_json::to_value(&at_three[0]).expect("json");
    assert_eq!(
        printed,
        json!({"runId": "run", "pause": 3, "kind": "escalate", "at": ts(5), "to": ["cy"]})
    );
    assert_eq!(
        serde_json::from_value::<StoredFollowUp>(printed).expect("read back"),
        at_three[0]
    );
}

#[test]
fn a_store_at_migration_17_gains_follow_ups() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    let conn = sqlite_store_at_version(&path, 17);
    conn.execute_batch(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at, deadline) \
         VALUES ('old', 'demo', 'paused', '\"hi\"', '{at}', '{at}', '{deadline}')",
        at = ts(1),
        deadline = ts(30)
    ))
    .expect("a paused run");
    drop(conn);

    let store = Store::open(&path).expect("migrated");
    assert_eq!(store.next_follow_up().expect("next"), None);
    assert_eq!(store.next_deadline().expect("deadline"), Some(ts(30)));
    store.set_follow_up("old", Some(&ts(20))).expect("set");
    assert_eq!(store.due_follow_ups(&ts(20)).expect("due"), ["old"]);
    let to = people(&["ana"]);
    let remind = FollowUp {
        run_id: "old",
        pause: 1,
        kind: "remind",
        at: &ts(20),
        to: &to,
    };
    assert!(store.claim_follow_up(&remind).expect("claim"));
    assert_eq!(store.follow_ups("old", 1).expect("read").len(), 1);
    drop(store);

    let conn = Connection::open(&path).expect("sqlite");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, MIGRATIONS.len() as i64);
    let indexed: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'runs_follow_up_at'",
            [],
            |row| row.get(0),
        )
        .expect("index");
    assert_eq!(indexed, 1);
}

#[test]
fn on_postgres_a_store_at_migration_9_gains_follow_ups() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    let mut old_schema = "CREATE TABLE weft_schema (version BIGINT NOT NULL); \
         INSERT INTO weft_schema (version) VALUES (9);"
        .to_string();
    old_schema.extend(postgresql::MIGRATIONS[..9].iter().copied());
    old_schema.push_str(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', 'paused', '\"hi\"', '{at}', '{at}');",
        at = ts(1)
    ));
    client.batch_execute(&old_schema).expect("old schema");

    let store = Location::Postgres(url.clone()).open();
    assert_eq!(store.next_follow_up().expect("next"), None);
    store.set_follow_up("old", Some(&ts(20))).expect("set");
    assert_eq!(store.due_follow_ups(&ts(25)).expect("due"), ["old"]);
    let to = people(&["ana", "bo"]);
    let escalate = FollowUp {
        run_id: "old",
        pause: 1,
        kind: "escalate",
        at: &ts(20),
        to: &to,
    };
    assert!(store.claim_follow_up(&escalate).expect("claim"));
    assert!(!store.claim_follow_up(&escalate).expect("again"));
    assert_eq!(store.follow_ups("old", 1).expect("read")[0].to, to);
    let version: i64 = client
        .query_one("SELECT version FROM weft_schema", &[])
        .expect("version")
        .get(0);
    assert_eq!(version, postgresql::MIGRATIONS.len() as i64);
    let indexed: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'runs_follow_up_at'",
            &[],
        )
        .expect("index")
        .get(0);
    assert_eq!(indexed, 1);
}
