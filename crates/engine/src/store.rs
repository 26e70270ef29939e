//! The run store (SPEC §4): every run, its events, node outputs and pending queue, kept in
//! SQLite as they happen, so a paused run can be resumed by another process and a run's
//! history can be opened later.
//!
//! Design:
//! - One database file in WAL mode (`synchronous=NORMAL`, a 5 s busy timeout, foreign keys
//!   on). The schema is built by numbered, forward-only migrations recorded in
//!   `PRAGMA user_version`; a newer version of Weft adds migrations at the end of
//!   `MIGRATIONS` and never edits earlier ones.
//! - Writes made while a run goes on ([`Store::create_run`], [`Store::append_event`], ...)
//!   are queued and return at once. One background writer thread, with its own connection,
//!   applies them in the order they were queued, many at a time in one transaction.
//! - A write that fails is logged with `tracing::error!` and kept; the first such error since
//!   the previous flush is returned by the next [`Store::flush`].
//! - Reads (and [`Store::claim_paused`]) first wait until every write queued before them is
//!   committed, then use a second connection.
//!
//! Timestamps are passed in by the caller (the engine owns the clock) and stored as given;
//! they are expected to be RFC 3339 UTC strings, which sort chronologically as text.

use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{EventType, RunEvent, RunStatus};
use crate::providers::Usage;

/// How long a connection waits for another one (possibly in another process) to release
/// the database before giving up with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The most queued messages the writer applies in one transaction.
const MAX_BATCH: usize = 1_000;

/// Prepared statements kept per connection (there are about a dozen distinct ones).
const STATEMENT_CACHE: usize = 32;

/// The schema, one migration per entry; migration `n` (1-based) brings `user_version` from
/// `n - 1` to `n`. Forward-only: add new entries at the end, never change existing ones.
const MIGRATIONS: &[&str] = &[MIGRATION_1, MIGRATION_2, MIGRATION_3];

/// Migration 1: runs, their events, node outputs and the queue of a paused run.
///
/// `waiting_source_node_id` completes the waiting step (`waiting_node_id`,
/// `waiting_input_json`) so that a paused run's [`QueuedStep`] round-trips exactly.
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

/// Everything that can go wrong in the run store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened, is not a SQLite database, or its schema could
    /// not be brought up to date.
    #[error("run store {path}: {message}")]
    Open { path: String, message: String },
    /// SQLite refused an operation (also used when the writer thread has stopped).
    #[error("run store: {0}")]
    Sqlite(String),
    /// No run has this id.
    #[error("run {0} does not exist")]
    NoSuchRun(String),
    /// The run is completed, failed or cancelled; it never changes again.
    #[error("run {run_id} has already finished ({status}); it cannot be resumed")]
    Finished { run_id: String, status: RunStatus },
    /// The run is running (not paused), so it cannot be claimed for resuming.
    #[error(
        "run {run_id} is running (perhaps being resumed by another process); it cannot be resumed now"
    )]
    NotPaused { run_id: String },
    /// A stored value could not be read back (invalid JSON, unknown status, ...).
    #[error("run {run_id}: stored state is damaged: {message}")]
    Corrupt { run_id: String, message: String },
    /// Several run ids start with this prefix.
    #[error("run id prefix {0} matches several runs")]
    Ambiguous(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(err.to_string())
    }
}

/// A run to create; it starts with status `running`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The run id (unique; the engine uses UUIDs).
    pub id: String,
    pub flow_name: String,
    /// Where the flow file was loaded from, if it came from a file.
    pub flow_path: Option<String>,
    /// The flow as it was when the run started (a resumed run uses this, not the file).
    pub flow_json: String,
    /// The run's input.
    pub input: Value,
    /// RFC 3339 UTC.
    pub started_at: String,
}

/// One step waiting to run: a node, the input it will get and the node it came from.
/// What a paused run needs to continue, written when it pauses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedStep {
    pub node_id: String,
    pub input: Value,
    pub source_node_id: Option<String>,
}

/// What a run saves when it pauses: the step waiting for approval, the steps queued behind
/// it (in order) and the engine's own extra state.
#[derive(Debug, Clone, PartialEq)]
pub struct PauseRecord {
    /// The step the run is waiting on (the `approval` node and its input).
    pub waiting: QueuedStep,
    /// Steps queued while pausing, in the order they are to run.
    pub queue: Vec<QueuedStep>,
    /// Engine-owned extra state (next seq, visits, latest approval...); opaque to the store.
    pub state: Value,
}

/// A run as listed: identity, status and times. Serialized in camelCase, like events.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub flow_name: String,
    pub flow_path: Option<String>,
    pub status: RunStatus,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// The node a paused run waits on.
    pub waiting_node_id: Option<String>,
}

/// Everything stored about a run except its events and node outputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub summary: RunSummary,
    /// The flow as it was when the run started.
    pub flow_json: String,
    pub input: Value,
    /// The final result of a completed run.
    pub result: Option<Value>,
    /// Why a failed run failed.
    pub error: Option<String>,
    /// The step a paused run waits on.
    pub waiting: Option<QueuedStep>,
    /// The steps queued behind `waiting`, in order.
    pub queue: Vec<QueuedStep>,
    /// Engine-owned extra state (`{}` until the engine sets it).
    pub state: Value,
    /// Tokens used by all the run's LLM calls so far.
    pub usage: Usage,
}

/// The latest output of one node in one run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutputRecord {
    pub node_id: String,
    /// The node's latest output (`null` if only an approval was recorded).
    pub output: Value,
    /// How many times the node has run.
    pub visits: u64,
    /// The latest approval decision given at this node, if any.
    pub approval: Option<Value>,
    pub updated_at: String,
    /// Tokens used by this node's LLM calls in this run (subagent calls count for the subagent).
    pub usage: Usage,
    /// About the latest output: `{"sources": [{url, title}]}` when a web search was used.
    pub metadata: Option<Value>,
}

/// A handle on the run store. Cheap to clone; all clones share one writer thread and one
/// read connection. The writer thread ends, after applying everything queued, when the last
/// clone is dropped.
///
/// The synchronous methods block the calling thread (on a flush and on SQLite); async callers
/// should use `spawn_blocking`.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

struct Inner {
    /// `Some` until the store is dropped; dropping it ends the writer's loop.
    sender: Option<Sender<Message>>,
    writer: Option<JoinHandle<()>>,
    reader: Mutex<Connection>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(handle) = self.writer.take()
            && handle.join().is_err()
        {
            tracing::error!("the run store's writer thread panicked; recent writes may be lost");
        }
    }
}

/// A step, already serialized for its table row.
struct StepRow {
    node_id: String,
    input_json: String,
    source_node_id: Option<String>,
}

impl StepRow {
    fn new(step: &QueuedStep) -> StepRow {
        StepRow {
            node_id: step.node_id.clone(),
            input_json: step.input.to_string(),
            source_node_id: step.source_node_id.clone(),
        }
    }
}

/// One queued write, with its values already serialized.
enum Write {
    CreateRun {
        id: String,
        flow_name: String,
        flow_path: Option<String>,
        flow_json: String,
        input_json: String,
        started_at: String,
    },
    Event {
        run_id: String,
        seq: u64,
        ts: String,
        kind: EventType,
        node_id: Option<String>,
        content: String,
        scope: Option<String>,
        item: Option<u64>,
        usage_json: Option<String>,
    },
    Usage {
        run_id: String,
        node_id: String,
        usage: Usage,
        at: String,
    },
    NodeMetadata {
        run_id: String,
        node_id: String,
        metadata_json: String,
        at: String,
    },
    NodeOutput {
        run_id: String,
        node_id: String,
        output_json: String,
        visits: u64,
        at: String,
    },
    NodeApproval {
        run_id: String,
        node_id: String,
        approval_json: String,
        at: String,
    },
    Pause {
        run_id: String,
        waiting: StepRow,
        queue: Vec<StepRow>,
        state_json: String,
        at: String,
    },
    SetState {
        run_id: String,
        state_json: String,
        at: String,
    },
    Finish {
        run_id: String,
        status: RunStatus,
        result_json: Option<String>,
        error: Option<String>,
        at: String,
    },
}

impl Write {
    /// What this write was, for error messages.
    fn describe(&self) -> String {
        match self {
            Write::CreateRun { id, .. } => format!("creating run {id}"),
            Write::Event { run_id, seq, .. } => format!("storing event {seq} of run {run_id}"),
            Write::Usage {
                run_id, node_id, ..
            } => {
                format!("adding the tokens of node {node_id} to run {run_id}")
            }
            Write::NodeMetadata {
                run_id, node_id, ..
            } => format!("storing the metadata of node {node_id} of run {run_id}"),
            Write::NodeOutput {
                run_id, node_id, ..
            } => format!("storing the output of node {node_id} in run {run_id}"),
            Write::NodeApproval {
                run_id, node_id, ..
            } => format!("storing the approval at node {node_id} in run {run_id}"),
            Write::Pause { run_id, .. } => format!("pausing run {run_id}"),
            Write::SetState { run_id, .. } => format!("saving the state of run {run_id}"),
            Write::Finish { run_id, .. } => format!("finishing run {run_id}"),
        }
    }
}

/// What the writer thread receives.
enum Message {
    Write(Write),
    /// Commit everything received so far, then answer. With `take_error`, the answer is the
    /// first write error since the previous such sync (which is then forgotten); without, it
    /// is always `None` (a plain barrier that leaves the error for the next flush).
    Sync {
        reply: Sender<Option<StoreError>>,
        take_error: bool,
    },
}

impl Store {
    /// Opens (creating it if needed, with its parent directories) the run store at `path`
    /// and brings its schema up to date.
    ///
    /// Errors: [`StoreError::Open`] when the directory or file cannot be created or opened,
    /// when the file is not a SQLite database, when it was made by a newer Weft (a schema
    /// version this one does not know), or when a migration fails.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let open_error = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|err| {
                open_error(format!(
                    "cannot create directory {}: {err}",
                    parent.display()
                ))
            })?;
        }

        let mut writer_conn = Connection::open(path).map_err(|err| open_error(describe(&err)))?;
        configure(&writer_conn, true).map_err(|err| open_error(describe(&err)))?;
        migrate(&mut writer_conn).map_err(open_error)?;

        let reader_conn = Connection::open(path).map_err(|err| open_error(describe(&err)))?;
        configure(&reader_conn, false).map_err(|err| open_error(describe(&err)))?;

        let (sender, receiver) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("weft-store-writer".to_string())
            .spawn(move || writer_loop(writer_conn, receiver))
            .map_err(|err| open_error(format!("cannot start the writer thread: {err}")))?;

        Ok(Store {
            inner: Arc::new(Inner {
                sender: Some(sender),
                writer: Some(writer),
                reader: Mutex::new(reader_conn),
            }),
        })
    }

    /// Queues the creation of a run with status `running`. A run with the same id is an
    /// error reported by the next [`Store::flush`].
    pub fn create_run(&self, run: &NewRun) {
        self.send(Write::CreateRun {
            id: run.id.clone(),
            flow_name: run.flow_name.clone(),
            flow_path: run.flow_path.clone(),
            flow_json: run.flow_json.clone(),
            input_json: run.input.to_string(),
            started_at: run.started_at.clone(),
        });
    }

    /// Queues one event. The run must have been created (earlier in the queue is enough) and
    /// `(run_id, seq)` must be new; otherwise the next [`Store::flush`] reports the error.
    pub fn append_event(&self, event: &RunEvent) {
        self.send(Write::Event {
            run_id: event.run_id.clone(),
            seq: event.seq,
            ts: event.ts.clone(),
            kind: event.kind,
            node_id: event.node_id.clone(),
            content: event.content.clone(),
            scope: event.scope.clone(),
            item: event.item,
            usage_json: event
                .usage
                .as_ref()
                .and_then(|usage| serde_json::to_string(usage).ok()),
        });
    }

    /// Queues `metadata` (e.g. `{"sources": [...]}`) as the metadata of node `node_id`'s latest output.
    pub fn put_node_metadata(&self, run_id: &str, node_id: &str, metadata: &Value, at: &str) {
        self.send(Write::NodeMetadata {
            run_id: run_id.to_string(),
            node_id: node_id.to_string(),
            metadata_json: metadata.to_string(),
            at: at.to_string(),
        });
    }

    /// Queues adding `usage` to node `node_id`'s and the run's token counts.
    pub fn add_usage(&self, run_id: &str, node_id: &str, usage: Usage, at: &str) {
        self.send(Write::Usage {
            run_id: run_id.to_string(),
            node_id: node_id.to_string(),
            usage,
            at: at.to_string(),
        });
    }

    /// Queues storing a node's latest output and visit count (insert or replace), keeping any
    /// approval already recorded for that node.
    pub fn put_node_output(
        &self,
        run_id: &str,
        node_id: &str,
        output: &Value,
        visits: u64,
        at: &str,
    ) {
        self.send(Write::NodeOutput {
            run_id: run_id.to_string(),
            node_id: node_id.to_string(),
            output_json: output.to_string(),
            visits,
            at: at.to_string(),
        });
    }

    /// Queues storing the approval decision given at a node. If the node has no output row
    /// yet, one is created with output `null` and 0 visits.
    pub fn put_node_approval(&self, run_id: &str, node_id: &str, approval: &Value, at: &str) {
        self.send(Write::NodeApproval {
            run_id: run_id.to_string(),
            node_id: node_id.to_string(),
            approval_json: approval.to_string(),
            at: at.to_string(),
        });
    }

    /// Queues pausing a run: status `paused`, the waiting step, the engine state, and the
    /// run's queue replaced by `pause.queue` (in order). An unknown run is reported by the
    /// next [`Store::flush`] as [`StoreError::NoSuchRun`].
    pub fn save_pause(&self, run_id: &str, pause: &PauseRecord, at: &str) {
        self.send(Write::Pause {
            run_id: run_id.to_string(),
            waiting: StepRow::new(&pause.waiting),
            queue: pause.queue.iter().map(StepRow::new).collect(),
            state_json: pause.state.to_string(),
            at: at.to_string(),
        });
    }

    /// Queues replacing the engine-owned state of a run.
    pub fn set_state(&self, run_id: &str, state: &Value, at: &str) {
        self.send(Write::SetState {
            run_id: run_id.to_string(),
            state_json: state.to_string(),
            at: at.to_string(),
        });
    }

    /// Queues ending a run with `status` (normally completed, failed or cancelled), its result
    /// or error, and `ended_at = at`; clears the waiting step and the queue.
    pub fn finish_run(
        &self,
        run_id: &str,
        status: RunStatus,
        result: Option<&Value>,
        error: Option<&str>,
        at: &str,
    ) {
        self.send(Write::Finish {
            run_id: run_id.to_string(),
            status,
            result_json: result.map(Value::to_string),
            error: error.map(str::to_string),
            at: at.to_string(),
        });
    }

    /// Waits until every write queued before this call is committed.
    ///
    /// Errors: the first write error since the previous flush (every failed write is also
    /// logged when it happens), or [`StoreError::Sqlite`] if the writer thread has stopped.
    pub fn flush(&self) -> Result<(), StoreError> {
        match self.sync(true)? {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Atomically moves a paused run to `running` and returns its record, with the waiting
    /// step and the queue, which are cleared from the store in the same transaction (the
    /// caller now owns them). Of several processes claiming the same run, exactly one wins.
    ///
    /// Errors: [`StoreError::NoSuchRun`], [`StoreError::Finished`] (completed, failed or
    /// cancelled), [`StoreError::NotPaused`] (running), [`StoreError::Corrupt`].
    pub fn claim_paused(&self, run_id: &str, at: &str) -> Result<RunRecord, StoreError> {
        self.barrier()?;
        let mut conn = self.reader();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let claimed = tx
            .prepare_cached(
                "UPDATE runs SET status = 'running', updated_at = ?2 \
                 WHERE id = ?1 AND status = 'paused'",
            )?
            .execute(params![run_id, at])?;
        if claimed == 0 {
            let status: Option<String> = tx
                .prepare_cached("SELECT status FROM runs WHERE id = ?1")?
                .query_row(params![run_id], |row| row.get(0))
                .optional()?;
            return Err(match status {
                None => StoreError::NoSuchRun(run_id.to_string()),
                Some(text) => {
                    let status = parse_status(run_id, &text)?;
                    if status.is_finished() {
                        StoreError::Finished {
                            run_id: run_id.to_string(),
                            status,
                        }
                    } else {
                        StoreError::NotPaused {
                            run_id: run_id.to_string(),
                        }
                    }
                }
            });
        }
        let record = load_record(&tx, run_id)?;
        tx.prepare_cached(
            "UPDATE runs SET waiting_node_id = NULL, waiting_input_json = NULL, \
             waiting_source_node_id = NULL WHERE id = ?1",
        )?
        .execute(params![run_id])?;
        tx.prepare_cached("DELETE FROM queue WHERE run_id = ?1")?
            .execute(params![run_id])?;
        tx.commit()?;
        Ok(record)
    }

    /// The newest `limit` runs (by `started_at`), newest first.
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunSummary>, StoreError> {
        self.barrier()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT id, flow_name, flow_path, status, started_at, ended_at, waiting_node_id \
             FROM runs ORDER BY started_at DESC, id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map(params![limit], |row| {
                Ok(RawSummary {
                    id: row.get(0)?,
                    flow_name: row.get(1)?,
                    flow_path: row.get(2)?,
                    status: row.get(3)?,
                    started_at: row.get(4)?,
                    ended_at: row.get(5)?,
                    waiting_node_id: row.get(6)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(RawSummary::into_summary).collect()
    }

    /// The full id of the one run whose id starts with `id_or_prefix` (an exact id always
    /// matches itself).
    ///
    /// Errors: [`StoreError::NoSuchRun`] when no run matches (or the prefix is empty),
    /// [`StoreError::Ambiguous`] when several do.
    pub fn resolve_run_id(&self, id_or_prefix: &str) -> Result<String, StoreError> {
        if id_or_prefix.is_empty() {
            return Err(StoreError::NoSuchRun(String::new()));
        }
        self.barrier()?;
        let conn = self.reader();
        if run_exists(&conn, id_or_prefix)? {
            return Ok(id_or_prefix.to_string());
        }
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT 2",
        )?;
        let mut ids = stmt
            .query_map(params![id_or_prefix], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        match ids.len() {
            0 => Err(StoreError::NoSuchRun(id_or_prefix.to_string())),
            1 => Ok(ids.remove(0)),
            _ => Err(StoreError::Ambiguous(id_or_prefix.to_string())),
        }
    }

    /// The run with exactly this id.
    ///
    /// Errors: [`StoreError::NoSuchRun`], [`StoreError::Corrupt`].
    pub fn run(&self, run_id: &str) -> Result<RunRecord, StoreError> {
        self.barrier()?;
        let conn = self.reader();
        load_record(&conn, run_id)
    }

    /// The run's events, ordered by `seq`.
    ///
    /// Errors: [`StoreError::NoSuchRun`] when there is no such run, [`StoreError::Corrupt`]
    /// for an unknown event type.
    pub fn events(&self, run_id: &str) -> Result<Vec<RunEvent>, StoreError> {
        self.barrier()?;
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, ts, type, node_id, content, scope, item, usage_json \
             FROM events WHERE run_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map(params![run_id], |row| {
                Ok((
                    (
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, String>(4)?,
                    ),
                    (
                        row.get::<_, Option<String>>(5)?,
                        row.get::<_, Option<i64>>(6)?,
                        row.get::<_, Option<String>>(7)?,
                    ),
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        if rows.is_empty() && !run_exists(&conn, run_id)? {
            return Err(StoreError::NoSuchRun(run_id.to_string()));
        }
        rows.into_iter()
            .map(
                |((seq, ts, kind, node_id, content), (scope, item, usage_json))| {
                    let kind = EventType::parse(&kind)
                        .ok_or_else(|| corrupt(run_id, format!("unknown event type {kind:?}")))?;
                    Ok(RunEvent {
                        seq: to_u64(run_id, "event seq", seq)?,
                        run_id: run_id.to_string(),
                        ts,
                        kind,
                        node_id,
                        content,
                        scope,
                        item: item
                            .map(|item| to_u64(run_id, "item index", item))
                            .transpose()?,
                        usage: usage_json
                            .map(|text| {
                                serde_json::from_str(&text).map_err(|error| {
                                    corrupt(run_id, format!("event usage: {error}"))
                                })
                            })
                            .transpose()?,
                    })
                },
            )
            .collect()
    }

    /// The run's node outputs, ordered by node id.
    ///
    /// Errors: [`StoreError::NoSuchRun`] when there is no such run, [`StoreError::Corrupt`].
    pub fn node_outputs(&self, run_id: &str) -> Result<Vec<NodeOutputRecord>, StoreError> {
        self.barrier()?;
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT node_id, output_json, visits, approval_json, updated_at, input_tokens, output_tokens, metadata_json \
             FROM node_outputs WHERE run_id = ?1 ORDER BY node_id",
        )?;
        let rows = stmt
            .query_map(params![run_id], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, String>(4)?,
                    (
                        row.get::<_, i64>(5)?,
                        row.get::<_, i64>(6)?,
                        row.get::<_, Option<String>>(7)?,
                    ),
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        if rows.is_empty() && !run_exists(&conn, run_id)? {
            return Err(StoreError::NoSuchRun(run_id.to_string()));
        }
        rows.into_iter()
            .map(
                |(
                    node_id,
                    output,
                    visits,
                    approval,
                    updated_at,
                    (input_tokens, output_tokens, metadata),
                )| {
                    Ok(NodeOutputRecord {
                        metadata: metadata
                            .map(|text| {
                                parse_json(run_id, &format!("metadata of node {node_id}"), &text)
                            })
                            .transpose()?,
                        usage: Usage {
                            input_tokens: to_u64(run_id, "input tokens", input_tokens)?,
                            output_tokens: to_u64(run_id, "output tokens", output_tokens)?,
                        },
                        output: parse_json(run_id, &format!("output of node {node_id}"), &output)?,
                        visits: to_u64(run_id, "visits", visits)?,
                        approval: approval
                            .map(|text| {
                                parse_json(run_id, &format!("approval at node {node_id}"), &text)
                            })
                            .transpose()?,
                        node_id,
                        updated_at,
                    })
                },
            )
            .collect()
    }

    fn send(&self, write: Write) {
        let sent = match &self.inner.sender {
            Some(sender) => sender.send(Message::Write(write)).is_ok(),
            None => false,
        };
        if !sent {
            // The next flush reports this too (the writer is gone).
            tracing::error!("the run store's writer thread has stopped; a write was lost");
        }
    }

    fn sync(&self, take_error: bool) -> Result<Option<StoreError>, StoreError> {
        let stopped = || {
            StoreError::Sqlite(
                "the writer thread has stopped; recent writes may have been lost".to_string(),
            )
        };
        let sender = self.inner.sender.as_ref().ok_or_else(stopped)?;
        let (reply, answer) = mpsc::channel();
        sender
            .send(Message::Sync { reply, take_error })
            .map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())
    }

    /// Waits until every write queued so far is committed, leaving any write error for the
    /// next flush.
    fn barrier(&self) -> Result<(), StoreError> {
        self.sync(false).map(|_| ())
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        self.inner
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A clear message for an error met while opening.
fn describe(err: &rusqlite::Error) -> String {
    match err.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            "the file is not a SQLite database (is this the right path?)".to_string()
        }
        _ => err.to_string(),
    }
}

fn configure(conn: &Connection, writer: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if writer {
        // Reading the journal mode is the first access to the file: a non-database fails here.
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!("the run store could not use WAL mode (journal mode is {mode})");
        }
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// Applies the migrations the database has not had yet, each in its own transaction.
/// Safe against another process migrating at the same time (the version is re-read under
/// the write lock).
fn migrate(conn: &mut Connection) -> Result<(), String> {
    let latest = MIGRATIONS.len();
    for (index, sql) in MIGRATIONS.iter().enumerate() {
        let version = index + 1;
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
        if current >= version {
            continue;
        }
        tx.execute_batch(sql)
            .and_then(|()| tx.pragma_update(None, "user_version", version as i64))
            .and_then(|()| tx.commit())
            .map_err(|err| format!("schema migration {version} failed: {}", describe(&err)))?;
    }
    Ok(())
}

/// The writer thread: blocks for a message, drains what else is queued (up to
/// [`MAX_BATCH`]) and applies the writes in one transaction; a sync commits first.
fn writer_loop(mut conn: Connection, receiver: Receiver<Message>) {
    let mut first_error: Option<StoreError> = None;
    let mut pending: Vec<Write> = Vec::new();
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        let mut taken = 1;
        while let Some(message) = next.take() {
            match message {
                Message::Write(write) => pending.push(write),
                Message::Sync { reply, take_error } => {
                    commit(&mut conn, &mut pending, &mut first_error);
                    let answer = if take_error { first_error.take() } else { None };
                    // The caller may have given up waiting; nothing to do then.
                    let _ = reply.send(answer);
                }
            }
            if taken < MAX_BATCH
                && let Ok(message) = receiver.try_recv()
            {
                taken += 1;
                next = Some(message);
            }
        }
        commit(&mut conn, &mut pending, &mut first_error);
    }
}

/// Applies `pending` in one transaction and empties it. A failing write is recorded and the
/// others still apply; a failing commit loses the whole batch (and is recorded).
fn commit(conn: &mut Connection, pending: &mut Vec<Write>, first_error: &mut Option<StoreError>) {
    if pending.is_empty() {
        return;
    }
    let count = pending.len();
    let mut failures = Vec::new();
    let result = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .and_then(|tx| {
            for write in pending.iter() {
                if let Err(err) = apply(&tx, write) {
                    failures.push(match err {
                        StoreError::Sqlite(message) => {
                            StoreError::Sqlite(format!("{}: {message}", write.describe()))
                        }
                        other => other,
                    });
                }
            }
            tx.commit()
        });
    pending.clear();
    if let Err(err) = result {
        failures.push(StoreError::Sqlite(format!(
            "committing {count} queued writes failed; they are lost: {err}"
        )));
    }
    for err in failures {
        tracing::error!("run store write failed: {err}");
        if first_error.is_none() {
            *first_error = Some(err);
        }
    }
}

fn apply(conn: &Connection, write: &Write) -> Result<(), StoreError> {
    match write {
        Write::CreateRun {
            id,
            flow_name,
            flow_path,
            flow_json,
            input_json,
            started_at,
        } => {
            conn.prepare_cached(
                "INSERT INTO runs (id, flow_name, flow_path, flow_json, status, input_json, \
                 started_at, updated_at) VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?6)",
            )?
            .execute(params![
                id, flow_name, flow_path, flow_json, input_json, started_at
            ])?;
        }
        Write::Event {
            run_id,
            seq,
            ts,
            kind,
            node_id,
            content,
            scope,
            item,
            usage_json,
        } => {
            let seq = to_i64("event seq", *seq)?;
            let item = item.map(|item| to_i64("item index", item)).transpose()?;
            conn.prepare_cached(
                "INSERT INTO events (run_id, seq, ts, type, node_id, content, scope, item, usage_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![run_id, seq, ts, kind.as_str(), node_id, content, scope, item, usage_json])?;
        }
        Write::NodeMetadata {
            run_id,
            node_id,
            metadata_json,
            at,
        } => {
            conn.prepare_cached(
                "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, metadata_json) \
                 VALUES (?1, ?2, 'null', 0, ?3, ?4) \
                 ON CONFLICT (run_id, node_id) DO UPDATE SET metadata_json = excluded.metadata_json",
            )?
            .execute(params![run_id, node_id, at, metadata_json])?;
        }
        Write::Usage {
            run_id,
            node_id,
            usage,
            at,
        } => {
            let input = to_i64("input tokens", usage.input_tokens)?;
            let output = to_i64("output tokens", usage.output_tokens)?;
            conn.prepare_cached(
                "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, input_tokens, output_tokens) \
                 VALUES (?1, ?2, 'null', 0, ?3, ?4, ?5) \
                 ON CONFLICT (run_id, node_id) DO UPDATE SET \
                 input_tokens = input_tokens + excluded.input_tokens, \
                 output_tokens = output_tokens + excluded.output_tokens",
            )?
            .execute(params![run_id, node_id, at, input, output])?;
        }
        Write::NodeOutput {
            run_id,
            node_id,
            output_json,
            visits,
            at,
        } => {
            let visits = to_i64("visits", *visits)?;
            conn.prepare_cached(
                "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (run_id, node_id) DO UPDATE SET output_json = excluded.output_json, \
                 visits = excluded.visits, updated_at = excluded.updated_at",
            )?
            .execute(params![run_id, node_id, output_json, visits, at])?;
        }
        Write::NodeApproval {
            run_id,
            node_id,
            approval_json,
            at,
        } => {
            conn.prepare_cached(
                "INSERT INTO node_outputs (run_id, node_id, output_json, visits, approval_json, \
                 updated_at) VALUES (?1, ?2, 'null', 0, ?3, ?4) \
                 ON CONFLICT (run_id, node_id) DO UPDATE SET \
                 approval_json = excluded.approval_json, updated_at = excluded.updated_at",
            )?
            .execute(params![run_id, node_id, approval_json, at])?;
        }
        Write::Pause {
            run_id,
            waiting,
            queue,
            state_json,
            at,
        } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE runs SET status = 'paused', waiting_node_id = ?2, \
                     waiting_input_json = ?3, waiting_source_node_id = ?4, state_json = ?5, \
                     updated_at = ?6 WHERE id = ?1",
                )?
                .execute(params![
                    run_id,
                    waiting.node_id,
                    waiting.input_json,
                    waiting.source_node_id,
                    state_json,
                    at
                ])?;
            if changed == 0 {
                return Err(StoreError::NoSuchRun(run_id.clone()));
            }
            conn.prepare_cached("DELETE FROM queue WHERE run_id = ?1")?
                .execute(params![run_id])?;
            let mut insert = conn.prepare_cached(
                "INSERT INTO queue (run_id, position, node_id, input_json, source_node_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (position, step) in queue.iter().enumerate() {
                let position = to_i64("queue position", position as u64)?;
                insert.execute(params![
                    run_id,
                    position,
                    step.node_id,
                    step.input_json,
                    step.source_node_id
                ])?;
            }
        }
        Write::SetState {
            run_id,
            state_json,
            at,
        } => {
            let changed = conn
                .prepare_cached("UPDATE runs SET state_json = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(params![run_id, state_json, at])?;
            if changed == 0 {
                return Err(StoreError::NoSuchRun(run_id.clone()));
            }
        }
        Write::Finish {
            run_id,
            status,
            result_json,
            error,
            at,
        } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE runs SET status = ?2, result_json = ?3, error = ?4, \
                     waiting_node_id = NULL, waiting_input_json = NULL, \
                     waiting_source_node_id = NULL, ended_at = ?5, updated_at = ?5 WHERE id = ?1",
                )?
                .execute(params![run_id, status.as_str(), result_json, error, at])?;
            if changed == 0 {
                return Err(StoreError::NoSuchRun(run_id.clone()));
            }
            conn.prepare_cached("DELETE FROM queue WHERE run_id = ?1")?
                .execute(params![run_id])?;
        }
    }
    Ok(())
}

/// A `runs` row as read, before its status is checked.
struct RawSummary {
    id: String,
    flow_name: String,
    flow_path: Option<String>,
    status: String,
    started_at: String,
    ended_at: Option<String>,
    waiting_node_id: Option<String>,
}

impl RawSummary {
    fn into_summary(self) -> Result<RunSummary, StoreError> {
        Ok(RunSummary {
            status: parse_status(&self.id, &self.status)?,
            id: self.id,
            flow_name: self.flow_name,
            flow_path: self.flow_path,
            started_at: self.started_at,
            ended_at: self.ended_at,
            waiting_node_id: self.waiting_node_id,
        })
    }
}

fn load_record(conn: &Connection, run_id: &str) -> Result<RunRecord, StoreError> {
    struct Rest {
        flow_json: String,
        input_json: String,
        result_json: Option<String>,
        error: Option<String>,
        waiting_input_json: Option<String>,
        waiting_source_node_id: Option<String>,
        state_json: String,
        input_tokens: i64,
        output_tokens: i64,
    }
    let row = conn
        .prepare_cached(
            "SELECT id, flow_name, flow_path, status, started_at, ended_at, waiting_node_id, \
             flow_json, input_json, result_json, error, waiting_input_json, \
             waiting_source_node_id, state_json, \
             (SELECT COALESCE(SUM(input_tokens), 0) FROM node_outputs WHERE run_id = runs.id), \
             (SELECT COALESCE(SUM(output_tokens), 0) FROM node_outputs WHERE run_id = runs.id) \
             FROM runs WHERE id = ?1",
        )?
        .query_row(params![run_id], |row| {
            Ok((
                RawSummary {
                    id: row.get(0)?,
                    flow_name: row.get(1)?,
                    flow_path: row.get(2)?,
                    status: row.get(3)?,
                    started_at: row.get(4)?,
                    ended_at: row.get(5)?,
                    waiting_node_id: row.get(6)?,
                },
                Rest {
                    flow_json: row.get(7)?,
                    input_json: row.get(8)?,
                    result_json: row.get(9)?,
                    error: row.get(10)?,
                    waiting_input_json: row.get(11)?,
                    waiting_source_node_id: row.get(12)?,
                    state_json: row.get(13)?,
                    input_tokens: row.get(14)?,
                    output_tokens: row.get(15)?,
                },
            ))
        })
        .optional()?;
    let Some((raw, rest)) = row else {
        return Err(StoreError::NoSuchRun(run_id.to_string()));
    };
    let summary = raw.into_summary()?;

    let waiting = match (&summary.waiting_node_id, rest.waiting_input_json) {
        (None, _) => None,
        (Some(node_id), Some(input)) => Some(QueuedStep {
            node_id: node_id.clone(),
            input: parse_json(run_id, "waiting input", &input)?,
            source_node_id: rest.waiting_source_node_id,
        }),
        (Some(node_id), None) => {
            return Err(corrupt(
                run_id,
                format!("the waiting node {node_id} has no input"),
            ));
        }
    };
    let queue = conn
        .prepare_cached(
            "SELECT node_id, input_json, source_node_id FROM queue WHERE run_id = ?1 \
             ORDER BY position",
        )?
        .query_map(params![run_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|(node_id, input, source_node_id)| {
            Ok(QueuedStep {
                input: parse_json(run_id, &format!("queued input of node {node_id}"), &input)?,
                node_id,
                source_node_id,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;

    Ok(RunRecord {
        summary,
        flow_json: rest.flow_json,
        input: parse_json(run_id, "input", &rest.input_json)?,
        result: rest
            .result_json
            .map(|text| parse_json(run_id, "result", &text))
            .transpose()?,
        error: rest.error,
        waiting,
        queue,
        state: parse_json(run_id, "state", &rest.state_json)?,
        usage: Usage {
            input_tokens: to_u64(run_id, "input tokens", rest.input_tokens)?,
            output_tokens: to_u64(run_id, "output tokens", rest.output_tokens)?,
        },
    })
}

fn run_exists(conn: &Connection, run_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM runs WHERE id = ?1")?
        .exists(params![run_id])?)
}

fn parse_status(run_id: &str, text: &str) -> Result<RunStatus, StoreError> {
    RunStatus::parse(text).ok_or_else(|| corrupt(run_id, format!("unknown status {text:?}")))
}

fn parse_json(run_id: &str, what: &str, text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|err| corrupt(run_id, format!("the {what} is not valid JSON: {err}")))
}

fn corrupt(run_id: &str, message: String) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_string(),
        message,
    }
}

fn to_i64(what: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Sqlite(format!("{what} {value} is too large")))
}

fn to_u64(run_id: &str, what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| corrupt(run_id, format!("{what} {value} is negative")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(n: u64) -> String {
        format!("2025-01-01T00:00:{:02}.000Z", n % 60)
    }

    fn new_run(id: &str, started_at: &str) -> NewRun {
        NewRun {
            id: id.to_string(),
            flow_name: "demo".to_string(),
            flow_path: Some("flows/demo.json".to_string()),
            flow_json: r#"{"nodes":[],"edges":[]}"#.to_string(),
            input: json!({"question": "why?"}),
            started_at: started_at.to_string(),
        }
    }

    fn event(run_id: &str, seq: u64, kind: EventType, node_id: Option<&str>) -> RunEvent {
        RunEvent {
            seq,
            run_id: run_id.to_string(),
            ts: ts(seq),
            kind,
            node_id: node_id.map(str::to_string),
            content: format!("event {seq}"),
            scope: None,
            item: None,
            usage: None,
        }
    }

    fn step(node_id: &str, n: i64, source: Option<&str>) -> QueuedStep {
        QueuedStep {
            node_id: node_id.to_string(),
            input: json!({"n": n}),
            source_node_id: source.map(str::to_string),
        }
    }

    fn open_temp() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("nested/dir/runs.db")).expect("open");
        (dir, store)
    }

    fn pause_record() -> PauseRecord {
        PauseRecord {
            waiting: step("approve", 1, Some("draft")),
            queue: vec![step("b", 2, Some("a")), step("c", 3, None)],
            state: json!({"nextSeq": 5, "visits": {"a": 1}}),
        }
    }

    #[test]
    fn store_round_trips_a_run_with_events_and_outputs() {
        let (_dir, store) = open_temp();
        store.create_run(&new_run("run-1", &ts(0)));
        store.append_event(&event("run-1", 1, EventType::RunStart, None));
        store.append_event(&event("run-1", 2, EventType::StepStart, Some("a")));
        store.append_event(&event("run-1", 3, EventType::StepEnd, Some("a")));
        store.put_node_output("run-1", "b", &json!({"text": "B"}), 1, &ts(4));
        store.put_node_approval("run-1", "a", &json!({"approved": true}), &ts(4));
        store.put_node_output("run-1", "a", &json!("A"), 2, &ts(5));
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

    #[test]
    fn store_lists_newest_first_and_resolves_prefixes() {
        let (_dir, store) = open_temp();
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

    #[test]
    fn store_claims_a_paused_run_once() {
        let (_dir, store) = open_temp();
        store.create_run(&new_run("run-p", &ts(0)));
        store.save_pause("run-p", &pause_record(), &ts(1));

        let paused = store.run("run-p").expect("run");
        assert_eq!(paused.summary.status, RunStatus::Paused);
        assert_eq!(paused.summary.waiting_node_id.as_deref(), Some("approve"));

        let claimed = store.claim_paused("run-p", &ts(2)).expect("claim");
        assert_eq!(claimed.summary.status, RunStatus::Running);
        assert_eq!(claimed.waiting, Some(pause_record().waiting));
        assert_eq!(claimed.queue, pause_record().queue);
        assert_eq!(claimed.state, pause_record().state);

        let after = store.run("run-p").expect("run");
        assert_eq!(after.summary.status, RunStatus::Running);
        assert_eq!(after.waiting, None);
        assert!(after.queue.is_empty());

        match store.claim_paused("run-p", &ts(3)) {
            Err(StoreError::NotPaused { run_id }) => assert_eq!(run_id, "run-p"),
            other => panic!("expected NotPaused, got {other:?}"),
        }
        assert!(matches!(
            store.claim_paused("missing", &ts(3)),
            Err(StoreError::NoSuchRun(_))
        ));
    }

    #[test]
    fn store_refuses_to_claim_a_finished_run() {
        let (_dir, store) = open_temp();
        store.create_run(&new_run("run-f", &ts(0)));
        store.save_pause("run-f", &pause_record(), &ts(1));
        store.finish_run("run-f", RunStatus::Cancelled, None, None, &ts(2));
        match store.claim_paused("run-f", &ts(3)) {
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

    #[test]
    fn store_pause_survives_reopening_in_another_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("runs.db");
        let first = Store::open(&path).expect("open");
        first.create_run(&new_run("run-r", &ts(0)));
        first.append_event(&event("run-r", 1, EventType::RunStart, None));
        first.save_pause("run-r", &pause_record(), &ts(1));
        first.flush().expect("flush");

        // A second process, while the first still has the file open.
        let second = Store::open(&path).expect("reopen");
        let claimed = second.claim_paused("run-r", &ts(2)).expect("claim");
        assert_eq!(claimed.waiting, Some(pause_record().waiting));
        assert_eq!(claimed.queue, pause_record().queue);
        assert!(matches!(
            first.claim_paused("run-r", &ts(3)),
            Err(StoreError::NotPaused { .. })
        ));
        drop(first);
        drop(second);

        // And after both have exited.
        let third = Store::open(&path).expect("reopen again");
        let record = third.run("run-r").expect("run");
        assert_eq!(record.summary.status, RunStatus::Running);
        assert_eq!(third.events("run-r").expect("events").len(), 1);
    }

    #[test]
    fn store_drop_applies_queued_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("runs.db");
        {
            let store = Store::open(&path).expect("open");
            let clone = store.clone();
            store.create_run(&new_run("run-d", &ts(0)));
            drop(store);
            for seq in 1..=100 {
                clone.append_event(&event("run-d", seq, EventType::LlmDelta, Some("a")));
            }
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(store.events("run-d").expect("events").len(), 100);
    }

    #[test]
    fn store_reads_concurrently_while_writing() {
        let (_dir, store) = open_temp();
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
            store.append_event(&event("run-c", seq, EventType::LlmDelta, Some("a")));
        }
        for reader in readers {
            reader.join().expect("reader thread");
        }
        store.flush().expect("flush");
        let events = store.events("run-c").expect("events");
        assert_eq!(events.len(), 5_000);
        assert!(events.windows(2).all(|pair| pair[0].seq + 1 == pair[1].seq));
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

    #[test]
    fn store_flush_reports_a_failed_write() {
        let (_dir, store) = open_temp();
        store.append_event(&event("ghost", 1, EventType::RunStart, None));
        store.create_run(&new_run("real", &ts(0)));
        store.append_event(&event("real", 1, EventType::RunStart, None));
        // A read in between does not swallow the error.
        assert!(matches!(store.run("ghost"), Err(StoreError::NoSuchRun(_))));
        match store.flush() {
            Err(StoreError::Sqlite(message)) => {
                assert!(message.contains("ghost"), "{message}");
                assert!(message.contains("FOREIGN KEY"), "{message}");
            }
            other => panic!("expected a write error, got {other:?}"),
        }
        // The other writes of the same batch were applied, and the error was reported once.
        assert_eq!(store.events("real").expect("events").len(), 1);
        store.flush().expect("second flush is clean");

        store.set_state("ghost", &json!({}), &ts(1));
        assert!(matches!(store.flush(), Err(StoreError::NoSuchRun(_))));
    }

    #[test]
    fn store_appends_twenty_thousand_events() {
        let (_dir, store) = open_temp();
        store.create_run(&new_run("run-big", &ts(0)));
        for seq in 1..=20_000 {
            store.append_event(&event("run-big", seq, EventType::LlmDelta, Some("writer")));
        }
        store.flush().expect("flush");
        assert_eq!(store.events("run-big").expect("events").len(), 20_000);
    }
}
