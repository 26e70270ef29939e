//! Approval decisions kept in a hash chain: order, repeats, refusals, races, tampering and the
//! migration that adds them.

use super::*;
use crate::decisions::{GENESIS, hash_of};

on_both_backends!(
    decisions_are_kept_in_one_chain_and_read_back,
    a_second_answer_by_one_person_at_one_pause_keeps_nothing,
    a_decision_for_a_run_that_is_not_paused_is_refused_and_keeps_nothing,
    decisions_recorded_at_once_by_several_stores_make_one_unbroken_chain,
    decisions_changed_or_removed_in_the_database_are_named,
);

/// A paused run, stored.
fn paused(store: &Store, run_id: &str) {
    store.create_run(&new_run(run_id, &ts(0)));
    store.save_pause(run_id, &pause_record(), &ts(1));
    store.flush().expect("flush");
}

fn answer<'a>(run_id: &'a str, pause: u64, by: &'a str, fields: &'a Value) -> NewDecision<'a> {
    NewDecision {
        run_id,
        node_id: "review",
        pause,
        decision: "approve",
        by,
        channel: "cli",
        note: "looks right",
        fields,
        draft_edit: None,
        at: "2026-03-01T10:00:00.000Z",
    }
}

fn kept(recorded: Result<Recorded, StoreError>) -> StoredDecision {
    match recorded {
        Ok(Recorded::New(decision)) => decision,
        other => panic!("expected a new decision, got {other:?}"),
    }
}

/// Runs `sql` (statements without parameters) on a connection of its own, as someone with
/// access to the database would.
fn tamper(at: &Location, sql: &str) {
    match at {
        Location::Sqlite(dir) => Connection::open(dir.path().join("nested/dir/runs.db"))
            .expect("sqlite")
            .execute_batch(sql)
            .expect("tampering"),
        Location::Postgres(url) => std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    ::postgres::Client::connect(url, ::postgres::NoTls)
                        .expect("postgres")
                        .batch_execute(sql)
                        .expect("tampering")
                })
                .join()
                .expect("tampering thread")
        }),
    }
}

fn decisions_are_kept_in_one_chain_and_read_back(at: &Location) {
    let store = at.open();
    paused(&store, "r1");
    paused(&store, "r2");
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 0 }
    );
    let fields = json!({"reason": "fine", "amount": 12.5, "tags": ["a", {"z": 1, "y": null}]});
    let edit = json!({"before": "Dear Sir", "after": "Dear Ana"});
    let first = kept(store.record_decision(&answer("r1", 1, "ana", &fields)));
    let second = kept(store.record_decision(&NewDecision {
        decision: "reject",
        channel: "app",
        note: "",
        node_id: "sub/review",
        draft_edit: Some(&edit),
        ..answer("r2", 1, "bo", &json!({}))
    }));
    let third = kept(store.record_decision(&answer("r1", 1, "cy", &json!({}))));

    assert_eq!(
        [first.seq, second.seq, third.seq],
        [1, 2, 3],
        "numbered in the order kept"
    );
    assert_eq!(first.prev_hash, GENESIS);
    assert_eq!(second.prev_hash, first.hash);
    assert_eq!(third.prev_hash, second.hash);
    for decision in [&first, &second, &third] {
        assert_eq!(decision.hash.len(), 64);
        assert!(
            decision
                .hash
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        );
        assert_eq!(hash_of(decision).expect("hash"), decision.hash);
    }
    assert_eq!(first.fields, fields);
    assert_eq!(first.draft_edit, None);
    assert_eq!(
        (
            second.node_id.as_str(),
            second.decision.as_str(),
            second.by.as_str()
        ),
        ("sub/review", "reject", "bo")
    );
    assert_eq!(second.draft_edit, Some(edit));
    assert_eq!(second.channel, "app");

    assert_eq!(
        store.decisions_at("r1", 1).expect("at"),
        [first.clone(), third.clone()]
    );
    assert!(store.decisions_at("r1", 2).expect("at").is_empty());
    assert_eq!(
        store.decisions(Some("r2")).expect("of r2"),
        std::slice::from_ref(&second)
    );
    assert!(store.decisions(Some("nope")).expect("of none").is_empty());
    let all = [first.clone(), second.clone(), third.clone()];
    assert_eq!(store.decisions(None).expect("all"), all);
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 3 }
    );

    // As `weft audit --json` prints one, and reads it back.
    let printed = serde_json::to_value(&second).expect("json");
    assert_eq!(printed["runId"], "r2");
    assert_eq!(printed["nodeId"], "sub/review");
    assert_eq!(printed["prevHash"], first.hash.as_str());
    assert_eq!(printed["draftEdit"]["after"], "Dear Ana");
    assert_eq!(
        serde_json::from_value::<StoredDecision>(printed).expect("read back"),
        second
    );
    let check = serde_json::to_value(ChainCheck::Altered {
        seq: 2,
        run_id: "r2".into(),
        by: "bo".into(),
    })
    .expect("json");
    assert_eq!(
        check,
        json!({"result": "altered", "seq": 2, "runId": "r2", "by": "bo"})
    );

    // Another process finds the same chain, and goes on with it.
    drop(store);
    let again = at.open();
    assert_eq!(again.decisions(None).expect("all"), all);
    let fourth = kept(again.record_decision(&answer("r2", 2, "bo", &json!({}))));
    assert_eq!(
        (fourth.seq, fourth.prev_hash.as_str()),
        (4, third.hash.as_str())
    );
    assert_eq!(
        again.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 4 }
    );
}

fn a_second_answer_by_one_person_at_one_pause_keeps_nothing(at: &Location) {
    let store = at.open();
    paused(&store, "run");
    let first = kept(store.record_decision(&answer("run", 1, "ana", &json!({"a": 1}))));
    let again = store.record_decision(&NewDecision {
        decision: "reject",
        note: "changed my mind",
        ..answer("run", 1, "ana", &json!({"a": 2}))
    });
    assert_eq!(again.expect("repeat"), Recorded::Repeated(first.clone()));
    assert_eq!(
        store.decisions(None).expect("all"),
        std::slice::from_ref(&first)
    );
    assert_eq!(at.count("SELECT count FROM decision_chain"), 1);

    // The same person at the run's next pause, and someone else at this one, are kept.
    let next = kept(store.record_decision(&answer("run", 2, "ana", &json!({}))));
    assert_eq!((next.seq, next.pause), (2, 2));
    let other = kept(store.record_decision(&answer("run", 1, "bo", &json!({}))));
    assert_eq!(other.seq, 3);
    // Nobody named is "unknown", once per pause too.
    let nobody = kept(store.record_decision(&answer("run", 1, "", &json!({}))));
    assert_eq!(nobody.by, "unknown");
    assert!(
        !store
            .record_decision(&answer("run", 1, "unknown", &json!({})))
            .expect("repeat")
            .is_new()
    );
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 4 }
    );
}

fn a_decision_for_a_run_that_is_not_paused_is_refused_and_keeps_nothing(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("running", &ts(0)));
    paused(&store, "done");
    store.finish_run("done", RunStatus::Completed, None, None, &ts(2));
    paused(&store, "claimed");
    store.claim_paused("claimed", &ts(3), None).expect("claim");
    store.flush().expect("flush");

    let fields = json!({});
    match store.record_decision(&answer("running", 1, "ana", &fields)) {
        Err(StoreError::NotPaused { run_id, status }) => {
            assert_eq!((run_id.as_str(), status), ("running", RunStatus::Running))
        }
        other => panic!("expected NotPaused, got {other:?}"),
    }
    match store.record_decision(&answer("claimed", 1, "ana", &fields)) {
        Err(StoreError::NotPaused { status, .. }) => assert_eq!(status, RunStatus::Running),
        other => panic!("expected NotPaused, got {other:?}"),
    }
    match store.record_decision(&answer("done", 1, "ana", &fields)) {
        Err(StoreError::Finished { run_id, status }) => {
            assert_eq!((run_id.as_str(), status), ("done", RunStatus::Completed))
        }
        other => panic!("expected Finished, got {other:?}"),
    }
    match store.record_decision(&answer("missing", 1, "ana", &fields)) {
        Err(StoreError::NoSuchRun(run_id)) => assert_eq!(run_id, "missing"),
        other => panic!("expected NoSuchRun, got {other:?}"),
    }
    assert!(store.decisions(None).expect("all").is_empty());
    // Through a connection of its own. A refusal's transaction is undone whole: on SQLite,
    // where the first decision makes the table, it is not even made.
    match at {
        Location::Sqlite(_) => assert_eq!(
            at.count("SELECT count(*) FROM sqlite_master WHERE name = 'decisions'"),
            0
        ),
        Location::Postgres(_) => assert_eq!(at.count("SELECT count(*) FROM decisions"), 0),
    }
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 0 }
    );
    // The refusals left the store's connection usable.
    paused(&store, "waiting");
    assert_eq!(
        kept(store.record_decision(&answer("waiting", 1, "ana", &fields))).seq,
        1
    );
}

fn decisions_recorded_at_once_by_several_stores_make_one_unbroken_chain(at: &Location) {
    const STORES: usize = 6;
    const EACH: u64 = 5;
    let first = at.open();
    paused(&first, "a");
    paused(&first, "b");
    // Each a store of its own, as processes would be; each records its own person's answers,
    // and then all of them the same person's answer at the same pause.
    let stores: Vec<Store> = (0..STORES).map(|_| at.open()).collect();
    let start = std::sync::Barrier::new(STORES);
    let fields = json!({"ok": true});
    // Nothing panics before the second barrier: a failing recorder must not hold the others.
    type Outcome = Result<Recorded, StoreError>;
    let outcomes: Vec<(Vec<Outcome>, Outcome)> = std::thread::scope(|scope| {
        let racing: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(index, store)| {
                let (start, fields) = (&start, &fields);
                scope.spawn(move || {
                    let by = format!("person-{index}");
                    let run = if index % 2 == 0 { "a" } else { "b" };
                    start.wait();
                    let own = (1..=EACH)
                        .map(|pause| store.record_decision(&answer(run, pause, &by, fields)))
                        .collect();
                    start.wait();
                    let same = store.record_decision(&NewDecision {
                        note: &by,
                        ..answer("a", 99, "same", fields)
                    });
                    (own, same)
                })
            })
            .collect();
        racing
            .into_iter()
            .map(|thread| thread.join().expect("recorder"))
            .collect()
    });
    let mut repeats = Vec::new();
    for (own, same) in outcomes {
        for outcome in own {
            kept(outcome);
        }
        repeats.push(same.expect("the same person's answer"));
    }
    let total = STORES as u64 * EACH + 1;
    assert_eq!(
        first.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: total }
    );
    let all = first.decisions(None).expect("all");
    assert_eq!(
        all.iter().map(|decision| decision.seq).collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    for pair in all.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
    // One person's racing answers keep one; every other racer got that one back.
    let new: Vec<&Recorded> = repeats
        .iter()
        .filter(|recorded| recorded.is_new())
        .collect();
    assert_eq!(new.len(), 1, "{repeats:?}");
    let the_one = new[0].decision();
    assert!(
        repeats
            .iter()
            .all(|recorded| recorded.decision() == the_one)
    );
    assert_eq!(store_count(&first, "a", 99), 1);
}

fn store_count(store: &Store, run_id: &str, pause: u64) -> usize {
    store.decisions_at(run_id, pause).expect("at").len()
}

fn decisions_changed_or_removed_in_the_database_are_named(at: &Location) {
    let store = at.open();
    paused(&store, "run");
    for (pause, by) in [(1, "ana"), (1, "bo"), (2, "ana"), (2, "bo"), (3, "cy")] {
        kept(store.record_decision(&answer("run", pause, by, &json!({"amount": 10}))));
    }
    let verify = || store.verify_decisions().expect("verify");
    let altered = |seq: u64, by: &str| ChainCheck::Altered {
        seq,
        run_id: "run".into(),
        by: by.into(),
    };
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });

    // A decision changed.
    tamper(at, "UPDATE decisions SET decision = 'reject' WHERE seq = 2");
    assert_eq!(verify(), altered(2, "bo"));
    tamper(
        at,
        "UPDATE decisions SET decision = 'approve' WHERE seq = 2",
    );
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });

    // Its answers changed, or made unreadable: the first in the chain is named.
    tamper(
        at,
        "UPDATE decisions SET fields_json = '{\"amount\":1000}' WHERE seq = 4; \
         UPDATE decisions SET fields_json = 'not json' WHERE seq = 5",
    );
    assert_eq!(verify(), altered(4, "bo"));
    tamper(
        at,
        "UPDATE decisions SET fields_json = '{\"amount\":10}' WHERE seq = 4",
    );
    assert_eq!(verify(), altered(5, "cy"));
    match store.decisions(None) {
        Err(StoreError::Corrupt { run_id, message }) => {
            assert_eq!(run_id, "run");
            assert!(message.contains("fields"), "{message}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // The same answers written in another order or spacing are the same answers.
    tamper(
        at,
        "UPDATE decisions SET fields_json = '{ \"amount\": 10 }' WHERE seq = 5",
    );
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });

    // A decision changed and hashed again: the next one's link names it; the last one's, the
    // chain's head does.
    let third = store.decisions_at("run", 2).expect("at")[0].clone();
    let rehashed = hash_of(&StoredDecision {
        note: "never said".into(),
        ..third.clone()
    })
    .expect("hash");
    tamper(
        at,
        &format!("UPDATE decisions SET note = 'never said', hash = '{rehashed}' WHERE seq = 3"),
    );
    assert_eq!(verify(), altered(3, "ana"));
    tamper(
        at,
        &format!(
            "UPDATE decisions SET note = '{}', hash = '{}' WHERE seq = 3",
            third.note, third.hash
        ),
    );
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });
    let mut last = store.decisions_at("run", 3).expect("at")[0].clone();
    last.decision = "reject".into();
    tamper(
        at,
        &format!(
            "UPDATE decisions SET decision = 'reject', hash = '{}' WHERE seq = 5",
            hash_of(&last).expect("hash")
        ),
    );
    assert_eq!(verify(), altered(5, "cy"));
    last.decision = "approve".into();
    tamper(
        at,
        &format!(
            "UPDATE decisions SET decision = 'approve', hash = '{}' WHERE seq = 5",
            hash_of(&last).expect("hash")
        ),
    );
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });

    // A decision removed from the middle, then the last one.
    tamper(
        at,
        "CREATE TABLE kept AS SELECT * FROM decisions WHERE seq = 3; \
         DELETE FROM decisions WHERE seq = 3",
    );
    assert_eq!(verify(), ChainCheck::Removed { seq: 3 });
    tamper(
        at,
        "INSERT INTO decisions SELECT * FROM kept; DROP TABLE kept",
    );
    assert_eq!(verify(), ChainCheck::Intact { count: 5 });
    tamper(at, "DELETE FROM decisions WHERE seq = 5");
    assert_eq!(verify(), ChainCheck::Removed { seq: 5 });
    // Or everything.
    tamper(at, "DELETE FROM decisions");
    assert_eq!(verify(), ChainCheck::Removed { seq: 1 });
}

#[test]
fn a_store_at_migration_16_gains_the_chain_of_decisions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    let conn = sqlite_store_at_version(&path, 16);
    conn.execute_batch(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', 'paused', '\"hi\"', '{at}', '{at}')",
        at = ts(1)
    ))
    .expect("a paused run");
    drop(conn);

    let store = Store::open(&path).expect("migrated");
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 0 }
    );
    let first = kept(store.record_decision(&answer("old", 1, "ana", &json!({}))));
    assert_eq!((first.seq, first.prev_hash.as_str()), (1, GENESIS));
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 1 }
    );
    drop(store);
    let version: i64 = Connection::open(&path)
        .expect("sqlite")
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, MIGRATIONS.len() as i64);
}

#[test]
fn on_postgres_a_store_at_migration_8_gains_the_chain_of_decisions() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    let mut old_schema = "CREATE TABLE weft_schema (version BIGINT NOT NULL); \
         INSERT INTO weft_schema (version) VALUES (8);"
        .to_string();
    old_schema.extend(postgresql::MIGRATIONS[..8].iter().copied());
    old_schema.push_str(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', 'paused', '\"hi\"', '{at}', '{at}');",
        at = ts(1)
    ));
    client.batch_execute(&old_schema).expect("old schema");

    let store = Location::Postgres(url.clone()).open();
    let first = kept(store.record_decision(&answer("old", 1, "ana", &json!({}))));
    assert_eq!((first.seq, first.prev_hash.as_str()), (1, GENESIS));
    assert_eq!(
        store.verify_decisions().expect("verify"),
        ChainCheck::Intact { count: 1 }
    );
    let version: i64 = client
        .query_one("SELECT version FROM weft_schema", &[])
        .expect("version")
        .get(0);
    assert_eq!(version, postgresql::MIGRATIONS.len() as i64);
}
