//! Flow versions: the canonical form of each distinct flow a run ran or the app saved, stored
//! once and named by its hash (`flow_versions`), and each use of one by a file
//! (`flow_version_uses`: a run of the file, a run of it as a subflow, a save, a restore).

use serde::{Deserialize, Serialize};

use super::StoreError;
use super::sql::{Db, Row, params};

/// The shortest hash prefix a version is looked up by (a shorter one would match many).
pub const MIN_HASH_PREFIX: usize = 4;

/// A stored version of a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFlowVersion {
    /// SHA-256 of `flow_json`, in lowercase hex.
    pub hash: String,
    /// The flow's canonical JSON (compact).
    pub flow_json: String,
    /// When it was first stored (RFC 3339, UTC).
    pub created_at: String,
}

/// How a file used a version.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VersionUseKind {
    /// A run of the file.
    Run,
    /// A run of another flow ran the file as a subflow or a forEach's body.
    Subflow,
    /// The app saved the file.
    Save,
    /// `weft versions --restore` (or the app's Restore) wrote the version back.
    Restore,
}

impl VersionUseKind {
    fn as_str(self) -> &'static str {
        match self {
            VersionUseKind::Run => "run",
            VersionUseKind::Subflow => "subflow",
            VersionUseKind::Save => "save",
            VersionUseKind::Restore => "restore",
        }
    }

    fn parse(text: &str) -> Option<VersionUseKind> {
        Some(match text {
            "run" => VersionUseKind::Run,
            "subflow" => VersionUseKind::Subflow,
            "save" => VersionUseKind::Save,
            "restore" => VersionUseKind::Restore,
            _ => return None,
        })
    }
}

/// One use of a version by a file.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowVersionUse {
    /// The file, as the run or the app named it.
    pub path: String,
    pub hash: String,
    /// RFC 3339, UTC.
    pub at: String,
    pub kind: VersionUseKind,
    /// The run, for a use by a run.
    pub run_id: Option<String>,
    /// Who saved or restored it, when known.
    pub by: Option<String>,
}

/// Keeps a version unless it is kept already.
pub(super) const INSERT_VERSION: &str = "INSERT INTO flow_versions (hash, flow_json, created_at) \
     VALUES (?1, ?2, ?3) ON CONFLICT (hash) DO NOTHING";

/// Records a use of a version.
pub(super) const INSERT_USE: &str = "INSERT INTO flow_version_uses \
     (path, hash, at, kind, run_id, saved_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

pub(super) fn insert_version(
    db: &mut dyn Db,
    hash: &str,
    flow_json: &str,
    at: &str,
) -> Result<(), StoreError> {
    db.execute(INSERT_VERSION, &params![hash, flow_json, at])?;
    Ok(())
}

pub(super) fn insert_use(db: &mut dyn Db, used: &FlowVersionUse) -> Result<(), StoreError> {
    db.execute(
        INSERT_USE,
        &params![
            &used.path,
            &used.hash,
            &used.at,
            used.kind.as_str(),
            &used.run_id,
            &used.by
        ],
    )?;
    Ok(())
}

/// The version whose hash is `hash_or_prefix` or starts with it.
pub(super) fn load(db: &mut dyn Db, hash_or_prefix: &str) -> Result<StoredFlowVersion, StoreError> {
    let prefix = hash_or_prefix.to_ascii_lowercase();
    if prefix.len() < MIN_HASH_PREFIX || !prefix.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(StoreError::NoSuchVersion(hash_or_prefix.to_string()));
    }
    // Hex digits are below `g`: every hash with the prefix sorts between the two bounds.
    let rows = db.query(
        "SELECT hash, flow_json, created_at FROM flow_versions \
         WHERE hash >= ?1 AND hash < ?2 ORDER BY hash LIMIT 2",
        &params![&prefix, &format!("{prefix}g")],
    )?;
    match rows.as_slice() {
        [] => Err(StoreError::NoSuchVersion(hash_or_prefix.to_string())),
        [row] => Ok(StoredFlowVersion {
            hash: row.text("hash")?,
            flow_json: row.text("flow_json")?,
            created_at: row.text("created_at")?,
        }),
        _ => Err(StoreError::AmbiguousVersion(hash_or_prefix.to_string())),
    }
}

/// Every use of a version by the file recorded under `path`, oldest first (in the order they
/// were stored when two have the same time).
pub(super) fn uses_of(db: &mut dyn Db, path: &str) -> Result<Vec<FlowVersionUse>, StoreError> {
    db.query(
        "SELECT path, hash, at, kind, run_id, saved_by FROM flow_version_uses \
         WHERE path = ?1 ORDER BY at, id",
        &params![path],
    )?
    .iter()
    .map(read_use)
    .collect()
}

fn read_use(row: &Row) -> Result<FlowVersionUse, StoreError> {
    let kind = row.text("kind")?;
    Ok(FlowVersionUse {
        path: row.text("path")?,
        hash: row.text("hash")?,
        at: row.text("at")?,
        kind: VersionUseKind::parse(&kind).ok_or_else(|| StoreError::Column {
            column: "kind".to_string(),
            message: format!("unknown use {kind:?}"),
        })?,
        run_id: row.opt_text("run_id")?,
        by: row.opt_text("saved_by")?,
    })
}
