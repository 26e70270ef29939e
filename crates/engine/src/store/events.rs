//! The `events` table: every event of every run, by `(run_id, seq)`.

use std::sync::OnceLock;

use super::sql::{Db, Param, params};
use super::{StoreError, corrupt, to_i64, to_u64};
use crate::event::RunEvent;

/// The most events one statement stores. A row is ten parameters; a statement per event cost
/// more than the row itself (statement lookup, binding, the start of a statement), so a batch's
/// events go in many rows to a statement.
pub(super) const ROWS_PER_INSERT: usize = 32;

pub(super) fn insert(db: &mut dyn Db, event: &RunEvent) -> Result<(), StoreError> {
    insert_many(db, &[event])
}

/// Stores `events` (at most [`ROWS_PER_INSERT`]) with one statement: all of them or, on an
/// error, none.
pub(super) fn insert_many(db: &mut dyn Db, events: &[&RunEvent]) -> Result<(), StoreError> {
    let usage: Vec<Option<String>> = events
        .iter()
        .map(|event| {
            event
                .usage
                .as_ref()
                .and_then(|usage| serde_json::to_string(usage).ok())
        })
        .collect();
    let mut values: Vec<Param<'_>> = Vec::with_capacity(events.len() * COLUMNS);
    for (event, usage_json) in events.iter().zip(&usage) {
        let item = event
            .item
            .map(|item| to_i64("item index", item))
            .transpose()?;
        values.extend(params![
            &event.run_id,
            to_i64("event seq", event.seq)?,
            &event.ts,
            event.kind.as_str(),
            &event.node_id,
            &event.content,
            &event.scope,
            item,
            usage_json,
            &event.from,
        ]);
    }
    db.execute(insert_sql(events.len()), &values)?;
    Ok(())
}

const COLUMNS: usize = 10;

/// `INSERT INTO events ... VALUES (?1, ..., ?10), (?11, ...)` for `rows` rows (1 to
/// [`ROWS_PER_INSERT`]), written once per process: statements are cached by their text.
fn insert_sql(rows: usize) -> &'static str {
    static STATEMENTS: OnceLock<Vec<String>> = OnceLock::new();
    let statements = STATEMENTS.get_or_init(|| {
        (1..=ROWS_PER_INSERT)
            .map(|rows| {
                let values: Vec<String> = (0..rows)
                    .map(|row| {
                        let numbers: Vec<String> = (1..=COLUMNS)
                            .map(|column| format!("?{}", row * COLUMNS + column))
                            .collect();
                        format!("({})", numbers.join(", "))
                    })
                    .collect();
                format!(
                    "INSERT INTO events (run_id, seq, ts, type, node_id, content, scope, item, \
                     usage_json, from_node) VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    &statements[rows.clamp(1, ROWS_PER_INSERT) - 1]
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
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let rows = db.query(
        "SELECT seq, ts, type, node_id, content, scope, item, usage_json, from_node \
         FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
        &params![run_id, after],
    )?;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let kind = row.text("type")?;
        events.push(RunEvent {
            seq: to_u64(run_id, "event seq", row.int("seq")?)?,
            run_id: run_id.to_string(),
            ts: row.text("ts")?,
            kind: kind
                .parse()
                .map_err(|_| corrupt(run_id, format!("unknown event type {kind:?}")))?,
            node_id: row.opt_text("node_id")?,
            content: row.text("content")?,
            scope: row.opt_text("scope")?,
            item: row
                .opt_int("item")?
                .map(|item| to_u64(run_id, "item index", item))
                .transpose()?,
            from: row.opt_text("from_node")?,
            usage: row
                .opt_text("usage_json")?
                .map(|text| {
                    serde_json::from_str(&text)
                        .map_err(|error| corrupt(run_id, format!("event usage: {error}")))
                })
                .transpose()?,
        });
    }
    Ok(events)
}

/// The largest `seq` of run `run_id`'s events (0 for none).
pub(super) fn last_seq(db: &mut dyn Db, run_id: &str) -> Result<u64, StoreError> {
    let last = db
        .query_opt(
            "SELECT MAX(seq) AS last FROM events WHERE run_id = ?1",
            &params![run_id],
        )?
        .map(|row| row.opt_int("last"))
        .transpose()?
        .flatten();
    to_u64(run_id, "event seq", last.unwrap_or(0))
}
