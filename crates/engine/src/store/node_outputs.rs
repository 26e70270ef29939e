//! The `node_outputs` table: each node's latest output in a run, its visit count, the latest
//! approval given there, its tokens and metadata. Nodes of nested runs are keyed by their scope
//! (`sub/draft`, `each[2]/grade`).

use rusqlite::{Connection, params};

use super::{NodeOutputRecord, StoreError, parse_json, to_i64, to_u64};
use crate::providers::Usage;

/// Inserts or replaces the output and visit count, keeping any approval recorded.
pub(super) fn put_output(
    conn: &Connection,
    run_id: &str,
    node_id: &str,
    output_json: &str,
    visits: u64,
    at: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET output_json = excluded.output_json, \
         visits = excluded.visits, updated_at = excluded.updated_at",
    )?
    .execute(params![
        run_id,
        node_id,
        output_json,
        to_i64("visits", visits)?,
        at
    ])?;
    Ok(())
}

/// Records the approval given at a node (a row with output `null` and 0 visits if it has none).
pub(super) fn put_approval(
    conn: &Connection,
    run_id: &str,
    node_id: &str,
    approval_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, approval_json, \
         updated_at) VALUES (?1, ?2, 'null', 0, ?3, ?4) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET \
         approval_json = excluded.approval_json, updated_at = excluded.updated_at",
    )?
    .execute(params![run_id, node_id, approval_json, at])?;
    Ok(())
}

/// Adds tokens to the node's counts (the run's total is summed from these when read).
pub(super) fn add_usage(
    conn: &Connection,
    run_id: &str,
    node_id: &str,
    usage: Usage,
    at: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, input_tokens, output_tokens) \
         VALUES (?1, ?2, 'null', 0, ?3, ?4, ?5) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET \
         input_tokens = input_tokens + excluded.input_tokens, \
         output_tokens = output_tokens + excluded.output_tokens",
    )?
    .execute(params![
        run_id,
        node_id,
        at,
        to_i64("input tokens", usage.input_tokens)?,
        to_i64("output tokens", usage.output_tokens)?
    ])?;
    Ok(())
}

pub(super) fn put_metadata(
    conn: &Connection,
    run_id: &str,
    node_id: &str,
    metadata_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO node_outputs (run_id, node_id, output_json, visits, updated_at, metadata_json) \
         VALUES (?1, ?2, 'null', 0, ?3, ?4) \
         ON CONFLICT (run_id, node_id) DO UPDATE SET metadata_json = excluded.metadata_json",
    )?
    .execute(params![run_id, node_id, at, metadata_json])?;
    Ok(())
}

/// Run `run_id`'s node outputs, ordered by node id (empty for an unknown run).
pub(super) fn list(conn: &Connection, run_id: &str) -> Result<Vec<NodeOutputRecord>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT node_id, output_json, visits, approval_json, updated_at, input_tokens, \
         output_tokens, metadata_json FROM node_outputs WHERE run_id = ?1 ORDER BY node_id",
    )?;
    let mut rows = statement.query(params![run_id])?;
    let mut outputs = Vec::new();
    while let Some(row) = rows.next()? {
        let node_id: String = row.get("node_id")?;
        let json = |column: &str, what: &str| -> Result<Option<serde_json::Value>, StoreError> {
            let text: Option<String> = row.get(column)?;
            text.map(|text| parse_json(run_id, &format!("{what} of node {node_id}"), &text))
                .transpose()
        };
        outputs.push(NodeOutputRecord {
            output: json("output_json", "output")?.unwrap_or_default(),
            visits: to_u64(run_id, "visits", row.get("visits")?)?,
            approval: json("approval_json", "approval")?,
            updated_at: row.get("updated_at")?,
            usage: Usage {
                input_tokens: to_u64(run_id, "input tokens", row.get("input_tokens")?)?,
                output_tokens: to_u64(run_id, "output tokens", row.get("output_tokens")?)?,
            },
            metadata: json("metadata_json", "metadata")?,
            node_id,
        });
    }
    Ok(outputs)
}
