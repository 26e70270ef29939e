//! A flow file's versions, as `weft versions` and the app's History → Versions list them: each
//! distinct version the file was run, run as a subflow, saved or restored in, newest first,
//! with the runs that used it and who saved it.

use std::path::Path;

use serde::Serialize;
use weft_flow::{Flow, version_path};
use weft_store::{FlowVersionUse, Store, StoreError, VersionUseKind};

/// The versions of one file.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileVersions {
    pub path: String,
    /// The hash of the file's content now (`None` when it cannot be read as a flow).
    pub current: Option<String>,
    /// Newest use first.
    pub versions: Vec<FileVersion>,
}

/// One version of a file and its uses.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileVersion {
    pub hash: String,
    /// Its first and last use by the file (RFC 3339, UTC).
    pub first_at: String,
    pub last_at: String,
    /// The runs of the file in this version, oldest first.
    pub runs: Vec<String>,
    /// The runs of other flows that ran the file as a subflow in this version.
    pub subflow_runs: Vec<String>,
    /// The app's saves and the restores that wrote it, oldest first.
    pub saves: Vec<VersionSave>,
    /// Whether the file holds this version now.
    pub current: bool,
}

#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionSave {
    pub at: String,
    pub by: Option<String>,
    /// `save` or `restore`.
    pub kind: VersionUseKind,
}

/// The versions of the file at `path` kept in `store`.
pub fn file_versions(store: &Store, path: &Path) -> Result<FileVersions, StoreError> {
    let uses = store.flow_version_uses(&version_path(path))?;
    let current = Flow::load(path).ok().map(|flow| flow.version().hash);
    Ok(FileVersions {
        path: path.display().to_string(),
        versions: group(uses, current.as_deref()),
        current,
    })
}

/// `uses` (oldest first) grouped by version, newest last use first.
fn group(uses: Vec<FlowVersionUse>, current: Option<&str>) -> Vec<FileVersion> {
    let mut versions: Vec<FileVersion> = Vec::new();
    // The position of each version's last use: two uses in the same millisecond keep their
    // order.
    let mut last_use: Vec<usize> = Vec::new();
    for (position, used) in uses.into_iter().enumerate() {
        let index = match versions
            .iter()
            .position(|version| version.hash == used.hash)
        {
            Some(index) => index,
            None => {
                versions.push(FileVersion {
                    current: current == Some(used.hash.as_str()),
                    hash: used.hash.clone(),
                    first_at: used.at.clone(),
                    last_at: used.at.clone(),
                    runs: Vec::new(),
                    subflow_runs: Vec::new(),
                    saves: Vec::new(),
                });
                last_use.push(position);
                versions.len() - 1
            }
        };
        last_use[index] = position;
        let version = &mut versions[index];
        version.last_at.clone_from(&used.at);
        match (used.kind, used.run_id) {
            (VersionUseKind::Run, Some(run_id)) => version.runs.push(run_id),
            (VersionUseKind::Subflow, Some(run_id)) => version.subflow_runs.push(run_id),
            (VersionUseKind::Run | VersionUseKind::Subflow, None) => {}
            (kind @ (VersionUseKind::Save | VersionUseKind::Restore), _) => {
                version.saves.push(VersionSave {
                    at: used.at,
                    by: used.by,
                    kind,
                });
            }
        }
    }
    let mut ordered: Vec<(usize, FileVersion)> = last_use.into_iter().zip(versions).collect();
    ordered.sort_by(|(a_last, a), (b_last, b)| {
        (b.last_at.as_str(), b_last).cmp(&(a.last_at.as_str(), a_last))
    });
    ordered.into_iter().map(|(_, version)| version).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(hash: &str, at: &str, kind: VersionUseKind, run_id: Option<&str>) -> FlowVersionUse {
        FlowVersionUse {
            path: "/flows/a.json".into(),
            hash: hash.into(),
            at: at.into(),
            kind,
            run_id: run_id.map(str::to_string),
            by: Some("ana".into()),
        }
    }

    #[test]
    fn uses_group_by_version_newest_first() {
        let uses = vec![
            used("aaa", "2026-01-01T00:00:00Z", VersionUseKind::Save, None),
            used(
                "aaa",
                "2026-01-02T00:00:00Z",
                VersionUseKind::Run,
                Some("r1"),
            ),
            used("bbb", "2026-01-03T00:00:00Z", VersionUseKind::Save, None),
            used(
                "aaa",
                "2026-01-04T00:00:00Z",
                VersionUseKind::Subflow,
                Some("r2"),
            ),
        ];
        let versions = group(uses, Some("bbb"));
        let hashes: Vec<&str> = versions.iter().map(|v| v.hash.as_str()).collect();
        assert_eq!(hashes, ["aaa", "bbb"]);
        assert_eq!(versions[0].runs, ["r1"]);
        assert_eq!(versions[0].subflow_runs, ["r2"]);
        assert_eq!(versions[0].first_at, "2026-01-01T00:00:00Z");
        assert_eq!(versions[0].saves.len(), 1);
        assert!(!versions[0].current);
        assert!(versions[1].current);
    }

    #[test]
    fn uses_in_the_same_millisecond_keep_the_order_they_were_stored_in() {
        let at = "2026-01-01T00:00:00.000Z";
        let uses = vec![
            used("aaa", at, VersionUseKind::Save, None),
            used("bbb", at, VersionUseKind::Save, None),
        ];
        let hashes: Vec<String> = group(uses, None).into_iter().map(|v| v.hash).collect();
        assert_eq!(hashes, ["bbb", "aaa"], "the later save first");
    }
}
