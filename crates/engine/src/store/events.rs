//! The `events` table: every event of every run, by `(run_id, seq)`.

use super::sql::{Db, params};
use super::{StoreError, corrupt, to_i64, to_u64};
use crate::event::RunEvent;

pub(super) fn insert(db: &mut dyn Db, event: &RunEvent) -> Result<(), StoreError> {
    let usage_json = event
        .usage
        .as_ref()
        .and_then(|usage| serde_json::to_string(usage).ok());
    let item = event
        .item
        .map(|item| to_i64("item index", item))
        .transpose()?;
    db.execute(
        "INSERT INTO events (run_id, seq, ts, type, node_id, content, scope, item, usage_json, from_node) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        &params![
            &event.run_id,
            to_i64("event seq", event.seq)?,
            &event.ts,
            event.kind.as_str(),
            &event.node_id,
            &event.content,
            &event.scope,
            item,
            &usage_json,
            &event.from,
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
