//! The store's own tests: round trips, claiming, concurrency, damaged files.

use super::*;
use rusqlite::Connection;
use schema::MIGRATIONS;
use serde_json::json;
use std::sync::{Arc, Mutex};
use weft_event::{EventSink, EventType};

fn ts(n: u64) -> String {
    format!("2025-01-01T00:00:{:02}.000Z", n % 60)
}

fn new_run(id: &str, started_at: &str) -> NewRun {
    NewRun {
        id: id.to_string(),
        flow_name: "demo".to_string(),
        flow_path: Some("flows/demo.json".to_string()),
        flow_json: r#"{"nodes":[],"edges":[]}"#.to_string(),
        flow_version: "e3b0c44298fc1c149afbf4c8996fb924".to_string(),
        version_path: Some("/work/flows/demo.json".to_string()),
        pins_json: None,
        input: json!({"question": "why?"}),
        started_at: started_at.to_string(),
        host: None,
        trigger: None,
    }
}

fn event(run_id: &str, seq: u64, kind: EventType, node_id: Option<&str>) -> RunEvent {
    RunEvent {
        seq,
        run_id: run_id.into(),
        ts: ts(seq).into(),
        kind,
        node_id: node_id.map(Arc::from),
        content: format!("event {seq}"),
        scope: None,
        item: None,
        from: None,
        usage: None,
        model: None,
    }
}

fn step(node_id: &str, n: i64, source: Option<&str>) -> QueuedStep {
    QueuedStep {
        node_id: node_id.into(),
        input: json!({"n": n}).into(),
        source_node_id: source.map(Arc::from),
    }
}

fn steps_of(queue: &[StoredStep]) -> Vec<QueuedStep> {
    queue.iter().map(|stored| stored.step.clone()).collect()
}

/// Where a test's store lives: a SQLite file in a temporary directory, or a new database on
/// the test process's PostgreSQL server. The tests that take one run on both.
enum Location {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Location {
    fn sqlite() -> Location {
        Location::Sqlite(tempfile::tempdir().expect("temp dir"))
    }

    fn postgres() -> Location {
        Location::Postgres(weft_test_postgres::PostgresServer::shared().new_database())
    }

    /// Opens the store here, as another process would: each call is a new `Store`.
    fn open(&self) -> Store {
        match self {
            Location::Sqlite(dir) => Store::open(&dir.path().join("nested/dir/runs.db")),
            Location::Postgres(url) => Store::open_postgres(url),
        }
        .expect("the store opens")
    }

    /// Sets the lease of `run_id` as another process would have it.
    fn lease_to(&self, run_id: &str, owner: &str, until: &str) {
        let sql = "UPDATE runs SET lease_owner = $2, lease_until = $3 WHERE id = $1";
        match self {
            Location::Sqlite(dir) => {
                let conn = Connection::open(dir.path().join("nested/dir/runs.db")).expect("sqlite");
                conn.execute(
                    &sql.replace('$', "?"),
                    rusqlite::params![run_id, owner, until],
                )
                .expect("lease");
            }
            Location::Postgres(url) => {
                let mut client =
                    ::postgres::Client::connect(url, ::postgres::NoTls).expect("postgres");
                client
                    .execute(sql, &[&run_id, &owner, &until])
                    .expect("lease");
            }
        }
    }

    /// The single number `sql` (with no parameters) selects, through a connection of its own.
    fn count(&self, sql: &str) -> i64 {
        match self {
            Location::Sqlite(dir) => Connection::open(dir.path().join("nested/dir/runs.db"))
                .expect("sqlite")
                .query_row(sql, [], |row| row.get(0))
                .expect("count"),
            Location::Postgres(url) => std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        ::postgres::Client::connect(url, ::postgres::NoTls)
                            .expect("postgres")
                            .query_one(sql, &[])
                            .expect("count")
                            .get(0)
                    })
                    .join()
                    .expect("count thread")
            }),
        }
    }

    /// Whether an event is stored, read through a connection of its own.
    fn event_lookup(&self) -> impl Fn(&str, u64) -> bool + Send + Sync + 'static {
        let sql = "SELECT first_seq FROM event_batches \
                   WHERE run_id = $1 AND first_seq <= $2 AND last_seq >= $2";
        let location = match self {
            Location::Sqlite(dir) => Err(dir.path().join("nested/dir/runs.db")),
            Location::Postgres(url) => Ok(url.clone()),
        };
        move |run_id: &str, seq: u64| match &location {
            Err(path) => Connection::open(path)
                .expect("sqlite")
                .prepare(&sql.replace('$', "?"))
                .and_then(|mut statement| statement.exists(rusqlite::params![run_id, seq as i64]))
                .expect("query"),
            Ok(url) => std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        ::postgres::Client::connect(url, ::postgres::NoTls)
                            .expect("postgres")
                            .query_opt(sql, &[&run_id, &(seq as i64)])
                            .expect("query")
                            .is_some()
                    })
                    .join()
                    .expect("lookup thread")
            }),
        }
    }
}

/// Runs each named test (a `fn(&Location)`) once on SQLite and once on PostgreSQL.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(&super::Location::sqlite());
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name(&super::Location::postgres());
            })*
        }
    };
}

on_both_backends!(
    exactly_one_of_several_stores_claiming_a_paused_run_at_once_wins,
    store_round_trips_a_run_with_events_and_outputs,
    store_lists_newest_first_and_resolves_prefixes,
    ten_thousand_runs_page_through_each_once_in_order,
    store_claims_a_paused_run_once,
    store_refuses_to_claim_a_finished_run,
    store_pause_survives_reopening_in_another_store,
    store_drop_applies_queued_writes,
    store_reads_concurrently_while_writing,
    a_write_nobody_waits_for_is_stored_and_shown_within_moments,
    every_flush_finds_what_was_queued_before_it_stored_while_others_write,
    store_flush_reports_a_failed_write,
    store_appends_twenty_thousand_events,
    events_queued_while_the_writer_cannot_commit_are_stored_and_shown_in_order,
    refused_events_amid_many_leave_the_others_stored_and_shown_in_order,
    store_publishes_an_event_only_once_it_is_committed,
    store_hands_events_over_in_committed_batches_each_followed_by_a_flush,
    store_marks_runs_of_stopped_processes_interrupted_and_leaves_live_ones,
    a_decision_claimed_with_a_run_outlives_the_claimant_and_is_not_taken_twice,
    store_keeps_a_checkpoint_of_a_running_run,
    a_run_is_created_with_its_seed_outputs_and_first_checkpoint_in_one_write,
    a_run_whose_first_checkpoint_cannot_be_stored_is_not_stored_at_all,
    events_stored_a_row_each_by_an_older_weft_read_back_the_same,
    events_are_read_from_any_point_of_the_batches_they_were_stored_in,
    values_nested_deeper_than_serde_json_reads_are_read_back,
    flow_versions_are_kept_once_per_content_and_found_by_hash_prefix,
);

/// The chain of approval decisions (`decisions`).
mod decisions;
/// Approval follow-ups (`approval_follow_ups`, `runs.follow_up_at`).
mod follow_ups;
/// The outbox of approval emails (`approval_mail`).
mod mail;

/// Three runs of one file in two versions, and a save in a third: three versions kept, each
/// once; a run reads its flow back from its version; a version is found by a prefix of its
/// hash, and a prefix that names several or none is told apart.
fn flow_versions_are_kept_once_per_content_and_found_by_hash_prefix(at: &Location) {
    let (one, two, three) = (
        format!("aaaa1{}", "0".repeat(59)),
        format!("aaaa2{}", "0".repeat(59)),
        format!("bbbb3{}", "0".repeat(59)),
    );
    let run_of = |id: &str, hash: &str, json: &str, n: u64| NewRun {
        flow_path: Some("flows/a.json".into()),
        version_path: Some("/flows/a.json".into()),
        flow_version: hash.into(),
        flow_json: json.into(),
        ..new_run(id, &ts(n))
    };
    let store = at.open();
    store.create_run(&run_of("r1", &one, r#"{"name":"one"}"#, 1));
    store.create_run(&run_of("r2", &one, r#"{"name":"one"}"#, 2));
    store.create_run(&run_of("r3", &two, r#"{"name":"two"}"#, 3));
    store.record_flow_version(
        r#"{"name":"three"}"#,
        &FlowVersionUse {
            path: "/flows/a.json".into(),
            hash: three.clone(),
            at: ts(4),
            kind: VersionUseKind::Save,
            run_id: None,
            by: Some("ana".into()),
        },
    );
    store.flush().expect("flush");
    assert_eq!(at.count("SELECT count(*) FROM flow_versions"), 3);

    let run = store.run("r2").expect("r2");
    assert_eq!(run.flow_version.as_deref(), Some(one.as_str()));
    assert_eq!(run.flow_json, r#"{"name":"one"}"#);
    assert_eq!(store.run("r3").expect("r3").flow_json, r#"{"name":"two"}"#);

    let found = store
        .flow_version("AAAA2")
        .expect("a unique prefix, in either case");
    assert_eq!(
        (found.hash, found.flow_json),
        (two, r#"{"name":"two"}"#.into())
    );
    assert_eq!(found.created_at, ts(3));
    assert!(matches!(
        store.flow_version("aaaa"),
        Err(StoreError::AmbiguousVersion(_))
    ));
    assert!(matches!(
        store.flow_version("cccc"),
        Err(StoreError::NoSuchVersion(_))
    ));
    assert!(matches!(
        store.flow_version("bbb"),
        Err(StoreError::NoSuchVersion(_))
    ));
    assert!(matches!(
        store.flow_version("bb_%"),
        Err(StoreError::NoSuchVersion(_))
    ));

    let uses = store.flow_version_uses("/flows/a.json").expect("uses");
    let seen: Vec<(&str, VersionUseKind, Option<&str>)> = uses
        .iter()
        .map(|used| {
            (
                &used.hash[..5],
                used.kind,
                used.run_id.as_deref().or(used.by.as_deref()),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("aaaa1", VersionUseKind::Run, Some("r1")),
            ("aaaa1", VersionUseKind::Run, Some("r2")),
            ("aaaa2", VersionUseKind::Run, Some("r3")),
            ("bbbb3", VersionUseKind::Save, Some("ana")),
        ]
    );
}

/// Found by the HTTP API's fuzz properties: a webhook's body as deep as serde_json reads (128
/// levels), stored a few levels down in its run's state, could not be read back: the run, and
/// every listing of approvals, failed as damaged.
fn values_nested_deeper_than_serde_json_reads_are_read_back(at: &Location) {
    let nested = |depth: usize| (0..depth).fold(json!("]["), |inner, _| json!([inner]));
    let deep = nested(200);
    let store = at.open();
    store.create_run(&NewRun {
        input: json!({"input": deep.clone()}),
        ..new_run("run-1", &ts(0))
    });
    store.put_node_output("run-1", "a", &deep, 1, ts(1));
    store.set_state("run-1", &json!({"outputs": {"a": deep.clone()}}), &ts(1));
    store.flush().expect("flush");
    let record = store.run("run-1").expect("the run reads back");
    assert_eq!(record.input["input"], deep);
    assert_eq!(record.state["outputs"]["a"], deep);
    let outputs = store.node_outputs("run-1").expect("its outputs read back");
    assert_eq!(outputs[0].output, deep);
    // Deeper than anything Weft takes in comes to when stored: refused as damaged, not read.
    store.set_state("run-1", &nested(MAX_STORED_DEPTH + 1), &ts(2));
    store.flush().expect("flush");
    let error = store.run("run-1").expect_err("too deep").to_string();
    assert!(
        error.contains("the state is not valid JSON: nested 257 levels deep"),
        "{error}"
    );
}

#[test]
fn the_nesting_of_json_text_counts_no_bracket_in_a_string() {
    assert_eq!(nesting(""), 0);
    assert_eq!(nesting("1"), 0);
    assert_eq!(nesting(r#"{"a": [1, {"b": []}]}"#), 4);
    assert_eq!(nesting(r#"["[[[{{", "\"[[", "\\", [2]]"#), 2);
    assert_eq!(nesting("]]][["), 2);
}

fn pause_record() -> PauseRecord {
    PauseRecord {
        waiting: step("approve", 1, Some("draft")),
        queue: vec![step("b", 2, Some("a")), step("c", 3, None)],
        state: json!({"nextSeq": 5, "visits": {"a": 1}}),
        deadline: None,
        follow_up: None,
        ask_by_mail: None,
    }
}

fn store_round_trips_a_run_with_events_and_outputs(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-1", &ts(0)));
    store.append_event(event("run-1", 1, EventType::RunStart, None), None);
    store.append_event(event("run-1", 2, EventType::StepStart, Some("a")), None);
    store.append_event(event("run-1", 3, EventType::StepEnd, Some("a")), None);
    store.put_node_output("run-1", "b", &json!({"text": "B"}), 1, ts(4));
    store.put_node_approval("run-1", "a", &json!({"approved": true}), &ts(4));
    store.put_node_output("run-1", "a", &json!("A"), 2, ts(5));
    store.set_state("run-1", &json!({"k": 1}), &ts(5));
    store.finish_run(
        "run-1",
        RunStatus::Completed,
        Some(&json!({"answer": 42})),
        None,
        &ts(6),
    );
    store.flush().expect("flush");

    let record = store.run("run-1").expect("run");
    assert_eq!(record.summary.status, RunStatus::Completed);
    assert_eq!(record.summary.flow_name, "demo");
    assert_eq!(record.summary.flow_path.as_deref(), Some("flows/demo.json"));
    assert_eq!(record.summary.started_at, ts(0));
    assert_eq!(record.summary.ended_at, Some(ts(6)));
    assert_eq!(record.input, json!({"question": "why?"}));
    assert_eq!(record.result, Some(json!({"answer": 42})));
    assert_eq!(record.state, json!({"k": 1}));
    assert_eq!(record.waiting, None);
    assert!(record.queue.is_empty());

    let events = store.events("run-1").expect("events");
    assert_eq!(
        events,
        vec![
            event("run-1", 1, EventType::RunStart, None),
            event("run-1", 2, EventType::StepStart, Some("a")),
            event("run-1", 3, EventType::StepEnd, Some("a")),
        ]
    );

    let outputs = store.node_outputs("run-1").expect("outputs");
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0].node_id, "a");
    assert_eq!(outputs[0].output, json!("A"));
    assert_eq!(outputs[0].visits, 2);
    assert_eq!(outputs[0].approval, Some(json!({"approved": true})));
    assert_eq!(outputs[1].node_id, "b");
    assert_eq!(outputs[1].approval, None);

    let runs = store.list_runs(10).expect("list");
    assert_eq!(runs, vec![record.summary.clone()]);
    assert!(matches!(store.run("nope"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(
        store.events("nope"),
        Err(StoreError::NoSuchRun(_))
    ));
}

/// Every run once, in `list_runs`' order, however the pages fall: runs started in the same
/// millisecond (ties broken by id) included, and runs started while paging come before the
/// first page, not inside the others.
fn ten_thousand_runs_page_through_each_once_in_order(at: &Location) {
    let store = at.open();
    // Ten runs a millisecond: every page boundary falls inside a tie somewhere.
    let started = |n: u64| {
        format!(
            "2025-01-01T00:{:02}:{:02}.{:03}Z",
            n / 600_000 % 60,
            n / 10_000 % 60,
            n / 10 % 1000
        )
    };
    let total = 10_000u64;
    for n in 0..total {
        store.create_run(&new_run(
            &format!("run-{:05}", (n * 7_919) % total),
            &started(n),
        ));
    }
    store.flush().expect("stored");
    let everything: Vec<String> = store
        .list_runs(total as usize)
        .expect("list")
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(everything.len(), total as usize);
    let mut paged = Vec::new();
    let mut page = store.list_runs(997).expect("first page");
    while let Some(last) = page.last().map(|run| run.id.clone()) {
        paged.extend(page.into_iter().map(|run| run.id));
        if paged.len() == 997 {
            // A run started while a client pages does not move the pages after the first.
            store.create_run(&new_run("run-late", "2026-01-01T00:00:00.000Z"));
            store.flush().expect("stored");
        }
        page = store.list_runs_after(997, &last).expect("next page");
    }
    assert_eq!(paged, everything, "each run once, in order");
    assert!(matches!(
        store.list_runs_after(10, "no-such-run"),
        Err(StoreError::NoSuchRun(id)) if id == "no-such-run"
    ));
}

fn store_lists_newest_first_and_resolves_prefixes(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("abc-1", &ts(1)));
    store.create_run(&new_run("abd-2", &ts(3)));
    store.create_run(&new_run("xyz-3", &ts(2)));
    let ids: Vec<String> = store
        .list_runs(10)
        .expect("list")
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(ids, ["abd-2", "xyz-3", "abc-1"]);
    assert_eq!(store.list_runs(1).expect("list").len(), 1);

    assert_eq!(store.resolve_run_id("x").expect("x"), "xyz-3");
    assert_eq!(store.resolve_run_id("abc").expect("abc"), "abc-1");
    assert_eq!(store.resolve_run_id("abd-2").expect("exact"), "abd-2");
    assert!(matches!(
        store.resolve_run_id("ab"),
        Err(StoreError::Ambiguous(_))
    ));
    assert!(matches!(
        store.resolve_run_id("q"),
        Err(StoreError::NoSuchRun(_))
    ));
    assert!(matches!(
        store.resolve_run_id(""),
        Err(StoreError::NoSuchRun(_))
    ));
    assert!(matches!(
        store.resolve_run_id("%"),
        Err(StoreError::NoSuchRun(_))
    ));
}

fn store_claims_a_paused_run_once(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-p", &ts(0)));
    store.save_pause("run-p", &pause_record(), &ts(1));

    let paused = store.run("run-p").expect("run");
    assert_eq!(paused.summary.status, RunStatus::Paused);
    assert_eq!(paused.summary.waiting_node_id.as_deref(), Some("approve"));

    let claimed = store.claim_paused("run-p", &ts(2), None).expect("claim");
    assert_eq!(claimed.summary.status, RunStatus::Running);
    assert_eq!(claimed.waiting, Some(pause_record().waiting));
    assert_eq!(steps_of(&claimed.queue), pause_record().queue);
    assert_eq!(claimed.state, pause_record().state);

    // The pause stays stored until the resumed run's first checkpoint replaces it, so a
    // resume that dies half-way leaves the run to go back to.
    let after = store.run("run-p").expect("run");
    assert_eq!(after.summary.status, RunStatus::Running);
    assert_eq!(after.waiting, Some(pause_record().waiting));
    assert_eq!(steps_of(&after.queue), pause_record().queue);

    match store.claim_paused("run-p", &ts(3), None) {
        Err(StoreError::NotPaused { run_id, status }) => {
            assert_eq!((run_id.as_str(), status), ("run-p", RunStatus::Running))
        }
        other => panic!("expected NotPaused, got {other:?}"),
    }
    assert!(matches!(
        store.claim_paused("missing", &ts(3), None),
        Err(StoreError::NoSuchRun(_))
    ));
}

fn exactly_one_of_several_stores_claiming_a_paused_run_at_once_wins(at: &Location) {
    let first = at.open();
    first.create_run(&new_run("contested", &ts(0)));
    first.save_pause("contested", &pause_record(), &ts(1));
    first.flush().expect("flush");
    // Eight resumers (each a store of its own, as eight processes would be) claim it together.
    let claimants: Vec<Store> = (0..8).map(|_| at.open()).collect();
    let start = std::sync::Barrier::new(claimants.len());
    let outcomes: Vec<Result<RunRecord, StoreError>> = std::thread::scope(|scope| {
        let racing: Vec<_> = claimants
            .iter()
            .map(|store| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    store.claim_paused("contested", &ts(2), Some(&json!({"decision": "approve"})))
                })
            })
            .collect();
        racing
            .into_iter()
            .map(|claim| claim.join().expect("claimant"))
            .collect()
    });
    let winners = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    assert_eq!(winners, 1, "{outcomes:?}");
    for outcome in outcomes.iter().filter(|outcome| outcome.is_err()) {
        assert!(
            matches!(
                outcome,
                Err(StoreError::NotPaused {
                    status: RunStatus::Running,
                    ..
                })
            ),
            "{outcome:?}"
        );
    }
    let run = first.run("contested").expect("run");
    assert_eq!(run.summary.status, RunStatus::Running);
    assert_eq!(run.state[DECIDED], json!({"decision": "approve"}));
}

fn store_refuses_to_claim_a_finished_run(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-f", &ts(0)));
    store.save_pause("run-f", &pause_record(), &ts(1));
    store.finish_run("run-f", RunStatus::Cancelled, None, None, &ts(2));
    match store.claim_paused("run-f", &ts(3), None) {
        Err(StoreError::Finished { run_id, status }) => {
            assert_eq!(run_id, "run-f");
            assert_eq!(status, RunStatus::Cancelled);
        }
        other => panic!("expected Finished, got {other:?}"),
    }
    let record = store.run("run-f").expect("run");
    assert_eq!(record.waiting, None);
    assert!(record.queue.is_empty());
}

fn store_pause_survives_reopening_in_another_store(at: &Location) {
    let first = at.open();
    first.create_run(&new_run("run-r", &ts(0)));
    first.append_event(event("run-r", 1, EventType::RunStart, None), None);
    first.save_pause("run-r", &pause_record(), &ts(1));
    first.flush().expect("flush");

    // A second process, while the first still has the file open.
    let second = at.open();
    let claimed = second.claim_paused("run-r", &ts(2), None).expect("claim");
    assert_eq!(claimed.waiting, Some(pause_record().waiting));
    assert_eq!(steps_of(&claimed.queue), pause_record().queue);
    assert!(matches!(
        first.claim_paused("run-r", &ts(3), None),
        Err(StoreError::NotPaused { .. })
    ));
    drop(first);
    drop(second);

    // And after both have exited.
    let third = at.open();
    let record = third.run("run-r").expect("run");
    assert_eq!(record.summary.status, RunStatus::Running);
    assert_eq!(third.events("run-r").expect("events").len(), 1);
}

fn store_drop_applies_queued_writes(at: &Location) {
    {
        let store = at.open();
        let clone = store.clone();
        store.create_run(&new_run("run-d", &ts(0)));
        drop(store);
        for seq in 1..=100 {
            clone.append_event(event("run-d", seq, EventType::LlmDelta, Some("a")), None);
        }
    }
    let store = at.open();
    assert_eq!(store.events("run-d").expect("events").len(), 100);
}

fn store_reads_concurrently_while_writing(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-c", &ts(0)));
    store.flush().expect("flush");
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                for _ in 0..50 {
                    let count = store.events("run-c").expect("events").len();
                    assert!(count >= last, "event count went backwards");
                    last = count;
                    assert_eq!(store.list_runs(5).expect("list").len(), 1);
                }
            })
        })
        .collect();
    for seq in 1..=5_000 {
        store.append_event(event("run-c", seq, EventType::LlmDelta, Some("a")), None);
    }
    for reader in readers {
        reader.join().expect("reader thread");
    }
    store.flush().expect("flush");
    let events = store.events("run-c").expect("events");
    assert_eq!(events.len(), 5_000);
    assert!(events.windows(2).all(|pair| pair[0].seq + 1 == pair[1].seq));
}

/// A run waiting on something slow (an LLM call) flushes nothing for a long time: what it wrote
/// before is stored and shown anyway, by the writer thread.
fn a_write_nobody_waits_for_is_stored_and_shown_within_moments(at: &Location) {
    let store = at.open();
    let shown: Arc<Mutex<Vec<u64>>> = Arc::default();
    let sink = shown.clone();
    let listener: EventListener = Arc::new(move |event: &RunEvent| {
        sink.lock().expect("shown").push(event.seq);
    });
    let stored = at.event_lookup();
    store.create_run(&new_run("run-w", &ts(0)));
    for seq in 1..=3 {
        store.append_event(
            event("run-w", seq, EventType::StepStart, Some("a")),
            Some(listener.clone()),
        );
    }
    wait_for_count(&shown, 3);
    assert_eq!(*shown.lock().expect("shown"), vec![1, 2, 3]);
    assert!(stored("run-w", 3), "the shown events are stored");
}

/// Several threads write runs of their own and flush, some from async tasks: each flush
/// returns only once everything its thread queued before is stored, whoever commits it (the
/// flushing thread, another one flushing at the same moment, or the writer thread).
fn every_flush_finds_what_was_queued_before_it_stored_while_others_write(at: &Location) {
    let store = at.open();
    let stored = Arc::new(at.event_lookup());
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let store = store.clone();
            let stored = stored.clone();
            std::thread::spawn(move || {
                let run_id = format!("run-{writer}");
                store.create_run(&new_run(&run_id, &ts(0)));
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("runtime");
                let mut seq = 0;
                for round in 0..40 {
                    for _ in 0..round % 7 + 1 {
                        seq += 1;
                        store.append_event(
                            event(&run_id, seq, EventType::LlmDelta, Some("a")),
                            None,
                        );
                    }
                    if (writer + round) % 2 == 0 {
                        store.flush().expect("flush");
                    } else {
                        runtime.block_on(store.flushed()).expect("flushed");
                    }
                    assert!(
                        stored(&run_id, seq),
                        "event {seq} of {run_id} was queued before the flush and is not stored"
                    );
                }
                seq
            })
        })
        .collect();
    for (writer, thread) in writers.into_iter().enumerate() {
        let last = thread.join().expect("writer thread");
        let run_id = format!("run-{writer}");
        let seqs: Vec<u64> = store
            .events(&run_id)
            .expect("events")
            .iter()
            .map(|event| event.seq)
            .collect();
        assert_eq!(seqs, (1..=last).collect::<Vec<_>>(), "{run_id}");
    }
}

/// A short run's end waits for its writes: on SQLite they are committed (and their events
/// shown) on the thread that waits, with no hand-over to the writer thread and back.
#[test]
fn a_flush_on_sqlite_commits_on_the_flushing_thread() {
    let at = Location::sqlite();
    let store = at.open();
    let (listener, threads) = thread_names();
    store.create_run(&new_run("run-h", &ts(0)));
    store.flush().expect("flush");
    let here = std::thread::current().name().map(str::to_string);
    // The writer thread commits what waits longer than a moment; a test thread taken off
    // its core between the write and the flush may see it do so: one of twenty is enough.
    let mut committed_here = 0;
    for seq in 1..=20 {
        threads.lock().expect("threads").clear();
        store.append_event(
            event("run-h", seq, EventType::StepEnd, Some("a")),
            Some(listener.clone()),
        );
        store.flush().expect("flush");
        let seen = threads.lock().expect("threads").clone();
        assert_eq!(seen.len(), 1, "the event was shown once by the flush's end");
        if seen[0] == here {
            committed_here += 1;
        }
    }
    assert!(
        committed_here > 0,
        "every commit was handed to the writer thread"
    );
}

/// A store opened for a command that may end in a moment (`WriterStart::OnDemand`).
fn on_demand(at: &Location) -> Store {
    let Location::Sqlite(dir) = at else {
        unreachable!("the writer thread starts on demand on SQLite only")
    };
    Store::open_with(&dir.path().join("runs.db"), WriterStart::OnDemand).expect("the store opens")
}

/// The names of the threads a listener was called on, in order.
fn thread_names() -> (EventListener, Arc<Mutex<Vec<Option<String>>>>) {
    let names: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let sink = names.clone();
    let listener: EventListener = Arc::new(move |_: &RunEvent| {
        let name = std::thread::current().name().map(str::to_string);
        sink.lock().expect("names").push(name);
    });
    (listener, names)
}

/// Waits (a while at most) until a listener has recorded `count` events in `seen`.
fn wait_for_count<T>(seen: &Mutex<Vec<T>>, count: usize) {
    let waited = std::time::Instant::now();
    while seen.lock().expect("seen").len() < count {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(20),
            "{} of {count} events were shown without a flush",
            seen.lock().expect("seen").len()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A short run on a store whose writer starts on demand: it writes, flushes and ends without
/// a thread of the store's, and everything it wrote is there.
#[test]
fn a_short_run_on_an_on_demand_store_starts_no_thread_and_keeps_everything() {
    let at = Location::sqlite();
    let (listener, names) = thread_names();
    {
        let store = on_demand(&at);
        store.create_run(&new_run("run-s", &ts(0)));
        for seq in 1..=5 {
            store.append_event(
                event("run-s", seq, EventType::StepEnd, Some("a")),
                Some(listener.clone()),
            );
        }
        store.finish_run("run-s", RunStatus::Completed, None, None, &ts(6));
        store.flush().expect("flush");
        let here = std::thread::current().name().map(str::to_string);
        assert_eq!(*names.lock().expect("names"), vec![here; 5]);
        store.append_event(event("run-s", 6, EventType::RunEnd, None), None);
        assert!(
            store.inner.writer.get().is_none(),
            "a writer thread started"
        );
        // Dropped with a write queued: the store's end commits it.
    }
    let store = on_demand(&at);
    assert_eq!(store.events("run-s").expect("events").len(), 6);
    assert_eq!(
        store.run("run-s").expect("run").summary.status,
        RunStatus::Completed
    );
}

/// `weft run`'s store, made by its open and left to the process's end: a run created,
/// evented and finished in one commit, and a write still queued when the store is let go, are
/// all there for the next process (here another store on the same file).
#[test]
fn a_store_left_to_the_process_end_keeps_every_write() {
    let at = Location::sqlite();
    {
        let store = on_demand(&at);
        assert_eq!(store.deadline_at_open(), None);
        store.end_with_process();
        store.create_run(&new_run("run-e", &ts(0)));
        for seq in 1..=3 {
            store.append_event(event("run-e", seq, EventType::StepEnd, Some("a")), None);
        }
        // The same number twice in one commit: the second is refused, as in any commit.
        store.append_event(event("run-e", 3, EventType::StepEnd, Some("b")), None);
        let refused = store.flush().expect_err("a second event 3");
        assert!(
            matches!(
                refused,
                StoreError::EventNotAfter {
                    seq: 3,
                    last: 3,
                    ..
                }
            ),
            "{refused}"
        );
        store.finish_run("run-e", RunStatus::Completed, None, None, &ts(4));
        store.append_event(event("run-e", 4, EventType::RunEnd, None), None);
        // Dropped with writes queued.
    }
    let store = on_demand(&at);
    let events = store.events("run-e").expect("events");
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(events[2].node_id.as_deref(), Some("a"));
    assert_eq!(
        store.run("run-e").expect("run").summary.status,
        RunStatus::Completed
    );
}

/// A short command's run is created, checkpointed and finished in one commit: the run reads
/// back as it ended, with no queue, while a run created and checkpointed beside it in the same
/// commit, and left running, keeps the queue it can be continued from.
#[test]
fn a_run_created_and_finished_in_one_commit_reads_back_whole_beside_one_left_running() {
    let at = Location::sqlite();
    let store = on_demand(&at);
    let stored = |key: u64, node: &str| StoredStep {
        key,
        step: step(node, key as i64, None),
        visit: Some(1),
    };
    let checkpoint = |added: Vec<StoredStep>, removed: Vec<u64>, next: u64| Checkpoint {
        added,
        removed,
        waiting: None,
        state: json!({ "nextSeq": next }),
    };
    for run_id in ["run-ended", "run-going"] {
        store.create_run_with(
            new_run(run_id, &ts(0)),
            [],
            &checkpoint(vec![stored(0, "start")], Vec::new(), 1),
        );
        store.save_checkpoint(
            run_id,
            &checkpoint(vec![stored(1, "shout"), stored(2, "log")], vec![0], 3),
            &ts(1),
        );
        store.save_checkpoint(run_id, &checkpoint(Vec::new(), vec![1], 4), &ts(2));
    }
    store.finish_run("run-ended", RunStatus::Completed, None, None, &ts(3));
    store.flush().expect("one commit");

    let ended = store.run("run-ended").expect("run");
    assert_eq!(ended.summary.status, RunStatus::Completed);
    assert!(ended.queue.is_empty(), "{:?}", ended.queue);
    assert_eq!(ended.state, json!({"nextSeq": 4}));
    let going = store.run("run-going").expect("run");
    assert_eq!(going.summary.status, RunStatus::Running);
    assert_eq!(going.queue, [stored(2, "log")]);
    assert_eq!(going.state, json!({"nextSeq": 4}));
}

/// Told that its caller is about to wait, an on-demand store commits and shows what was
/// written in the background, with nobody flushing.
#[test]
fn an_on_demand_store_told_a_wait_is_coming_shows_its_writes_meanwhile() {
    let at = Location::sqlite();
    let store = on_demand(&at);
    let (listener, names) = thread_names();
    store.create_run(&new_run("run-e", &ts(0)));
    store.append_event(
        event("run-e", 1, EventType::StepStart, Some("ask")),
        Some(listener.clone()),
    );
    store.expect_wait();
    wait_for_count(&names, 1);
    store.append_event(
        event("run-e", 2, EventType::LlmDelta, Some("ask")),
        Some(listener.clone()),
    );
    wait_for_count(&names, 2);
    assert!(
        names
            .lock()
            .expect("names")
            .iter()
            .all(|name| name.as_deref() == Some("weft-store-writer")),
        "{:?}",
        names.lock().expect("names")
    );
}

/// A large write (a large output's event) starts an on-demand store's writer, which commits
/// it at once: a run that never waits does not hold every large output until its end.
#[test]
fn a_large_write_starts_an_on_demand_writer() {
    let at = Location::sqlite();
    let store = on_demand(&at);
    let (listener, names) = thread_names();
    store.create_run(&new_run("run-l", &ts(0)));
    store.append_event(
        event("run-l", 1, EventType::StepStart, Some("a")),
        Some(listener.clone()),
    );
    assert!(
        store.inner.writer.get().is_none(),
        "a small write started it"
    );
    let mut large = event("run-l", 2, EventType::StepEnd, Some("a"));
    large.content = "x".repeat(writer::LARGE_WRITE_BYTES);
    store.append_event(large, Some(listener.clone()));
    wait_for_count(&names, 2);
    assert!(
        names
            .lock()
            .expect("names")
            .iter()
            .all(|name| name.as_deref() == Some("weft-store-writer")),
        "{:?}",
        names.lock().expect("names")
    );
}

/// A run that goes on without waiting piles writes up: an on-demand store then starts its
/// writer, which commits them as they come; an async flush after many finds them all stored.
#[test]
fn writes_piling_up_start_an_on_demand_writer() {
    let at = Location::sqlite();
    let store = on_demand(&at);
    let (listener, names) = thread_names();
    store.create_run(&new_run("run-p", &ts(0)));
    for seq in 1..=PILED_UP as u64 {
        store.append_event(
            event("run-p", seq, EventType::LlmDelta, Some("a")),
            Some(listener.clone()),
        );
    }
    wait_for_count(&names, PILED_UP);
    for seq in PILED_UP as u64 + 1..=2_000 {
        store.append_event(event("run-p", seq, EventType::LlmDelta, Some("a")), None);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(store.flushed()).expect("flushed");
    assert_eq!(store.last_seq("run-p").expect("last"), 2_000);
}

#[test]
fn a_postgres_store_made_by_a_newer_weft_is_refused_and_its_url_shown_without_password() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    drop(Store::open_postgres(&url).expect("open"));
    let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    client
        .batch_execute("UPDATE weft_schema SET version = 99")
        .expect("set version");
    let with_password = url.replacen("weft@", "weft:hunter2@", 1);
    match Store::open_postgres(&with_password) {
        Err(error @ StoreError::Open { .. }) => {
            let message = error.to_string();
            assert!(message.contains("newer version"), "{message}");
            assert!(message.contains("weft:***@"), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
        other => panic!("expected Open error, got {other:?}"),
    }
}

#[test]
fn a_postgres_server_that_does_not_answer_is_a_clear_open_error() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://weft:secret@127.0.0.1:{port}/runs");
    match Store::open_location(&url) {
        Err(error @ StoreError::Open { .. }) => {
            let message = error.to_string();
            assert!(message.contains("cannot connect"), "{message}");
            assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
        other => panic!("expected Open error, got {other:?}"),
    }
}

#[test]
fn a_postgres_store_connects_again_when_the_server_closes_its_connections() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    let store = Store::open_postgres(&url).expect("open");
    store.create_run(&new_run("cut", &ts(0)));
    for seq in 1..=10 {
        store.append_event(event("cut", seq, EventType::LlmDelta, Some("a")), None);
    }
    store.flush().expect("flush");
    assert_eq!(store.events("cut").expect("events").len(), 10);
    // The server ends every other connection to the database (a restart, an administrator).
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    let ended: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()) AS ended",
            &[],
        )
        .expect("terminate")
        .get(0);
    assert_eq!(ended, 2, "the store's writer and reader");
    // Give the clients a moment to see their connections end.
    std::thread::sleep(std::time::Duration::from_millis(200));
    for seq in 11..=20 {
        store.append_event(event("cut", seq, EventType::LlmDelta, Some("a")), None);
    }
    store
        .flush()
        .expect("the writer connected again and nothing was lost");
    let events = store.events("cut").expect("the reader connected again");
    assert_eq!(events.len(), 20);
    assert_eq!(
        store.run("cut").expect("run").summary.status,
        RunStatus::Running
    );
}

#[test]
fn store_open_rejects_a_file_that_is_not_a_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "these are my notes, not a database\n".repeat(200)).expect("write");
    match Store::open(&path) {
        Err(err @ StoreError::Open { .. }) => {
            let message = err.to_string();
            assert!(message.contains("notes.txt"), "{message}");
            assert!(message.contains("not a SQLite database"), "{message}");
        }
        other => panic!("expected Open error, got {other:?}"),
    }
}

#[test]
fn store_open_rejects_a_newer_schema() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    drop(Store::open(&path).expect("open"));
    let conn = Connection::open(&path).expect("sqlite");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, MIGRATIONS.len() as i64);
    conn.pragma_update(None, "user_version", 99)
        .expect("set version");
    drop(conn);
    match Store::open(&path) {
        Err(StoreError::Open { message, .. }) => {
            assert!(message.contains("newer version"), "{message}")
        }
        other => panic!("expected Open error, got {other:?}"),
    }
}

fn store_flush_reports_a_failed_write(at: &Location) {
    let store = at.open();
    store.append_event(event("ghost", 1, EventType::RunStart, None), None);
    store.create_run(&new_run("real", &ts(0)));
    store.append_event(event("real", 1, EventType::RunStart, None), None);
    // A read in between does not swallow the error.
    assert!(matches!(store.run("ghost"), Err(StoreError::NoSuchRun(_))));
    match store.flush() {
        Err(error @ (StoreError::Sqlite { .. } | StoreError::Postgres { .. })) => {
            let message = error.to_string();
            assert!(message.contains("ghost"), "{message}");
            assert!(message.to_lowercase().contains("foreign key"), "{message}");
            // The database's error is kept as the source, not only as text.
            let source = std::error::Error::source(&error).expect("a source");
            assert!(
                format!("{source:?}").to_lowercase().contains("foreign key"),
                "{source:?}"
            );
        }
        other => panic!("expected a write error, got {other:?}"),
    }
    // The other writes of the same batch were applied, and the error was reported once.
    assert_eq!(store.events("real").expect("events").len(), 1);
    store.flush().expect("second flush is clean");

    store.set_state("ghost", &json!({}), &ts(1));
    assert!(matches!(store.flush(), Err(StoreError::NoSuchRun(_))));
}

fn store_appends_twenty_thousand_events(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-big", &ts(0)));
    for seq in 1..=20_000 {
        store.append_event(
            event("run-big", seq, EventType::LlmDelta, Some("writer")),
            None,
        );
    }
    store.flush().expect("flush");
    assert_eq!(store.events("run-big").expect("events").len(), 20_000);
}

/// Events queued faster than the writer commits wait in several parts of the queue; they are
/// stored, and shown, in the order they were queued.
fn events_queued_while_the_writer_cannot_commit_are_stored_and_shown_in_order(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-q", &ts(0)));
    store.flush().expect("the run is stored");
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let sink = seen.clone();
    let listener: EventListener = Arc::new(move |event: &RunEvent| {
        sink.lock().expect("seen").push(event.seq);
    });
    let held = store.inner.shared.hold_connection();
    for seq in 1..=1_300 {
        store.append_event(
            event("run-q", seq, EventType::LlmDelta, Some("a")),
            Some(listener.clone()),
        );
    }
    assert_eq!(
        store.inner.shared.queued(),
        1_300,
        "nothing was committed yet"
    );
    drop(held);
    store.flush().expect("flush");
    let in_order: Vec<u64> = (1..=1_300).collect();
    let stored = store.events("run-q").expect("events");
    assert_eq!(
        stored.iter().map(|event| event.seq).collect::<Vec<_>>(),
        in_order
    );
    assert_eq!(*seen.lock().expect("seen"), in_order, "shown in order");
    // The parts emptied are used again: a second run of events is stored the same way.
    for seq in 1_301..=2_600 {
        store.append_event(event("run-q", seq, EventType::LlmDelta, Some("a")), None);
    }
    store.flush().expect("flush");
    assert_eq!(store.events("run-q").expect("events").len(), 2_600);
}

/// Of many events written in one batch, one the store refuses (a second event with the same
/// number, an event of a run that does not exist) fails alone, wherever it falls.
fn refused_events_amid_many_leave_the_others_stored_and_shown_in_order(at: &Location) {
    let store = at.open();
    let seen: Arc<Mutex<Vec<(String, u64, String)>>> = Arc::default();
    let sink = seen.clone();
    let listener: EventListener = Arc::new(move |event: &RunEvent| {
        let line = (event.run_id.to_string(), event.seq, event.content.clone());
        sink.lock().expect("seen").push(line);
    });
    store.create_run(&new_run("run-m", &ts(0)));
    for seq in 1..=100 {
        store.append_event(
            event("run-m", seq, EventType::LlmDelta, Some("a")),
            Some(listener.clone()),
        );
        if seq == 40 {
            let mut again = event("run-m", 7, EventType::LlmDelta, Some("a"));
            again.content = "a second event 7".into();
            store.append_event(again, Some(listener.clone()));
        }
        if seq == 70 {
            store.append_event(
                event("ghost", 1, EventType::RunStart, None),
                Some(listener.clone()),
            );
        }
    }
    let error = store
        .flush()
        .expect_err("two events were refused")
        .to_string();
    // The first refusal in the order they were queued is the one reported.
    assert!(error.contains("event 7 of run run-m"), "{error}");
    store.flush().expect("the refusals were reported once");
    let stored = store.events("run-m").expect("events");
    assert_eq!(
        stored.iter().map(|event| event.seq).collect::<Vec<_>>(),
        (1..=100).collect::<Vec<_>>()
    );
    assert_eq!(stored[6].content, "event 7", "the first event 7 stands");
    assert_eq!(
        seen.lock().expect("seen").clone(),
        (1..=100)
            .map(|seq| ("run-m".to_string(), seq, format!("event {seq}")))
            .collect::<Vec<_>>(),
        "the stored events, in order, were shown; the refused ones were not"
    );
}

fn store_publishes_an_event_only_once_it_is_committed(at: &Location) {
    let store = at.open();
    let seen: Arc<Mutex<Vec<(u64, bool)>>> = Arc::default();
    let sink = seen.clone();
    // Another connection, as another process would read it: the event must already be there.
    let stored = at.event_lookup();
    let listener: EventListener = Arc::new(move |event: &RunEvent| {
        let stored = stored(&event.run_id, event.seq);
        sink.lock().expect("seen").push((event.seq, stored));
    });
    store.create_run(&new_run("run-p", &ts(0)));
    for seq in 1..=50 {
        store.append_event(
            event("run-p", seq, EventType::LlmDelta, Some("a")),
            Some(listener.clone()),
        );
    }
    // An event the store refuses (its run does not exist) is never shown.
    store.append_event(
        event("ghost", 1, EventType::RunStart, None),
        Some(listener.clone()),
    );
    assert!(store.flush().is_err());
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(
        seen,
        (1..=50).map(|seq| (seq, true)).collect::<Vec<_>>(),
        "every event reached the listener after its commit, in order, and the refused one never"
    );
}

/// Records what a sink is handed: `Some(seq)` for an event, `None` for a flush.
#[derive(Default)]
struct BatchRecorder(Mutex<Vec<Option<u64>>>);

impl EventSink for BatchRecorder {
    fn event(&self, event: &RunEvent) {
        self.0.lock().expect("calls").push(Some(event.seq));
    }

    fn flush(&self) {
        self.0.lock().expect("calls").push(None);
    }
}

fn store_hands_events_over_in_committed_batches_each_followed_by_a_flush(at: &Location) {
    let store = at.open();
    let recorder = Arc::new(BatchRecorder::default());
    let listener: EventListener = recorder.clone();
    store.create_run(&new_run("run-b", &ts(0)));
    for seq in 1..=3_000 {
        store.append_event(
            event("run-b", seq, EventType::LlmDelta, Some("a")),
            Some(listener.clone()),
        );
    }
    store.flush().expect("flush");
    let calls = recorder.0.lock().expect("calls").clone();
    let events: Vec<u64> = calls.iter().flatten().copied().collect();
    assert_eq!(
        events,
        (1..=3_000).collect::<Vec<_>>(),
        "every event, in order"
    );
    // A sink that buffers until flush (the CLI's NDJSON printer) has shown everything: the
    // last call is a flush, a flush never comes twice in a row, and no batch is larger than
    // what the writer commits at once.
    assert_eq!(calls.last(), Some(&None));
    assert!(calls.windows(2).all(|pair| pair != [None, None]));
    let batches: Vec<usize> = calls
        .split(Option::is_none)
        .map(<[Option<u64>]>::len)
        .filter(|len| *len > 0)
        .collect();
    assert!(
        batches.len() >= 3,
        "3,000 events are more than one commit: {batches:?}"
    );
    assert!(batches.iter().all(|len| *len <= 1_000), "{batches:?}");
}

fn store_marks_runs_of_stopped_processes_interrupted_and_leaves_live_ones(at: &Location) {
    let first = at.open();
    assert_eq!(first.deadline_at_open(), None, "nothing waits yet");
    for id in [
        "dead",
        "mine",
        "expired",
        "elsewhere",
        "waits-long",
        "waits-short",
    ] {
        first.create_run(&new_run(id, &ts(0)));
    }
    // Two approvals waiting with a deadline: the open that marks the others reads the earlier.
    for (id, deadline) in [("waits-long", ts(50)), ("waits-short", ts(30))] {
        let pause = PauseRecord {
            deadline: Some(deadline),
            ..pause_record()
        };
        first.save_pause(id, &pause, &ts(1));
    }
    first.flush().expect("flush");
    // `dead`: a process of this machine that is gone (this one's id, another start time);
    // `expired` and `elsewhere`: processes of another machine, with a lease run out or not.
    let me = lease::current_owner();
    let (rest, start) = me.rsplit_once(':').expect("host:pid:start");
    let gone = format!("{rest}:{}", start.parse::<u64>().expect("ticks") + 7);
    at.lease_to("dead", &gone, "2999-01-01T00:00:00.000Z");
    at.lease_to("expired", "far-away:12:34", "2000-01-01T00:00:00.000Z");
    at.lease_to("elsewhere", "far-away:12:34", "2999-01-01T00:00:00.000Z");

    let second = at.open();
    assert_eq!(second.deadline_at_open(), Some(ts(30).as_str()));
    let status = |id: &str| second.run(id).expect("run").summary.status;
    assert_eq!(status("waits-short"), RunStatus::Paused);
    assert_eq!(status("dead"), RunStatus::Interrupted);
    assert_eq!(status("expired"), RunStatus::Interrupted);
    assert_eq!(
        status("mine"),
        RunStatus::Running,
        "this process still runs it"
    );
    assert_eq!(
        status("elsewhere"),
        RunStatus::Running,
        "its lease still holds"
    );
    let reason = second.run("dead").expect("run").error.unwrap_or_default();
    assert!(reason.contains("stopped before the run ended"), "{reason}");
    assert!(reason.contains("weft resume dead --retry"), "{reason}");
    let reason = second
        .run("expired")
        .expect("run")
        .error
        .unwrap_or_default();
    assert!(reason.contains("stopped renewing its lease"), "{reason}");
    assert!(second.interrupt_abandoned().expect("again").is_empty());

    // Exactly one claim wins; a decision cannot be given to an interrupted run.
    match second.claim_paused("dead", &ts(5), None) {
        Err(StoreError::NotPaused { status, .. }) => assert_eq!(status, RunStatus::Interrupted),
        other => panic!("expected NotPaused, got {other:?}"),
    }
    let claimed = second
        .claim_interrupted("dead", &ts(5), None)
        .expect("claim");
    assert_eq!(claimed.summary.status, RunStatus::Running);
    match first.claim_interrupted("dead", &ts(6), None) {
        Err(StoreError::NotInterrupted { status, .. }) => assert_eq!(status, RunStatus::Running),
        other => panic!("expected NotInterrupted, got {other:?}"),
    }
}

fn a_decision_claimed_with_a_run_outlives_the_claimant_and_is_not_taken_twice(at: &Location) {
    let first = at.open();
    first.create_run(&new_run("decided", &ts(0)));
    first.save_pause("decided", &pause_record(), &ts(1));
    first.create_run(&new_run("busy", &ts(0)));
    first.flush().expect("flush");
    let approve = json!({"decision": "approve", "note": "fine"});
    let claimed = first
        .claim_paused("decided", &ts(2), Some(&approve))
        .expect("claim");
    assert_eq!(claimed.state[DECIDED], approve, "the claimant gets it back");
    // Both claimants die: the one that took the decision, and one running `busy`.
    let me = lease::current_owner();
    let (rest, start) = me.rsplit_once(':').expect("host:pid:start");
    let gone = format!("{rest}:{}", start.parse::<u64>().expect("ticks") + 7);
    for id in ["decided", "busy"] {
        at.lease_to(id, &gone, "2999-01-01T00:00:00.000Z");
    }
    drop(first);

    let second = at.open();
    let status = |id: &str| second.run(id).expect("run").summary.status;
    assert_eq!(status("decided"), RunStatus::Interrupted);
    // Another answer is refused, naming the one taken, and claims nothing.
    let reject = json!({"decision": "reject", "note": ""});
    match second.claim_interrupted("decided", &ts(3), Some(&reject)) {
        Err(error @ StoreError::NotWaiting { .. }) => {
            let message = error.to_string();
            assert!(message.contains("(approve)"), "{message}");
            assert!(message.contains("--retry"), "{message}");
        }
        other => panic!("expected NotWaiting, got {other:?}"),
    }
    assert_eq!(status("decided"), RunStatus::Interrupted);
    // So is any answer to a run that was not waiting for one; it stays to be continued.
    match second.claim_interrupted("busy", &ts(3), Some(&reject)) {
        Err(StoreError::NotWaiting { decided: None, .. }) => {}
        other => panic!("expected NotWaiting, got {other:?}"),
    }
    assert_eq!(status("busy"), RunStatus::Interrupted);
    // Continued without an answer, the run comes back with the decision and its waiting step.
    let continued = second
        .claim_interrupted("decided", &ts(4), None)
        .expect("claim");
    assert_eq!(continued.state[DECIDED], approve);
    assert_eq!(continued.waiting, Some(pause_record().waiting));
    // The next checkpoint writes the state afresh: the decision is applied, not kept.
    second.save_checkpoint(
        "decided",
        &Checkpoint {
            added: Vec::new(),
            removed: Vec::new(),
            waiting: None,
            state: json!({"nextSeq": 9}),
        },
        &ts(5),
    );
    second.flush().expect("flush");
    assert_eq!(second.run("decided").expect("run").state.get(DECIDED), None);
}

fn store_keeps_a_checkpoint_of_a_running_run(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-c", &ts(0)));
    let stored = |key: u64, node: &str, visit: Option<u64>| StoredStep {
        key,
        step: step(node, key as i64, Some("a")),
        visit,
    };
    store.save_checkpoint(
        "run-c",
        &Checkpoint {
            added: vec![stored(3, "slow", Some(1)), stored(4, "next", None)],
            removed: Vec::new(),
            waiting: Some(step("review", 9, Some("draft"))),
            state: json!({"nextSeq": 12}),
        },
        &ts(1),
    );
    store.save_checkpoint(
        "run-c",
        &Checkpoint {
            added: vec![stored(7, "later", Some(2))],
            removed: vec![4],
            waiting: None,
            state: json!({"nextSeq": 20}),
        },
        &ts(2),
    );
    let record = store.run("run-c").expect("run");
    assert_eq!(record.summary.status, RunStatus::Running);
    assert_eq!(
        record.queue,
        [stored(3, "slow", Some(1)), stored(7, "later", Some(2))]
    );
    assert_eq!(record.waiting, None);
    assert_eq!(record.state, json!({"nextSeq": 20}));
    // Ending the run leaves no queue behind.
    store.finish_run("run-c", RunStatus::Completed, None, None, &ts(3));
    assert!(store.run("run-c").expect("run").queue.is_empty());
}

fn a_run_is_created_with_its_seed_outputs_and_first_checkpoint_in_one_write(at: &Location) {
    let store = at.open();
    let first = StoredStep {
        key: 0,
        step: step("write", 1, None),
        visit: None,
    };
    store.create_run_with(
        new_run("run-w", &ts(0)),
        [("draft", &json!("earlier text"))],
        &Checkpoint {
            added: vec![first.clone()],
            removed: Vec::new(),
            waiting: None,
            state: json!({"nextSeq": 1}),
        },
    );
    let record = store.run("run-w").expect("run");
    assert_eq!(record.summary.status, RunStatus::Running);
    assert_eq!(record.queue, [first]);
    assert_eq!(record.state, json!({"nextSeq": 1}));
    let outputs = store.node_outputs("run-w").expect("outputs");
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].node_id, "draft");
    assert_eq!(outputs[0].output, json!("earlier text"));
}

fn a_run_whose_first_checkpoint_cannot_be_stored_is_not_stored_at_all(at: &Location) {
    let store = at.open();
    // A visit count SQLite cannot hold: the checkpoint's queue row is refused.
    let unstorable = StoredStep {
        key: 0,
        step: step("write", 1, None),
        visit: Some(u64::MAX),
    };
    store.create_run_with(
        new_run("run-half", &ts(0)),
        [("draft", &json!("earlier text"))],
        &Checkpoint {
            added: vec![unstorable],
            removed: Vec::new(),
            waiting: None,
            state: json!({"nextSeq": 1}),
        },
    );
    assert!(store.flush().is_err(), "the failed write is reported");
    assert!(
        matches!(store.run("run-half"), Err(StoreError::NoSuchRun(_))),
        "no run without the state to continue it from"
    );
    assert!(matches!(
        store.node_outputs("run-half"),
        Err(StoreError::NoSuchRun(_))
    ));
    // The writer goes on with later writes.
    store.create_run(&new_run("run-next", &ts(1)));
    assert_eq!(
        store.run("run-next").expect("run").summary.status,
        RunStatus::Running
    );
}

/// A SQLite store as the Weft whose schema ended at migration `version` left it.
fn sqlite_store_at_version(path: &std::path::Path, version: usize) -> Connection {
    let mut conn = Connection::open(path).expect("sqlite");
    for (index, migration) in MIGRATIONS[..version].iter().enumerate() {
        let tx = conn.transaction().expect("transaction");
        tx.execute_batch(migration).expect("old migration");
        tx.pragma_update(None, "user_version", index as i64 + 1)
            .expect("version");
        tx.commit().expect("commit");
    }
    conn
}

#[test]
fn runs_stored_before_the_flow_moved_to_its_own_table_keep_their_flow() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    // A store as the version before migration 8 left it, with a finished run in it.
    let conn = sqlite_store_at_version(&path, 7);
    let flow = r#"{"nodes":[{"id":"start","type":"start"}],"edges":[]}"#;
    conn.execute(
        "INSERT INTO runs (id, flow_name, flow_json, status, input_json, started_at, updated_at) \
         VALUES ('old', 'demo', ?1, 'completed', '\"hi\"', ?2, ?2)",
        [flow, &ts(1)],
    )
    .expect("old run");
    drop(conn);

    let store = Store::open(&path).expect("migrated");
    let run = store.run("old").expect("the old run");
    assert_eq!(run.flow_json, flow);
    assert_eq!(
        run.flow_version, None,
        "an older Weft's run names no version"
    );
    assert_eq!(run.input, json!("hi"));
    // New runs keep their flow the same way.
    store.create_run(&new_run("new", &ts(2)));
    store.flush().expect("flush");
    assert_eq!(
        store.run("new").expect("the new run").flow_json,
        r#"{"nodes":[],"edges":[]}"#
    );
}

#[test]
fn pins_stored_in_the_runs_row_move_to_their_own_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    // A store as migration 15 left it: a paused run with its pins in its row.
    let conn = sqlite_store_at_version(&path, 15);
    conn.execute_batch(&format!(
        "INSERT INTO flow_versions (hash, flow_json, created_at) \
         VALUES ('f1', '{{\"nodes\":[],\"edges\":[]}}', '{at}'); \
         INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at, \
         flow_version, pins_json) VALUES ('pinned', 'demo', 'paused', '\"hi\"', '{at}', '{at}', \
         'f1', '{{\"classify\":\"bug\"}}')",
        at = ts(1)
    ))
    .expect("old run");
    drop(conn);

    let store = Store::open(&path).expect("migrated");
    assert_eq!(
        store.run("pinned").expect("the old run").pins,
        Some(json!({"classify": "bug"}))
    );
    let mut new = new_run("new", &ts(2));
    new.pins_json = Some(r#"{"draft":"text"}"#.into());
    store.create_run(&new);
    store.flush().expect("flush");
    assert_eq!(
        store.run("new").expect("the new run").pins,
        Some(json!({"draft": "text"}))
    );
    drop(store);
    // Out of the row each checkpoint writes again.
    let conn = Connection::open(&path).expect("sqlite");
    let in_rows: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM runs WHERE pins_json IS NOT NULL",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(in_rows, 0);
    // A run a Weft from before made in a shared store, pins in its row, is read the same.
    conn.execute(
        "UPDATE runs SET pins_json = '{\"late\":1}' WHERE id = 'new'",
        [],
    )
    .expect("as a Weft from before writes it");
    conn.execute("DELETE FROM run_pins WHERE run_id = 'new'", [])
        .expect("no pins of its own");
    drop(conn);
    let store = Store::open(&path).expect("opened again");
    assert_eq!(
        store.run("new").expect("the run").pins,
        Some(json!({"late": 1}))
    );
    // Pins kept for a run that has none yet; one that has them keeps its own.
    store.keep_pins("pinned", r#"{"other":2}"#.into());
    store.keep_pins("new", r#"{"kept":3}"#.into());
    store.flush().expect("flush");
    assert_eq!(
        store.run("pinned").expect("the old run").pins,
        Some(json!({"classify": "bug"}))
    );
    assert_eq!(
        store.run("new").expect("the run").pins,
        Some(json!({"kept": 3}))
    );
}

#[test]
fn on_postgres_pins_stored_in_the_runs_row_move_to_their_own_table() {
    let url = weft_test_postgres::PostgresServer::shared().new_database();
    let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("postgres");
    // A database as PostgreSQL migration 7 left it: a paused run with its pins in its row.
    let mut old_schema = "CREATE TABLE weft_schema (version BIGINT NOT NULL); \
         INSERT INTO weft_schema (version) VALUES (7);"
        .to_string();
    old_schema.extend(postgresql::MIGRATIONS[..7].iter().copied());
    client.batch_execute(&old_schema).expect("old schema");
    client
        .batch_execute(&format!(
            "INSERT INTO flow_versions (hash, flow_json, created_at) \
             VALUES ('f1', '{{\"nodes\":[],\"edges\":[]}}', '{at}'); \
             INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at, \
             flow_version, pins_json) VALUES ('pinned', 'demo', 'paused', '\"hi\"', '{at}', \
             '{at}', 'f1', '{{\"classify\":\"bug\"}}')",
            at = ts(1)
        ))
        .expect("old run");

    let store = Location::Postgres(url.clone()).open();
    assert_eq!(
        store.run("pinned").expect("the old run").pins,
        Some(json!({"classify": "bug"}))
    );
    let moved: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM run_pins WHERE run_id = 'pinned' AND pins_json LIKE '%bug%'",
            &[],
        )
        .expect("count")
        .get(0);
    let in_rows: i64 = client
        .query_one("SELECT COUNT(*) FROM runs WHERE pins_json IS NOT NULL", &[])
        .expect("count")
        .get(0);
    assert_eq!((moved, in_rows), (1, 0));
}

/// The schema of the store at `conn` as facts that do not depend on how it was made: each
/// table's columns, keys, foreign keys and whether it has row ids, each index's columns,
/// uniqueness and condition.
fn schema_facts(conn: &Connection) -> Vec<String> {
    let strings = |sql: &str| -> Vec<String> {
        let mut statement = conn.prepare(sql).expect("schema query");
        let columns = statement.column_count();
        statement
            .query_map([], |row| {
                (0..columns)
                    .map(|index| {
                        row.get_ref(index).map(|value| match value {
                            rusqlite::types::ValueRef::Null => "null".to_string(),
                            rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                            rusqlite::types::ValueRef::Text(text) => {
                                String::from_utf8_lossy(text).into_owned()
                            }
                            _ => "?".to_string(),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(|cells| cells.join(" "))
            })
            .expect("schema rows")
            .collect::<Result<Vec<_>, _>>()
            .expect("schema rows")
    };
    let mut facts = Vec::new();
    for table in strings("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") {
        let sql = strings(&format!(
            "SELECT sql FROM sqlite_master WHERE name = '{table}'"
        ));
        let rowid = !sql.concat().to_uppercase().contains("WITHOUT ROWID");
        facts.push(format!("table {table} rowid {rowid}"));
        for column in strings(&format!("SELECT * FROM pragma_table_xinfo('{table}')")) {
            facts.push(format!("  column {column}"));
        }
        for key in strings(&format!(
            "SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list('{table}')"
        )) {
            facts.push(format!("  references {key}"));
        }
        for index in strings(&format!(
            "SELECT name, \"unique\", origin, partial FROM pragma_index_list('{table}') ORDER BY name"
        )) {
            let name = index.split(' ').next().unwrap_or_default().to_string();
            let columns = strings(&format!(
                "SELECT seqno, name, desc FROM pragma_index_xinfo('{name}')"
            ));
            let condition = strings(&format!(
                "SELECT COALESCE(substr(sql, instr(upper(sql), ' WHERE ')), '') FROM sqlite_master WHERE name = '{name}'"
            ));
            facts.push(format!("  index {index} {columns:?} {condition:?}"));
        }
    }
    facts
}

#[test]
fn a_new_stores_schema_is_the_one_the_migrations_leave() {
    let dir = tempfile::tempdir().expect("temp dir");
    let migrated = dir.path().join("migrated.db");
    let conn = sqlite_store_at_version(&migrated, MIGRATIONS.len());
    let by_migrations = schema_facts(&conn);
    drop(conn);
    let made = dir.path().join("made.db");
    drop(Store::open(&made).expect("a new store"));
    let conn = Connection::open(&made).expect("sqlite");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, MIGRATIONS.len() as i64);
    // The features' tables are made at their first use, as the migrations made them.
    assert_eq!(feature_tables_in(&made), Vec::<&str>::new());
    for feature in schema::Feature::ALL {
        conn.execute_batch(feature.sqlite_tables())
            .expect("the feature's tables");
    }
    assert_eq!(schema_facts(&conn), by_migrations);
    // Made again where they are, nothing changes (another process may have made them).
    for feature in schema::Feature::ALL {
        conn.execute_batch(feature.sqlite_tables())
            .expect("the feature's tables again");
    }
    assert_eq!(schema_facts(&conn), by_migrations);
    let head: (i64, String) = conn
        .query_row("SELECT count, last_hash FROM decision_chain", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .expect("one head of the decisions' chain");
    assert_eq!(head, (0, "0".repeat(64)));
    assert!(by_migrations.len() > 60, "{by_migrations:#?}");
    // And a store made so goes on migrating from there: reopened, nothing changes.
    drop(conn);
    drop(Store::open(&made).expect("reopened"));
    let conn = Connection::open(&made).expect("sqlite");
    assert_eq!(schema_facts(&conn), by_migrations);
}

/// The tables of the features a store at `path` has, by name.
fn feature_tables_in(path: &std::path::Path) -> Vec<&'static str> {
    let conn = Connection::open(path).expect("sqlite");
    schema::Feature::ALL
        .iter()
        .map(|feature| feature.table())
        .filter(|table| {
            conn.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |row| row.get::<_, i64>(0),
            )
            .expect("tables")
                == 1
        })
        .collect()
}

/// A new store holds only the tables every run uses (migration 21). A run that uses no
/// feature leaves them unmade; reading a feature before its first use finds nothing; its first
/// use makes its tables, and another store already open on the file reads what it kept.
#[test]
fn a_features_tables_are_made_at_its_first_use_and_read_empty_before() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    let store = Store::open(&path).expect("open");
    store.create_run(&new_run("plain", &ts(0)));
    store.append_event(event("plain", 1, EventType::RunStart, None), None);
    store.put_node_output("plain", "a", &json!("A"), 1, ts(1));
    store.finish_run(
        "plain",
        RunStatus::Completed,
        Some(&json!("A")),
        None,
        &ts(2),
    );
    store.flush().expect("flush");
    assert_eq!(feature_tables_in(&path), Vec::<&str>::new());

    // Read before any use, on this store and on one opened after it.
    let other = Store::open(&path).expect("a second store on the file");
    for reader in [&store, &other] {
        assert_eq!(reader.run("plain").expect("run").pins, None);
        assert!(reader.decisions(None).expect("decisions").is_empty());
        assert!(
            reader
                .decisions_at("plain", 1)
                .expect("decisions")
                .is_empty()
        );
        assert_eq!(
            reader.verify_decisions().expect("verify"),
            ChainCheck::Intact { count: 0 }
        );
        assert!(
            reader
                .follow_ups("plain", 1)
                .expect("follow-ups")
                .is_empty()
        );
        assert!(reader.due_mail(&ts(59), 10).expect("mail").is_empty());
        assert!(reader.mails("plain").expect("mail").is_empty());
        assert_eq!(reader.latest_claim("demo", 0).expect("claims"), None);
    }
    assert_eq!(feature_tables_in(&path), Vec::<&str>::new());

    // First uses, each through `store`: `other` has read the schema without them.
    let mut pinned = new_run("pinned", &ts(3));
    pinned.pins_json = Some(r#"{"a":"pinned A"}"#.to_string());
    store.create_run(&pinned);
    store.create_run(&new_run("asks", &ts(4)));
    store.save_pause(
        "asks",
        &PauseRecord {
            ask_by_mail: Some(1),
            ..pause_record()
        },
        &ts(5),
    );
    store.flush().expect("flush");
    let fields = json!({});
    let decision = NewDecision {
        run_id: "asks",
        node_id: "approve",
        pause: 1,
        decision: "approve",
        by: "ana",
        channel: "cli",
        note: "",
        fields: &fields,
        draft_edit: None,
        at: &ts(6),
    };
    assert!(matches!(
        store.record_decision(&decision),
        Ok(Recorded::New(_))
    ));
    let remind = FollowUp {
        run_id: "asks",
        pause: 1,
        kind: "remind",
        at: &ts(7),
        to: &["ana".to_string()],
    };
    assert!(store.claim_follow_up(&remind).expect("follow-up"));
    assert!(
        store
            .claim_occurrence("demo", 0, &ts(8), &ts(8))
            .expect("claim")
    );
    let mut made = feature_tables_in(&path);
    made.sort_unstable();
    let mut all: Vec<&str> = schema::Feature::ALL.iter().map(|f| f.table()).collect();
    all.sort_unstable();
    assert_eq!(made, all);

    for reader in [&store, &other] {
        assert_eq!(
            reader.run("pinned").expect("run").pins,
            Some(json!({"a": "pinned A"}))
        );
        assert_eq!(
            reader
                .decisions(Some("asks"))
                .expect("decisions")
                .iter()
                .map(|kept| kept.by.as_str())
                .collect::<Vec<_>>(),
            ["ana"]
        );
        assert_eq!(
            reader.verify_decisions().expect("verify"),
            ChainCheck::Intact { count: 1 }
        );
        assert_eq!(reader.follow_ups("asks", 1).expect("follow-ups").len(), 1);
        assert_eq!(reader.mails("asks").expect("mail").len(), 1);
        assert_eq!(reader.latest_claim("demo", 0).expect("claims"), Some(ts(8)));
    }
    // Used again, nothing is made twice and nothing kept is lost.
    assert!(
        !other
            .claim_occurrence("demo", 0, &ts(8), &ts(9))
            .expect("claim")
    );
    assert!(matches!(
        other.record_decision(&decision),
        Ok(Recorded::Repeated(_))
    ));
}

#[test]
fn a_long_log_is_folded_into_the_database_when_the_store_closes_and_a_short_one_is_left() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    let log = dir.path().join("runs.db-wal");
    let log_size = || std::fs::metadata(&log).map_or(0, |meta| meta.len());

    // A short run's writes stay in the log: closing does not sync and copy them.
    let store = Store::open(&path).expect("open");
    store.create_run(&new_run("small", &ts(1)));
    store.flush().expect("flush");
    drop(store);
    let short = log_size();
    assert!(
        short > 0 && short <= schema::FOLD_LOG_ABOVE_BYTES,
        "{short}"
    );

    // A log past the bound is folded on close, so the next process does not read it all.
    let store = Store::open(&path).expect("open again");
    let mut big = new_run("big", &ts(2));
    big.flow_json = format!(
        r#"{{"nodes":[],"edges":[],"pad":"{}"}}"#,
        "x".repeat(3 << 20)
    );
    big.flow_version = "b16".into();
    store.create_run(&big);
    store.flush().expect("flush");
    assert!(log_size() > schema::FOLD_LOG_ABOVE_BYTES);
    drop(store);
    assert_eq!(log_size(), 0, "the long log was not folded");

    let store = Store::open(&path).expect("open a third time");
    assert_eq!(
        store.run("small").expect("small").summary.status,
        RunStatus::Running
    );
    assert_eq!(store.run("big").expect("big").flow_json, big.flow_json);
}

/// Events of every shape, as an older Weft stored them (a row each, in `events`), and node
/// outputs with every column, read back the same once the store is opened and migrated; the
/// run then goes on numbering its events after them.
fn events_stored_a_row_each_by_an_older_weft_read_back_the_same(at: &Location) {
    let insert_run = "INSERT INTO runs (id, flow_name, status, input_json, started_at, updated_at) \
                      VALUES ('old', 'demo', 'paused', '{}', $1, $1)";
    let insert_flow = "INSERT INTO run_flows (run_id, flow_json) VALUES ('old', '{}')";
    let insert_output = "INSERT INTO node_outputs (run_id, node_id, output_json, visits, \
                         approval_json, updated_at, input_tokens, output_tokens, metadata_json) \
                         VALUES ('old', 'writer', '{\"text\":\"hi\"}', 2, '{\"decision\":\"approve\"}', \
                         $1, 12, 34, '{\"sources\":[]}')";
    let old_output = NodeOutputRecord {
        node_id: "writer".into(),
        output: json!({"text": "hi"}),
        visits: 2,
        approval: Some(json!({"decision": "approve"})),
        updated_at: ts(3),
        usage: weft_providers::Usage {
            input_tokens: 12,
            output_tokens: 34,
        },
        metadata: Some(json!({"sources": []})),
    };
    let insert_event = "INSERT INTO events \
        (run_id, seq, ts, type, node_id, content, scope, item, usage_json, from_node) \
        VALUES ('old', $1, $2, $3, $4, $5, $6, $7, $8, $9)";
    let mut start = event("old", 1, EventType::RunStart, None);
    start.content = "{\"input\":\"hi\"}".into();
    let mut step_start = event("old", 2, EventType::StepStart, Some("draft"));
    step_start.from = Some("start".into());
    step_start.content = "quote \" and ünïcode".into();
    let mut answer = event("old", 3, EventType::LlmResponse, Some("writer"));
    answer.scope = Some("each[1]".into());
    answer.item = Some(1);
    answer.usage = Some(weft_providers::Usage {
        input_tokens: 12,
        output_tokens: 34,
    });
    let old_events = vec![start, step_start, answer];
    let usage_json = |event: &RunEvent| {
        event
            .usage
            .map(|usage| serde_json::to_string(&usage).expect("usage"))
    };
    match at {
        Location::Sqlite(dir) => {
            let path = dir.path().join("nested/dir/runs.db");
            std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
            let conn = sqlite_store_at_version(&path, 9);
            let sqlite = |sql: &str| sql.replace('$', "?");
            conn.execute(&sqlite(insert_run), [ts(0)]).expect("run");
            conn.execute(insert_flow, []).expect("flow");
            conn.execute(&sqlite(insert_output), [ts(3)])
                .expect("output");
            for event in &old_events {
                conn.execute(
                    &sqlite(insert_event),
                    rusqlite::params![
                        event.seq as i64,
                        event.ts,
                        event.kind.as_str(),
                        event.node_id,
                        event.content,
                        event.scope,
                        event.item.map(|item| item as i64),
                        usage_json(event),
                        event.from,
                    ],
                )
                .expect("old event");
            }
        }
        Location::Postgres(url) => {
            let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).expect("postgres");
            let mut old_schema = "CREATE TABLE weft_schema (version BIGINT NOT NULL); \
                 INSERT INTO weft_schema (version) VALUES (2);"
                .to_string();
            old_schema.extend(postgresql::MIGRATIONS[..2].iter().copied());
            client.batch_execute(&old_schema).expect("old schema");
            client.execute(insert_run, &[&ts(0)]).expect("run");
            client.execute(insert_flow, &[]).expect("flow");
            client.execute(insert_output, &[&ts(3)]).expect("output");
            for event in &old_events {
                client
                    .execute(
                        insert_event,
                        &[
                            &(event.seq as i64),
                            &&*event.ts,
                            &event.kind.as_str(),
                            &event.node_id.as_deref(),
                            &event.content,
                            &event.scope,
                            &event.item.map(|item| item as i64),
                            &usage_json(event),
                            &event.from.as_deref(),
                        ],
                    )
                    .expect("old event");
            }
        }
    }

    let store = at.open();
    assert_eq!(store.events("old").expect("events"), old_events);
    assert_eq!(store.node_outputs("old").expect("outputs"), [old_output]);
    assert_eq!(store.last_seq("old").expect("last"), 3);
    assert_eq!(
        store.events_after("old", 2).expect("after 2"),
        old_events[2..]
    );
    store.append_event(event("old", 4, EventType::RunEnd, None), None);
    store.append_event(event("old", 3, EventType::RunEnd, None), None);
    let error = store.flush().expect_err("event 3 is stored already");
    assert!(
        matches!(
            error,
            StoreError::EventNotAfter {
                seq: 3,
                last: 4,
                ..
            }
        ),
        "{error}"
    );
    let seqs: Vec<u64> = store
        .events("old")
        .expect("events")
        .iter()
        .map(|event| event.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
}

/// A run's events stored over many commits (batches of different sizes) are read back from
/// any point: what a follower that has seen up to `after` asks for.
fn events_are_read_from_any_point_of_the_batches_they_were_stored_in(at: &Location) {
    let store = at.open();
    store.create_run(&new_run("run-f", &ts(0)));
    store.create_run(&new_run("run-other", &ts(0)));
    let mut seq = 0;
    for batch in [1, 5, 2, 40, 1, 13] {
        for _ in 0..batch {
            seq += 1;
            store.append_event(event("run-f", seq, EventType::LlmDelta, Some("a")), None);
            // Another run's events in the same commits are its own.
            store.append_event(event("run-other", seq, EventType::LlmDelta, None), None);
        }
        store.flush().expect("flush");
    }
    assert_eq!(seq, 62);
    for after in 0..=63 {
        let seqs: Vec<u64> = store
            .events_after("run-f", after)
            .expect("events after")
            .iter()
            .map(|event| event.seq)
            .collect();
        assert_eq!(seqs, (after + 1..=62).collect::<Vec<_>>(), "after {after}");
    }
    let others = store.events("run-other").expect("other run");
    assert_eq!(others.len(), 62);
    assert!(others.iter().all(|event| &*event.run_id == "run-other"));
    assert_eq!(store.last_seq("run-f").expect("last"), 62);
    assert_eq!(store.last_seq("run-none").expect("none"), 0);
}

#[test]
fn a_migration_that_fails_leaves_the_store_as_it_was() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("runs.db");
    // A store as migration 8 left it, with a table in the way of migration 10.
    let conn = sqlite_store_at_version(&path, 8);
    conn.execute_batch("CREATE TABLE event_batches (x TEXT)")
        .expect("a table in the way");
    drop(conn);

    match Store::open(&path) {
        Err(error @ StoreError::Open { .. }) => {
            let message = error.to_string();
            assert!(message.contains("schema migration 10 failed"), "{message}");
        }
        other => panic!("expected Open error, got {other:?}"),
    }
    let conn = Connection::open(&path).expect("sqlite");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("version");
    assert_eq!(version, 8, "no migration of the failed set was kept");
    let host_column: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'host'",
            [],
            |row| row.get(0),
        )
        .expect("columns");
    assert_eq!(host_column, 0, "migration 9 was not kept either");
}

/// The statements a new writer compiles ahead are the ones the store runs: each compiles
/// against the current schema (a misspelt one would fail silently there and only cost time).
#[test]
fn the_statements_compiled_ahead_compile_against_the_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    drop(Store::open(&path).expect("open"));
    let conn = Connection::open(&path).expect("connection");
    for sql in writer::RUN_STATEMENTS {
        conn.prepare(sql)
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

/// What this process has read through system calls so far, in bytes (`rchar`).
#[cfg(target_os = "linux")]
fn bytes_read_by_this_process() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .and_then(|bytes| bytes.trim().parse().ok())
        .expect("rchar in /proc/self/io")
}

/// A model's first answer to the node `node_key`, for [`Store::record_llm_call`].
fn answer(node_key: String, response: Value) -> RecordedCall {
    RecordedCall {
        node_key,
        visit: 1,
        call: 1,
        request_hash: "h".to_string(),
        model: String::new(),
        response,
        tool: None,
    }
}

/// A store holding outputs of megabytes takes later outputs and model answers without reading
/// the large ones again. In tables WITHOUT ROWID the rows were the tree's keys, and SQLite read
/// each large row it compared a new key with whole (migration 20). Counted in bytes read, not
/// time.
#[cfg(target_os = "linux")]
#[test]
fn small_writes_after_large_outputs_do_not_read_the_large_ones() {
    let at = Location::sqlite();
    let store = at.open();
    let large = json!("x".repeat(4 << 20));
    for run in 0..4 {
        let run_id = format!("{:08x}-large", run * 0x3000_0000_u32);
        store.create_run(&new_run(&run_id, &ts(run.into())));
        for node in 0..3 {
            store.put_node_output(run_id.as_str(), format!("n{node}"), &large, 1, ts(10));
            store.record_llm_call(&run_id, &answer(format!("n{node}"), large.clone()), &ts(10));
        }
    }
    store.flush().expect("flush");

    let before = bytes_read_by_this_process();
    for run in 0..20 {
        let run_id = format!("{:08x}-small", run * 0x0c00_0000_u32);
        store.create_run(&new_run(&run_id, &ts(20)));
        for node in 0..10 {
            store.put_node_output(run_id.as_str(), format!("a{node}"), &json!("ok"), 1, ts(21));
            store.record_llm_call(&run_id, &answer(format!("a{node}"), json!("ok")), &ts(21));
        }
    }
    store.flush().expect("flush");
    let read = bytes_read_by_this_process() - before;
    // Other tests of this binary read their own stores meanwhile; each large row read again
    // would be 4 MiB, and 400 writes pass several of them.
    assert!(
        read < 64 << 20,
        "200 small outputs and 200 answers read {} MiB",
        read >> 20
    );
}
