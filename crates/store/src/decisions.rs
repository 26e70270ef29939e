//! The `decisions` table: every answer a person gave at a pause of a run, kept for good in one
//! chain for the whole store (an audit log). Each decision is numbered `seq` 1, 2, 3, … and
//! carries the hash of the one before it (`prev_hash`) and its own (`hash`, SHA-256 of
//! `prev_hash` and its content), so that a decision changed or removed afterwards shows: see
//! [`verify`]. The chain's head (`decision_chain`, one row: how many decisions were kept and the
//! last one's hash) is updated in the same transaction as each insert, so that removing the
//! last decisions shows too.
//!
//! Inserts are serialized: on SQLite by the write lock the transaction takes at its start
//! (`BEGIN IMMEDIATE`), on PostgreSQL by locking the head's row (`SELECT … FOR UPDATE`). The
//! chain never forks, and of one person's two answers at one pause the first is kept.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use weft_event::RunStatus;

use super::schema::Feature;
use super::sql::{Db, Dialect, Row, params};
use super::{MAX_STORED_DEPTH, StoreError, corrupt, json_text, nesting, read_json, runs, to_i64};

/// The `prev_hash` of the first decision.
pub(super) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Decisions [`verify`] reads at a time.
const PAGE: i64 = 1000;

/// One person's answer at one pause of a run, to keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewDecision<'a> {
    pub run_id: &'a str,
    /// The approval node (`sub/review` for one inside a subflow).
    pub node_id: &'a str,
    /// Which pause of the run it answers (the engine's number for that pause; stable while the
    /// run waits there).
    pub pause: u64,
    /// "approve" | "reject" | "timeout"
    pub decision: &'a str,
    /// Who decided (never empty; "unknown" when nobody was named: an empty `by` is kept as
    /// "unknown").
    pub by: &'a str,
    /// How: "app" | "cli" | "api" | "email" | "mcp" | "weft" (the store does not check the set).
    pub channel: &'a str,
    pub note: &'a str,
    /// The form's answers, a JSON object ({} when none).
    pub fields: &'a Value,
    /// The edit made to a draft: {"before": ..., "after": ...}, when a draft field changed it.
    pub draft_edit: Option<&'a Value>,
    /// When (RFC 3339, UTC, milliseconds).
    pub at: &'a str,
}

/// A decision given in advance, as the engine queues it for keeping ([`NewDecision`] owned).
#[derive(Debug, Clone, PartialEq)]
pub struct GivenDecision {
    pub run_id: String,
    pub node_id: String,
    /// The number of the event that says it was applied (`input_received`).
    pub pause: u64,
    pub decision: String,
    pub by: String,
    pub channel: String,
    pub note: String,
    pub fields: Value,
    pub at: String,
}

impl GivenDecision {
    pub(super) fn as_new(&self) -> NewDecision<'_> {
        NewDecision {
            run_id: &self.run_id,
            node_id: &self.node_id,
            pause: self.pause,
            decision: &self.decision,
            by: &self.by,
            channel: &self.channel,
            note: &self.note,
            fields: &self.fields,
            draft_edit: None,
            at: &self.at,
        }
    }
}

/// A kept decision, as `weft audit --json` prints it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredDecision {
    /// Its place in the store's chain: 1, 2, 3, … with no gaps.
    pub seq: u64,
    pub run_id: String,
    pub node_id: String,
    pub pause: u64,
    pub decision: String,
    pub by: String,
    pub channel: String,
    pub note: String,
    pub fields: Value,
    pub draft_edit: Option<Value>,
    pub at: String,
    /// The hash of the decision before it (64 zeros for the first).
    pub prev_hash: String,
    /// SHA-256 (hex) of `prev_hash` and this decision's content.
    pub hash: String,
}

/// What [`crate::Store::record_decision`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// Kept, at the end of the chain.
    New(StoredDecision),
    /// `by` had already answered this pause: their earlier decision, nothing kept.
    Repeated(StoredDecision),
}

impl Recorded {
    /// The decision kept: this one, or the earlier one of the same person at the same pause.
    pub fn decision(&self) -> &StoredDecision {
        match self {
            Recorded::New(decision) | Recorded::Repeated(decision) => decision,
        }
    }

    pub fn into_decision(self) -> StoredDecision {
        match self {
            Recorded::New(decision) | Recorded::Repeated(decision) => decision,
        }
    }

    /// Whether this call kept the decision.
    pub fn is_new(&self) -> bool {
        matches!(self, Recorded::New(_))
    }
}

/// What walking the chain found.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "result",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ChainCheck {
    /// Every decision is as it was kept.
    Intact { count: u64 },
    /// The decision at `seq` is not as it was kept (its content or hash changed).
    Altered {
        seq: u64,
        run_id: String,
        by: String,
    },
    /// The decision at `seq` was removed (a gap in the chain, or fewer decisions than the
    /// chain's head counts).
    Removed { seq: u64 },
}

/// Keeps `new` at the end of the chain, inside the caller's transaction (begun with
/// [`Db::begin`]): see [`crate::Store::record_decision`].
pub(super) fn record(db: &mut dyn Db, new: &NewDecision<'_>) -> Result<Recorded, StoreError> {
    record_checked(db, new, true)
}

/// Keeps `new`, a decision given in advance and applied as the run went (`weft run --decide`),
/// at the end of the chain, inside the writer's transaction: the run is not paused for it.
pub(super) fn record_given(db: &mut dyn Db, new: &NewDecision<'_>) -> Result<(), StoreError> {
    record_checked(db, new, false).map(|_| ())
}

fn record_checked(
    db: &mut dyn Db,
    new: &NewDecision<'_>,
    paused: bool,
) -> Result<Recorded, StoreError> {
    let pause = to_i64("a pause's number", new.pause)?;
    let by = if new.by.is_empty() { "unknown" } else { new.by };
    db.make_tables(Feature::Decisions)?;
    // Every inserter waits here for the one before it (SQLite's transaction holds the write
    // lock from its start already).
    let head = match db.dialect() {
        Dialect::Postgres => db.query_opt(
            "SELECT count, last_hash FROM decision_chain WHERE id = 1 FOR UPDATE",
            &[],
        )?,
        Dialect::Sqlite => db.query_opt(
            "SELECT count, last_hash FROM decision_chain WHERE id = 1",
            &[],
        )?,
    }
    .ok_or_else(missing_head)?;
    let (count, last_hash) = (head.int("count")?, head.text("last_hash")?);

    // The run must wait for a person now, and go on waiting until this commits.
    let status = match db.dialect() {
        Dialect::Postgres => db.query_opt(
            "SELECT status FROM runs WHERE id = ?1 FOR SHARE",
            &params![new.run_id],
        )?,
        Dialect::Sqlite => db.query_opt(
            "SELECT status FROM runs WHERE id = ?1",
            &params![new.run_id],
        )?,
    };
    let run_id = new.run_id.to_string();
    let status = match status {
        None => return Err(StoreError::NoSuchRun(run_id)),
        Some(row) => runs::parse_status(&run_id, &row.text("status")?)?,
    };
    match status {
        _ if !paused => {}
        RunStatus::Paused => {}
        status if status.is_finished() => return Err(StoreError::Finished { run_id, status }),
        status => return Err(StoreError::NotPaused { run_id, status }),
    }

    let earlier = db.query_opt(
        "SELECT seq, run_id, node_id, pause, decision, decided_by, channel, note, fields_json, \
         draft_edit_json, at, prev_hash, hash FROM decisions \
         WHERE run_id = ?1 AND pause = ?2 AND decided_by = ?3",
        &params![new.run_id, pause, by],
    )?;
    if let Some(row) = earlier {
        return Ok(Recorded::Repeated(read_row(&row)?));
    }

    let fields_json = stored_json(new.fields, "the nesting depth of a decision's fields")?;
    let draft_edit_json = new
        .draft_edit
        .map(|edit| stored_json(edit, "the nesting depth of a decision's draft edit"))
        .transpose()?;
    let next = count
        .checked_add(1)
        .filter(|next| *next >= 1)
        .ok_or_else(|| corrupt(&run_id, format!("the decisions' chain counts {count}")))?;
    let seq = u64::try_from(next).unwrap_or_default();
    // Hashed as it reads back, so that walking the chain later finds the same hash.
    let mut kept = StoredDecision {
        seq,
        run_id: run_id.clone(),
        node_id: new.node_id.to_string(),
        pause: new.pause,
        decision: new.decision.to_string(),
        by: by.to_string(),
        channel: new.channel.to_string(),
        note: new.note.to_string(),
        fields: parse(&run_id, "fields", &fields_json)?,
        draft_edit: draft_edit_json
            .as_deref()
            .map(|text| parse(&run_id, "draft edit", text))
            .transpose()?,
        at: new.at.to_string(),
        prev_hash: last_hash,
        hash: String::new(),
    };
    kept.hash = hash_of(&kept).map_err(|message| corrupt(&run_id, message))?;
    db.execute(
        "INSERT INTO decisions (seq, run_id, node_id, pause, decision, decided_by, channel, note, \
         fields_json, draft_edit_json, at, prev_hash, hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        &params![
            next,
            new.run_id,
            new.node_id,
            pause,
            new.decision,
            by,
            new.channel,
            new.note,
            &fields_json,
            &draft_edit_json,
            new.at,
            &kept.prev_hash,
            &kept.hash
        ],
    )?;
    db.execute(
        "UPDATE decision_chain SET count = ?1, last_hash = ?2 WHERE id = 1",
        &params![next, &kept.hash],
    )?;
    Ok(Recorded::New(kept))
}

/// The decisions kept at pause `pause` of run `run_id`, in chain order.
pub(super) fn at_pause(
    db: &mut dyn Db,
    run_id: &str,
    pause: u64,
) -> Result<Vec<StoredDecision>, StoreError> {
    let pause = to_i64("a pause's number", pause)?;
    if !db.has_tables(Feature::Decisions)? {
        return Ok(Vec::new());
    }
    db.query(
        "SELECT seq, run_id, node_id, pause, decision, decided_by, channel, note, fields_json, \
         draft_edit_json, at, prev_hash, hash FROM decisions \
         WHERE run_id = ?1 AND pause = ?2 ORDER BY seq",
        &params![run_id, pause],
    )?
    .iter()
    .map(read_row)
    .collect()
}

/// Every kept decision (of run `run_id` when given), in chain order.
pub(super) fn list(
    db: &mut dyn Db,
    run_id: Option<&str>,
) -> Result<Vec<StoredDecision>, StoreError> {
    if !db.has_tables(Feature::Decisions)? {
        return Ok(Vec::new());
    }
    let rows = match run_id {
        Some(run_id) => db.query(
            "SELECT seq, run_id, node_id, pause, decision, decided_by, channel, note, \
             fields_json, draft_edit_json, at, prev_hash, hash FROM decisions \
             WHERE run_id = ?1 ORDER BY seq",
            &params![run_id],
        )?,
        None => db.query(
            "SELECT seq, run_id, node_id, pause, decision, decided_by, channel, note, \
             fields_json, draft_edit_json, at, prev_hash, hash FROM decisions ORDER BY seq",
            &[],
        )?,
    };
    rows.iter().map(read_row).collect()
}

/// Walks the whole chain, in one snapshot of it, and names the first decision altered or
/// removed.
pub(super) fn verify(db: &mut dyn Db) -> Result<ChainCheck, StoreError> {
    // A snapshot, so that decisions kept meanwhile are not taken for ones added behind the
    // head's back; on SQLite a deferred transaction, which holds no write lock: writers go on.
    match db.dialect() {
        Dialect::Sqlite => db.batch("BEGIN")?,
        Dialect::Postgres => {
            db.begin()?;
            db.batch("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")?;
        }
    }
    let checked = walk(db);
    let _ = db.rollback();
    checked
}

fn walk(db: &mut dyn Db) -> Result<ChainCheck, StoreError> {
    if !db.has_tables(Feature::Decisions)? {
        return Ok(ChainCheck::Intact { count: 0 });
    }
    let head = db
        .query_opt(
            "SELECT count, last_hash FROM decision_chain WHERE id = 1",
            &[],
        )?
        .ok_or_else(missing_head)?;
    let (count, head_hash) = (head.int("count")?, head.text("last_hash")?);
    // The decision before the one looked at: its number and hash.
    let mut last: i64 = 0;
    let mut previous = Previous {
        hash: GENESIS.to_string(),
        run_id: String::new(),
        by: String::new(),
    };
    loop {
        let rows = db.query(
            "SELECT seq, run_id, node_id, pause, decision, decided_by, channel, note, \
             fields_json, draft_edit_json, at, prev_hash, hash FROM decisions \
             WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            &params![last, PAGE],
        )?;
        for row in &rows {
            let seq = row.int("seq")?;
            let altered = |seq: i64| ChainCheck::Altered {
                seq: u64::try_from(seq).unwrap_or(0),
                run_id: row.opt_text("run_id").ok().flatten().unwrap_or_default(),
                by: row
                    .opt_text("decided_by")
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            };
            if seq > last + 1 {
                return Ok(ChainCheck::Removed {
                    seq: u64::try_from(last + 1).unwrap_or(0),
                });
            }
            // Numbered before the first decision (the number itself was changed), or past the
            // head: never kept so.
            if seq < 1 || seq > count {
                return Ok(altered(seq));
            }
            let Ok(decision) = read_row(row) else {
                return Ok(altered(seq));
            };
            if hash_of(&decision).ok().as_deref() != Some(decision.hash.as_str()) {
                return Ok(altered(seq));
            }
            if decision.prev_hash != previous.hash {
                // This decision is as it was hashed; the one before it no longer has the hash
                // it had then (it was changed and hashed again), or was replaced.
                return Ok(if last == 0 {
                    altered(seq)
                } else {
                    ChainCheck::Altered {
                        seq: u64::try_from(last).unwrap_or(0),
                        run_id: previous.run_id,
                        by: previous.by,
                    }
                });
            }
            if seq == count && decision.hash != head_hash {
                // The last decision, changed and hashed again.
                return Ok(altered(seq));
            }
            last = seq;
            previous = Previous {
                hash: decision.hash,
                run_id: decision.run_id,
                by: decision.by,
            };
        }
        if rows.len() < PAGE as usize {
            break;
        }
    }
    if last < count {
        return Ok(ChainCheck::Removed {
            seq: u64::try_from(last + 1).unwrap_or(0),
        });
    }
    Ok(ChainCheck::Intact {
        count: u64::try_from(count).unwrap_or(0),
    })
}

/// The decision [`walk`] checked last.
struct Previous {
    hash: String,
    run_id: String,
    by: String,
}

fn missing_head() -> StoreError {
    StoreError::Column {
        column: "decision_chain.count".to_string(),
        message: "the head of the decisions' chain is missing".to_string(),
    }
}

/// `value` as the JSON text kept, if it can be read back.
fn stored_json(value: &Value, what: &'static str) -> Result<String, StoreError> {
    let text = json_text(value);
    let depth = nesting(&text);
    if depth > MAX_STORED_DEPTH {
        return Err(StoreError::OutOfRange {
            what,
            value: depth as u64,
        });
    }
    Ok(text)
}

fn parse(run_id: &str, what: &str, text: &str) -> Result<Value, StoreError> {
    read_json(text)
        .map_err(|err| corrupt(run_id, format!("a decision's {what} cannot be read: {err}")))
}

fn read_row(row: &Row) -> Result<StoredDecision, StoreError> {
    let run_id = row.text("run_id")?;
    let number = |column: &str| -> Result<u64, StoreError> {
        let value = row.int(column)?;
        u64::try_from(value).map_err(|_| {
            corrupt(
                &run_id,
                format!("a decision's {column} {value} is negative"),
            )
        })
    };
    Ok(StoredDecision {
        seq: number("seq")?,
        pause: number("pause")?,
        node_id: row.text("node_id")?,
        decision: row.text("decision")?,
        by: row.text("decided_by")?,
        channel: row.text("channel")?,
        note: row.text("note")?,
        fields: parse(&run_id, "fields", &row.text("fields_json")?)?,
        draft_edit: row
            .opt_text("draft_edit_json")?
            .map(|text| parse(&run_id, "draft edit", &text))
            .transpose()?,
        at: row.text("at")?,
        prev_hash: row.text("prev_hash")?,
        hash: row.text("hash")?,
        run_id,
    })
}

/// A JSON value written with its objects' keys in order (by their UTF-8 bytes), whatever
/// order the map keeps them in (serde_json's `preserve_order` keeps insertion order).
struct Canonical<'a>(&'a Value);

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Array(items) => serializer.collect_seq(items.iter().map(Canonical)),
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                serializer.collect_map(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key, Canonical(value))),
                )
            }
            scalar => scalar.serialize(serializer),
        }
    }
}

/// The hash of a decision: SHA-256, in lowercase hex, of the compact JSON array
/// `[prev_hash, seq, run_id, node_id, pause, decision, by, channel, note, fields, draft_edit,
/// at]`, with objects' keys sorted and `draft_edit` as `[]` when there is none and `[edit]`
/// when there is one (so that no edit and an edit of `null` differ).
pub(super) fn hash_of(decision: &StoredDecision) -> Result<String, String> {
    let draft_edit: Vec<Canonical<'_>> = decision.draft_edit.iter().map(Canonical).collect();
    let content = (
        &decision.prev_hash,
        decision.seq,
        &decision.run_id,
        &decision.node_id,
        decision.pause,
        &decision.decision,
        &decision.by,
        &decision.channel,
        &decision.note,
        Canonical(&decision.fields),
        draft_edit,
        &decision.at,
    );
    let text = serde_json::to_vec(&content)
        .map_err(|err| format!("a decision cannot be written for its hash: {err}"))?;
    Ok(Sha256::digest(&text)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decision(fields: Value, draft_edit: Option<Value>) -> StoredDecision {
        StoredDecision {
            seq: 1,
            run_id: "run".into(),
            node_id: "review".into(),
            pause: 2,
            decision: "approve".into(),
            by: "ana".into(),
            channel: "cli".into(),
            note: "ok".into(),
            fields,
            draft_edit,
            at: "2026-01-01T00:00:00.000Z".into(),
            prev_hash: GENESIS.into(),
            hash: String::new(),
        }
    }

    #[test]
    fn the_hash_covers_the_content_whatever_order_object_keys_are_in() {
        let sorted = decision(json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}}), None);
        let mut map = serde_json::Map::new();
        // Inserted out of order: a map that keeps insertion order writes them so.
        map.insert("b".into(), json!({"c": [1, {"e": 3, "d": 2}]}));
        map.insert("a".into(), json!(1));
        let shuffled = decision(Value::Object(map), None);
        let hash = hash_of(&sorted).expect("hash");
        assert_eq!(hash.len(), 64);
        assert!(hash.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_eq!(hash_of(&shuffled).expect("hash"), hash);
        assert_eq!(
            serde_json::to_string(&Canonical(&shuffled.fields)).expect("json"),
            r#"{"a":1,"b":{"c":[1,{"d":2,"e":3}]}}"#
        );

        let changed = |change: fn(&mut StoredDecision)| {
            let mut other = sorted.clone();
            change(&mut other);
            hash_of(&other).expect("hash")
        };
        let others = [
            changed(|d| d.seq = 2),
            changed(|d| d.run_id = "run2".into()),
            changed(|d| d.node_id = "other".into()),
            changed(|d| d.pause = 3),
            changed(|d| d.decision = "reject".into()),
            changed(|d| d.by = "bo".into()),
            changed(|d| d.channel = "app".into()),
            changed(|d| d.note = "ok ".into()),
            changed(|d| d.fields = json!({"a": 2})),
            changed(|d| d.draft_edit = Some(Value::Null)),
            changed(|d| d.at = "2026-01-01T00:00:00.001Z".into()),
            changed(|d| d.prev_hash = "1".repeat(64)),
            // Text moved from one field to the next is another content.
            changed(|d| {
                d.decision = "approvea".into();
                d.by = "na".into();
            }),
        ];
        for (index, other) in others.iter().enumerate() {
            assert_ne!(other, &hash, "change {index}");
        }
    }
}
