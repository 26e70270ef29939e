//! The `runs` table: one row per run with its status, flow, input, result, the step a paused run
//! waits on, and the engine's saved state.

use std::sync::Arc;

use super::schema::Feature;
use super::sql::{Db, Row, params};
use super::versions::{self, FlowVersionUse, VersionUseKind};
use super::{
    QueuedStep, RunRecord, RunSummary, StepRow, StoreError, corrupt, parse_json, queue, to_u64,
};
use weft_event::RunStatus;
use weft_providers::Usage;

/// Creates a run, `running` and leased.
pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, flow_name, flow_path, status, input_json, \
     started_at, updated_at, lease_owner, lease_until, host, trigger_json, flow_version) \
     VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10)";

/// A run's pinned outputs, apart from its row, which each checkpoint writes again; the pins
/// a run already has stay.
const INSERT_PINS: &str =
    "INSERT INTO run_pins (run_id, pins_json) VALUES (?1, ?2) ON CONFLICT (run_id) DO NOTHING";

/// Sets a run's engine state.
pub(super) const SET_STATE: &str = "UPDATE runs SET state_json = ?2, updated_at = ?3 WHERE id = ?1";

/// Ends a run.
pub(super) const FINISH_RUN: &str = "UPDATE runs SET status = ?2, result_json = ?3, error = ?4, \
     waiting_node_id = NULL, waiting_input_json = NULL, \
     waiting_source_node_id = NULL, ended_at = ?5, updated_at = ?5, \
     lease_owner = NULL, lease_until = NULL, deadline = NULL, follow_up_at = NULL WHERE id = ?1";

/// A running run's checkpoint.
pub(super) const CHECKPOINT_RUN: &str = "UPDATE runs SET waiting_node_id = ?2, waiting_input_json = ?3, \
     waiting_source_node_id = ?4, state_json = ?5, updated_at = ?6 \
     WHERE id = ?1 AND status = 'running'";

/// A run to insert, its values serialized.
pub(super) struct NewRunRow<'a> {
    pub id: &'a str,
    pub flow_name: &'a str,
    pub flow_path: Option<&'a str>,
    pub flow_json: &'a str,
    pub flow_version: &'a str,
    pub version_path: Option<&'a str>,
    pub input_json: &'a str,
    pub pins_json: Option<&'a str>,
    pub started_at: &'a str,
    pub host: Option<&'a str>,
    pub trigger_json: Option<&'a str>,
}

/// Keeps `pins_json` as the pins of `run_id`, unless it has pins already.
pub(super) fn keep_pins(db: &mut dyn Db, run_id: &str, pins_json: &str) -> Result<(), StoreError> {
    db.make_tables(Feature::Pins)?;
    db.execute(INSERT_PINS, &params![run_id, pins_json])?;
    Ok(())
}

/// Inserts a run with status `running`, leased to `owner` until `until`.
pub(super) fn insert(
    db: &mut dyn Db,
    run: NewRunRow<'_>,
    owner: &str,
    until: &str,
) -> Result<(), StoreError> {
    db.execute(
        INSERT_RUN,
        &params![
            run.id,
            run.flow_name,
            run.flow_path,
            run.input_json,
            run.started_at,
            owner,
            until,
            run.host,
            run.trigger_json,
            run.flow_version
        ],
    )?;
    if let Some(pins_json) = run.pins_json {
        keep_pins(db, run.id, pins_json)?;
    }
    // The flow is kept once per version; the file's use of it is what `weft versions` lists.
    versions::insert_version(db, run.flow_version, run.flow_json, run.started_at)?;
    if let Some(path) = run.version_path {
        versions::insert_use(
            db,
            &FlowVersionUse {
                path: path.to_string(),
                hash: run.flow_version.to_string(),
                at: run.started_at.to_string(),
                kind: VersionUseKind::Run,
                run_id: Some(run.id.to_string()),
                by: None,
            },
        )?;
    }
    Ok(())
}

/// Pushes the lease of every running run of `owner` forward to `until`.
pub(super) fn renew_leases(db: &mut dyn Db, owner: &str, until: &str) -> Result<(), StoreError> {
    db.execute(
        "UPDATE runs SET lease_until = ?2 WHERE lease_owner = ?1 AND status = 'running'",
        &params![owner, until],
    )?;
    Ok(())
}

/// A running run as the check for abandoned runs reads it: id, lease owner and lease end.
type Running = (String, Option<String>, Option<String>);

/// Marks as `interrupted` every running run whose owner is not `me` and has stopped: gone from
/// this machine, or (when that cannot be told) past its lease. Returns their ids.
pub(super) fn interrupt_abandoned(
    db: &mut dyn Db,
    me: &str,
    now: &str,
) -> Result<Vec<String>, StoreError> {
    let running = db
        .query(
            "SELECT id, lease_owner, lease_until FROM runs WHERE status = 'running'",
            &[],
        )?
        .into_iter()
        .map(|row| {
            Ok((
                row.text("id")?,
                row.opt_text("lease_owner")?,
                row.opt_text("lease_until")?,
            ))
        })
        .collect::<Result<Vec<Running>, StoreError>>()?;
    interrupt_those_abandoned(db, me, now, running)
}

/// What opening a store does first, in one read rather than two (each statement compiled costs
/// a short command ~0.1 ms): [`interrupt_abandoned`], and then [`next_deadline`].
pub(super) fn settle_at_open(
    db: &mut dyn Db,
    me: &str,
    now: &str,
) -> Result<Option<String>, StoreError> {
    let rows = db.query(
        "SELECT id, lease_owner, lease_until, NULL AS earliest FROM runs \
         WHERE status = 'running' \
         UNION ALL SELECT NULL, NULL, NULL, MIN(deadline) FROM runs \
         WHERE status = 'paused' AND deadline IS NOT NULL",
        &[],
    )?;
    let mut running = Vec::new();
    let mut earliest = None;
    for row in rows {
        match row.opt_text("id")? {
            Some(id) => running.push((
                id,
                row.opt_text("lease_owner")?,
                row.opt_text("lease_until")?,
            )),
            None => earliest = row.opt_text("earliest")?,
        }
    }
    interrupt_those_abandoned(db, me, now, running)?;
    Ok(earliest)
}

/// [`interrupt_abandoned`] of the `running` runs read.
fn interrupt_those_abandoned(
    db: &mut dyn Db,
    me: &str,
    now: &str,
    running: Vec<Running>,
) -> Result<Vec<String>, StoreError> {
    let mut interrupted = Vec::new();
    for (id, owner, until) in running {
        let reason = match (
            &owner,
            super::lease::owner_alive(owner.as_deref().unwrap_or("")),
        ) {
            (Some(owner), _) if owner == me => continue,
            (_, Some(true)) => continue,
            (Some(owner), Some(false)) => format!(
                "the process that ran it ({}) stopped before the run ended",
                owner_text(owner)
            ),
            (Some(owner), None) if until.as_deref().is_none_or(|until| until < now) => format!(
                "the process that ran it ({}) stopped renewing its lease at {}",
                owner_text(owner),
                until.as_deref().unwrap_or("?")
            ),
            (Some(_), None) => continue,
            (None, _) => "the process that ran it stopped before the run ended".to_string(),
        };
        let message = format!("interrupted: {reason}; continue it with `weft resume {id} --retry`");
        let changed = db.execute(
            "UPDATE runs SET status = 'interrupted', error = ?3, lease_owner = NULL, \
             lease_until = NULL, updated_at = ?4 \
             WHERE id = ?1 AND status = 'running' AND lease_owner IS NOT DISTINCT FROM ?2",
            &params![&id, &owner, message.as_str(), now],
        )?;
        if changed > 0 {
            interrupted.push(id);
        }
    }
    Ok(interrupted)
}

/// `host:pid:start` as a person reads it: `pid 4242 on host`.
fn owner_text(owner: &str) -> String {
    let mut parts = owner.rsplitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(pid), Some(host)) => format!("pid {pid} on {host}"),
        _ => owner.to_string(),
    }
}

/// Fails with [`StoreError::NoSuchRun`] when an update changed no row.
fn changed(run_id: &str, rows: u64) -> Result<(), StoreError> {
    if rows == 0 {
        Err(StoreError::NoSuchRun(run_id.to_string()))
    } else {
        Ok(())
    }
}

/// Status `paused`, the waiting step, the engine state, when the approval times out and when
/// its next follow-up is due (the queue is the `queue` table's).
pub(super) fn pause(
    db: &mut dyn Db,
    run_id: &str,
    waiting: &StepRow,
    state_json: &str,
    due: &PauseDue,
    at: &str,
) -> Result<(), StoreError> {
    let rows = db.execute(
        "UPDATE runs SET status = 'paused', waiting_node_id = ?2, \
         waiting_input_json = ?3, waiting_source_node_id = ?4, state_json = ?5, \
         updated_at = ?6, lease_owner = NULL, lease_until = NULL, deadline = ?7, \
         follow_up_at = ?8 WHERE id = ?1",
        &params![
            run_id,
            &*waiting.node_id,
            &waiting.input_json,
            waiting.source_node_id.as_deref(),
            state_json,
            at,
            due.deadline.as_deref(),
            due.follow_up.as_deref()
        ],
    )?;
    changed(run_id, rows)
}

/// Paused runs whose deadline is `now` or earlier.
pub(super) fn due(db: &mut dyn Db, now: &str) -> Result<Vec<String>, StoreError> {
    db.query(
        "SELECT id FROM runs WHERE status = 'paused' AND deadline IS NOT NULL AND deadline <= ?1 \
         ORDER BY deadline",
        &params![now],
    )?
    .iter()
    .map(|row| row.text("id"))
    .collect()
}

/// The earliest deadline of a paused run.
pub(super) fn next_deadline(db: &mut dyn Db) -> Result<Option<String>, StoreError> {
    db.query_opt(
        "SELECT MIN(deadline) AS earliest FROM runs \
         WHERE status = 'paused' AND deadline IS NOT NULL",
        &[],
    )?
    .map(|row| row.opt_text("earliest"))
    .transpose()
    .map(Option::flatten)
}

/// When a paused run's approval times out and has its next follow-up due, as
/// [`crate::PauseRecord`] has them.
#[derive(Debug)]
pub(super) struct PauseDue {
    pub deadline: Option<Box<str>>,
    pub follow_up: Option<Box<str>>,
    pub ask_by_mail: Option<u64>,
}

impl PauseDue {
    /// Neither.
    pub const NONE: PauseDue = PauseDue {
        deadline: None,
        follow_up: None,
        ask_by_mail: None,
    };
}

/// Paused runs whose next follow-up is due at `now` or earlier, earliest first.
pub(super) fn due_follow_ups(db: &mut dyn Db, now: &str) -> Result<Vec<String>, StoreError> {
    db.query(
        "SELECT id FROM runs WHERE status = 'paused' AND follow_up_at IS NOT NULL \
         AND follow_up_at <= ?1 ORDER BY follow_up_at, id",
        &params![now],
    )?
    .iter()
    .map(|row| row.text("id"))
    .collect()
}

/// The earliest follow-up due of a paused run.
pub(super) fn next_follow_up(db: &mut dyn Db) -> Result<Option<String>, StoreError> {
    db.query_opt(
        "SELECT MIN(follow_up_at) AS earliest FROM runs \
         WHERE status = 'paused' AND follow_up_at IS NOT NULL",
        &[],
    )?
    .map(|row| row.opt_text("earliest"))
    .transpose()
    .map(Option::flatten)
}

/// Sets (`None` clears) when paused run `run_id`'s next follow-up is due; a run that is not
/// paused, or unknown, is left as it is. `updated_at` stays: it says when the run paused.
pub(super) fn set_follow_up(
    db: &mut dyn Db,
    run_id: &str,
    due: Option<&str>,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE runs SET follow_up_at = ?2 WHERE id = ?1 AND status = 'paused'",
        &params![run_id, due],
    )?;
    Ok(())
}

/// Every paused run's record, oldest pause first.
pub(super) fn paused(db: &mut dyn Db) -> Result<Vec<RunRecord>, StoreError> {
    let ids = db
        .query(
            "SELECT id FROM runs WHERE status = 'paused' ORDER BY updated_at, id",
            &[],
        )?
        .iter()
        .map(|row| row.text("id"))
        .collect::<Result<Vec<String>, StoreError>>()?;
    ids.iter().map(|id| load(db, id)).collect()
}

pub(super) fn set_state(
    db: &mut dyn Db,
    run_id: &str,
    state_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    let rows = db.execute(SET_STATE, &params![run_id, state_json, at])?;
    changed(run_id, rows)
}

/// Ends a run: its status, result or error, `ended_at`; no waiting step any more.
pub(super) fn finish(
    db: &mut dyn Db,
    run_id: &str,
    status: RunStatus,
    result_json: Option<&str>,
    error: Option<&str>,
    at: &str,
) -> Result<(), StoreError> {
    let rows = db.execute(
        FINISH_RUN,
        &params![run_id, status.as_str(), result_json, error, at],
    )?;
    changed(run_id, rows)
}

/// A running run's checkpoint: the step waiting for a person (or none) and the engine's state;
/// the queue's changes are the `queue` table's.
pub(super) fn checkpoint(
    db: &mut dyn Db,
    run_id: &str,
    waiting: Option<&StepRow>,
    state_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    let rows = db.execute(
        CHECKPOINT_RUN,
        &params![
            run_id,
            waiting.map(|step| &*step.node_id),
            waiting.map(|step| &step.input_json),
            waiting.and_then(|step| step.source_node_id.as_deref()),
            state_json,
            at
        ],
    )?;
    changed(run_id, rows)
}

/// Moves a run from status `from` (paused or interrupted) to `running`, leased to `owner`, and
/// returns its record (waiting step and queue included, which stay stored); the caller runs
/// this in a write transaction.
pub(super) fn claim(
    db: &mut dyn Db,
    run_id: &str,
    from: RunStatus,
    owner: &str,
    at: &str,
) -> Result<RunRecord, StoreError> {
    let until = chrono::DateTime::parse_from_rfc3339(at)
        .map(|at| super::lease::until(at.with_timezone(&chrono::Utc)))
        .unwrap_or_else(|_| super::lease::until(chrono::Utc::now()));
    let claimed = db.execute(
        "UPDATE runs SET status = 'running', updated_at = ?2, lease_owner = ?4, \
         lease_until = ?5, deadline = NULL, follow_up_at = NULL WHERE id = ?1 AND status = ?3",
        &params![run_id, at, from.as_str(), owner, until.as_str()],
    )?;
    if claimed == 0 {
        let status = db
            .query_opt("SELECT status FROM runs WHERE id = ?1", &params![run_id])?
            .map(|row| row.text("status"))
            .transpose()?;
        let run_id = run_id.to_string();
        return Err(match status {
            None => StoreError::NoSuchRun(run_id),
            Some(text) => match parse_status(&run_id, &text)? {
                status if status.is_finished() => StoreError::Finished { run_id, status },
                status if from == RunStatus::Interrupted => {
                    StoreError::NotInterrupted { run_id, status }
                }
                status => StoreError::NotPaused { run_id, status },
            },
        });
    }
    load(db, run_id)
}

/// The newest `limit` runs (by `started_at`), newest first.
pub(super) fn list(db: &mut dyn Db, limit: usize) -> Result<Vec<RunSummary>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    db.query(
        "SELECT id, flow_name, flow_path, status, started_at, ended_at, updated_at, \
         waiting_node_id, trigger_json FROM runs ORDER BY started_at DESC, id DESC LIMIT ?1",
        &params![limit],
    )?
    .iter()
    .map(summary)
    .collect()
}

/// The `limit` runs listed after run `after` (newest first, as [`list`] orders them): a page of
/// a long list, `after` being the last run of the page before. [`StoreError::NoSuchRun`] when
/// there is no run `after`.
pub(super) fn list_after(
    db: &mut dyn Db,
    limit: usize,
    after: &str,
) -> Result<Vec<RunSummary>, StoreError> {
    if !exists(db, after)? {
        return Err(StoreError::NoSuchRun(after.to_string()));
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    db.query(
        "SELECT id, flow_name, flow_path, status, started_at, ended_at, updated_at, \
         waiting_node_id, trigger_json FROM runs \
         WHERE started_at < (SELECT started_at FROM runs WHERE id = ?2) \
         OR (started_at = (SELECT started_at FROM runs WHERE id = ?2) AND id < ?2) \
         ORDER BY started_at DESC, id DESC LIMIT ?1",
        &params![limit, after],
    )?
    .iter()
    .map(summary)
    .collect()
}

/// The one run id that is `id_or_prefix` or starts with it.
pub(super) fn resolve(db: &mut dyn Db, id_or_prefix: &str) -> Result<String, StoreError> {
    if exists(db, id_or_prefix)? {
        return Ok(id_or_prefix.to_string());
    }
    let mut ids = db
        .query(
            "SELECT id FROM runs WHERE substr(id, 1, length(CAST(?1 AS TEXT))) = ?1 \
             ORDER BY id LIMIT 2",
            &params![id_or_prefix],
        )?
        .iter()
        .map(|row| row.text("id"))
        .collect::<Result<Vec<String>, StoreError>>()?;
    match ids.len() {
        0 => Err(StoreError::NoSuchRun(id_or_prefix.to_string())),
        1 => Ok(ids.remove(0)),
        _ => Err(StoreError::Ambiguous(id_or_prefix.to_string())),
    }
}

pub(super) fn exists(db: &mut dyn Db, run_id: &str) -> Result<bool, StoreError> {
    Ok(db
        .query_opt("SELECT id FROM runs WHERE id = ?1", &params![run_id])?
        .is_some())
}

/// The query of one run's row and totals, with `$pins` for its pinned outputs (a macro:
/// statements are `&'static str`).
macro_rules! load_run {
    ($pins:literal) => {
        concat!(
            "SELECT id, flow_name, flow_path, status, started_at, ended_at, updated_at, \
             waiting_node_id, trigger_json, \
             COALESCE((SELECT flow_json FROM flow_versions WHERE hash = runs.flow_version), \
               (SELECT flow_json FROM run_flows WHERE run_id = runs.id)) AS flow_json, \
             flow_version, input_json, result_json, error, waiting_input_json, \
             waiting_source_node_id, state_json, host, ",
            $pins,
            " AS pins_json, \
             (SELECT CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) FROM node_outputs \
               WHERE run_id = runs.id) AS input_tokens, \
             (SELECT CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) FROM node_outputs \
               WHERE run_id = runs.id) AS output_tokens \
             FROM runs WHERE id = ?1"
        )
    };
}
const LOAD_RUN: &str =
    load_run!("COALESCE((SELECT pins_json FROM run_pins WHERE run_id = runs.id), pins_json)");
const LOAD_RUN_WITHOUT_PINS_TABLE: &str = load_run!("pins_json");

/// The run with exactly this id, with its queue and token totals.
pub(super) fn load(db: &mut dyn Db, run_id: &str) -> Result<RunRecord, StoreError> {
    // A store that never kept pins has no `run_pins` (migration 21): a run's own column, where
    // a Weft from before migration 16 kept them, is all there is to read.
    let sql = if db.has_tables(Feature::Pins)? {
        LOAD_RUN
    } else {
        LOAD_RUN_WITHOUT_PINS_TABLE
    };
    let Some(row) = db.query_opt(sql, &params![run_id])? else {
        return Err(StoreError::NoSuchRun(run_id.to_string()));
    };
    let summary = summary(&row)?;
    let waiting_input = row.opt_text("waiting_input_json")?;
    let waiting = match (&summary.waiting_node_id, waiting_input) {
        (None, _) => None,
        (Some(node_id), Some(input)) => Some(QueuedStep {
            node_id: node_id.as_str().into(),
            input: Arc::new(parse_json(run_id, "waiting input", &input)?),
            source_node_id: row.opt_text("waiting_source_node_id")?.map(Arc::from),
        }),
        (Some(node_id), None) => {
            return Err(corrupt(
                run_id,
                format!("the waiting node {node_id} has no input"),
            ));
        }
    };
    let record = RunRecord {
        flow_json: row.text("flow_json")?,
        flow_version: row.opt_text("flow_version")?,
        input: parse_json(run_id, "input", &row.text("input_json")?)?,
        result: row
            .opt_text("result_json")?
            .map(|text| parse_json(run_id, "result", &text))
            .transpose()?,
        error: row.opt_text("error")?,
        waiting,
        queue: queue::list(db, run_id)?,
        state: parse_json(run_id, "state", &row.text("state_json")?)?,
        pins: row
            .opt_text("pins_json")?
            .map(|text| parse_json(run_id, "pins", &text))
            .transpose()?,
        usage: Usage {
            input_tokens: to_u64(run_id, "input tokens", row.int("input_tokens")?)?,
            output_tokens: to_u64(run_id, "output tokens", row.int("output_tokens")?)?,
        },
        host: row.opt_text("host")?,
        summary,
    };
    Ok(record)
}

/// A `runs` row's summary columns.
fn summary(row: &Row) -> Result<RunSummary, StoreError> {
    let id = row.text("id")?;
    let status = row.text("status")?;
    Ok(RunSummary {
        status: parse_status(&id, &status)?,
        flow_name: row.text("flow_name")?,
        flow_path: row.opt_text("flow_path")?,
        started_at: row.text("started_at")?,
        ended_at: row.opt_text("ended_at")?,
        updated_at: row.text("updated_at")?,
        waiting_node_id: row.opt_text("waiting_node_id")?,
        // A trigger that does not read is left out: it only says what started the run.
        trigger: row
            .opt_text("trigger_json")?
            .and_then(|text| serde_json::from_str(&text).ok()),
        id,
    })
}

pub(super) fn parse_status(run_id: &str, text: &str) -> Result<RunStatus, StoreError> {
    text.parse()
        .map_err(|_| corrupt(run_id, format!("unknown status {text:?}")))
}
