//! The `event_batches` table: every event of every run, stored a run's committed batch to a
//! row — the events one commit of the writer stored for that run, numbered `first_seq` to
//! `last_seq`, as a JSON array.
//!
//! A row per event cost more than the rest of a fast step: a B-tree insert keyed by the run id,
//! its foreign-key lookup, ten bound values, and log pages rewritten at every commit (a
//! 10,000-step `if` chain spent a quarter of its wall time there, and a 1,000-step one wrote
//! more than a megabyte of log). A batch is one insert, written to the log once.

use serde::Deserialize;
use std::sync::Arc;

use super::sql::{Db, Dialect, params};
use super::{StoreError, corrupt, to_i64};
use weft_event::{EventType, RunEvent, RunStatus};
use weft_providers::Usage;

/// Stores one committed batch of a run's events.
pub(super) const INSERT_BATCH: &str = "INSERT INTO event_batches (run_id, first_seq, last_seq, events_json) \
     VALUES (?1, ?2, ?3, ?4)";

/// The number of a run's last stored event.
pub(super) const SELECT_LAST_SEQ: &str = "SELECT last_seq FROM event_batches WHERE run_id = ?1 \
     ORDER BY first_seq DESC LIMIT 1";

/// An event read back from a batch (absent and `null` fields alike are `None`: the events
/// migrated from the table of one row per event have their empty columns as `null`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredEvent {
    seq: u64,
    ts: String,
    #[serde(rename = "type")]
    kind: EventType,
    #[serde(default)]
    node_id: Option<Arc<str>>,
    content: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    item: Option<u64>,
    #[serde(default)]
    from: Option<Arc<str>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    model: Option<String>,
}

impl StoredEvent {
    fn into_event(self, run_id: &str) -> RunEvent {
        RunEvent {
            seq: self.seq,
            run_id: run_id.into(),
            ts: self.ts.into(),
            kind: self.kind,
            node_id: self.node_id,
            content: self.content,
            scope: self.scope,
            item: self.item,
            from: self.from,
            usage: self.usage,
            model: self.model,
        }
    }
}

/// Stores `events` (of run `run_id`, numbered in increasing order) as one batch.
pub(super) fn insert_batch(
    db: &mut dyn Db,
    run_id: &str,
    events: &[&RunEvent],
) -> Result<(), StoreError> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Ok(());
    };
    // ~150 bytes an event beside its content; one allocation for most batches, and no more
    // than the batch needs for one with a large output in it.
    let content: usize = events.iter().map(|event| event.content.len()).sum();
    let mut json = String::with_capacity(content + content / 16 + events.len() * 192 + 2);
    json.push('[');
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            json.push(',');
        }
        // The run id is the row's.
        event.write_json(&mut json, false);
    }
    json.push(']');
    db.execute(
        INSERT_BATCH,
        &params![
            run_id,
            to_i64("event seq", first.seq)?,
            to_i64("event seq", last.seq)?,
            &json,
        ],
    )?;
    Ok(())
}

/// Run `run_id`'s events, ordered by `seq` (empty for an unknown run).
pub(super) fn list(db: &mut dyn Db, run_id: &str) -> Result<Vec<RunEvent>, StoreError> {
    list_after(db, run_id, 0)
}

/// Run `run_id`'s events after `seq` `after`, ordered by `seq`.
pub(super) fn list_after(
    db: &mut dyn Db,
    run_id: &str,
    after: u64,
) -> Result<Vec<RunEvent>, StoreError> {
    let after_key = i64::try_from(after).unwrap_or(i64::MAX);
    // Batches never overlap: the first one to read is the last to start at or before
    // `after + 1` (found in the key's index), and every later one.
    let rows = db.query(
        "SELECT events_json FROM event_batches WHERE run_id = ?1 AND last_seq > ?2 \
         AND first_seq >= (SELECT COALESCE(MAX(first_seq), 0) FROM event_batches \
                           WHERE run_id = ?1 AND first_seq <= ?3) \
         ORDER BY first_seq",
        &params![run_id, after_key, after_key.saturating_add(1)],
    )?;
    let mut events = Vec::new();
    for row in rows {
        let batch: Vec<StoredEvent> = serde_json::from_str(&row.text("events_json")?)
            .map_err(|error| corrupt(run_id, format!("stored events: {error}")))?;
        events.extend(
            batch
                .into_iter()
                .filter(|event| event.seq > after)
                .map(|event| event.into_event(run_id)),
        );
    }
    Ok(events)
}

/// The largest `seq` of run `run_id`'s events (0 for none).
pub(super) fn last_seq(db: &mut dyn Db, run_id: &str) -> Result<u64, StoreError> {
    let last = db
        .query_opt(SELECT_LAST_SEQ, &params![run_id])?
        .map(|row| row.int("last_seq"))
        .transpose()?;
    super::to_u64(run_id, "event seq", last.unwrap_or(0))
}

/// Appends `event` to the events of run `run_id` as its next one, if the run is paused, inside
/// the caller's transaction (begun with [`Db::begin`]): its `seq` is set here. A host that
/// claims the run to go on does so before or after this, never between its reading the last
/// `seq` and this insert (SQLite's transaction holds the write lock; PostgreSQL's locks the
/// run's row), and a run going on numbers its events after the last one stored. `None` when
/// the run is not paused.
pub(super) fn append_to_paused(
    db: &mut dyn Db,
    event: &mut RunEvent,
) -> Result<Option<u64>, StoreError> {
    let run_id = event.run_id.to_string();
    let status = match db.dialect() {
        Dialect::Postgres => db.query_opt(
            "SELECT status FROM runs WHERE id = ?1 FOR UPDATE",
            &params![run_id.as_str()],
        )?,
        Dialect::Sqlite => db.query_opt(
            "SELECT status FROM runs WHERE id = ?1",
            &params![run_id.as_str()],
        )?,
    };
    let Some(status) = status else {
        return Err(StoreError::NoSuchRun(run_id));
    };
    if super::runs::parse_status(&run_id, &status.text("status")?)? != RunStatus::Paused {
        return Ok(None);
    }
    event.seq = last_seq(db, &run_id)? + 1;
    insert_batch(db, &run_id, &[&*event])?;
    Ok(Some(event.seq))
}
