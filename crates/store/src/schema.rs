//! The database file and its schema: connection settings and the numbered, forward-only
//! migrations recorded in `PRAGMA user_version`. A newer version of Weft adds migrations at the
//! end of [`MIGRATIONS`] and never edits earlier ones.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

/// How long a connection waits for another one (possibly in another process) to release the
/// database before giving up with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Pages written to the log between two checkpoints (SQLite's default is 1,000).
const WAL_CHECKPOINT_PAGES: i64 = 10_000;
/// Bytes the log file keeps after a checkpoint.
const WAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Prepared statements kept per connection (there are a few dozen distinct ones).
const STATEMENT_CACHE: usize = 48;

/// The schema, one migration per entry; migration `n` (1-based) brings `user_version` from
/// `n - 1` to `n`.
pub(super) const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
    MIGRATION_10,
    MIGRATION_11,
    MIGRATION_12,
    MIGRATION_13,
    MIGRATION_14,
    MIGRATION_15,
    MIGRATION_16,
    MIGRATION_17,
    MIGRATION_18,
    MIGRATION_19,
    MIGRATION_20,
    MIGRATION_21,
];

/// Migration 1: runs, their events, node outputs and the queue of a paused run.
///
/// `waiting_source_node_id` completes the waiting step (`waiting_node_id`,
/// `waiting_input_json`) so that a paused run's queued step round-trips exactly.
const MIGRATION_1: &str = "
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    flow_name TEXT NOT NULL,
    flow_path TEXT,
    flow_json TEXT NOT NULL,
    status TEXT NOT NULL,
    input_json TEXT NOT NULL,
    result_json TEXT,
    error TEXT,
    waiting_node_id TEXT,
    waiting_input_json TEXT,
    waiting_source_node_id TEXT,
    state_json TEXT NOT NULL DEFAULT '{}',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    ended_at TEXT
);
CREATE INDEX runs_started_at ON runs(started_at);
CREATE TABLE events (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    ts TEXT NOT NULL,
    type TEXT NOT NULL,
    node_id TEXT,
    content TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE node_outputs (
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    output_json TEXT NOT NULL,
    visits INTEGER NOT NULL,
    approval_json TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (run_id, node_id)
);
CREATE TABLE queue (
    run_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    input_json TEXT NOT NULL,
    source_node_id TEXT,
    PRIMARY KEY (run_id, position)
);
";

/// Migration 2: events of nested runs (`scope`, `item`), and tokens used: per event
/// (`usage_json` on `llm_response`) and per node. A run's total is the sum over its nodes,
/// computed when read: updating a `runs` row per LLM call would rewrite its flow JSON each time.
const MIGRATION_2: &str = "
ALTER TABLE events ADD COLUMN scope TEXT;
ALTER TABLE events ADD COLUMN item INTEGER;
ALTER TABLE events ADD COLUMN usage_json TEXT;
ALTER TABLE node_outputs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_outputs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
";

/// Migration 3: metadata of a node's latest output (the web pages a search used).
const MIGRATION_3: &str = "
ALTER TABLE node_outputs ADD COLUMN metadata_json TEXT;
";

/// Migration 4: the node whose output started a step (`from` on `step_start`).
const MIGRATION_4: &str = "
ALTER TABLE events ADD COLUMN from_node TEXT;
";

/// Migration 5: crash safety. The lease of the process running a run (`lease_owner`,
/// `lease_until`); the visit a queued step already started as (a step that was running when the
/// run was checkpointed); and the LLM calls a run made, so that a run continued after an
/// interruption gets the answers it already had instead of asking again.
const MIGRATION_5: &str = "
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until TEXT;
CREATE INDEX runs_status ON runs(status);
ALTER TABLE queue ADD COLUMN visit INTEGER;
CREATE TABLE llm_calls (
    run_id TEXT NOT NULL,
    node_key TEXT NOT NULL,
    visit INTEGER NOT NULL,
    call INTEGER NOT NULL,
    request_hash TEXT NOT NULL,
    response_json TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (run_id, node_key, visit, call)
) WITHOUT ROWID;
";

/// Migration 6: what each LLM call cost: the model it asked (`provider/model`) and the tokens
/// the provider reported, so that a run's cost is summed without reading every answer back.
/// Calls recorded before have no model, and count as unpriced.
const MIGRATION_6: &str = "
ALTER TABLE llm_calls ADD COLUMN model TEXT;
ALTER TABLE llm_calls ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
";

/// Migration 7: when a paused run's approval times out (`timeoutSeconds`), so that the next
/// process to open the store finds the approvals nobody decided in time.
const MIGRATION_7: &str = "
ALTER TABLE runs ADD COLUMN deadline TEXT;
CREATE INDEX runs_deadline ON runs(deadline) WHERE deadline IS NOT NULL;
";

/// Migration 8: a run's flow in a table of its own. SQLite rewrites a whole row on every
/// update, and a run's row is updated at each checkpoint and at its end: with the flow in it,
/// a 10,000-node flow (2 MB) was written again each time (6 MB at the end of every such run).
const MIGRATION_8: &str = "
CREATE TABLE run_flows (
    run_id TEXT PRIMARY KEY REFERENCES runs(id),
    flow_json TEXT NOT NULL
);
INSERT INTO run_flows (run_id, flow_json) SELECT id, flow_json FROM runs;
ALTER TABLE runs DROP COLUMN flow_json;
";

/// Migration 9: who drives a run when not whichever process claims it (a Restate workflow).
const MIGRATION_9: &str = "
ALTER TABLE runs ADD COLUMN host TEXT;
";

/// Migration 10: events stored a batch to a row (see `events`): the events one commit stored
/// for a run, as a JSON array of events without their run id. The events stored before become
/// batches of one.
const MIGRATION_10: &str = "
CREATE TABLE event_batches (
    run_id TEXT NOT NULL REFERENCES runs(id),
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    events_json TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
INSERT INTO event_batches (run_id, first_seq, last_seq, events_json)
SELECT run_id, seq, seq, json_array(json_object(
    'seq', seq, 'ts', ts, 'type', type, 'nodeId', node_id, 'content', content,
    'scope', scope, 'item', item, 'from', from_node, 'usage', json(usage_json)))
FROM events ORDER BY run_id, seq;
DROP TABLE events;
";

/// Migration 11: `node_outputs` keyed by its primary key alone (WITHOUT ROWID). A step stores
/// its node's output, and the row and a separate index of `(run_id, node_id)` both had pages
/// rewritten at every commit: a 1,000-step run wrote 61 pages of log for 37 pages of outputs.
const MIGRATION_11: &str = "
CREATE TABLE node_outputs_by_key (
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    output_json TEXT NOT NULL,
    visits INTEGER NOT NULL,
    approval_json TEXT,
    updated_at TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    metadata_json TEXT,
    PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
INSERT INTO node_outputs_by_key (run_id, node_id, output_json, visits, approval_json,
    updated_at, input_tokens, output_tokens, metadata_json)
SELECT run_id, node_id, output_json, visits, approval_json, updated_at, input_tokens,
    output_tokens, metadata_json FROM node_outputs;
DROP TABLE node_outputs;
ALTER TABLE node_outputs_by_key RENAME TO node_outputs;
";

/// Migration 12: MCP tool calls kept beside the LLM calls (`tool`: `server/tool`), numbered
/// with them in their node's visit, so that a run continued after an interruption, a replay and
/// a flow test offline get a tool's result back instead of calling it again.
const MIGRATION_12: &str = "
ALTER TABLE llm_calls ADD COLUMN tool TEXT;
";

/// Migration 13: what started each run, and the schedules' occurrences claimed by a server
/// (one row per occurrence: the first server to insert it starts the run).
const MIGRATION_13: &str = "
ALTER TABLE runs ADD COLUMN trigger_json TEXT;
CREATE TABLE schedule_claims (
    flow TEXT NOT NULL,
    schedule INTEGER NOT NULL,
    occurrence TEXT NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (flow, schedule, occurrence)
) WITHOUT ROWID;
";

/// Migration 14: flow versions. The canonical form of each distinct flow a run ran or the app
/// saved, once (`flow_versions`, by its SHA-256), the version each run ran (`runs.flow_version`;
/// a run stored before has none and keeps its own copy in `run_flows`), and each use of a
/// version by a file: a run, a subflow, a save, a restore (`flow_version_uses`, numbered in the
/// order they were stored: two uses in one millisecond still list in order).
const MIGRATION_14: &str = "
CREATE TABLE flow_versions (
    hash TEXT PRIMARY KEY,
    flow_json TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE flow_version_uses (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    saved_by TEXT
);
CREATE INDEX flow_version_uses_path ON flow_version_uses(path, at);
ALTER TABLE runs ADD COLUMN flow_version TEXT;
";

/// Migration 15: a run's pinned outputs in a column of their own, written once when the run is
/// created. In the engine's state they were written again at every checkpoint: a run with a
/// 16 MB pin rewrote 16 MB at each step. Runs stored before keep them in their state.
const MIGRATION_15: &str = "
ALTER TABLE runs ADD COLUMN pins_json TEXT;
";

/// Migration 16: a run's pinned outputs in a table of their own. In a column of `runs` they
/// were written again with the row at every checkpoint (SQLite rewrites a whole row, large
/// texts included): a 16 MB pin and four steps that wait wrote 64 MB more. The column stays,
/// read when `run_pins` has nothing for a run: a process of the Weft before, still running on a
/// shared store, writes and reads it.
const MIGRATION_16: &str = "
CREATE TABLE run_pins (
    run_id TEXT PRIMARY KEY REFERENCES runs(id),
    pins_json TEXT NOT NULL
);
INSERT INTO run_pins (run_id, pins_json) SELECT id, pins_json FROM runs WHERE pins_json IS NOT NULL;
UPDATE runs SET pins_json = NULL WHERE pins_json IS NOT NULL;
";

/// Migration 17: every approval decision, kept for good in one hash chain (an audit log, see
/// `decisions`): numbered `seq` 1, 2, 3, … as the chain's head (`decision_chain`, one row)
/// counts them, never by the database (a number left out would hide a decision removed); one
/// decision per person and pause of a run.
const MIGRATION_17: &str = "
CREATE TABLE decisions (
    seq INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    pause INTEGER NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    channel TEXT NOT NULL,
    note TEXT NOT NULL,
    fields_json TEXT NOT NULL,
    draft_edit_json TEXT,
    at TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE UNIQUE INDEX decisions_answer ON decisions(run_id, pause, decided_by);
CREATE INDEX decisions_run ON decisions(run_id, seq);
CREATE TABLE decision_chain (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    count INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO decision_chain (id, count, last_hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
";

/// Migration 18: approval follow-ups (reminders, escalations). When a paused run's approval has
/// its next follow-up due (`follow_up_at`, like `deadline`), and the follow-ups done at each
/// pause of a run, one of each kind (the first process to insert it does it).
const MIGRATION_18: &str = "
ALTER TABLE runs ADD COLUMN follow_up_at TEXT;
CREATE INDEX runs_follow_up_at ON runs(follow_up_at) WHERE follow_up_at IS NOT NULL;
CREATE TABLE approval_follow_ups (
    run_id TEXT NOT NULL,
    pause INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    to_json TEXT NOT NULL,
    PRIMARY KEY (run_id, pause, kind)
);
";

/// Migration 19: the outbox of approval emails (asking approvers, reminders, escalations): owed
/// per pause, then one per person, sent by the processes that have a mailer.
const MIGRATION_19: &str = "
CREATE TABLE approval_mail (
    run_id TEXT NOT NULL,
    pause INTEGER NOT NULL,
    kind TEXT NOT NULL,
    person TEXT NOT NULL,
    email TEXT,
    queued_at TEXT NOT NULL,
    next_at TEXT,
    attempts INTEGER NOT NULL,
    sent_at TEXT,
    last_error TEXT,
    PRIMARY KEY (run_id, pause, kind, person)
);
CREATE INDEX approval_mail_next ON approval_mail(next_at) WHERE next_at IS NOT NULL;
";

/// Migration 20: node outputs and model answers back in tables with row ids. In a table
/// WITHOUT ROWID the rows themselves are the tree's keys, large values and all, and SQLite
/// reads the whole of each key it compares with: once a store held large outputs, every
/// later run's write of an output or an answer read them through again (docs/benchmarks.md
/// has what it cost). With row ids the tree is keyed by numbers and the primary key is an
/// index of small keys.
const MIGRATION_20: &str = "
CREATE TABLE node_outputs_by_rowid (
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    output_json TEXT NOT NULL,
    visits INTEGER NOT NULL,
    approval_json TEXT,
    updated_at TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    metadata_json TEXT,
    PRIMARY KEY (run_id, node_id)
);
INSERT INTO node_outputs_by_rowid (run_id, node_id, output_json, visits, approval_json,
    updated_at, input_tokens, output_tokens, metadata_json)
SELECT run_id, node_id, output_json, visits, approval_json, updated_at, input_tokens,
    output_tokens, metadata_json FROM node_outputs;
DROP TABLE node_outputs;
ALTER TABLE node_outputs_by_rowid RENAME TO node_outputs;
CREATE TABLE llm_calls_by_rowid (
    run_id TEXT NOT NULL,
    node_key TEXT NOT NULL,
    visit INTEGER NOT NULL,
    call INTEGER NOT NULL,
    request_hash TEXT NOT NULL,
    response_json TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    model TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    tool TEXT,
    PRIMARY KEY (run_id, node_key, visit, call)
);
INSERT INTO llm_calls_by_rowid (run_id, node_key, visit, call, request_hash, response_json,
    recorded_at, model, input_tokens, output_tokens, tool)
SELECT run_id, node_key, visit, call, request_hash, response_json, recorded_at, model,
    input_tokens, output_tokens, tool FROM llm_calls;
DROP TABLE llm_calls;
ALTER TABLE llm_calls_by_rowid RENAME TO llm_calls;
";

/// Migration 21: a new store holds only the tables that every run uses. The tables of features
/// a run may never touch ([`Feature`]: schedules' claims, pins, approvals' decisions, follow-ups
/// and mail) are made at their first use: SQLite parses every table and index of a store at its
/// first statement, in each process that opens it, and a short run's process paid for parsing
/// those tables too. A store migrated to here keeps the ones it has. The version itself is
/// the change: a Weft before this one, which would take a missing table for a broken store,
/// refuses a store at this version as made by a newer Weft.
const MIGRATION_21: &str = "";

/// The schema as the migrations leave it, made at once in a new store, but for the tables of
/// [`Feature`]s (migration 21): replaying every migration (tables made, altered, copied and
/// dropped, the whole schema parsed again after each change) took half of a first run's time.
/// A test keeps the two the same, with every feature's tables made.
pub(super) const SCHEMA: &str = "
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    flow_name TEXT NOT NULL,
    flow_path TEXT,
    status TEXT NOT NULL,
    input_json TEXT NOT NULL,
    result_json TEXT,
    error TEXT,
    waiting_node_id TEXT,
    waiting_input_json TEXT,
    waiting_source_node_id TEXT,
    state_json TEXT NOT NULL DEFAULT '{}',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    ended_at TEXT,
    lease_owner TEXT,
    lease_until TEXT,
    deadline TEXT,
    host TEXT,
    trigger_json TEXT,
    flow_version TEXT,
    pins_json TEXT,
    follow_up_at TEXT
);
CREATE INDEX runs_started_at ON runs(started_at);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_deadline ON runs(deadline) WHERE deadline IS NOT NULL;
CREATE INDEX runs_follow_up_at ON runs(follow_up_at) WHERE follow_up_at IS NOT NULL;
CREATE TABLE queue (
    run_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    input_json TEXT NOT NULL,
    source_node_id TEXT,
    visit INTEGER,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE llm_calls (
    run_id TEXT NOT NULL,
    node_key TEXT NOT NULL,
    visit INTEGER NOT NULL,
    call INTEGER NOT NULL,
    request_hash TEXT NOT NULL,
    response_json TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    model TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    tool TEXT,
    PRIMARY KEY (run_id, node_key, visit, call)
);
CREATE TABLE run_flows (
    run_id TEXT PRIMARY KEY REFERENCES runs(id),
    flow_json TEXT NOT NULL
);
CREATE TABLE event_batches (
    run_id TEXT NOT NULL REFERENCES runs(id),
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    events_json TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
CREATE TABLE node_outputs (
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    output_json TEXT NOT NULL,
    visits INTEGER NOT NULL,
    approval_json TEXT,
    updated_at TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    metadata_json TEXT,
    PRIMARY KEY (run_id, node_id)
);
CREATE TABLE flow_versions (
    hash TEXT PRIMARY KEY,
    flow_json TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE flow_version_uses (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    saved_by TEXT
);
CREATE INDEX flow_version_uses_path ON flow_version_uses(path, at);
";

/// A feature whose tables a SQLite store gets at its first use (migration 21): written by
/// [`Feature::sqlite_tables`] before any write of it, read as empty while they are missing. A
/// store migrated from before has them all; PostgreSQL's schema has them all from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Feature {
    /// The occurrences of schedules claimed by servers (`schedule_claims`).
    ScheduleClaims,
    /// Runs' pinned outputs (`run_pins`).
    Pins,
    /// The hash chain of approval decisions (`decisions`, `decision_chain`).
    Decisions,
    /// Approvals' reminders and escalations done (`approval_follow_ups`).
    FollowUps,
    /// The outbox of approval emails (`approval_mail`).
    Mail,
}

impl Feature {
    #[cfg(test)]
    pub(super) const ALL: [Feature; 5] = [
        Feature::ScheduleClaims,
        Feature::Pins,
        Feature::Decisions,
        Feature::FollowUps,
        Feature::Mail,
    ];

    /// One of the feature's tables: they are made in one transaction, so where one is, all are.
    pub(super) fn table(self) -> &'static str {
        match self {
            Feature::ScheduleClaims => "schedule_claims",
            Feature::Pins => "run_pins",
            Feature::Decisions => "decision_chain",
            Feature::FollowUps => "approval_follow_ups",
            Feature::Mail => "approval_mail",
        }
    }

    /// The feature's tables as the migrations that added them left them; harmless where they
    /// are there already.
    pub(super) fn sqlite_tables(self) -> &'static str {
        match self {
            Feature::ScheduleClaims => {
                "CREATE TABLE IF NOT EXISTS schedule_claims (
                    flow TEXT NOT NULL,
                    schedule INTEGER NOT NULL,
                    occurrence TEXT NOT NULL,
                    claimed_by TEXT NOT NULL,
                    claimed_at TEXT NOT NULL,
                    PRIMARY KEY (flow, schedule, occurrence)
                ) WITHOUT ROWID;"
            }
            Feature::Pins => {
                "CREATE TABLE IF NOT EXISTS run_pins (
                    run_id TEXT PRIMARY KEY REFERENCES runs(id),
                    pins_json TEXT NOT NULL
                );"
            }
            Feature::Decisions => {
                "CREATE TABLE IF NOT EXISTS decisions (
                    seq INTEGER PRIMARY KEY,
                    run_id TEXT NOT NULL,
                    node_id TEXT NOT NULL,
                    pause INTEGER NOT NULL,
                    decision TEXT NOT NULL,
                    decided_by TEXT NOT NULL,
                    channel TEXT NOT NULL,
                    note TEXT NOT NULL,
                    fields_json TEXT NOT NULL,
                    draft_edit_json TEXT,
                    at TEXT NOT NULL,
                    prev_hash TEXT NOT NULL,
                    hash TEXT NOT NULL
                );
                CREATE UNIQUE INDEX IF NOT EXISTS decisions_answer ON decisions(run_id, pause, decided_by);
                CREATE INDEX IF NOT EXISTS decisions_run ON decisions(run_id, seq);
                CREATE TABLE IF NOT EXISTS decision_chain (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    count INTEGER NOT NULL,
                    last_hash TEXT NOT NULL
                );
                INSERT OR IGNORE INTO decision_chain (id, count, last_hash) VALUES (1, 0,
                    '0000000000000000000000000000000000000000000000000000000000000000');"
            }
            Feature::FollowUps => {
                "CREATE TABLE IF NOT EXISTS approval_follow_ups (
                    run_id TEXT NOT NULL,
                    pause INTEGER NOT NULL,
                    kind TEXT NOT NULL,
                    at TEXT NOT NULL,
                    to_json TEXT NOT NULL,
                    PRIMARY KEY (run_id, pause, kind)
                );"
            }
            Feature::Mail => {
                "CREATE TABLE IF NOT EXISTS approval_mail (
                    run_id TEXT NOT NULL,
                    pause INTEGER NOT NULL,
                    kind TEXT NOT NULL,
                    person TEXT NOT NULL,
                    email TEXT,
                    queued_at TEXT NOT NULL,
                    next_at TEXT,
                    attempts INTEGER NOT NULL,
                    sent_at TEXT,
                    last_error TEXT,
                    PRIMARY KEY (run_id, pause, kind, person)
                );
                CREATE INDEX IF NOT EXISTS approval_mail_next ON approval_mail(next_at)
                    WHERE next_at IS NOT NULL;"
            }
        }
    }
}

/// A clear message for an error met while opening.
pub(super) fn describe(err: &rusqlite::Error) -> String {
    match err.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            "the file is not a SQLite database (is this the right path?)".to_string()
        }
        _ => err.to_string(),
    }
}

/// Sets a connection up. For a store made now (`new`: no file, or an empty one), the switch to
/// WAL and the schema are written without syncs: the switch alone otherwise syncs a rollback
/// journal, its directory, the database and then the log and its directory again, which cost
/// a new store's first `weft run` more than the run. Until [`sync_normally`] it holds no run
/// that a power cut could lose; a crash of the process loses nothing (the OS has the writes).
pub(super) fn configure(conn: &Connection, writer: bool, new: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Before the journal mode: a new store's switch to WAL then syncs as little as the rest.
    conn.pragma_update(None, "synchronous", if new { "OFF" } else { "NORMAL" })?;
    if writer {
        if new {
            // The switch to WAL writes the header under a rollback journal; kept in memory, no
            // journal file is made and removed for it.
            conn.pragma_update_and_check(None, "journal_mode", "MEMORY", |row| {
                row.get::<_, String>(0)
            })?;
        }
        // Reading the journal mode is the first access to the file: a non-database fails here.
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!("the run store could not use WAL mode (journal mode is {mode})");
        }
        // Copying the log back into the database less often: a page that many commits change
        // (the last page of `events`) is copied once per checkpoint instead of once per 1,000
        // pages written. The log file is cut back to a bound after each checkpoint.
        conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    }
    // A process that closes the store leaves the log for the next writer's checkpoint instead
    // of copying it back and syncing three files on the way out: that close cost as much as a
    // short run itself.
    // Nothing committed is at risk from a crash of the process: the log is the database's
    // own (synchronous=NORMAL keeps what the OS was given across a process crash, as before).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// A new store's file: [`SCHEMA`] made by [`configure`] and [`migrate`] in an empty file, in
/// WAL mode, its log folded in ([`new_store_image_from_sql`]; a test keeps the two the same).
/// Copied into place, a new store costs a file's write instead of compiling and running the
/// schema's statements and writing each page to the log, most of what a first run paid more
/// than the next.
pub(super) const NEW_STORE_IMAGE: &[u8] = include_bytes!("new-store.sqlite");

/// Where the image is kept, for the test that writes it again.
#[cfg(test)]
pub(super) const NEW_STORE_IMAGE_FILE: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/src/new-store.sqlite");

/// Puts a new store at `path` from [`NEW_STORE_IMAGE`]: written beside it under a name of its
/// own, then linked into place, so a process opening the same path meanwhile finds either no
/// file or the whole of it. False when the image cannot serve and the caller is to make the
/// store by SQL as before: a file is there already (possibly empty, or made by another process
/// just now), a log is left from a store that was deleted (SQLite would replay it onto the
/// image; an empty file makes it drop the log), or the folder takes no new file or no link.
pub(super) fn place_new_store(path: &Path) -> bool {
    static STAGED: AtomicU64 = AtomicU64::new(0);
    if path.symlink_metadata().is_ok() || with_suffix(path, "-wal").symlink_metadata().is_ok() {
        return false;
    }
    let staged = with_suffix(
        path,
        &format!(
            ".new-{}-{}",
            std::process::id(),
            STAGED.fetch_add(1, Ordering::Relaxed)
        ),
    );
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    // The mode SQLite gives the files it makes (before the umask), as a store made by SQL has.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o644);
    let placed = options
        .open(&staged)
        .and_then(|mut file| file.write_all(NEW_STORE_IMAGE))
        .and_then(|()| std::fs::hard_link(&staged, path));
    let _ = std::fs::remove_file(&staged);
    placed.is_ok()
}

/// `path` with `suffix` added to its file name (`runs.db` → `runs.db-wal`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What [`NEW_STORE_IMAGE`] should hold: a new store made by SQL in `dir`, its log folded into
/// the file.
#[cfg(test)]
pub(super) fn new_store_image_from_sql(dir: &Path) -> Vec<u8> {
    let path = dir.join("image.db");
    let mut conn = Connection::open(&path).expect("open the image's file");
    configure(&conn, true, true).expect("settings");
    migrate(&mut conn).expect("schema");
    sync_normally(&conn).expect("settings");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("fold the log");
    drop(conn);
    std::fs::read(&path).expect("read the image")
}

/// Starts the log of a store just placed from the image, without a sync. The first commit
/// into an empty log writes the log's header and, at `synchronous=NORMAL`, syncs it and its
/// folder: two `fsync`s in a new store's first run, which its commits otherwise never pay. That
/// sync guards a log that starts again over frames of an earlier round; a new log has none.
/// So the first commit is a write of the schema version it has, made without syncs while the
/// log is still empty (looked at under the write lock: a process that opened the store
/// meanwhile may have begun it, and then this commits nothing). Only a saving: when it cannot
/// be made, the store's first commit syncs as any would.
pub(super) fn start_a_new_log(conn: &Connection) -> rusqlite::Result<()> {
    if let Some(path) = conn.path().filter(|path| !path.is_empty()) {
        let log = format!("{path}-wal");
        conn.pragma_update(None, "synchronous", "OFF")?;
        let started = conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
            let empty = std::fs::metadata(&log).map_or(true, |file| file.len() == 0);
            if empty {
                let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
                conn.pragma_update(None, "user_version", version)?;
            }
            conn.execute_batch("COMMIT")
        });
        if let Err(error) = started {
            let _ = conn.execute_batch("ROLLBACK");
            tracing::debug!("a new run store's log was left to its first commit: {error}");
        }
    }
    sync_normally(conn)
}

/// Back to the store's durability once a new store's schema is written (see [`configure`]).
pub(super) fn sync_normally(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", "NORMAL")
}

/// Applies the migrations the database has not had yet, all in one transaction: a new store's
/// schema is written once (each page of it, the schema table's above all, once rather than
/// once per migration), and a failing migration leaves the store as it was. Safe against
/// another process migrating at the same time (the version is re-read under the write lock).
pub(super) fn migrate(conn: &mut Connection) -> Result<(), String> {
    let latest = MIGRATIONS.len();
    // The usual case, a schema already up to date, costs one read and no write lock.
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|err| describe(&err))?;
    if usize::try_from(current) == Ok(latest) {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|err| describe(&err))?;
    let current: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|err| describe(&err))?;
    let current = usize::try_from(current)
        .map_err(|_| format!("the schema version {current} is not valid"))?;
    if current > latest {
        return Err(format!(
            "it was made by a newer version of Weft (schema version {current}; this \
             version knows up to {latest})"
        ));
    }
    let empty = current == 0
        && tx
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(|err| describe(&err))?
            == 0;
    if empty {
        tx.execute_batch(SCHEMA)
            .map_err(|err| format!("making the schema failed: {}", describe(&err)))?;
    } else {
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
            let version = index + 1;
            tx.execute_batch(sql)
                .map_err(|err| format!("schema migration {version} failed: {}", describe(&err)))?;
        }
    }
    tx.pragma_update(None, "user_version", latest as i64)
        .and_then(|()| tx.commit())
        .map_err(|err| format!("schema migration to {latest} failed: {}", describe(&err)))
}

/// Past this size the log is folded into the database when the writer stops. Whoever opens
/// the store first reads its whole log (~0.7 ms per MiB here), so a log left to grow to the
/// automatic checkpoint's 40 MiB would slow every `weft` start; below it, leaving the log saves
/// the syncs of a checkpoint, most of a short run's exit.
pub(super) const FOLD_LOG_ABOVE_BYTES: u64 = 1 << 20;

/// A long log's pages handed to the disk while the runs go on, a step of the log at a time,
/// by a thread of their own: the fold's sync of the log (see [`fold_a_long_log`]), on the way
/// out of the process, then finds them written instead of writing the whole log itself. Only
/// a saving of time: a flush adds durability and takes none away. The file's length is what
/// is watched: a log that starts again from its beginning after a checkpoint keeps its length,
/// and needs no flush ahead, the checkpoint having synced it; a log cut by another process's
/// fold is watched again from its new length.
pub(super) struct LogWriteback {
    path: PathBuf,
    /// The log's length when the last flush began.
    flushed: u64,
    flushing: Arc<AtomicBool>,
    /// How many flushes began.
    pub(super) started: usize,
}

/// How much more log starts another flush.
const WRITEBACK_STEP: u64 = 1 << 20;

impl LogWriteback {
    pub(super) fn of(conn: &Connection) -> Option<LogWriteback> {
        let path = conn.path().filter(|path| !path.is_empty())?;
        Some(LogWriteback {
            path: with_suffix(Path::new(path), "-wal"),
            flushed: 0,
            flushing: Arc::default(),
            started: 0,
        })
    }

    /// After each commit: a log that will be folded, grown by a step since the last flush,
    /// is flushed unless a flush is still under way.
    pub(super) fn committed(&mut self) {
        let Ok(length) = std::fs::metadata(&self.path).map(|log| log.len()) else {
            return;
        };
        if length < self.flushed {
            self.flushed = 0;
        }
        if length <= FOLD_LOG_ABOVE_BYTES || length < self.flushed + WRITEBACK_STEP {
            return;
        }
        if self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.flushed = length;
        self.started += 1;
        let path = self.path.clone();
        let flushing = Arc::clone(&self.flushing);
        let started = std::thread::Builder::new()
            .name("weft-store-flush".into())
            .spawn(move || {
                if let Ok(log) = std::fs::File::open(&path) {
                    let _ = log.sync_data();
                }
                flushing.store(false, Ordering::Release);
            });
        if started.is_err() {
            self.flushing.store(false, Ordering::Release);
        }
    }

    /// Whether a flush began and has not ended.
    #[cfg(test)]
    pub(super) fn flushing(&self) -> bool {
        self.flushing.load(Ordering::Acquire)
    }
}

pub(super) fn fold_a_long_log(conn: &Connection) {
    let Some(path) = conn.path().filter(|path| !path.is_empty()) else {
        return;
    };
    let long =
        std::fs::metadata(format!("{path}-wal")).is_ok_and(|log| log.len() > FOLD_LOG_ABOVE_BYTES);
    if !long {
        return;
    }
    // A reader elsewhere does not hold this process up: the next writer to stop folds it.
    let _ = conn.busy_timeout(std::time::Duration::from_millis(100));
    if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::debug!("the run store's log was left for later: {error}");
    }
}
