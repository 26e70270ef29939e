//! A flow named by a host that serves a folder of flows (`weft serve`, `weft restate`): `triage`
//! names `DIR/triage.json`, and no name reaches outside the folder; and the flow files of such a
//! folder, as the hosts list them (flows, schedules, MCP tools).

use std::path::{Path, PathBuf};

/// Why a name does not give a flow of the folder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowNameError {
    #[error(
        "`{0}` is not a flow name: a name like `triage` (letters, digits, - _ .) names DIR/triage.json, and cannot leave the flows folder"
    )]
    NotAName(String),
    #[error("there is no flow `{0}` in the flows folder")]
    NotFound(String),
}

/// The flow files of the folder `dir` with their names (`triage` for `triage.json`), in name
/// order: every `NAME.json` but the test cases and pins kept beside flows (`NAME.tests.json`,
/// `NAME.pins.json`). Whether each loads is the caller's to find out.
pub fn flow_files(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|file| file.to_str())
            .and_then(|file| file.strip_suffix(".json"))
        else {
            continue;
        };
        if name.ends_with(".tests") || name.ends_with(".pins") {
            continue;
        }
        found.push((name.to_string(), path));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// The file flow `name` (with or without `.json`) is in the folder `dir` (canonical).
pub fn flow_in_dir(dir: &Path, name: &str) -> Result<PathBuf, FlowNameError> {
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let plain = !stem.is_empty()
        && !stem.starts_with('.')
        && stem
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character));
    if !plain {
        return Err(FlowNameError::NotAName(name.to_string()));
    }
    let path = dir.join(format!("{stem}.json"));
    let inside = path
        .canonicalize()
        .is_ok_and(|real| real.starts_with(dir) && real.is_file());
    if !inside {
        return Err(FlowNameError::NotFound(stem.to_string()));
    }
    Ok(path)
}
