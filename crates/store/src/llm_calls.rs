//! The `llm_calls` table: the answer of every LLM call a run made, keyed by the node (scoped
//! for nested runs), its visit and the call's number within that visit, with a hash of the
//! request. A run continued after an interruption gets these answers back for the same requests
//! instead of paying for them again.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sql::{Db, params};
use super::{StoreError, corrupt, parse_json, to_i64, to_u64};
use weft_providers::Usage;

/// One recorded LLM call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedCall {
    /// The node that made it (`draft`, or `sub/draft` inside the subflow `sub`).
    pub node_key: String,
    pub visit: u64,
    /// 0 for the visit's first call, 1 for the next (a tool loop makes several).
    pub call: u64,
    /// A hash of the request as sent (model, messages, tools, settings).
    pub request_hash: String,
    /// The model asked, as `provider/model` (empty for calls recorded before it was kept, and
    /// for tool calls).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The provider's answer, as the engine reads it (for a tool call, the tool's result).
    pub response: Value,
    /// For an MCP tool call rather than an LLM call: `server/tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// What one LLM call used, without its answer: what a run's cost is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallUsage {
    pub node_key: String,
    pub visit: u64,
    pub call: u64,
    /// `provider/model`; `None` for calls recorded before the model was kept.
    pub model: Option<String>,
    pub usage: Usage,
}

pub(super) fn insert(
    db: &mut dyn Db,
    run_id: &str,
    call: &RecordedCall,
    at: &str,
) -> Result<(), StoreError> {
    let usage: Usage = call
        .response
        .get("usage")
        .and_then(|usage| Usage::deserialize(usage).ok())
        .unwrap_or_default();
    let response_json = call.response.to_string();
    db.execute(
        "INSERT INTO llm_calls (run_id, node_key, visit, call, request_hash, \
         response_json, recorded_at, model, input_tokens, output_tokens, tool) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (run_id, node_key, visit, call) DO UPDATE SET \
         request_hash = excluded.request_hash, response_json = excluded.response_json, \
         recorded_at = excluded.recorded_at, model = excluded.model, \
         input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
         tool = excluded.tool",
        &params![
            run_id,
            &call.node_key,
            to_i64("visit", call.visit)?,
            to_i64("call number", call.call)?,
            &call.request_hash,
            response_json.as_str(),
            at,
            (!call.model.is_empty()).then_some(call.model.as_str()),
            to_i64("input tokens", usage.input_tokens)?,
            to_i64("output tokens", usage.output_tokens)?,
            call.tool.as_deref(),
        ],
    )?;
    Ok(())
}

/// What each LLM call of a run used, in the order the calls were made per node.
pub(super) fn usage(db: &mut dyn Db, run_id: &str) -> Result<Vec<CallUsage>, StoreError> {
    let rows = db.query(
        "SELECT node_key, visit, call, model, input_tokens, output_tokens FROM llm_calls \
         WHERE run_id = ?1 AND tool IS NULL ORDER BY node_key, visit, call",
        &params![run_id],
    )?;
    let mut calls = Vec::with_capacity(rows.len());
    for row in rows {
        calls.push(CallUsage {
            node_key: row.text("node_key")?,
            visit: to_u64(run_id, "visit", row.int("visit")?)?,
            call: to_u64(run_id, "call number", row.int("call")?)?,
            model: row.opt_text("model")?,
            usage: Usage {
                input_tokens: to_u64(run_id, "input tokens", row.int("input_tokens")?)?,
                output_tokens: to_u64(run_id, "output tokens", row.int("output_tokens")?)?,
            },
        });
    }
    Ok(calls)
}

pub(super) fn list(db: &mut dyn Db, run_id: &str) -> Result<Vec<RecordedCall>, StoreError> {
    let rows = db.query(
        "SELECT node_key, visit, call, request_hash, model, response_json, tool FROM llm_calls \
         WHERE run_id = ?1 ORDER BY node_key, visit, call",
        &params![run_id],
    )?;
    let mut calls = Vec::with_capacity(rows.len());
    for row in rows {
        let node_key = row.text("node_key")?;
        let response = row.text("response_json")?;
        calls.push(RecordedCall {
            response: parse_json(
                run_id,
                &format!("recorded answer of node {node_key}"),
                &response,
            )?,
            visit: to_u64(run_id, "visit", row.int("visit")?)?,
            call: to_u64(run_id, "call number", row.int("call")?)?,
            request_hash: row.text("request_hash")?,
            model: row.opt_text("model")?.unwrap_or_default(),
            tool: row.opt_text("tool")?,
            node_key,
        });
    }
    if calls.iter().any(|call| call.request_hash.is_empty()) {
        return Err(corrupt(
            run_id,
            "a recorded LLM call has no request hash".into(),
        ));
    }
    Ok(calls)
}
