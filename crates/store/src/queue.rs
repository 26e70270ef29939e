//! The `queue` table: the steps a paused run will start when it goes on, in order; for a running
//! run, the steps that were running or queued at its last checkpoint, by key.

use std::sync::Arc;

use super::sql::{Db, params};
use super::{QueuedStep, StepRow, StoreError, StoredStep, parse_json, to_i64, to_u64};

/// Empties a run's queue.
pub(super) const CLEAR_QUEUE: &str = "DELETE FROM queue WHERE run_id = ?1";

/// Stores a step of a run's queue under its key.
pub(super) const UPSERT_STEP: &str = "INSERT INTO queue (run_id, position, node_id, input_json, source_node_id, visit) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
     ON CONFLICT (run_id, position) DO UPDATE SET node_id = excluded.node_id, \
     input_json = excluded.input_json, source_node_id = excluded.source_node_id, \
     visit = excluded.visit";

/// Removes a step of a run's queue.
pub(super) const DELETE_STEP: &str = "DELETE FROM queue WHERE run_id = ?1 AND position = ?2";

/// Replaces run `run_id`'s queue with `steps`, in order (keys 0, 1, ...).
pub(super) fn replace(db: &mut dyn Db, run_id: &str, steps: &[StepRow]) -> Result<(), StoreError> {
    clear(db, run_id)?;
    for (position, step) in steps.iter().enumerate() {
        insert(db, run_id, position as u64, step)?;
    }
    Ok(())
}

/// Adds `steps` under their keys.
pub(super) fn add(
    db: &mut dyn Db,
    run_id: &str,
    steps: &[(u64, StepRow)],
) -> Result<(), StoreError> {
    for (key, step) in steps {
        insert(db, run_id, *key, step)?;
    }
    Ok(())
}

fn insert(db: &mut dyn Db, run_id: &str, key: u64, step: &StepRow) -> Result<(), StoreError> {
    let visit = step.visit.map(|visit| to_i64("visit", visit)).transpose()?;
    db.execute(
        UPSERT_STEP,
        &params![
            run_id,
            to_i64("queue position", key)?,
            &*step.node_id,
            &step.input_json,
            step.source_node_id.as_deref(),
            visit
        ],
    )?;
    Ok(())
}

/// Removes the steps with `keys`.
pub(super) fn remove(db: &mut dyn Db, run_id: &str, keys: &[u64]) -> Result<(), StoreError> {
    for key in keys {
        db.execute(
            DELETE_STEP,
            &params![run_id, to_i64("queue position", *key)?],
        )?;
    }
    Ok(())
}

pub(super) fn clear(db: &mut dyn Db, run_id: &str) -> Result<(), StoreError> {
    db.execute(CLEAR_QUEUE, &params![run_id])?;
    Ok(())
}

/// Run `run_id`'s queue, by key.
pub(super) fn list(db: &mut dyn Db, run_id: &str) -> Result<Vec<StoredStep>, StoreError> {
    let rows = db.query(
        "SELECT position, node_id, input_json, source_node_id, visit FROM queue \
         WHERE run_id = ?1 ORDER BY position",
        &params![run_id],
    )?;
    let mut steps = Vec::with_capacity(rows.len());
    for row in rows {
        let node_id = row.text("node_id")?;
        let input = row.text("input_json")?;
        steps.push(StoredStep {
            key: to_u64(run_id, "queue position", row.int("position")?)?,
            step: QueuedStep {
                input: Arc::new(parse_json(
                    run_id,
                    &format!("queued input of node {node_id}"),
                    &input,
                )?),
                node_id: node_id.into(),
                source_node_id: row.opt_text("source_node_id")?.map(Arc::from),
            },
            visit: row
                .opt_int("visit")?
                .map(|visit| to_u64(run_id, "visit", visit))
                .transpose()?,
        });
    }
    Ok(steps)
}
