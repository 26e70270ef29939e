//! The `node_outputs` table: each node's latest output in a run, its visit count, the latest
//! approval given there, its tokens and metadata. Nodes of nested runs are keyed by their scope
//! (`sub/draft`, `each[2]/grade`).

use super::sql::{Db, params};
use super::{NodeOutputRecord, StoreError, parse_json, to_i64, to_u64};
use weft_providers::Usage;

/// Stores a node's latest output and visit count.
pub(super) const UPSERT_OUTPUT: &str = "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT (run_id, node_id) DO UPDATE SET output_json = excluded.output_json, \
     visits = excluded.visits, updated_at = excluded.updated_at";

/// Inserts or replaces the output and visit count, keeping any approval recorded.
pub(super) fn put_output(
    db: &mut dyn Db,
    run_id: &str,
    node_id: &str,
    output_json: &str,
    visits: u64,
    at: &str,
) -> Result<(), StoreError> {
    db.execute(
        UPSERT_OUTPUT,
        &params![run_id, node_id, output_json, to_i64("visits", visits)?, at],
    )?;
    Ok(())
}

/// Records the approval given at a node (a row with output `null` and 0 visits if it has none).
pub(super) fn put_approval(
    db: &mut dyn Db,
    run_id: &str,
    node_id: &str,
    approval_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, approval_json, \
         updated_at) VALUES (?1, ?2, 'null', 0, ?3, ?4) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET \
         approval_json = excluded.approval_json, updated_at = excluded.updated_at",
        &params![run_id, node_id, approval_json, at],
    )?;
    Ok(())
}

/// Adds tokens to the node's counts (the run's total is summed from these when read).
pub(super) fn add_usage(
    db: &mut dyn Db,
    run_id: &str,
    node_id: &str,
    usage: Usage,
    at: &str,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, input_tokens, output_tokens) \
         VALUES (?1, ?2, 'null', 0, ?3, ?4, ?5) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET \
         input_tokens = node_outputs.input_tokens + excluded.input_tokens, \
         output_tokens = node_outputs.output_tokens + excluded.output_tokens",
        &params![
            run_id,
            node_id,
            at,
            to_i64("input tokens", usage.input_tokens)?,
            to_i64("output tokens", usage.output_tokens)?
        ],
    )?;
    Ok(())
}

pub(super) fn put_metadata(
    db: &mut dyn Db,
    run_id: &str,
    node_id: &str,
    metadata_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, metadata_json) \
         VALUES (?1, ?2, 'null', 0, ?3, ?4) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET metadata_json = excluded.metadata_json",
        &params![run_id, node_id, at, metadata_json],
    )?;
    Ok(())
}

/// Run `run_id`'s node outputs, ordered by node id (empty for an unknown run).
pub(super) fn list(db: &mut dyn Db, run_id: &str) -> Result<Vec<NodeOutputRecord>, StoreError> {
    let rows = db.query(
        "SELECT node_id, output_json, visits, approval_json, updated_at, input_tokens, \
         output_tokens, metadata_json FROM node_outputs WHERE run_id = ?1 ORDER BY node_id",
        &params![run_id],
    )?;
    let mut outputs = Vec::with_capacity(rows.len());
    for row in rows {
        let node_id = row.text("node_id")?;
        let json = |column: &str, what: &str| -> Result<Option<serde_json::Value>, StoreError> {
            row.opt_text(column)?
                .map(|text| parse_json(run_id, &format!("{what} of node {node_id}"), &text))
                .transpose()
        };
        outputs.push(NodeOutputRecord {
            output: json("output_json", "output")?.unwrap_or_default(),
            visits: to_u64(run_id, "visits", row.int("visits")?)?,
            approval: json("approval_json", "approval")?,
            updated_at: row.text("updated_at")?,
            usage: Usage {
                input_tokens: to_u64(run_id, "input tokens", row.int("input_tokens")?)?,
                output_tokens: to_u64(run_id, "output tokens", row.int("output_tokens")?)?,
            },
            metadata: json("metadata_json", "metadata")?,
            node_id,
        });
    }
    Ok(outputs)
}
