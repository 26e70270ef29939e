//! The store's writes: queued, then applied in order, many at a time in one transaction, by the
//! writer thread or by a caller that waits for them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Instant;

use super::sql::{Db, Dialect};
use super::{
    FlowVersionUse, GivenDecision, RecordedCall, StepRow, StoreError, decisions, events, lease,
    llm_calls, mail, node_outputs, queue, runs, versions,
};
use weft_event::{EventListener, RunEvent, RunStatus};
use weft_providers::Usage;

/// The most writes applied in one transaction.
const MAX_BATCH: usize = 1_000;

/// How many messages one part of the queue holds (see [`Queue::filled`]).
const QUEUE_PART: usize = 512;

/// How many emptied parts of the queue are kept for reuse: what a long run queues in a
/// moment, without holding much memory in a server once a burst has passed.
const KEPT_PARTS: usize = 16;

/// The statements a run's writes use, compiled by a writer thread as it starts (unless a
/// caller is committing already), while the process goes on: the first commit otherwise
/// compiles them while whoever waits for it waits.
pub(super) const RUN_STATEMENTS: &[&str] = &[
    runs::INSERT_RUN,
    versions::INSERT_VERSION,
    versions::INSERT_USE,
    runs::CHECKPOINT_RUN,
    runs::SET_STATE,
    runs::FINISH_RUN,
    queue::UPSERT_STEP,
    queue::DELETE_STEP,
    queue::CLEAR_QUEUE,
    node_outputs::UPSERT_OUTPUT,
    events::INSERT_BATCH,
    events::SELECT_LAST_SEQ,
];

/// How long a queued write waits for more before the writer thread commits it (a caller that
/// waits for it commits at once).
const GATHER: std::time::Duration = std::time::Duration::from_micros(300);

/// How long a commit waits for a database server that went away (a restart, a failover, a
/// network cut) to come back, keeping its writes, before it gives them up. Meanwhile runs start
/// no step (see [`crate::Store::in_outage`]): nothing they would print or pay for is lost.
pub const OUTAGE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The first wait before trying a lost connection again; doubled up to [`OUTAGE_RETRY_MAX`].
const OUTAGE_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const OUTAGE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// A new run's row, with its values already serialized.
pub(super) struct CreateRun {
    pub id: String,
    pub flow_name: String,
    pub flow_path: Option<String>,
    pub flow_json: String,
    pub flow_version: String,
    pub version_path: Option<String>,
    pub input_json: String,
    pub pins_json: Option<String>,
    pub started_at: String,
    pub host: Option<String>,
    pub trigger_json: Option<String>,
}

/// A flow version to keep and the use of it to record.
pub(super) struct VersionWrite {
    pub flow_json: String,
    pub used: FlowVersionUse,
}

/// One queued write, with its values already serialized. The writes a run sends at every step
/// (events, outputs) are small; the rare large ones are boxed, because the channel's slots are
/// as large as the largest write, and a run fills and zeroes blocks of them as it goes.
pub(super) enum Write {
    CreateRun(Box<CreateRun>),
    FlowVersion(Box<VersionWrite>),
    Event {
        event: Box<RunEvent>,
        /// Called with the event once it is committed.
        publish: Option<EventListener>,
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
        run_id: Arc<str>,
        node_id: String,
        output_json: String,
        visits: u64,
        at: Arc<str>,
    },
    NodeApproval {
        run_id: String,
        node_id: String,
        approval_json: String,
        at: String,
    },
    /// A run's pins, kept apart from its row (when they are not yet).
    Pins {
        run_id: String,
        pins_json: String,
    },
    /// A decision given in advance and applied, kept in the chain of decisions.
    GivenDecision(Box<GivenDecision>),
    Pause {
        run_id: String,
        waiting: Box<StepRow>,
        queue: Vec<StepRow>,
        state_json: String,
        /// When its approval times out and has its next follow-up due (`None`: neither; boxed
        /// so that a queued write stays small).
        due: Option<Box<runs::PauseDue>>,
        at: String,
    },
    Checkpoint {
        run_id: String,
        added: Vec<(u64, StepRow)>,
        removed: Box<[u64]>,
        waiting: Option<Box<StepRow>>,
        state_json: String,
        at: String,
    },
    LlmCall {
        run_id: String,
        call: Box<RecordedCall>,
        at: String,
    },
    /// Several writes that must be committed in the same transaction (never events: they
    /// are published one by one).
    Together(Vec<Write>),
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

/// A write whose texts come to this many bytes is committed without waiting for the run's
/// end: the run's memory does not hold every large output it has made until then.
pub(super) const LARGE_WRITE_BYTES: usize = 1024 * 1024;

impl Write {
    /// Whether this write's texts come to [`LARGE_WRITE_BYTES`] or more.
    pub(super) fn is_large(&self) -> bool {
        let bytes = match self {
            Write::CreateRun(run) => {
                run.flow_json.len()
                    + run.input_json.len()
                    + run.pins_json.as_ref().map_or(0, String::len)
            }
            Write::Event { event, .. } => event.content.len(),
            Write::NodeOutput { output_json, .. } => output_json.len(),
            Write::Pause { state_json, .. }
            | Write::Checkpoint { state_json, .. }
            | Write::SetState { state_json, .. } => state_json.len(),
            Write::Finish { result_json, .. } => result_json.as_ref().map_or(0, String::len),
            Write::Together(writes) => return writes.iter().any(Write::is_large),
            _ => 0,
        };
        bytes >= LARGE_WRITE_BYTES
    }

    /// What this write was, for error messages.
    fn describe(&self) -> String {
        match self {
            Write::CreateRun(run) => format!("creating run {}", run.id),
            Write::FlowVersion(version) => {
                format!("keeping a version of flow {}", version.used.path)
            }
            Write::Together(writes) => writes
                .iter()
                .map(Write::describe)
                .collect::<Vec<_>>()
                .join(", "),
            Write::Event { event, .. } => {
                format!("storing event {} of run {}", event.seq, event.run_id)
            }
            Write::Usage {
                run_id, node_id, ..
            } => format!("adding the tokens of node {node_id} to run {run_id}"),
            Write::NodeMetadata {
                run_id, node_id, ..
            } => format!("storing the metadata of node {node_id} of run {run_id}"),
            Write::NodeOutput {
                run_id, node_id, ..
            } => format!("storing the output of node {node_id} in run {run_id}"),
            Write::NodeApproval {
                run_id, node_id, ..
            } => format!("storing the approval at node {node_id} in run {run_id}"),
            Write::Pins { run_id, .. } => format!("keeping the pins of run {run_id}"),
            Write::Pause { run_id, .. } => format!("pausing run {run_id}"),
            Write::GivenDecision(given) => format!(
                "keeping {}'s decision for `{}` of run {}",
                given.by, given.node_id, given.run_id
            ),
            Write::Checkpoint { run_id, .. } => format!("checkpointing run {run_id}"),
            Write::LlmCall { run_id, call, .. } => format!(
                "keeping the answer of an LLM call of node {} in run {run_id}",
                call.node_key
            ),
            Write::SetState { run_id, .. } => format!("saving the state of run {run_id}"),
            Write::Finish { run_id, .. } => format!("finishing run {run_id}"),
        }
    }

    /// Applies the write in the commit whose runs `commit` tells of (and records a run it
    /// creates there).
    fn apply<'a>(
        &'a self,
        db: &mut dyn Db,
        owner: &str,
        commit: &mut CommitRuns<'a>,
    ) -> Result<(), StoreError> {
        match self {
            Write::CreateRun(run) => {
                runs::insert(
                    db,
                    runs::NewRunRow {
                        id: &run.id,
                        flow_name: &run.flow_name,
                        flow_path: run.flow_path.as_deref(),
                        flow_json: &run.flow_json,
                        flow_version: &run.flow_version,
                        version_path: run.version_path.as_deref(),
                        input_json: &run.input_json,
                        pins_json: run.pins_json.as_deref(),
                        started_at: &run.started_at,
                        host: run.host.as_deref(),
                        trigger_json: run.trigger_json.as_deref(),
                    },
                    owner,
                    &lease::until(chrono::Utc::now()),
                )?;
                commit.created.push(&run.id);
                Ok(())
            }
            Write::Checkpoint {
                run_id,
                added,
                removed,
                waiting,
                state_json,
                at,
            } => {
                runs::checkpoint(db, run_id, waiting.as_deref(), state_json, at)?;
                if commit.queue_is_moot(run_id) {
                    return Ok(());
                }
                queue::remove(db, run_id, removed)?;
                queue::add(db, run_id, added)
            }
            Write::LlmCall { run_id, call, at } => llm_calls::insert(db, run_id, call, at),
            Write::FlowVersion(version) => {
                let used = &version.used;
                versions::insert_version(db, &used.hash, &version.flow_json, &used.at)?;
                versions::insert_use(db, used)
            }
            Write::Together(writes) => {
                // All or none: a savepoint inside the batch's transaction, so that a failing
                // part leaves nothing of the others (the rest of the batch still commits).
                // A run created in a part that then fails is forgotten by the commit's loop,
                // which gets the error.
                isolated(db, "together", |db| {
                    writes
                        .iter()
                        .try_for_each(|write| write.apply(db, owner, commit))
                })
            }
            // The writer stores a commit's events of a run together (`store_events`); one
            // applied on its own is a batch of one.
            Write::Event { event, .. } => events::insert_batch(db, &event.run_id, &[&**event]),
            Write::Usage {
                run_id,
                node_id,
                usage,
                at,
            } => node_outputs::add_usage(db, run_id, node_id, *usage, at),
            Write::NodeMetadata {
                run_id,
                node_id,
                metadata_json,
                at,
            } => node_outputs::put_metadata(db, run_id, node_id, metadata_json, at),
            Write::NodeOutput {
                run_id,
                node_id,
                output_json,
                visits,
                at,
            } => node_outputs::put_output(db, run_id, node_id, output_json, *visits, at),
            Write::NodeApproval {
                run_id,
                node_id,
                approval_json,
                at,
            } => node_outputs::put_approval(db, run_id, node_id, approval_json, at),
            Write::Pins { run_id, pins_json } => runs::keep_pins(db, run_id, pins_json),
            Write::Pause {
                run_id,
                waiting,
                queue: steps,
                state_json,
                due,
                at,
            } => {
                let due = due.as_deref().unwrap_or(&runs::PauseDue::NONE);
                runs::pause(db, run_id, waiting, state_json, due, at)?;
                if let Some(pause) = due.ask_by_mail {
                    mail::queue(db, run_id, pause, "ask", at)?;
                }
                queue::replace(db, run_id, steps)
            }
            Write::SetState {
                run_id,
                state_json,
                at,
            } => runs::set_state(db, run_id, state_json, at),
            Write::GivenDecision(given) => decisions::record_given(db, &given.as_new()),
            Write::Finish {
                run_id,
                status,
                result_json,
                error,
                at,
            } => {
                runs::finish(
                    db,
                    run_id,
                    *status,
                    result_json.as_deref(),
                    error.as_deref(),
                    at,
                )?;
                if commit.queue_is_moot(run_id) {
                    return Ok(());
                }
                queue::clear(db, run_id)
            }
        }
    }
}

/// What the writer thread receives.
pub(super) enum Message {
    Write(Write),
    /// Commit everything received so far, then answer. With `take_error`, the answer is the
    /// first write error since the previous such sync (which is then forgotten); without, it
    /// is always `None` (a plain barrier that leaves the error for the next flush).
    Sync {
        reply: Reply,
        take_error: bool,
    },
}

/// Where the answer of a [`Message::Sync`] goes: a thread blocked on it, or a task awaiting it.
pub(super) enum Reply {
    Blocking(Sender<Option<StoreError>>),
    Async(tokio::sync::oneshot::Sender<Option<StoreError>>),
}

impl Reply {
    fn send(self, answer: Option<StoreError>) {
        // The caller may have given up waiting; nothing to do then.
        let _ = match self {
            Reply::Blocking(sender) => sender.send(answer).map_err(drop),
            Reply::Async(sender) => sender.send(answer).map_err(drop),
        };
    }
}

/// What a store's callers and its writer thread share: the queue of messages not yet applied,
/// and the connection that applies them.
///
/// Whoever holds the connection takes the whole queue while holding it, and applies it: a
/// message is never in one thread's hands while another commits past it, so a caller that
/// holds the connection and finds the queue empty knows everything queued before is committed.
/// The writer thread commits in the background, gathering what comes in a moment; a caller
/// that waits for the writes (a flush, a read) commits them itself when it can, rather than
/// waking the writer and sleeping until it answers: on a small machine each of those hand-offs
/// costs as much as committing a short run.
pub(super) struct Shared {
    queue: Mutex<Queue>,
    connection: Mutex<Connection>,
    /// Set while a commit waits for the database server to come back (see [`OUTAGE_LIMIT`]).
    outage: AtomicBool,
}

#[derive(Default)]
struct Queue {
    /// The part of the queue being filled: the newest messages, after those of `filled`.
    messages: Vec<Message>,
    /// Parts of [`QUEUE_PART`] messages that were filled before `messages`, oldest first. A
    /// long run queues faster than the writer commits; one growing list would be copied to a
    /// new allocation at every doubling, on the thread that runs the steps.
    filled: Vec<Vec<Message>>,
    /// Emptied parts, kept for the next that fills ([`KEPT_PARTS`] at most).
    free: Vec<Vec<Message>>,
    /// When the oldest queued message was queued: the writer commits it [`GATHER`] later.
    since: Option<Instant>,
    /// Someone waits on the writer (a sync it must answer, or the store's end): it commits
    /// without gathering.
    urgent: bool,
    /// The writer sleeps until a message comes; the next sender wakes it.
    writer_asleep: bool,
    /// The store is closing: the writer applies what is left and ends.
    closing: bool,
    /// The writer thread has ended: nothing queued would be applied.
    writer_gone: bool,
}

impl Queue {
    /// How many messages are queued.
    fn len(&self) -> usize {
        self.filled.len() * QUEUE_PART + self.messages.len()
    }

    /// Keeps the emptied `parts` for the next parts that fill, as many as it keeps.
    fn keep_free(&mut self, parts: &mut Vec<Vec<Message>>) {
        for mut part in parts.drain(..) {
            if self.free.len() < KEPT_PARTS {
                part.clear();
                self.free.push(part);
            }
        }
    }
}

/// The writer connection and what goes with it.
pub(super) struct Connection {
    /// `None` until a connection opened by the writer thread is there (PostgreSQL), and once
    /// the store is closed.
    db: Option<Box<dyn Db>>,
    /// The first write error since the last sync that took it (see [`Message::Sync`]).
    first_error: Option<StoreError>,
    /// An emptied queue, kept to be swapped in next time (its allocation reused).
    spare: Vec<Message>,
    /// The filled parts taken with it, emptied and given back to the queue's `free`.
    taken: Vec<Vec<Message>>,
}

/// A message the writer thread no longer takes (it has ended).
pub(super) struct WriterGone;

/// What [`Shared::push`] found.
pub(super) struct Queued {
    /// The messages queued now.
    pub count: usize,
    /// The writer thread sleeps until a message comes: it must be woken.
    pub wake: bool,
}

impl Shared {
    /// `db`: the writer connection, or `None` when the writer thread opens it (see
    /// [`Shared::connected`]).
    pub(super) fn new(db: Option<Box<dyn Db>>) -> Shared {
        Shared {
            queue: Mutex::new(Queue::default()),
            connection: Mutex::new(Connection {
                db,
                first_error: None,
                spare: Vec::new(),
                taken: Vec::new(),
            }),
            outage: AtomicBool::new(false),
        }
    }

    /// Whether a commit is waiting for the database server to come back.
    pub(super) fn in_outage(&self) -> bool {
        self.outage.load(Ordering::Relaxed)
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds the connection: nothing is committed until the guard is dropped.
    #[cfg(test)]
    pub(super) fn hold_connection(&self) -> MutexGuard<'_, Connection> {
        self.connection()
    }

    /// How many messages are queued.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.queue().len()
    }

    /// Hands over the connection the writer thread opened.
    pub(super) fn connected(&self, db: Box<dyn Db>) {
        self.connection().db = Some(db);
    }

    /// Queues `message`; `urgent` when its sender waits for the writer to answer it.
    pub(super) fn push(&self, message: Message, urgent: bool) -> Result<Queued, WriterGone> {
        let mut queue = self.queue();
        if queue.writer_gone {
            return Err(WriterGone);
        }
        if queue.messages.len() >= QUEUE_PART {
            let next = queue
                .free
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(QUEUE_PART));
            let full = std::mem::replace(&mut queue.messages, next);
            queue.filled.push(full);
        }
        queue.messages.push(message);
        queue.since.get_or_insert_with(Instant::now);
        queue.urgent |= urgent;
        Ok(Queued {
            count: queue.len(),
            // The first sender finds it asleep and wakes it; it is awake from then on.
            wake: std::mem::take(&mut queue.writer_asleep),
        })
    }

    /// Commits everything queued on the calling thread, waiting for the writer if it is
    /// committing. Answers as a [`Message::Sync`] is answered: with `take_error`, the first
    /// write error since the last sync that took it.
    ///
    /// Errors: [`StoreError::WriterStopped`] once the writer thread has ended (the writes
    /// sent since were refused).
    pub(super) fn commit_here(
        &self,
        owner: &str,
        take_error: bool,
    ) -> Result<Option<StoreError>, StoreError> {
        let mut connection = self.connection();
        self.answer_here(&mut connection, owner, take_error)
    }

    /// [`Shared::commit_here`] when it needs no wait: the writer is not committing and at most
    /// `most` messages are queued (a long queue is left to the writer, so that the caller, an
    /// async task, does not hold its thread for long). `None` when it could not.
    pub(super) fn try_commit_here(
        &self,
        owner: &str,
        take_error: bool,
        most: usize,
    ) -> Option<Result<Option<StoreError>, StoreError>> {
        let mut connection = match self.connection.try_lock() {
            Ok(connection) => connection,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        if self.queue().len() > most {
            return None;
        }
        Some(self.answer_here(&mut connection, owner, take_error))
    }

    fn answer_here(
        &self,
        connection: &mut Connection,
        owner: &str,
        take_error: bool,
    ) -> Result<Option<StoreError>, StoreError> {
        if self.queue().writer_gone {
            return Err(StoreError::WriterStopped);
        }
        self.apply_queued(connection, owner);
        Ok(if take_error {
            connection.first_error.take()
        } else {
            None
        })
    }

    /// Commits what is queued and closes the connection (done by the store's last owner, or
    /// by the writer thread at the store's end). With `leave_open`, the process is ending:
    /// the connection is left for it to close (see [`crate::Store::end_with_process`]).
    pub(super) fn close(&self, owner: &str, leave_open: bool) {
        let mut connection = self.connection();
        self.apply_queued(&mut connection, owner);
        if let Some(mut db) = connection.db.take() {
            db.close();
            if leave_open {
                std::mem::forget(db);
            }
        }
    }

    /// Tells the writer thread the store is closing.
    pub(super) fn closing(&self) {
        let mut queue = self.queue();
        queue.closing = true;
        queue.urgent = true;
    }

    /// Takes the queue and applies it, [`MAX_BATCH`] writes at most to a transaction, until
    /// nothing is queued; a sync commits what came before it, then answers.
    fn apply_queued(&self, connection: &mut Connection, owner: &str) {
        let Connection {
            db,
            first_error,
            spare,
            taken,
        } = connection;
        let mut pending: Vec<Write> = Vec::new();
        loop {
            {
                let mut queue = self.queue();
                queue.keep_free(taken);
                if queue.messages.is_empty() {
                    break;
                }
                std::mem::swap(&mut queue.filled, taken);
                std::mem::swap(&mut queue.messages, spare);
                queue.since = None;
                queue.urgent = false;
            }
            // Oldest first: the filled parts, then the part that was being filled.
            let messages = taken
                .iter_mut()
                .flat_map(|part| part.drain(..))
                .chain(spare.drain(..));
            let Some(db) = db.as_deref_mut() else {
                // Closed, or never opened: nothing can be applied, and whoever waits is told
                // so (a dropped reply reads as the writer having stopped).
                drop(messages);
                taken.iter_mut().for_each(Vec::clear);
                spare.clear();
                tracing::error!("the run store is closed; queued writes were lost");
                continue;
            };
            for message in messages {
                match message {
                    Message::Write(write) => {
                        pending.push(write);
                        if pending.len() >= MAX_BATCH {
                            commit(db, &mut pending, first_error, owner, &self.outage);
                        }
                    }
                    Message::Sync { reply, take_error } => {
                        commit(db, &mut pending, first_error, owner, &self.outage);
                        reply.send(if take_error { first_error.take() } else { None });
                    }
                }
            }
            commit(db, &mut pending, first_error, owner, &self.outage);
        }
    }

    /// What the writer thread does next, waiting (parked) until there is something: apply
    /// the queue once its oldest message is [`GATHER`] old (at once when someone waits), end
    /// when the store closes, or nothing once `renew_at` has come.
    fn next_task(&self, renew_at: Instant) -> Task {
        let mut queue = self.queue();
        loop {
            if queue.closing {
                return Task::Close;
            }
            let now = Instant::now();
            let wake_at = match queue.since {
                Some(since) if queue.urgent || now >= since + GATHER => return Task::Apply,
                Some(since) => since + GATHER,
                None if now >= renew_at => return Task::Renew,
                None => {
                    queue.writer_asleep = true;
                    renew_at
                }
            };
            drop(queue);
            std::thread::park_timeout(wake_at.saturating_duration_since(now));
            queue = self.queue();
            queue.writer_asleep = false;
        }
    }
}

enum Task {
    Apply,
    Renew,
    Close,
}

/// Held by the writer thread from its first moment: however the thread ends (a panic too),
/// senders are told from then on, and whoever waits for an answer of it is answered (its
/// reply dropped).
pub(super) struct WriterThread<'a>(&'a Shared);

impl<'a> WriterThread<'a> {
    pub(super) fn of(shared: &'a Shared) -> WriterThread<'a> {
        WriterThread(shared)
    }
}

impl Drop for WriterThread<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.queue();
        queue.writer_gone = true;
        queue.messages.clear();
        queue.filled.clear();
    }
}

/// The writer thread: commits queued writes in the background (see [`Shared`]), and every few
/// seconds renews the leases of this process's running runs (`owner`), even while nothing is
/// written. At the store's end it applies what is left and closes the connection (when the
/// store's last owner has not done so already).
pub(super) fn run(shared: &Shared, owner: &str) {
    let mut renew_at = Instant::now() + lease::RENEW_EVERY;
    loop {
        let task = shared.next_task(renew_at);
        if Instant::now() >= renew_at {
            renew_at = Instant::now() + lease::RENEW_EVERY;
            if let Some(db) = shared.connection().db.as_deref_mut()
                && let Err(error) = runs::renew_leases(db, owner, &lease::until(chrono::Utc::now()))
            {
                tracing::warn!("the run store could not renew this process's leases: {error}");
            }
        }
        match task {
            Task::Apply => shared.apply_queued(&mut shared.connection(), owner),
            Task::Renew => {}
            Task::Close => return shared.close(owner, false),
        }
    }
}

/// Compiles the statements a run's writes use, unless a caller is committing already.
pub(super) fn prepare_ahead(shared: &Shared) {
    if let Ok(mut connection) = shared.connection.try_lock()
        && let Some(db) = connection.db.as_deref_mut()
    {
        db.prepare_ahead(RUN_STATEMENTS);
    }
}

/// Applies `pending` in one transaction and empties it, then passes the committed events on
/// to their listeners. A failing write is recorded and the others still apply; a failing commit
/// loses the whole batch (and is recorded), and nothing of it is published.
fn commit(
    db: &mut dyn Db,
    pending: &mut Vec<Write>,
    first_error: &mut Option<StoreError>,
    owner: &str,
    outage: &AtomicBool,
) {
    if pending.is_empty() {
        return;
    }
    let count = pending.len();
    // Each failure with the position of its write, so that they are reported in queue order.
    let mut failures: Vec<(usize, StoreError)> = Vec::new();
    let mut applied = vec![false; count];
    // PostgreSQL aborts a whole transaction at its first failing statement, where SQLite only
    // undoes that statement. There, a batch with a failing write is rolled back and applied
    // again with each write in a savepoint of its own, so that the others still commit (the
    // savepoints cost a round trip each, so only a failing batch pays for them).
    let mut each_isolated = false;
    // A batch that failed because the server went away is kept and tried again once it is
    // back, within OUTAGE_LIMIT.
    let mut outage_began: Option<Instant> = None;
    let mut retry_after = OUTAGE_RETRY_FIRST;
    let result = loop {
        failures.clear();
        applied.fill(false);
        let attempt = db.begin().map(|()| {
            let mut events = RunEvents::default();
            let mut commit = CommitRuns::of(pending);
            for (index, write) in pending.iter().enumerate() {
                if let Write::Event { event, .. } = write {
                    events.add(index, event);
                    continue;
                }
                let created = commit.created.len();
                let outcome = if each_isolated {
                    isolated(db, "write", |db| write.apply(db, owner, &mut commit))
                } else {
                    write.apply(db, owner, &mut commit)
                };
                match outcome {
                    Ok(()) => applied[index] = true,
                    Err(err) => {
                        commit.created.truncate(created);
                        failures.push((index, err.with_action(write.describe())));
                    }
                }
            }
            // After the other writes: a run created in this commit exists by now.
            for (run_id, run_events) in &events.runs {
                store_events(
                    db,
                    run_id,
                    run_events,
                    commit.created.contains(run_id),
                    each_isolated,
                    &mut applied,
                    &mut failures,
                );
            }
        });
        // An event the writer refuses itself (`EventNotAfter`) leaves the transaction sound.
        let aborted = failures
            .iter()
            .any(|(_, err)| !matches!(err, StoreError::EventNotAfter { .. }));
        let retry = db.dialect() == Dialect::Postgres && !each_isolated && aborted;
        let result = if retry || attempt.is_err() {
            attempt
        } else {
            db.commit()
        };
        let within_limit = outage_began.is_none_or(|began| began.elapsed() < OUTAGE_LIMIT);
        if (result.is_err() || aborted) && within_limit && db.connection_lost() {
            let _ = db.rollback();
            if outage_began.is_none() {
                let writes = if count == 1 { "write" } else { "writes" };
                tracing::warn!(
                    "the run store's database server went away; keeping {count} {writes} until it is back"
                );
                outage.store(true, Ordering::Relaxed);
                outage_began = Some(Instant::now());
            }
            std::thread::sleep(retry_after);
            retry_after = (retry_after * 2).min(OUTAGE_RETRY_MAX);
            each_isolated = false;
            continue;
        }
        if retry {
            let _ = db.rollback();
            each_isolated = true;
            continue;
        }
        break result;
    };
    if outage_began.is_some() {
        outage.store(false, Ordering::Relaxed);
    }
    match result {
        Ok(()) => {
            let mut published: Vec<&EventListener> = Vec::new();
            for (write, applied) in pending.iter().zip(applied) {
                if let (
                    Write::Event {
                        event,
                        publish: Some(publish),
                    },
                    true,
                ) = (write, applied)
                {
                    publish.event(event);
                    if !published.iter().any(|seen| Arc::ptr_eq(seen, publish)) {
                        published.push(publish);
                    }
                }
            }
            for listener in published {
                listener.flush();
            }
        }
        Err(err) => {
            // Whatever the transaction had done is gone; the connection is left usable.
            let _ = db.rollback();
            failures.push((
                count,
                err.with_action(match outage_began {
                    Some(began) => format!(
                        "the database server was unreachable for {} s: {count} queued {} given up",
                        began.elapsed().as_secs(),
                        if count == 1 {
                            "write was"
                        } else {
                            "writes were"
                        }
                    ),
                    None => format!("committing {count} queued writes failed; they are lost"),
                }),
            ));
        }
    }
    pending.clear();
    failures.sort_by_key(|(index, _)| *index);
    for (_, err) in failures {
        tracing::error!("run store write failed: {err}");
        if first_error.is_none() {
            *first_error = Some(err);
        }
    }
}

/// What the writes of one commit tell of each other's runs.
struct CommitRuns<'a> {
    /// The runs created in this commit so far (their creation applied).
    created: Vec<&'a str>,
    /// The runs this commit finishes, and does not pause on the way.
    ending: Vec<&'a str>,
}

impl<'a> CommitRuns<'a> {
    fn of(pending: &'a [Write]) -> CommitRuns<'a> {
        let mut ending: Vec<&str> = pending
            .iter()
            .filter_map(|write| match write {
                Write::Finish { run_id, .. } => Some(run_id.as_str()),
                _ => None,
            })
            .collect();
        ending.retain(|ended| {
            !pending
                .iter()
                .any(|write| matches!(write, Write::Pause { run_id, .. } if run_id == ended))
        });
        CommitRuns {
            created: Vec::new(),
            ending,
        }
    }

    /// Whether run `run_id`'s stored queue ends this commit as it began it, empty: the run is
    /// created and finished in it, and its end clears its queue. Its steps are then not
    /// written only to be removed (a short command's whole run is one commit).
    fn queue_is_moot(&self, run_id: &str) -> bool {
        self.created.contains(&run_id) && self.ending.contains(&run_id)
    }
}

/// The events of a commit, by run in the order each run first appears, each with its
/// position in the commit.
#[derive(Default)]
struct RunEvents<'a> {
    runs: Vec<(&'a str, Vec<(usize, &'a RunEvent)>)>,
}

impl<'a> RunEvents<'a> {
    fn add(&mut self, index: usize, event: &'a RunEvent) {
        // A commit holds the events of one run, or of a few.
        match self
            .runs
            .iter_mut()
            .find(|(run_id, _)| **run_id == *event.run_id)
        {
            Some((_, events)) => events.push((index, event)),
            None => self.runs.push((&event.run_id, vec![(index, event)])),
        }
    }
}

/// Stores a commit's events of run `run_id` (each with its position in the commit) as one
/// batch. An event not numbered after the run's last stored one (a second event with the same
/// number) is refused on its own; the others are stored and marked `applied`. A run
/// `created_here`, in this commit, has no stored event yet: its last is not read.
fn store_events(
    db: &mut dyn Db,
    run_id: &str,
    run_events: &[(usize, &RunEvent)],
    created_here: bool,
    each_isolated: bool,
    applied: &mut [bool],
    failures: &mut Vec<(usize, StoreError)>,
) {
    let Some(&(first_index, _)) = run_events.first() else {
        return;
    };
    let last_stored = if created_here {
        Ok(0)
    } else {
        events::last_seq(db, run_id)
    };
    let mut last = match last_stored {
        Ok(last) => last,
        Err(err) => {
            let action = format!("reading the last event of run {run_id}");
            failures.push((first_index, err.with_action(action)));
            return;
        }
    };
    let mut kept = Vec::with_capacity(run_events.len());
    let mut kept_events = Vec::with_capacity(run_events.len());
    for &(index, event) in run_events {
        if event.seq > last {
            last = event.seq;
            kept.push(index);
            kept_events.push(event);
        } else {
            let refusal = StoreError::EventNotAfter {
                run_id: run_id.to_string(),
                seq: event.seq,
                last,
            };
            failures.push((index, refusal));
        }
    }
    let (Some(first), Some(last)) = (kept_events.first(), kept_events.last()) else {
        return;
    };
    let outcome = if each_isolated {
        isolated(db, "events", |db| {
            events::insert_batch(db, run_id, &kept_events)
        })
    } else {
        events::insert_batch(db, run_id, &kept_events)
    };
    match outcome {
        Ok(()) => kept.iter().for_each(|&index| applied[index] = true),
        Err(err) => {
            let action = if first.seq == last.seq {
                format!("storing event {} of run {run_id}", first.seq)
            } else {
                format!(
                    "storing events {} to {} of run {run_id}",
                    first.seq, last.seq
                )
            };
            failures.push((kept[0], err.with_action(action)));
        }
    }
}

/// Runs `work` in a savepoint named `name`: all of it applies, or (on an error) none of it
/// does and the transaction around it goes on.
fn isolated(
    db: &mut dyn Db,
    name: &str,
    work: impl FnOnce(&mut dyn Db) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    db.batch(&format!("SAVEPOINT {name}"))?;
    let applied = work(db);
    let end = if applied.is_ok() {
        format!("RELEASE {name}")
    } else {
        format!("ROLLBACK TO {name}; RELEASE {name}")
    };
    db.batch(&end)?;
    applied
}

// What every write a run sends costs in the channel (see `Write`): kept from growing back.
const _: () = assert!(std::mem::size_of::<Message>() <= 128);
