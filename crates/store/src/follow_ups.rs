//! The `approval_follow_ups` table: the follow-ups (reminders, escalations) done at each pause
//! of a run, one of each kind. Kept by whichever process inserts it first (`ON CONFLICT DO
//! NOTHING`), so that a follow-up due is done once however many processes find it due. When a
//! paused run's next follow-up is due is `runs.follow_up_at` (see `runs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schema::Feature;
use super::sql::{Db, Row, params};
use super::{StoreError, corrupt, json_text, read_json, to_i64};

/// A follow-up done at one pause of a run, to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowUp<'a> {
    pub run_id: &'a str,
    /// Which pause of the run (the engine's number for that pause, as for decisions).
    pub pause: u64,
    /// "remind" | "escalate"
    pub kind: &'a str,
    /// When (RFC 3339, UTC).
    pub at: &'a str,
    /// who was reminded, or who was added as approvers
    pub to: &'a [String],
}

/// A kept follow-up.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredFollowUp {
    pub run_id: String,
    pub pause: u64,
    /// "remind" | "escalate"
    pub kind: String,
    /// When it was done (RFC 3339, UTC).
    pub at: String,
    /// Who was reminded, or who was added as approvers.
    pub to: Vec<String>,
}

/// Keeps `done` unless a follow-up of its kind is kept for its pause already: whether this call
/// kept it.
pub(super) fn claim(db: &mut dyn Db, done: &FollowUp<'_>) -> Result<bool, StoreError> {
    let pause = to_i64("a pause's number", done.pause)?;
    let to_json = json_text(&Value::Array(
        done.to.iter().cloned().map(Value::String).collect(),
    ));
    db.make_tables(Feature::FollowUps)?;
    let kept = db.execute(
        "INSERT INTO approval_follow_ups (run_id, pause, kind, at, to_json) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        &params![done.run_id, pause, done.kind, done.at, &to_json],
    )?;
    Ok(kept == 1)
}

/// The follow-ups kept at pause `pause` of run `run_id`, by `at`, then kind.
pub(super) fn at_pause(
    db: &mut dyn Db,
    run_id: &str,
    pause: u64,
) -> Result<Vec<StoredFollowUp>, StoreError> {
    let pause = to_i64("a pause's number", pause)?;
    if !db.has_tables(Feature::FollowUps)? {
        return Ok(Vec::new());
    }
    db.query(
        "SELECT run_id, pause, kind, at, to_json FROM approval_follow_ups \
         WHERE run_id = ?1 AND pause = ?2 ORDER BY at, kind",
        &params![run_id, pause],
    )?
    .iter()
    .map(read_row)
    .collect()
}

fn read_row(row: &Row) -> Result<StoredFollowUp, StoreError> {
    let run_id = row.text("run_id")?;
    let pause = row.int("pause")?;
    let pause = u64::try_from(pause)
        .map_err(|_| corrupt(&run_id, format!("a follow-up's pause {pause} is negative")))?;
    let to = read_json(&row.text("to_json")?).map_err(|err| {
        corrupt(
            &run_id,
            format!("a follow-up's people cannot be read: {err}"),
        )
    })?;
    Ok(StoredFollowUp {
        pause,
        kind: row.text("kind")?,
        at: row.text("at")?,
        to,
        run_id,
    })
}
