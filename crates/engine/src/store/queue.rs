//! The `queue` table: the steps a paused run will start when it goes on, in order.

use rusqlite::{Connection, params};

use super::{QueuedStep, StepRow, StoreError, parse_json, to_i64};

/// Replaces run `run_id`'s queue with `steps`, in order.
pub(super) fn replace(
    conn: &Connection,
    run_id: &str,
    steps: &[StepRow],
) -> Result<(), StoreError> {
    clear(conn, run_id)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO queue (run_id, position, node_id, input_json, source_node_id) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (position, step) in steps.iter().enumerate() {
        insert.execute(params![
            run_id,
            to_i64("queue position", position as u64)?,
            step.node_id,
            step.input_json,
            step.source_node_id
        ])?;
    }
    Ok(())
}

pub(super) fn clear(conn: &Connection, run_id: &str) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM queue WHERE run_id = ?1")?
        .execute(params![run_id])?;
    Ok(())
}

/// Run `run_id`'s queue, in order.
pub(super) fn list(conn: &Connection, run_id: &str) -> Result<Vec<QueuedStep>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT node_id, input_json, source_node_id FROM queue WHERE run_id = ?1 \
         ORDER BY position",
    )?;
    let mut rows = statement.query(params![run_id])?;
    let mut steps = Vec::new();
    while let Some(row) = rows.next()? {
        let node_id: String = row.get("node_id")?;
        let input: String = row.get("input_json")?;
        steps.push(QueuedStep {
            input: parse_json(run_id, &format!("queued input of node {node_id}"), &input)?,
            node_id,
            source_node_id: row.get("source_node_id")?,
        });
    }
    Ok(steps)
}
