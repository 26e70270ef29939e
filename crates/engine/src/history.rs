//! Past runs as every host shows them in JSON (`weft runs --json`, `weft show --json`, the
//! server's `/v1/runs`): one shape, made in one place.

use serde_json::{Value, json};

use crate::cost::{Prices, run_cost, run_total};
use crate::store::{Store, StoreError};
use crate::visits::node_visits;

/// The newest `limit` runs, newest first: each run's summary with its `cost` beside the other
/// fields.
pub fn listed_runs(store: &Store, limit: usize, prices: &Prices) -> Result<Vec<Value>, StoreError> {
    let summaries = store.list_runs(limit)?;
    let mut listed = Vec::with_capacity(summaries.len());
    for summary in summaries {
        let cost = run_total(store, &summary.id, prices)?;
        let mut value = serde_json::to_value(&summary).unwrap_or_default();
        if let Value::Object(fields) = &mut value {
            fields.insert(
                "cost".into(),
                serde_json::to_value(&cost).unwrap_or_default(),
            );
        }
        listed.push(value);
    }
    Ok(listed)
}

/// Everything about run `run_id` (an id or a unique prefix): `{run, cost, nodeOutputs, visits,
/// events}`.
pub fn run_report(store: &Store, run_id: &str, prices: &Prices) -> Result<Value, StoreError> {
    let run_id = store.resolve_run_id(run_id)?;
    let record = store.run(&run_id)?;
    let outputs = store.node_outputs(&run_id)?;
    let events = store.events(&run_id)?;
    let cost = run_cost(store, &record, prices)?;
    let visits = node_visits(&record, &events, &outputs, &cost);
    Ok(json!({
        "run": record,
        "cost": cost,
        "nodeOutputs": outputs,
        "visits": visits,
        "events": events,
    }))
}
