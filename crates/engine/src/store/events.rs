//! The `events` table: every event of every run, by `(run_id, seq)`.

use rusqlite::{Connection, params};

use super::{StoreError, corrupt, to_i64, to_u64};
use crate::event::RunEvent;

pub(super) fn insert(conn: &Connection, event: &RunEvent) -> Result<(), StoreError> {
    let usage_json = event
        .usage
        .as_ref()
        .and_then(|usage| serde_json::to_string(usage).ok());
    let item = event
        .item
        .map(|item| to_i64("item index", item))
        .transpose()?;
    conn.prepare_cached(
        "INSERT INTO events (run_id, seq, ts, type, node_id, content, scope, item, usage_json, from_node) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        event.run_id,
        to_i64("event seq", event.seq)?,
        event.ts,
        event.kind.as_str(),
        event.node_id,
        event.content,
        event.scope,
        item,
        usage_json,
        event.from,
    ])?;
    Ok(())
}

/// Run `run_id`'s events, ordered by `seq` (empty for an unknown run).
pub(super) fn list(conn: &Connection, run_id: &str) -> Result<Vec<RunEvent>, StoreError> {
    list_after(conn, run_id, 0)
}

/// Run `run_id`'s events after `seq` `after`, ordered by `seq`.
pub(super) fn list_after(
    conn: &Connection,
    run_id: &str,
    after: u64,
) -> Result<Vec<RunEvent>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT seq, ts, type, node_id, content, scope, item, usage_json, from_node \
         FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let mut rows = statement.query(params![run_id, after])?;
    let mut events = Vec::new();
    while let Some(row) = rows.next()? {
        let kind: String = row.get("type")?;
        let usage: Option<String> = row.get("usage_json")?;
        let item: Option<i64> = row.get("item")?;
        events.push(RunEvent {
            seq: to_u64(run_id, "event seq", row.get("seq")?)?,
            run_id: run_id.to_string(),
            ts: row.get("ts")?,
            kind: kind
                .parse()
                .map_err(|_| corrupt(run_id, format!("unknown event type {kind:?}")))?,
            node_id: row.get("node_id")?,
            content: row.get("content")?,
            scope: row.get("scope")?,
            item: item
                .map(|item| to_u64(run_id, "item index", item))
                .transpose()?,
            from: row.get("from_node")?,
            usage: usage
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
pub(super) fn last_seq(conn: &Connection, run_id: &str) -> Result<u64, StoreError> {
    let last: Option<i64> = conn
        .prepare_cached("SELECT MAX(seq) FROM events WHERE run_id = ?1")?
        .query_row(params![run_id], |row| row.get(0))?;
    to_u64(run_id, "event seq", last.unwrap_or(0))
}
