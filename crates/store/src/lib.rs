//! The run store (docs/flows.md#running): every run, its events, node outputs and pending queue,
//! kept in
//! SQLite as they happen, so a paused run can be resumed by another process and a run's
//! history can be opened later.
//!
//! Design:
//! - One database file in WAL mode (`synchronous=NORMAL`, a 5 s busy timeout, foreign keys
//!   on); the schema and its migrations are in `schema`.
//! - Writes made while a run goes on ([`Store::create_run`], [`Store::append_event`], ...)
//!   are queued and return at once. They are applied on a connection of their own, in the
//!   order they were queued, many at a time in one transaction: by a background writer thread
//!   a moment after they come, or (SQLite) by a caller that waits for them, a flush or a read,
//!   itself (see `writer::Shared`). The writer thread starts when the store opens, or, for a
//!   command that may end in a moment, only once a run waits or its writes pile up
//!   ([`WriterStart`]).
//!   An event is passed on to its listener only after the transaction that stored it commits:
//!   whatever a host shows is already kept. The events a commit stores for a run go into one
//!   row of `event_batches` (see `events`), after the commit's other writes.
//! - A write that fails is logged with `tracing::error!` and kept; the first such error since
//!   the previous flush is returned by the next [`Store::flush`].
//! - Reads (and [`Store::claim_paused`]) first wait until every write queued before them is
//!   committed, then use a second connection.
//! - One file per table (`runs`, `events` for `event_batches`, `node_outputs`, `queue`,
//!   `decisions`, `follow_ups` for `approval_follow_ups`) holds its SQL; rows are read by
//!   column name.
//! - Approval decisions are kept apart from the queue of writes, in a hash chain of their own
//!   (an audit log: see [`Store::record_decision`]).
//!
//! Timestamps are passed in by the caller (the engine owns the clock) and stored as given;
//! they are expected to be RFC 3339 UTC strings, which sort chronologically as text.

mod decisions;
mod events;
mod follow_ups;
mod json;
mod lease;
mod llm_calls;
mod mail;
mod node_outputs;
mod postgresql;
mod queue;
mod runs;
mod schema;
mod sql;
mod sqlite;
mod versions;
mod writer;
pub use json::json_text;
pub use writer::OUTAGE_LIMIT;

pub use decisions::{ChainCheck, GivenDecision, NewDecision, Recorded, StoredDecision};
pub use follow_ups::{FollowUp, StoredFollowUp};
pub use llm_calls::{CallUsage, RecordedCall};
pub use mail::{MailKey, StoredMail};
pub use postgresql::{is_postgres_url, redacted as shown_location};
pub use versions::{FlowVersionUse, MIN_HASH_PREFIX, StoredFlowVersion, VersionUseKind};

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use schema::Feature;
use sql::{Db, Dialect, params};
use weft_event::{EventListener, RunEvent, RunStatus};
use weft_providers::Usage;
use writer::{Message, Reply, Write};

/// The most queued writes an async flush commits on its own thread; more are left to the writer
/// thread, so that the task's thread is not held for long (see [`Store::flushed`]).
const COMMIT_HERE_AT_MOST: usize = 256;

/// The field of a run's state that holds a decision taken when the run was claimed and not yet
/// applied by a checkpoint (which writes the state afresh, without it).
pub(crate) const DECIDED: &str = "decided";

/// Everything that can go wrong in the run store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened, is not a SQLite database, or its schema could
    /// not be brought up to date.
    #[error("run store {path}: {message}")]
    Open { path: String, message: String },
    /// SQLite refused an operation; `action` says which (empty for a plain read).
    #[error("run store: {}{source}", if action.is_empty() { String::new() } else { format!("{action}: ") })]
    Sqlite {
        action: String,
        #[source]
        source: rusqlite::Error,
    },
    /// PostgreSQL refused an operation or could not be reached; `action` says which.
    #[error("run store: {}{}", if action.is_empty() { String::new() } else { format!("{action}: ") }, postgresql::describe(source))]
    Postgres {
        action: String,
        #[source]
        source: ::postgres::Error,
    },
    /// A column read back does not hold what the schema says it holds.
    #[error("run store: column {column}: {message}")]
    Column { column: String, message: String },
    /// The writer thread has stopped, so writes queued since may be lost.
    #[error("run store: the writer thread has stopped; recent writes may have been lost")]
    WriterStopped,
    /// A number too large to store (a sequence number or count past `i64::MAX`).
    #[error("run store: {what} {value} is too large to store")]
    OutOfRange { what: &'static str, value: u64 },
    /// An event whose number is not after the last one stored for its run (a second event
    /// with the same number): a run's events are stored once each, in order.
    #[error(
        "run store: storing event {seq} of run {run_id}: the run's events are stored up to \
         {last} already; the event was not stored"
    )]
    EventNotAfter { run_id: String, seq: u64, last: u64 },
    /// No run has this id.
    #[error("run {0} does not exist")]
    NoSuchRun(String),
    /// The run is completed, failed or cancelled; it never changes again.
    #[error("run {run_id} has already finished ({status}); it cannot be resumed")]
    Finished { run_id: String, status: RunStatus },
    /// The run is running or interrupted (not paused), so it cannot be claimed for resuming.
    #[error(
        "run {run_id} is {status}{}; it cannot be resumed with a decision now",
        if *status == RunStatus::Interrupted { " (continue it with --retry)" } else { " (perhaps being resumed by another process)" }
    )]
    NotPaused { run_id: String, status: RunStatus },
    /// A decision was given to an interrupted run that was not waiting for one, or whose
    /// decision was already taken (`decided`) before it was interrupted.
    #[error(
        "run {run_id} was interrupted {}; continue it with --retry",
        match decided {
            Some(choice) => format!("after its decision ({choice}) was taken, which --retry goes on with"),
            None => "while running, not while waiting for a decision".to_string(),
        }
    )]
    NotWaiting {
        run_id: String,
        decided: Option<String>,
    },
    /// The caller's own check of what the run waits at refused the claim (the message says why).
    #[error("{message}")]
    Refused { message: String },
    /// The run was not interrupted, so there is nothing to retry.
    #[error("run {run_id} is {status}, not interrupted; there is nothing to retry")]
    NotInterrupted { run_id: String, status: RunStatus },
    /// A stored value could not be read back (invalid JSON, unknown status, ...).
    #[error("run {run_id}: stored state is damaged: {message}")]
    Corrupt { run_id: String, message: String },
    /// Several run ids start with this prefix.
    #[error("run id prefix {0} matches several runs")]
    Ambiguous(String),
    /// No stored flow version has this hash (or starts with it).
    #[error("no flow version {0} in the store")]
    NoSuchVersion(String),
    /// Several stored flow versions start with this prefix.
    #[error("flow version prefix {0} matches several versions; give more of the hash")]
    AmbiguousVersion(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            action: String::new(),
            source,
        }
    }
}

impl From<::postgres::Error> for StoreError {
    fn from(source: ::postgres::Error) -> StoreError {
        StoreError::Postgres {
            action: String::new(),
            source,
        }
    }
}

impl StoreError {
    /// The same error, saying it happened while doing `action` (for a database's refusal).
    fn with_action(self, action: String) -> StoreError {
        match self {
            StoreError::Sqlite { source, .. } => StoreError::Sqlite { action, source },
            StoreError::Postgres { source, .. } => StoreError::Postgres { action, source },
            other => other,
        }
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
    /// The flow as it was when the run started, in canonical form (a resumed run uses this,
    /// not the file); stored once per distinct content.
    pub flow_json: String,
    /// The SHA-256 of `flow_json`, which names the flow's version.
    pub flow_version: String,
    /// The flow file's resolved path (links and `..` resolved), under which the run's use of
    /// the version is recorded (`weft versions` looks a file up by it); `None` for a flow
    /// that came from no file.
    pub version_path: Option<String>,
    /// The run's input.
    pub input: Value,
    /// The outputs pinned for the run, by node, as JSON text (`None`: none), kept once for the
    /// run's life.
    pub pins_json: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// Who drives the run when it pauses, when not whichever process claims it:
    /// `restate INGRESS-URL` for a run that is a Restate workflow (decided through that
    /// ingress). Set at creation, never changed.
    pub host: Option<String>,
    /// What started it; `None` when the host did not say.
    pub trigger: Option<Trigger>,
}

/// What started a run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    pub kind: TriggerKind,
    /// For a schedule: the occurrence it started for (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence: Option<String>,
    /// For a schedule: its place in the flow's `settings.schedules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<u64>,
    /// Who started the run, when a person or a token did (the name decisions are kept by):
    /// what an approval's `allowSelf: false` compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// Who or what started a run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TriggerKind {
    // A person: `weft run`, the app's Run.
    Manual,
    // A request to `weft serve`'s API.
    Api,
    // A webhook of `weft serve`.
    Hook,
    // A schedule of the flow (`settings.schedules`), started by a server.
    Schedule,
    // An MCP client calling the flow as a tool.
    Mcp,
}

impl Trigger {
    pub fn of(kind: TriggerKind) -> Trigger {
        Trigger {
            kind,
            occurrence: None,
            schedule: None,
            by: None,
        }
    }

    /// The same trigger, started by `by` (nobody when `None` or blank).
    pub fn by(mut self, by: Option<String>) -> Trigger {
        self.by = by.filter(|name| !name.trim().is_empty());
        self
    }

    /// `schedule 2026-11-30T08:00:00Z`, `api (ci)`, … as `weft runs` shows it.
    pub fn text(&self) -> String {
        let kind = match self.kind {
            TriggerKind::Manual => "manual",
            TriggerKind::Api => "api",
            TriggerKind::Hook => "hook",
            TriggerKind::Schedule => "schedule",
            TriggerKind::Mcp => "mcp",
        };
        let text = match &self.occurrence {
            Some(at) => format!("{kind} {at}"),
            None => kind.to_string(),
        };
        match &self.by {
            Some(by) => format!("{text} ({by})"),
            None => text,
        }
    }
}

/// One step waiting to run: a node, the input it will get and the node it came from.
/// What a paused run needs to continue, written when it pauses.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedStep {
    // The ids are shared with the run's graph, not copied: a step is queued at every edge.
    pub node_id: Arc<str>,
    // Shared, not copied, with the output it came from: a large value passed along a chain of
    // steps is held once.
    pub input: Arc<Value>,
    pub source_node_id: Option<Arc<str>>,
}

/// A step of a run's stored queue: its key (unique in the run's queue), the step, and the visit
/// it started as when it was already running when the queue was stored.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredStep {
    pub key: u64,
    #[serde(flatten)]
    pub step: QueuedStep,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visit: Option<u64>,
}

/// Where a running run stands, stored as it goes so that a run whose process dies can be
/// continued: the steps to add to and remove from its stored queue since the last checkpoint,
/// the step waiting for a person (if any), and the engine's own extra state.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub added: Vec<StoredStep>,
    pub removed: Vec<u64>,
    pub waiting: Option<QueuedStep>,
    pub state: Value,
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
    /// When the approval waited at times out (RFC 3339, UTC), if it does.
    pub deadline: Option<String>,
    /// When the approval waited at has its next follow-up due (RFC 3339, UTC), if it has any.
    pub follow_up: Option<String>,
    /// The pause's number when its approval names who may decide it: an email asking them is
    /// owed (`approval_mail`), sent by a process that has a mailer.
    pub ask_by_mail: Option<u64>,
}

/// A run as listed: identity, status and times. Serialized in camelCase, like events.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub flow_name: String,
    pub flow_path: Option<String>,
    pub status: RunStatus,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// When it last changed (for a paused run: when it paused).
    pub updated_at: String,
    /// The node a paused run waits on.
    pub waiting_node_id: Option<String>,
    /// What started it (`None` for runs stored before triggers were kept).
    pub trigger: Option<Trigger>,
}

/// Everything stored about a run except its events and node outputs.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub summary: RunSummary,
    /// The flow as it was when the run started.
    pub flow_json: String,
    /// The hash of the flow's version (`None` for a run stored by a Weft before versions
    /// were kept: its flow is stored with it, but under no version).
    pub flow_version: Option<String>,
    pub input: Value,
    /// The final result of a completed run.
    pub result: Option<Value>,
    /// Why a failed run failed.
    pub error: Option<String>,
    /// The step a paused run waits on.
    pub waiting: Option<QueuedStep>,
    /// The steps queued behind `waiting` (or, for a run that stopped while running, the steps
    /// that were running or queued at its last checkpoint), by key.
    pub queue: Vec<StoredStep>,
    /// Engine-owned extra state (`{}` until the engine sets it).
    pub state: Value,
    /// The outputs pinned for the run, by node (see [`NewRun::pins_json`]); `None` for none, and
    /// for a run stored before they had a column (its state holds them). Left out of the
    /// record's JSON: a pin can be large, and the flow's pins file shows them.
    #[serde(skip)]
    pub pins: Option<Value>,
    /// Tokens used by all the run's LLM calls so far.
    pub usage: Usage,
    /// Who drives the run (see [`NewRun::host`]); `None` for a run of this store's processes.
    pub host: Option<String>,
}

/// The latest output of one node in one run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// A step, already serialized for its table row.
struct StepRow {
    pub node_id: Arc<str>,
    pub input_json: String,
    pub source_node_id: Option<Arc<str>>,
    pub visit: Option<u64>,
}

impl StepRow {
    fn new(step: &QueuedStep) -> StepRow {
        StepRow {
            node_id: step.node_id.clone(),
            input_json: step.input.to_string(),
            source_node_id: step.source_node_id.clone(),
            visit: None,
        }
    }

    fn stored(stored: &StoredStep) -> (u64, StepRow) {
        let row = StepRow {
            visit: stored.visit,
            ..StepRow::new(&stored.step)
        };
        (stored.key, row)
    }
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
    /// The queue of writes and the writer connection, shared with the writer thread.
    shared: Arc<writer::Shared>,
    /// The writer thread once started (`None` in it: it could not be).
    writer: OnceLock<Option<JoinHandle<()>>>,
    /// The read connection, opened by the first read: a short command that reads nothing
    /// (`weft run` of a flow, when no approval waits with a deadline) never opens it.
    reader: Mutex<Option<Box<dyn Db>>>,
    open_reader: Box<dyn Fn() -> Result<Box<dyn Db>, StoreError> + Send + Sync>,
    dialect: Dialect,
    /// This process as the owner of the runs it runs (see `lease`).
    owner: String,
    /// The earliest deadline of a paused run's approval when the store was opened.
    deadline_at_open: Option<String>,
    /// The process ends with the store: its connections are left open for the system to close
    /// (see [`Store::end_with_process`]).
    ends_with_process: AtomicBool,
}

impl Inner {
    /// Whether a caller that waits for the writes commits them itself (SQLite). PostgreSQL's
    /// client blocks on a runtime of its own, which an async caller's thread cannot enter:
    /// there the writer thread commits everything.
    fn commits_here(&self) -> bool {
        self.dialect == Dialect::Sqlite
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let leave_open = self.ends_with_process.load(Ordering::Relaxed);
        if self.commits_here() {
            self.shared.close(&self.owner, leave_open);
        }
        if leave_open
            && let Some(reader) = self
                .reader
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        {
            std::mem::forget(reader);
        }
        self.shared.closing();
        if let Some(handle) = self.writer.take().flatten() {
            handle.thread().unpark();
            if handle.join().is_err() {
                tracing::error!(
                    "the run store's writer thread panicked; recent writes may be lost"
                );
            }
        }
    }
}

/// When a SQLite store starts its writer thread, which commits in the background the writes
/// nobody waits for (a PostgreSQL store's starts at once: it opens the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterStart {
    /// When the store opens: for a process that stays (the app, a server).
    AtOpen,
    /// When it is needed: when a run is about to wait on a step that may take a while (see
    /// [`Store::expect_wait`]), or when writes pile up. A command that ends before (a short
    /// run: its end commits its writes itself) never starts a thread, which costs a short
    /// process more than anything it does with the store.
    OnDemand,
}

/// Queued writes that start an on-demand writer thread: a run that goes on without waiting.
const PILED_UP: usize = 64;

impl Store {
    /// Opens (creating it if needed, with its parent directories) the run store at `path`
    /// and brings its schema up to date. Its writer thread starts at once.
    ///
    /// Errors: [`StoreError::Open`] when the directory or file cannot be created or opened,
    /// when the file is not a SQLite database, when it was made by a newer Weft (a schema
    /// version this one does not know), or when a migration fails.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, WriterStart::AtOpen)
    }

    /// [`Store::open`], with the writer thread started as `start` says.
    pub fn open_with(path: &Path, start: WriterStart) -> Result<Store, StoreError> {
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
        // On the caller's thread rather than the writer's: a short command waits for the open
        // more than for anything else, and handing it to a new thread and back wakes the other
        // core twice, a measurable share of a short run.
        let owner = lease::current_owner();
        let mut writer = sqlite::SqliteDb::open(path, true).map_err(open_error)?;
        // A store just made has no run left behind and no approval waiting: nothing to read.
        let deadline = if writer.made_now() {
            None
        } else {
            settle_at_open(&mut writer, &owner).map_err(open_error)?
        };
        let reader_path = path.to_path_buf();
        let open_reader = move || -> Result<Box<dyn Db>, String> {
            Ok(Box::new(sqlite::SqliteDb::open(&reader_path, false)?))
        };
        Store::spawn(
            shown,
            Dialect::Sqlite,
            owner,
            Opening::Opened(Box::new(writer), deadline, start),
            open_reader,
        )
    }

    /// Opens the run store `location` names: a PostgreSQL connection URL (`postgres://` or
    /// `postgresql://`, see [`is_postgres_url`]), else the path of a SQLite file.
    pub fn open_location(location: &str) -> Result<Store, StoreError> {
        Store::open_location_with(location, WriterStart::AtOpen)
    }

    /// [`Store::open_location`], with a SQLite store's writer thread started as `start` says.
    pub fn open_location_with(location: &str, start: WriterStart) -> Result<Store, StoreError> {
        if is_postgres_url(location) {
            Store::open_postgres(location)
        } else {
            Store::open_with(Path::new(location), start)
        }
    }

    /// Connects to the run store in the PostgreSQL database `url` names and brings its schema
    /// up to date. The URL is never shown with its password.
    ///
    /// Errors: [`StoreError::Open`] when the server cannot be reached, refuses the login, or the
    /// schema was made by a newer Weft or cannot be brought up to date.
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        let shown = postgresql::redacted(url);
        let writer_url = url.to_string();
        // On the writer's thread: the PostgreSQL client blocks on a runtime of its own, which
        // cannot be started from a caller's async task.
        let open_writer = move || -> Result<Box<dyn Db>, String> {
            Ok(Box::new(postgresql::PostgresDb::connect(
                &writer_url,
                true,
            )?))
        };
        let reader_url = url.to_string();
        let open_reader = move || -> Result<Box<dyn Db>, String> {
            Ok(Box::new(postgresql::PostgresDb::connect(
                &reader_url,
                false,
            )?))
        };
        let owner = lease::current_owner();
        let writer_owner = owner.clone();
        let open_and_settle = move || {
            let mut writer = open_writer()?;
            let deadline = settle_at_open(&mut *writer, &writer_owner)?;
            Ok((writer, deadline))
        };
        Store::spawn(
            shown,
            Dialect::Postgres,
            owner,
            Opening::OnWriterThread(Box::new(open_and_settle)),
            open_reader,
        )
    }

    /// Starts the writer thread with its connection (`writer`: opened and settled already, or
    /// by the thread, which then answers with the earliest deadline of a paused run). The thread
    /// compiles the
    /// statements a run's writes use and then applies writes. `open_reader` opens the read
    /// connection (of `dialect`) at the first read. `shown` names the store in errors; `owner`
    /// is this process as a lease owner.
    fn spawn(
        shown: String,
        dialect: Dialect,
        owner: String,
        writer: Opening,
        open_reader: impl Fn() -> Result<Box<dyn Db>, String> + Send + Sync + 'static,
    ) -> Result<Store, StoreError> {
        let open_error = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        // The read connection's errors name the store as the writer's do.
        let reader_shown = shown.clone();
        let open_reader = Box::new(move || {
            open_reader().map_err(|message| StoreError::Open {
                path: reader_shown.clone(),
                message,
            })
        });
        let (opened, answer) = mpsc::sync_channel::<OpenAnswer>(1);
        let (shared, known_deadline, open_on_writer, start) = match writer {
            Opening::Opened(db, deadline, start) => {
                (writer::Shared::new(Some(db)), Some(deadline), None, start)
            }
            Opening::OnWriterThread(open) => (
                writer::Shared::new(None),
                None,
                Some(open),
                WriterStart::AtOpen,
            ),
        };
        let shared = Arc::new(shared);
        let writer = OnceLock::new();
        if start == WriterStart::AtOpen {
            let open = open_on_writer.map(|open| (open, opened));
            let thread = start_writer(&shared, &owner, open)
                .map_err(|err| open_error(format!("cannot start the writer thread: {err}")))?;
            let _ = writer.set(Some(thread));
        }
        let deadline_at_open = match known_deadline {
            Some(deadline) => deadline,
            None => answer
                .recv()
                .map_err(|_| {
                    open_error("the writer thread stopped while opening the store".into())
                })?
                .map_err(open_error)?,
        };
        Ok(Store {
            inner: Arc::new(Inner {
                shared,
                writer,
                reader: Mutex::new(None),
                open_reader,
                dialect,
                owner,
                deadline_at_open,
                ends_with_process: AtomicBool::new(false),
            }),
        })
    }

    /// Queues the creation of a run with status `running`, leased to this process. A run with
    /// the same id is an error reported by the next [`Store::flush`].
    pub fn create_run(&self, run: &NewRun) {
        self.send(creation(run.clone()));
    }

    /// Queues the creation of a run together with the node outputs it starts from and its
    /// first checkpoint, committed in one transaction: a run that is in the store can always
    /// be continued, whenever its process dies.
    /// Taken whole: its texts (the flow, the pins) are stored as they are, not copied.
    pub fn create_run_with<'o>(
        &self,
        run: NewRun,
        outputs: impl IntoIterator<Item = (&'o str, &'o Value)>,
        checkpoint: &Checkpoint,
    ) {
        let outputs = outputs.into_iter();
        let (run_id, at) = (run.id.clone(), run.started_at.clone());
        let mut writes = Vec::with_capacity(outputs.size_hint().0 + 2);
        writes.push(creation(run));
        writes.extend(outputs.map(|(node_id, output)| {
            node_output(
                run_id.as_str(),
                node_id.to_string(),
                json_text(output),
                0,
                at.as_str(),
            )
        }));
        writes.push(checkpointing(&run_id, checkpoint, &at));
        self.send(Write::Together(writes));
    }

    /// Queues a checkpoint of a running run: its stored queue changes, the step waiting for a
    /// person (or none) and the engine's state, applied together.
    pub fn save_checkpoint(&self, run_id: &str, checkpoint: &Checkpoint, at: &str) {
        self.send(checkpointing(run_id, checkpoint, at));
    }

    /// Queues keeping the answer of one LLM call of a run (call `call` of node `node_key` in
    /// its visit `visit`), so that the run, continued after an interruption, need not ask again.
    pub fn record_llm_call(&self, run_id: &str, call: &RecordedCall, at: &str) {
        self.send(Write::LlmCall {
            run_id: run_id.to_string(),
            call: Box::new(call.clone()),
            at: at.to_string(),
        });
    }

    /// The LLM calls run `run_id` made, as recorded.
    /// Queues keeping a flow version (once per hash) and a use of it by a file.
    pub fn record_flow_version(&self, flow_json: &str, used: &FlowVersionUse) {
        self.send(Write::FlowVersion(Box::new(writer::VersionWrite {
            flow_json: flow_json.to_string(),
            used: used.clone(),
        })));
    }

    /// The stored version whose hash is `hash_or_prefix` or starts with it (at least
    /// [`MIN_HASH_PREFIX`] hex digits).
    ///
    /// Errors: [`StoreError::NoSuchVersion`], [`StoreError::AmbiguousVersion`].
    pub fn flow_version(&self, hash_or_prefix: &str) -> Result<StoredFlowVersion, StoreError> {
        self.read(|db| versions::load(db, hash_or_prefix))
    }

    /// Every use of a version by the file recorded under `path`, oldest first.
    pub fn flow_version_uses(&self, path: &str) -> Result<Vec<FlowVersionUse>, StoreError> {
        self.read(|db| versions::uses_of(db, path))
    }

    pub fn llm_calls(&self, run_id: &str) -> Result<Vec<RecordedCall>, StoreError> {
        self.read(|db| llm_calls::list(db, run_id))
    }

    /// What each LLM call of run `run_id` used (model and tokens), without the answers.
    pub fn call_usage(&self, run_id: &str) -> Result<Vec<CallUsage>, StoreError> {
        self.read(|db| llm_calls::usage(db, run_id))
    }

    /// Queues one event, and `publish` to be called with it once it is committed (in the order
    /// events were queued; on the writer thread, so it should be quick). The run must have
    /// been created (earlier in the queue is enough) and `(run_id, seq)` must be new; otherwise
    /// the next [`Store::flush`] reports the error and the event is not published.
    pub fn append_event(&self, event: RunEvent, publish: Option<EventListener>) {
        self.send(Write::Event {
            event: Box::new(event),
            publish,
        });
    }

    /// Queues `metadata` (e.g. `{"sources": [...]}`) as the metadata of node `node_id`'s latest
    /// output.
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
        run_id: impl Into<Arc<str>>,
        node_id: impl Into<String>,
        output: &Value,
        visits: u64,
        at: impl Into<Arc<str>>,
    ) {
        self.put_node_output_json(run_id, node_id, json_text(output), visits, at);
    }

    /// [`Store::put_node_output`] of an output already written as JSON (`output_json`), as
    /// the engine has it for every output but a text.
    pub fn put_node_output_json(
        &self,
        run_id: impl Into<Arc<str>>,
        node_id: impl Into<String>,
        output_json: String,
        visits: u64,
        at: impl Into<Arc<str>>,
    ) {
        self.send(node_output(
            run_id,
            node_id.into(),
            output_json,
            visits,
            at.into(),
        ));
    }

    /// Queues keeping `pins_json` as the pins of `run_id` (see [`NewRun::pins_json`]), unless it
    /// has pins already: a run paused by a Weft that kept them in the engine's state.
    pub fn keep_pins(&self, run_id: &str, pins_json: String) {
        self.send(Write::Pins {
            run_id: run_id.to_string(),
            pins_json,
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

    /// Queues keeping a decision given in advance (`weft run --decide`) as the run applied it,
    /// in the chain of decisions (`weft audit`).
    pub fn keep_given_decision(&self, given: GivenDecision) {
        self.send(Write::GivenDecision(Box::new(given)));
    }

    /// Queues pausing a run: status `paused`, the waiting step, the engine state, when its
    /// approval times out and has its next follow-up due, and the run's queue replaced by
    /// `pause.queue` (in order). An unknown run is reported by the
    /// next [`Store::flush`] as [`StoreError::NoSuchRun`].
    pub fn save_pause(&self, run_id: &str, pause: &PauseRecord, at: &str) {
        self.send(Write::Pause {
            run_id: run_id.to_string(),
            waiting: Box::new(StepRow::new(&pause.waiting)),
            queue: pause.queue.iter().map(StepRow::new).collect(),
            state_json: pause.state.to_string(),
            due: (pause.deadline.is_some()
                || pause.follow_up.is_some()
                || pause.ask_by_mail.is_some())
            .then(|| {
                Box::new(runs::PauseDue {
                    deadline: pause.deadline.as_deref().map(Box::from),
                    follow_up: pause.follow_up.as_deref().map(Box::from),
                    ask_by_mail: pause.ask_by_mail,
                })
            }),
            at: at.to_string(),
        });
    }

    /// Queues replacing the engine-owned state of a run. Written as JSON straight from
    /// `state`: a long run's state (its visits by node) made a JSON value first took
    /// milliseconds of tree inserts before the process could end.
    pub fn set_state(&self, run_id: &str, state: &impl Serialize, at: &str) {
        self.send(Write::SetState {
            run_id: run_id.to_string(),
            state_json: serde_json::to_string(state).unwrap_or_else(|_| "null".to_string()),
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
            result_json: result.map(json_text),
            error: error.map(str::to_string),
            at: at.to_string(),
        });
    }

    /// Waits until every write queued before this call is committed.
    ///
    /// Errors: the first write error since the previous flush (every failed write is also
    /// logged when it happens), or [`StoreError::WriterStopped`].
    pub fn flush(&self) -> Result<(), StoreError> {
        match self.sync(true)? {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Whether the store is waiting for its database server to come back, its writes kept
    /// (at most [`OUTAGE_LIMIT`]): a run starts no step meanwhile.
    pub fn in_outage(&self) -> bool {
        self.inner.shared.in_outage()
    }

    /// [`Store::flush`] for async callers. On SQLite the task commits what is queued itself
    /// when the writer thread is not committing and little is queued (a run's end, a pause);
    /// else the task waits for the writer, and no thread does (a short run's end then needs no
    /// thread of the blocking pool, which costs more to start than the run).
    pub async fn flushed(&self) -> Result<(), StoreError> {
        match self.synced(true).await? {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Waits until every write queued before this call is committed, leaving any write error
    /// for the next flush: what a run does before it asks for something it pays for (a model's
    /// answer, a tool's result), so that a process killed meanwhile has kept every answer before
    /// it and a run continued elsewhere does not ask for them again.
    ///
    /// Errors: [`StoreError::WriterStopped`].
    pub async fn committed(&self) -> Result<(), StoreError> {
        self.synced(false).await.map(|_| ())
    }

    /// [`Store::sync`] for async callers.
    async fn synced(&self, take_error: bool) -> Result<Option<StoreError>, StoreError> {
        if self.inner.commits_here() {
            let committed = self.inner.shared.try_commit_here(
                &self.inner.owner,
                take_error,
                COMMIT_HERE_AT_MOST,
            );
            if let Some(answer) = committed {
                return answer;
            }
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.send_sync(Reply::Async(reply), take_error)?;
        answer.await.map_err(|_| StoreError::WriterStopped)
    }

    /// Atomically moves a paused run to `running`, leased to this process, and returns its
    /// record with the waiting step and the queue. They stay stored until the run's next
    /// checkpoint replaces them, so a resume that dies half-way leaves the pause to go back to.
    /// Of several processes claiming the same run, exactly one wins.
    ///
    /// `decided` is the person's decision the claimant continues the run with: it is stored in
    /// the run's state (field [`DECIDED`]) in the same transaction, so a claimant that dies
    /// before its next checkpoint leaves a run that continues with that decision rather than one
    /// that asks again (and could be answered differently) after the run went on with it.
    ///
    /// Errors: [`StoreError::NoSuchRun`], [`StoreError::Finished`] (completed, failed or
    /// cancelled), [`StoreError::NotPaused`] (running or interrupted), [`StoreError::Corrupt`].
    pub fn claim_paused(
        &self,
        run_id: &str,
        at: &str,
        decided: Option<&Value>,
    ) -> Result<RunRecord, StoreError> {
        self.claim(run_id, RunStatus::Paused, at, decided, |_| Ok(()))
    }

    /// [`Store::claim_paused`] when `accept` agrees with the run's record (what it waits at),
    /// in the same transaction: else nothing is claimed, and the error is
    /// [`StoreError::Refused`] with `accept`'s message.
    pub fn claim_paused_if(
        &self,
        run_id: &str,
        at: &str,
        decided: Option<&Value>,
        accept: impl FnOnce(&RunRecord) -> Result<(), String> + Send,
    ) -> Result<RunRecord, StoreError> {
        self.claim(run_id, RunStatus::Paused, at, decided, accept)
    }

    /// Atomically moves an interrupted run to `running`, leased to this process, and returns
    /// its record: the queue and state of its last checkpoint. Of several processes claiming
    /// the same run, exactly one wins. `decided` as for [`Store::claim_paused`].
    ///
    /// Errors as [`Store::claim_paused`], with [`StoreError::NotInterrupted`] for a run that is
    /// not interrupted, and [`StoreError::NotWaiting`] (nothing claimed) for a decision given to
    /// a run that was not waiting for one, or whose decision was already taken.
    pub fn claim_interrupted(
        &self,
        run_id: &str,
        at: &str,
        decided: Option<&Value>,
    ) -> Result<RunRecord, StoreError> {
        self.claim(run_id, RunStatus::Interrupted, at, decided, |_| Ok(()))
    }

    /// [`Store::claim_interrupted`] when `accept` agrees, as [`Store::claim_paused_if`].
    pub fn claim_interrupted_if(
        &self,
        run_id: &str,
        at: &str,
        decided: Option<&Value>,
        accept: impl FnOnce(&RunRecord) -> Result<(), String> + Send,
    ) -> Result<RunRecord, StoreError> {
        self.claim(run_id, RunStatus::Interrupted, at, decided, accept)
    }

    fn claim(
        &self,
        run_id: &str,
        from: RunStatus,
        at: &str,
        decided: Option<&Value>,
        accept: impl FnOnce(&RunRecord) -> Result<(), String> + Send,
    ) -> Result<RunRecord, StoreError> {
        let owner = &self.inner.owner;
        self.read(|db| {
            db.begin()?;
            // Rolled back on any error: nothing is claimed then.
            let claimed = claim_in(db, run_id, from, owner, at, decided, accept);
            match claimed {
                Ok(record) => db.commit().map(|()| record),
                Err(error) => {
                    let _ = db.rollback();
                    Err(error)
                }
            }
        })
    }

    /// Keeps one person's answer at one pause of a run, at the end of the store's chain of
    /// decisions, in one transaction that first checks the run is paused.
    ///
    /// Returns [`Recorded::Repeated`] with their earlier decision, keeping nothing, when `by`
    /// already answered pause `pause` of the run. Concurrent callers (threads, processes, two
    /// stores on one PostgreSQL database) are serialized: the chain never forks, and of one
    /// person's two racing answers at one pause one is kept.
    ///
    /// Errors: [`StoreError::NoSuchRun`], [`StoreError::Finished`] (completed, failed or
    /// cancelled), [`StoreError::NotPaused`] (running or interrupted), nothing kept; a
    /// [`StoreError::OutOfRange`] for fields nested too deep to read back.
    pub fn record_decision(&self, new: &NewDecision<'_>) -> Result<Recorded, StoreError> {
        self.read(|db| {
            db.begin()?;
            match decisions::record(db, new) {
                Ok(recorded) => db.commit().map(|()| recorded),
                Err(error) => {
                    let _ = db.rollback();
                    Err(error)
                }
            }
        })
    }

    /// Appends `event` to the events of its run as the next one (its `seq` is set here) if the
    /// run is paused: what a keeper notes while a run waits (a reminder, an escalation). A host
    /// claiming the run meanwhile goes on after it. Returns the event's seq, or `None` when the
    /// run is not paused.
    pub fn append_to_paused(&self, mut event: RunEvent) -> Result<Option<u64>, StoreError> {
        self.read(|db| {
            db.begin()?;
            match events::append_to_paused(db, &mut event) {
                Ok(seq) => db.commit().map(|()| seq),
                Err(error) => {
                    let _ = db.rollback();
                    Err(error)
                }
            }
        })
    }

    /// The decisions kept at pause `pause` of run `run_id`, in chain order.
    pub fn decisions_at(
        &self,
        run_id: &str,
        pause: u64,
    ) -> Result<Vec<StoredDecision>, StoreError> {
        self.read(|db| decisions::at_pause(db, run_id, pause))
    }

    /// Every kept decision (of run `run_id` when given), in chain order.
    pub fn decisions(&self, run_id: Option<&str>) -> Result<Vec<StoredDecision>, StoreError> {
        self.read(|db| decisions::list(db, run_id))
    }

    /// Walks the whole chain of decisions (in one snapshot of it) and names the first decision
    /// altered or removed.
    pub fn verify_decisions(&self) -> Result<ChainCheck, StoreError> {
        self.read(|db| decisions::verify(db))
    }

    /// Marks as `interrupted` the runs still `running` whose process has stopped (another
    /// process's, on this machine or whose lease ran out); returns their ids. Done when a store
    /// is opened; a process that stays open (the app, a server) may call it again.
    pub fn interrupt_abandoned(&self) -> Result<Vec<String>, StoreError> {
        let owner = &self.inner.owner;
        self.read(|db| runs::interrupt_abandoned(db, owner, &lease::now_text()))
    }

    /// Claims occurrence `occurrence` (RFC 3339) of schedule `schedule` of flow `flow` for this
    /// process: `true` when it is the first to, and so starts the run; `false` when another
    /// process (or an earlier start of this one) already did.
    pub fn claim_occurrence(
        &self,
        flow: &str,
        schedule: u64,
        occurrence: &str,
        at: &str,
    ) -> Result<bool, StoreError> {
        let owner = &self.inner.owner;
        let schedule = to_i64("a schedule's number", schedule)?;
        self.read(|db| {
            db.make_tables(Feature::ScheduleClaims)?;
            Ok(db.execute(
                "INSERT INTO schedule_claims (flow, schedule, occurrence, claimed_by, claimed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                &params![flow, schedule, occurrence, owner.as_str(), at],
            )? == 1)
        })
    }

    /// The latest occurrence of schedule `schedule` of flow `flow` any process claimed.
    pub fn latest_claim(&self, flow: &str, schedule: u64) -> Result<Option<String>, StoreError> {
        let schedule = to_i64("a schedule's number", schedule)?;
        self.read(|db| {
            if !db.has_tables(Feature::ScheduleClaims)? {
                return Ok(None);
            }
            db.query_opt(
                "SELECT MAX(occurrence) AS latest FROM schedule_claims \
                 WHERE flow = ?1 AND schedule = ?2",
                &params![flow, schedule],
            )?
            .map(|row| row.opt_text("latest"))
            .transpose()
            .map(Option::flatten)
        })
    }

    /// The largest event `seq` of a run (0 for none): where its numbering goes on.
    pub fn last_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.read(|db| events::last_seq(db, run_id))
    }

    /// The earliest deadline of a paused run's approval when this store was opened (`None`:
    /// no paused run waited with one then), read by the writer as it opened the store.
    pub fn deadline_at_open(&self) -> Option<&str> {
        self.inner.deadline_at_open.as_deref()
    }

    /// For a process that ends once the store is let go (`weft run`): when it is, the writes
    /// are committed as ever, and then the connections are left for the system to close with
    /// the process instead of being closed here, which frees every statement and the whole
    /// schema piece by piece, work a short command would do for nothing. Nothing is lost: every
    /// commit is in the store's log by then, and the next connection reads the log the same
    /// whether the last one closed or not.
    pub fn end_with_process(&self) {
        self.inner.ends_with_process.store(true, Ordering::Relaxed);
    }

    /// Paused runs whose next follow-up is due at `now` or earlier, earliest first.
    pub fn due_follow_ups(&self, now: &str) -> Result<Vec<String>, StoreError> {
        self.read(|db| runs::due_follow_ups(db, now))
    }

    /// The earliest follow-up due of a paused run.
    pub fn next_follow_up(&self) -> Result<Option<String>, StoreError> {
        self.read(|db| runs::next_follow_up(db))
    }

    /// Sets (`None` clears) when paused run `run_id`'s next follow-up is due; leaves a run that
    /// is not paused (or unknown) as it is, and never changes `updated_at`.
    pub fn set_follow_up(&self, run_id: &str, due: Option<&str>) -> Result<(), StoreError> {
        self.read(|db| runs::set_follow_up(db, run_id, due))
    }

    /// Keeps `done` unless a follow-up of that kind is already kept for that pause; true for
    /// the one caller (of any process, any store handle) that kept it.
    pub fn claim_follow_up(&self, done: &FollowUp<'_>) -> Result<bool, StoreError> {
        self.read(|db| follow_ups::claim(db, done))
    }

    /// Owes an email of `kind` ("remind", "escalate") for pause `pause` of `run_id`, to be
    /// addressed and sent by a process that has a mailer; whether it was not owed already.
    pub fn queue_mail(
        &self,
        run_id: &str,
        pause: u64,
        kind: &str,
        at: &str,
    ) -> Result<bool, StoreError> {
        self.read(|db| mail::queue(db, run_id, pause, kind, at))
    }

    /// Emails to address or (re)try at `now`, earliest first, at most `limit`.
    pub fn due_mail(&self, now: &str, limit: u32) -> Result<Vec<StoredMail>, StoreError> {
        self.read(|db| mail::due(db, now, limit))
    }

    /// Takes the email `key` until `until` (counting an attempt) if it is still due at `seen`,
    /// as the caller read it: true for the one caller of any process that has it.
    pub fn claim_mail(
        &self,
        key: &MailKey<'_>,
        seen: &str,
        until: &str,
    ) -> Result<bool, StoreError> {
        self.read(|db| mail::claim(db, key, seen, until))
    }

    /// Addresses the owed email `key`: one for each of `to` (person, address; `None`: kept
    /// unsent, saying why), due at `at`; the owed one is done.
    pub fn address_mail(
        &self,
        key: &MailKey<'_>,
        to: &[(String, Option<String>)],
        at: &str,
    ) -> Result<(), StoreError> {
        self.read(|db| mail::address(db, key, to, at))
    }

    /// Marks the email `key` sent at `at`.
    pub fn mail_sent(&self, key: &MailKey<'_>, at: &str) -> Result<(), StoreError> {
        self.read(|db| mail::finish(db, key, None, Some(at), None))
    }

    /// Keeps why the email `key` was not sent; due again at `retry_at`, or done when `None`.
    pub fn mail_failed(
        &self,
        key: &MailKey<'_>,
        error: &str,
        retry_at: Option<&str>,
    ) -> Result<(), StoreError> {
        self.read(|db| mail::finish(db, key, retry_at, None, Some(error)))
    }

    /// Every email of a run, owed, sent or not sent, by pause and time owed.
    pub fn mails(&self, run_id: &str) -> Result<Vec<StoredMail>, StoreError> {
        self.read(|db| mail::of_run(db, run_id))
    }

    /// The follow-ups kept at one pause of a run, in the order they were kept (by `at`, then
    /// kind).
    pub fn follow_ups(&self, run_id: &str, pause: u64) -> Result<Vec<StoredFollowUp>, StoreError> {
        self.read(|db| follow_ups::at_pause(db, run_id, pause))
    }

    /// Paused runs whose approval's deadline is `now` or earlier, oldest deadline first.
    pub fn due_approvals(&self, now: &str) -> Result<Vec<String>, StoreError> {
        self.read(|db| runs::due(db, now))
    }

    /// The earliest deadline of a paused run's approval, if any waits with one.
    pub fn next_deadline(&self) -> Result<Option<String>, StoreError> {
        self.read(|db| runs::next_deadline(db))
    }

    /// Every paused run, oldest pause first (approvals and breakpoints alike).
    pub fn paused_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.read(|db| runs::paused(db))
    }

    /// The newest `limit` runs (by `started_at`), newest first.
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunSummary>, StoreError> {
        self.read(|db| runs::list(db, limit))
    }

    /// The `limit` runs that come after run `after` in [`Store::list_runs`]'s order: the next
    /// page of a long list, `after` being the last run of the page before. Runs started
    /// meanwhile do not shift the pages (they come before the first).
    ///
    /// Errors: [`StoreError::NoSuchRun`] when there is no run `after`.
    pub fn list_runs_after(
        &self,
        limit: usize,
        after: &str,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.read(|db| runs::list_after(db, limit, after))
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
        self.read(|db| runs::resolve(db, id_or_prefix))
    }

    /// The run with exactly this id.
    ///
    /// Errors: [`StoreError::NoSuchRun`], [`StoreError::Corrupt`].
    pub fn run(&self, run_id: &str) -> Result<RunRecord, StoreError> {
        self.read(|db| runs::load(db, run_id))
    }

    /// The run's events, ordered by `seq`.
    ///
    /// Errors: [`StoreError::NoSuchRun`] when there is no such run, [`StoreError::Corrupt`]
    /// for an unknown event type.
    pub fn events(&self, run_id: &str) -> Result<Vec<RunEvent>, StoreError> {
        self.read(|db| {
            let events = events::list(db, run_id)?;
            if events.is_empty() && !runs::exists(db, run_id)? {
                return Err(StoreError::NoSuchRun(run_id.to_string()));
            }
            Ok(events)
        })
    }

    /// The run's events after `seq` `after` (all of them for 0), ordered by `seq`.
    pub fn events_after(&self, run_id: &str, after: u64) -> Result<Vec<RunEvent>, StoreError> {
        self.read(|db| events::list_after(db, run_id, after))
    }

    /// The run's node outputs, ordered by node id.
    ///
    /// Errors: [`StoreError::NoSuchRun`] when there is no such run, [`StoreError::Corrupt`].
    pub fn node_outputs(&self, run_id: &str) -> Result<Vec<NodeOutputRecord>, StoreError> {
        self.read(|db| {
            let outputs = node_outputs::list(db, run_id)?;
            if outputs.is_empty() && !runs::exists(db, run_id)? {
                return Err(StoreError::NoSuchRun(run_id.to_string()));
            }
            Ok(outputs)
        })
    }

    /// Says that the caller is about to wait on something that may take a while (a model,
    /// the network, a long render): what it wrote is committed, and its events shown, in the
    /// background meanwhile, by the writer thread, started now if it has not been (see
    /// [`WriterStart::OnDemand`]).
    pub fn expect_wait(&self) {
        if self.inner.writer.get().is_none() {
            self.writer();
            self.wake_writer();
        }
    }

    /// The writer thread, started if it has not been (`None`: it cannot be; the writes then
    /// wait for a flush, and the error is logged).
    fn writer(&self) -> Option<&JoinHandle<()>> {
        let writer = self.inner.writer.get_or_init(|| {
            start_writer(&self.inner.shared, &self.inner.owner, None)
                .inspect_err(|error| {
                    tracing::error!("the run store cannot start its writer thread: {error}");
                })
                .ok()
        });
        writer.as_ref()
    }

    fn send(&self, write: Write) {
        let large = write.is_large();
        match self.inner.shared.push(Message::Write(write), false) {
            Ok(queued) if queued.wake => self.wake_writer(),
            Ok(queued) if queued.count >= PILED_UP || large => self.expect_wait(),
            Ok(_) => {}
            // The next flush reports this too (the writer is gone).
            Err(writer::WriterGone) => {
                tracing::error!("the run store's writer thread has stopped; a write was lost")
            }
        }
    }

    /// Wakes the writer thread, if it is started.
    fn wake_writer(&self) {
        if let Some(Some(writer)) = self.inner.writer.get() {
            writer.thread().unpark();
        }
    }

    fn sync(&self, take_error: bool) -> Result<Option<StoreError>, StoreError> {
        if self.inner.commits_here() {
            return self.inner.shared.commit_here(&self.inner.owner, take_error);
        }
        let (reply, answer) = mpsc::channel();
        self.send_sync(Reply::Blocking(reply), take_error)?;
        answer.recv().map_err(|_| StoreError::WriterStopped)
    }

    fn send_sync(&self, reply: Reply, take_error: bool) -> Result<(), StoreError> {
        self.inner
            .shared
            .push(Message::Sync { reply, take_error }, true)
            .map_err(|writer::WriterGone| StoreError::WriterStopped)?;
        // Someone waits for the writer's answer: it must be there.
        self.writer()
            .ok_or(StoreError::WriterStopped)?
            .thread()
            .unpark();
        Ok(())
    }

    /// Waits until every write queued so far is committed, leaving any write error for the
    /// next flush.
    fn barrier(&self) -> Result<(), StoreError> {
        self.sync(false).map(|_| ())
    }

    /// Runs `work` on the read connection once every write queued before is committed.
    ///
    /// PostgreSQL's client blocks on a runtime of its own, which cannot be entered from a
    /// thread that drives async tasks: there `work` runs on a thread of its own (a read
    /// through the store from async code without `spawn_blocking`).
    fn read<T: Send>(
        &self,
        work: impl FnOnce(&mut dyn Db) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        self.barrier()?;
        let mut reader = self
            .inner
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot: &mut Option<Box<dyn Db>> = &mut reader;
        let read = || {
            let db: &mut dyn Db = match slot {
                Some(db) => &mut **db,
                empty => &mut **empty.insert((self.inner.open_reader)()?),
            };
            work(db)
        };
        match self.inner.dialect {
            Dialect::Postgres => postgresql::off_runtime(read),
            Dialect::Sqlite => read(),
        }
    }
}

/// What a writer thread that opens its connection answers: the earliest deadline of a paused
/// run, or why the store cannot be opened.
type OpenAnswer = Result<Option<String>, String>;

/// Opens and settles a writer connection (see [`Opening::OnWriterThread`]).
type OpenOnWriter = Box<dyn FnOnce() -> Result<(Box<dyn Db>, Option<String>), String> + Send>;

/// Starts the writer thread of `shared` (with `open`, it first opens the connection and
/// answers on the channel with the earliest deadline of a paused run). It compiles the
/// statements a run's writes use, then commits in the background (see `writer::run`).
fn start_writer(
    shared: &Arc<writer::Shared>,
    owner: &str,
    open: Option<(OpenOnWriter, mpsc::SyncSender<OpenAnswer>)>,
) -> std::io::Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    let owner = owner.to_string();
    std::thread::Builder::new()
        .name("weft-store-writer".to_string())
        .spawn(move || {
            let _thread = writer::WriterThread::of(&shared);
            if let Some((open, opened)) = open {
                match open() {
                    Ok((db, deadline)) => {
                        shared.connected(db);
                        let _ = opened.send(Ok(deadline));
                    }
                    Err(message) => {
                        let _ = opened.send(Err(message));
                        return;
                    }
                }
            }
            // While the caller goes on to start its run, before its first write.
            writer::prepare_ahead(&shared);
            writer::run(&shared, &owner);
        })
}

/// The writer's connection as [`Store::spawn`] gets it.
enum Opening {
    /// Opened on the caller's thread, with the earliest deadline of a paused run, and when its
    /// writer thread starts.
    Opened(Box<dyn Db>, Option<String>, WriterStart),
    /// To be opened and settled on the writer's thread: the connection and that deadline.
    OnWriterThread(OpenOnWriter),
}

/// What opening a store does on its writer connection before anything else: runs whose
/// process is gone were cut off, and are marked interrupted before anyone reads them; and the
/// earliest deadline of a paused run is read (see [`Store::deadline_at_open`]).
fn settle_at_open(writer: &mut dyn Db, owner: &str) -> Result<Option<String>, String> {
    runs::settle_at_open(writer, owner, &lease::now_text()).map_err(|err| err.to_string())
}

/// The claim of [`Store::claim`], inside the caller's transaction.
fn claim_in(
    db: &mut dyn Db,
    run_id: &str,
    from: RunStatus,
    owner: &str,
    at: &str,
    decided: Option<&Value>,
    accept: impl FnOnce(&RunRecord) -> Result<(), String>,
) -> Result<RunRecord, StoreError> {
    let mut record = runs::claim(db, run_id, from, owner, at)?;
    accept(&record).map_err(|message| StoreError::Refused { message })?;
    if let Some(decision) = decided {
        let refused = |decided: Option<&Value>| StoreError::NotWaiting {
            run_id: run_id.to_string(),
            decided: decided.map(|earlier| match earlier.get("decision") {
                Some(Value::String(choice)) => choice.clone(),
                _ => earlier.to_string(),
            }),
        };
        if record.waiting.is_none() {
            return Err(refused(None));
        }
        let Value::Object(state) = &mut record.state else {
            return Err(StoreError::Corrupt {
                run_id: run_id.to_string(),
                message: "the run's state is not an object".into(),
            });
        };
        if let Some(earlier) = state.get(DECIDED) {
            return Err(refused(Some(earlier)));
        }
        state.insert(DECIDED.to_string(), decision.clone());
        runs::set_state(db, run_id, &record.state.to_string(), at)?;
    }
    Ok(record)
}

/// What a stored value that cannot be read back says.
fn corrupt(run_id: &str, message: String) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_string(),
        message,
    }
}

fn parse_json(run_id: &str, what: &str, text: &str) -> Result<Value, StoreError> {
    read_json(text).map_err(|err| corrupt(run_id, format!("the {what} is not valid JSON: {err}")))
}

/// How deep a stored JSON document may nest and still be read back. What Weft takes in is read
/// at most 128 levels deep (serde_json's limit), then stored a few levels down in a run's state,
/// outputs or queue: a read limited to 128 too refused what had just been written (a webhook's
/// body 127 deep made its run, and every listing of approvals, unreadable). Still bounded, so
/// that reading a stored document cannot exhaust a thread's stack (256 levels take under 512 KiB
/// of it in a debug build).
const MAX_STORED_DEPTH: usize = 256;

/// `text` as JSON of type `T`, if it nests at most [`MAX_STORED_DEPTH`] levels.
fn read_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let depth = nesting(text);
    if depth > MAX_STORED_DEPTH {
        return Err(format!(
            "nested {depth} levels deep, more than the {MAX_STORED_DEPTH} read"
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer).map_err(|error| error.to_string())?;
    deserializer.end().map_err(|error| error.to_string())?;
    Ok(value)
}

/// The deepest nesting of arrays and objects in JSON text (brackets in strings not counted).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn to_i64(what: &'static str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}

fn to_u64(run_id: &str, what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| corrupt(run_id, format!("{what} {value} is negative")))
}

fn creation(run: NewRun) -> Write {
    Write::CreateRun(Box::new(writer::CreateRun {
        input_json: json_text(&run.input),
        id: run.id,
        flow_name: run.flow_name,
        flow_path: run.flow_path,
        flow_json: run.flow_json,
        flow_version: run.flow_version,
        version_path: run.version_path,
        pins_json: run.pins_json,
        started_at: run.started_at,
        host: run.host,
        trigger_json: run
            .trigger
            .as_ref()
            .and_then(|trigger| serde_json::to_string(trigger).ok()),
    }))
}

fn checkpointing(run_id: &str, checkpoint: &Checkpoint, at: &str) -> Write {
    Write::Checkpoint {
        run_id: run_id.to_string(),
        added: checkpoint.added.iter().map(StepRow::stored).collect(),
        removed: checkpoint.removed.as_slice().into(),
        waiting: checkpoint
            .waiting
            .as_ref()
            .map(|step| Box::new(StepRow::new(step))),
        state_json: checkpoint.state.to_string(),
        at: at.to_string(),
    }
}

/// Takes the key and time as they are: a run stores an output at every step.
/// A run's id and a time are shared texts ([`RunEvent::run_id`]): a step stores its output.
fn node_output(
    run_id: impl Into<Arc<str>>,
    node_id: String,
    output_json: String,
    visits: u64,
    at: impl Into<Arc<str>>,
) -> Write {
    Write::NodeOutput {
        run_id: run_id.into(),
        node_id,
        output_json,
        visits,
        at: at.into(),
    }
}

#[cfg(test)]
mod tests;
