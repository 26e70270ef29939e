//! The outbox of approval emails (`approval_mail`): owed with a pause or by a follow-up,
//! addressed to each person once, claimed by one mailer at a time, retried or given up; the
//! migration that adds it.

use super::*;

on_both_backends!(
    a_pause_that_asks_by_mail_owes_one_ask_email_and_saving_it_again_owes_no_other,
    an_owed_email_is_addressed_to_each_person_once_and_listed_due_earliest_first,
    of_several_stores_claiming_the_same_due_email_at_once_exactly_one_has_it_until_it_expires,
    a_failed_email_is_due_again_at_its_retry_or_done_without_one_and_a_sent_one_is_done,
);

/// Run `run_id` paused at `ts(at)`, asking by mail for pause `ask_by_mail`, stored.
fn paused(store: &Store, run_id: &str, ask_by_mail: Option<u64>, at: u64) {
    store.create_run(&new_run(run_id, &ts(0)));
    let pause = PauseRecord {
        ask_by_mail,
        ..pause_record()
    };
    store.save_pause(run_id, &pause, &ts(at));
    store.flush().expect("flush");
}

/// The email owed (not addressed yet) for `pause` of `run_id`, queued and due at `at`.
fn owed(run_id: &str, pause: u64, kind: &str, at: String) -> StoredMail {
    StoredMail {
        run_id: run_id.into(),
        pause,
        kind: kind.into(),
        person: String::new(),
        email: None,
        queued_at: at.clone(),
        next_at: Some(at),
        attempts: 0,
        sent_at: None,
        last_error: None,
    }
}

fn to(people: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    people
        .iter()
        .map(|(person, email)| (person.to_string(), email.map(str::to_string)))
        .collect()
}

/// Who is listed by `due_mail(now, limit)`, as (run, kind, person).
fn due(store: &Store, now: u64, limit: u32) -> Vec<(String, String, String)> {
    store
        .due_mail(&ts(now), limit)
        .expect("due")
        .into_iter()
        .map(|mail| (mail.run_id, mail.kind, mail.person))
        .collect()
}

fn who(run_id: &str, kind: &str, person: &str) -> (String, String, String) {
    (run_id.into(), kind.into(), person.into())
}

/// The one email of `run_id` to `person`.
fn mail_to(store: &Store, run_id: &str, person: &str) -> StoredMail {
    let mut found: Vec<StoredMail> = store
        .mails(run_id)
        .expect("mails")
        .into_iter()
        .filter(|mail| mail.person == person)
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// Run `run_id`'s "ask" email of pause 3 addressed to ada (due at `ts(at)`) and bob (due at
/// `ts(at)` too, if `bob` is true).
fn addressed(store: &Store, run_id: &str, at: u64, bob: bool) {
    paused(store, run_id, Some(3), 1);
    let ask = owed(run_id, 3, "ask", ts(1));
    let mut people = vec![("ada", Some("ada@x.test"))];
    if bob {
        people.push(("bob", Some("bob@x.test")));
    }
    store
        .address_mail(&ask.key(), &to(&people), &ts(at))
        .expect("address");
}

fn a_pause_that_asks_by_mail_owes_one_ask_email_and_saving_it_again_owes_no_other(at: &Location) {
    let store = at.open();
    paused(&store, "asked", Some(7), 5);
    paused(&store, "silent", None, 5);

    let ask = owed("asked", 7, "ask", ts(5));
    assert_eq!(
        store.mails("asked").expect("mails"),
        std::slice::from_ref(&ask)
    );
    assert!(store.mails("silent").expect("mails").is_empty());
    assert!(store.mails("unknown").expect("mails").is_empty());
    // Due from the pause's time, not before; seen by another store as well.
    assert!(due(&store, 4, 10).is_empty());
    assert_eq!(due(&store, 5, 10), [who("asked", "ask", "")]);
    assert_eq!(
        at.open().mails("asked").expect("mails"),
        std::slice::from_ref(&ask)
    );

    // The same pause saved again (by this store or another) owes it no second time, and
    // leaves it as it was owed.
    let again = PauseRecord {
        ask_by_mail: Some(7),
        ..pause_record()
    };
    store.save_pause("asked", &again, &ts(9));
    store.flush().expect("flush");
    let other = at.open();
    other.save_pause("asked", &again, &ts(10));
    other.flush().expect("flush");
    assert_eq!(
        store.mails("asked").expect("mails"),
        std::slice::from_ref(&ask)
    );
    assert_eq!(
        at.count("SELECT count(*) FROM approval_mail WHERE run_id = 'asked'"),
        1
    );

    // A later pause of the same run owes its own.
    let next = PauseRecord {
        ask_by_mail: Some(8),
        ..pause_record()
    };
    store.save_pause("asked", &next, &ts(12));
    store.flush().expect("flush");
    assert_eq!(
        store.mails("asked").expect("mails"),
        [ask.clone(), owed("asked", 8, "ask", ts(12))]
    );

    // A reminder is owed once: true the first time, false after, from any store.
    assert!(
        store
            .queue_mail("asked", 7, "remind", &ts(20))
            .expect("queue")
    );
    assert!(
        !store
            .queue_mail("asked", 7, "remind", &ts(21))
            .expect("again")
    );
    assert!(
        !other
            .queue_mail("asked", 7, "remind", &ts(22))
            .expect("other")
    );
    // An ask already owed is not owed again by queueing it either.
    assert!(!store.queue_mail("asked", 7, "ask", &ts(23)).expect("ask"));
    // Another kind, another run: owed too.
    assert!(
        store
            .queue_mail("asked", 7, "escalate", &ts(24))
            .expect("escalate")
    );
    assert!(
        store
            .queue_mail("silent", 1, "remind", &ts(25))
            .expect("other run")
    );
    assert_eq!(
        store.mails("asked").expect("mails"),
        [
            ask,
            owed("asked", 7, "remind", ts(20)),
            owed("asked", 7, "escalate", ts(24)),
            owed("asked", 8, "ask", ts(12)),
        ]
    );
    assert_eq!(
        store.mails("silent").expect("mails"),
        [owed("silent", 1, "remind", ts(25))]
    );
    assert_eq!(at.count("SELECT count(*) FROM approval_mail"), 5);
}

fn an_owed_email_is_addressed_to_each_person_once_and_listed_due_earliest_first(at: &Location) {
    let store = at.open();
    paused(&store, "run", Some(7), 1);
    let ask = owed("run", 7, "ask", ts(1));
    let people = to(&[("ada", Some("ada@x.test")), ("bob", None)]);
    store
        .address_mail(&ask.key(), &people, &ts(5))
        .expect("address");

    let mails = store.mails("run").expect("mails");
    assert_eq!(mails.len(), 3, "{mails:#?}");
    // The owed one is done: nothing more to address.
    assert_eq!(mails[0].person, "");
    assert_eq!(mails[0].next_at, None);
    assert_eq!(mails[0].sent_at, Some(ts(5)));
    assert_eq!(mails[0].last_error, None);
    // Ada's is due at once.
    assert_eq!(
        mails[1],
        StoredMail {
            person: "ada".into(),
            email: Some("ada@x.test".into()),
            queued_at: ts(5),
            next_at: Some(ts(5)),
            ..ask.clone()
        }
    );
    // Bob has no address: done, not sent, saying why.
    assert_eq!(mails[2].person, "bob");
    assert_eq!(mails[2].email, None);
    assert_eq!(mails[2].next_at, None);
    assert_eq!(mails[2].sent_at, None);
    let why = mails[2].last_error.as_deref().unwrap_or_default();
    assert!(why.contains("no email address"), "{why:?}");
    assert_eq!(due(&store, 59, 10), [who("run", "ask", "ada")]);

    // Addressed again (another mailer that read it owed too): nobody gets a second email, and
    // who has one is left as it was.
    let other = at.open();
    other
        .address_mail(
            &ask.key(),
            &to(&[("ada", Some("new@x.test")), ("bob", None)]),
            &ts(6),
        )
        .expect("address again");
    let again = store.mails("run").expect("mails");
    assert_eq!(again.len(), 3, "{again:#?}");
    assert_eq!(again[1..], mails[1..]);
    assert_eq!(at.count("SELECT count(*) FROM approval_mail"), 3);
    assert_eq!(due(&store, 59, 10), [who("run", "ask", "ada")]);

    // Listed earliest first (then by run, kind and person), at most `limit`.
    assert!(
        store
            .queue_mail("early", 1, "remind", &ts(3))
            .expect("queue")
    );
    assert!(
        store
            .queue_mail("late", 1, "escalate", &ts(8))
            .expect("queue")
    );
    assert!(store.queue_mail("run", 7, "remind", &ts(5)).expect("queue"));
    assert!(due(&store, 2, 10).is_empty());
    assert_eq!(due(&store, 4, 10), [who("early", "remind", "")]);
    let all = [
        who("early", "remind", ""),
        who("run", "ask", "ada"),
        who("run", "remind", ""),
        who("late", "escalate", ""),
    ];
    assert_eq!(due(&store, 59, 10), all);
    assert_eq!(due(&store, 7, 10), all[..3]);
    assert_eq!(due(&store, 59, 2), all[..2]);
    assert_eq!(due(&store, 59, 1), all[..1]);
    assert!(due(&store, 59, 0).is_empty());
    let listed = store.due_mail(&ts(59), 10).expect("due");
    assert_eq!(listed[1], mails[1], "listed as stored");

    // As JSON (camelCase), and read back.
    let printed = serde_json::to_value(&mails[2]).expect("json");
    assert_eq!(printed["runId"], "run");
    assert_eq!(printed["queuedAt"], ts(5));
    assert_eq!(printed["nextAt"], serde_json::Value::Null);
    assert_eq!(printed["lastError"], json!(why));
    assert_eq!(
        serde_json::from_value::<StoredMail>(printed).expect("read back"),
        mails[2]
    );
}

fn of_several_stores_claiming_the_same_due_email_at_once_exactly_one_has_it_until_it_expires(
    at: &Location,
) {
    const STORES: usize = 6;
    let store = at.open();
    addressed(&store, "run", 10, false);
    let ada = mail_to(&store, "run", "ada");
    assert_eq!((ada.next_at.as_deref(), ada.attempts), (Some(&*ts(10)), 0));

    let stores: Vec<Store> = (0..STORES).map(|_| at.open()).collect();
    let start = std::sync::Barrier::new(STORES);
    let claimed: Vec<bool> = std::thread::scope(|scope| {
        let racing: Vec<_> = stores
            .iter()
            .map(|store| {
                let (start, ada) = (&start, &ada);
                scope.spawn(move || {
                    start.wait();
                    store.claim_mail(&ada.key(), &ts(10), &ts(40))
                })
            })
            .collect();
        racing
            .into_iter()
            .map(|racer| racer.join().expect("racer").expect("claim"))
            .collect()
    });
    assert_eq!(
        claimed.iter().filter(|claimed| **claimed).count(),
        1,
        "{claimed:?}"
    );

    // Counted as one attempt, and taken until the claim expires.
    let taken = mail_to(&store, "run", "ada");
    assert_eq!(taken.attempts, 1);
    assert_eq!(taken.next_at, Some(ts(40)));
    assert_eq!((taken.sent_at, taken.last_error), (None, None));
    assert!(due(&store, 39, 10).is_empty(), "not due while claimed");
    // A claim of what was read before it was taken is refused.
    assert!(
        !store
            .claim_mail(&ada.key(), &ts(10), &ts(50))
            .expect("stale")
    );
    assert_eq!(mail_to(&store, "run", "ada").attempts, 1);

    // Once the claim expires (the claimant stopped before sending), it is due again, and
    // another process takes it.
    assert_eq!(due(&store, 40, 10), [who("run", "ask", "ada")]);
    let seen = store.due_mail(&ts(40), 10).expect("due").remove(0);
    let seen_at = seen.next_at.clone().expect("due");
    assert!(
        stores[0]
            .claim_mail(&seen.key(), &seen_at, &ts(55))
            .expect("retry")
    );
    assert!(
        !stores[1]
            .claim_mail(&seen.key(), &seen_at, &ts(55))
            .expect("lost")
    );
    let retried = mail_to(&store, "run", "ada");
    assert_eq!((retried.attempts, retried.next_at), (2, Some(ts(55))));

    // An email that is done is claimed by nobody.
    store.mail_sent(&seen.key(), &ts(41)).expect("sent");
    assert!(
        !store
            .claim_mail(&seen.key(), &ts(55), &ts(59))
            .expect("done")
    );
    assert_eq!(mail_to(&store, "run", "ada").attempts, 2);
}

fn a_failed_email_is_due_again_at_its_retry_or_done_without_one_and_a_sent_one_is_done(
    at: &Location,
) {
    let store = at.open();
    addressed(&store, "run", 10, true);
    let ada = mail_to(&store, "run", "ada");
    let bob = mail_to(&store, "run", "bob");
    assert!(
        store
            .claim_mail(&ada.key(), &ts(10), &ts(20))
            .expect("claim")
    );

    // Failed, to be retried at 30: kept why, not due before then, due then.
    store
        .mail_failed(&ada.key(), "connection refused", Some(&ts(30)))
        .expect("failed");
    let failed = mail_to(&store, "run", "ada");
    assert_eq!(failed.last_error.as_deref(), Some("connection refused"));
    assert_eq!(failed.next_at, Some(ts(30)));
    assert_eq!((failed.sent_at.as_deref(), failed.attempts), (None, 1));
    assert_eq!(due(&store, 29, 10), [who("run", "ask", "bob")]);
    assert_eq!(
        due(&store, 30, 10),
        [who("run", "ask", "bob"), who("run", "ask", "ada")]
    );
    // Seen as failed by another store too.
    assert_eq!(at.open().mails("run").expect("mails")[1], failed);

    // Retried and sent: done, the earlier error gone.
    assert!(
        store
            .claim_mail(&ada.key(), &ts(30), &ts(45))
            .expect("claim")
    );
    store.mail_sent(&ada.key(), &ts(31)).expect("sent");
    let sent = mail_to(&store, "run", "ada");
    assert_eq!(sent.sent_at, Some(ts(31)));
    assert_eq!((&sent.next_at, &sent.last_error), (&None, &None));
    assert_eq!(sent.attempts, 2);
    assert_eq!(due(&store, 59, 10), [who("run", "ask", "bob")]);

    // Failed with no retry (the address was refused): done, never due again, why kept.
    assert!(
        store
            .claim_mail(&bob.key(), &ts(10), &ts(20))
            .expect("claim")
    );
    store
        .mail_failed(&bob.key(), "550 mailbox unavailable", None)
        .expect("failed");
    let given_up = mail_to(&store, "run", "bob");
    assert_eq!(given_up.next_at, None);
    assert_eq!(given_up.sent_at, None);
    assert_eq!(
        given_up.last_error.as_deref(),
        Some("550 mailbox unavailable")
    );
    assert!(due(&store, 59, 10).is_empty());
    assert_eq!(
        at.count("SELECT count(*) FROM approval_mail WHERE next_at IS NOT NULL"),
        0,
        "nothing left to send"
    );
    // And stays as it is from another store.
    let other = at.open();
    assert!(other.due_mail(&ts(59), 10).expect("due").is_empty());
    assert_eq!(mail_to(&other, "run", "bob"), given_up);
    assert_eq!(mail_to(&other, "run", "ada"), sent);
}

#[test]
fn a_store_at_migration_18_gains_the_mail_outbox() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    let conn = sqlite_store_at_version(&path, 18);
    conn.execute_batch(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', 'running', '\"hi\"', '{at}', '{at}')",
        at = ts(1)
    ))
    .expect("a running run");
    drop(conn);

    let store = Store::open(&path).expect("migrated");
    assert!(store.mails("old").expect("mails").is_empty());
    let pause = PauseRecord {
        ask_by_mail: Some(1),
        ..pause_record()
    };
    store.save_pause("old", &pause, &ts(2));
    store.flush().expect("flush");
    assert!(store.queue_mail("old", 1, "remind", &ts(3)).expect("queue"));
    assert!(!store.queue_mail("old", 1, "remind", &ts(4)).expect("again"));
    assert_eq!(
        store.mails("old").expect("mails"),
        [
            owed("old", 1, "ask", ts(2)),
            owed("old", 1, "remind", ts(3))
        ]
    );
    assert_eq!(due(&store, 2, 10), [who("old", "ask", "")]);
    drop(store);

    let conn = Connection::open(&path).expect("sqlite");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, MIGRATIONS.len() as i64);
    let indexed: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'approval_mail_next'",
            [],
            |row| row.get(0),
        )
        .expect("index");
    assert_eq!(indexed, 1);
}

#[test]
fn on_postgres_a_store_at_migration_10_gains_the_mail_outbox() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    let mut old_schema = "CREATE TABLE weft_schema (version BIGINT NOT NULL); \
         INSERT INTO weft_schema (version) VALUES (10);"
        .to_string();
    old_schema.extend(postgresql::MIGRATIONS[..10].iter().copied());
    old_schema.push_str(&format!(
        "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', 'running', '\"hi\"', '{at}', '{at}');",
        at = ts(1)
    ));
    client.batch_execute(&old_schema).expect("old schema");
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'approval_mail'",
            &[],
        )
        .expect("tables")
        .get(0);
    assert_eq!(tables, 0, "not there before the migration");

    let store = Location::Postgres(url.clone()).open();
    assert!(store.mails("old").expect("mails").is_empty());
    let pause = PauseRecord {
        ask_by_mail: Some(1),
        ..pause_record()
    };
    store.save_pause("old", &pause, &ts(2));
    store.flush().expect("flush");
    assert!(
        store
            .queue_mail("old", 1, "escalate", &ts(3))
            .expect("queue")
    );
    assert!(
        !store
            .queue_mail("old", 1, "escalate", &ts(4))
            .expect("again")
    );
    assert_eq!(
        store.mails("old").expect("mails"),
        [
            owed("old", 1, "ask", ts(2)),
            owed("old", 1, "escalate", ts(3))
        ]
    );
    assert_eq!(due(&store, 2, 10), [who("old", "ask", "")]);
    let version: i64 = client
        .query_one("SELECT version FROM weft_schema", &[])
        .expect("version")
        .get(0);
    assert_eq!(version, postgresql::MIGRATIONS.len() as i64);
    let indexed: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'approval_mail_next'",
            &[],
        )
        .expect("index")
        .get(0);
    assert_eq!(indexed, 1);
}
