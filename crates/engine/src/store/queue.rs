//! The `queue` table: the steps a paused run will start when it goes on, in order; for a running
//! run, the steps that were running or queued at its last checkpoint, by key.

use rusqlite::{Connection, params};

use super::{QueuedStep, StepRow, StoreError, StoredStep, parse_json, to_i64, to_u64};

/// Replaces run `run_id`'s queue with `steps`, in order (keys 0, 1, ...).
pub(super) fn replace(
    conn: &Connection,
    run_id: &str,
    steps: &[StepRow],
) -> Result<(), StoreError> {
    clear(conn, run_id)?;
    for (position, step) in steps.iter().enumerate() {
        insert(conn, run_id, position as u64, step)?;
    }
    Ok(())
}

/// Adds `steps` under their keys.
pub(super) fn add(
    conn: &Connection,
    run_id: &str,
    steps: &[(u64, StepRow)],
) -> Result<(), StoreError> {
    for (key, step) in steps {
        insert(conn, run_id, *key, step)?;
    }
    Ok(())
}

fn insert(conn: &Connection, run_id: &str, key: u64, step: &StepRow) -> Result<(), StoreError> {
    let visit = step.visit.map(|visit| to_i64("visit", visit)).transpose()?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO queue (run_id, position, node_id, input_json, source_node_id, visit) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        run_id,
        to_i64("queue position", key)?,
        step.node_id,
        step.input_json,
        step.source_node_id,
        visit
    ])?;
    Ok(())
}

/// Removes the steps with `keys`.
pub(super) fn remove(conn: &Connection, run_id: &str, keys: &[u64]) -> Result<(), StoreError> {
    let mut delete =
        conn.prepare_cached("DELETE FROM queue WHERE run_id = ?1 AND position = ?2")?;
    for key in keys {
        delete.execute(params![run_id, to_i64("queue position", *key)?])?;
    }
    Ok(())
}

pub(super) fn clear(conn: &Connection, run_id: &str) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM queue WHERE run_id = ?1")?
        .execute(params![run_id])?;
    Ok(())
}

/// Run `run_id`'s queue, by key.
pub(super) fn list(conn: &Connection, run_id: &str) -> Result<Vec<StoredStep>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT position, node_id, input_json, source_node_id, visit FROM queue \
         WHERE run_id = ?1 ORDER BY position",
    )?;
    let mut rows = statement.query(params![run_id])?;
    let mut steps = Vec::new();
    while let Some(row) = rows.next()? {
        let node_id: String = row.get("node_id")?;
        let input: String = row.get("input_json")?;
        let visit: Option<i64> = row.get("visit")?;
        steps.push(StoredStep {
            key: to_u64(run_id, "queue position", row.get("position")?)?,
            step: QueuedStep {
                input: parse_json(run_id, &format!("queued input of node {node_id}"), &input)?,
                node_id,
                source_node_id: row.get("source_node_id")?,
            },
            visit: visit
                .map(|visit| to_u64(run_id, "visit", visit))
                .transpose()?,
        });
    }
    Ok(steps)
}
