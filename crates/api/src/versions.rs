//! A version of a flow named the ways people name one: a flow file, a kept version's hash (or a
//! unique prefix, as `weft versions` lists them), or a stored run's id (the flow it ran).
//! `weft flow-diff` and the canvas's "Compare with…" read their two sides through here; a save
//! in the app and `weft versions --restore` record what they wrote through here too.

use std::path::Path;

use weft_flow::{Flow, short_hash, version_path};
use weft_store::{FlowVersionUse, Store, StoreError, VersionUseKind};

use crate::Error;

/// The flow `given` names, and a label saying which it is ("flow version 3f2a9c1d0b4e", "the
/// flow of run …", the file's path). A relative file path is read from `folder` when given.
///
/// Errors: [`crate::ErrorKind::Invalid`] for a file that is not a flow, a prefix naming both
/// a version and a run or several versions; [`crate::ErrorKind::NotFound`] when nothing has
/// that name.
pub fn flow_named(
    store: &Store,
    given: &str,
    folder: Option<&Path>,
) -> Result<(Flow, String), Error> {
    let given = given.trim();
    let path = match folder {
        Some(folder) if Path::new(given).is_relative() => folder.join(given),
        _ => Path::new(given).to_path_buf(),
    };
    if !given.is_empty() && path.is_file() {
        let flow = Flow::load(&path).map_err(|error| Error::invalid(error.to_string()))?;
        return Ok((flow, given.to_string()));
    }
    let (flow_json, label) = match (store.flow_version(given), store.resolve_run_id(given)) {
        (Ok(version), Err(_)) => (
            version.flow_json,
            format!("flow version {}", short_hash(&version.hash)),
        ),
        (Err(_), Ok(run_id)) => (
            store.run(&run_id)?.flow_json,
            format!("the flow of run {run_id}"),
        ),
        (Ok(version), Ok(run_id)) => {
            return Err(Error::invalid(format!(
                "{given} names both flow version {} and run {run_id}; give more of the one you \
                 mean",
                short_hash(&version.hash)
            )));
        }
        (Err(StoreError::AmbiguousVersion(_)), Err(_)) => {
            return Err(Error::invalid(format!(
                "{given} starts several flow versions' hashes; give more of it"
            )));
        }
        (Err(_), Err(_)) => {
            return Err(Error::not_found(format!(
                "{given}: neither a flow file, a flow version nor a run in the store"
            )));
        }
    };
    let flow =
        Flow::parse(&flow_json, &label).map_err(|error| Error::invalid(error.to_string()))?;
    Ok((flow, label))
}

/// Records that `flow` was just written to the file at `path` (`kind`: a save in the app, a
/// restore) by `by`, and waits until the store holds it.
pub fn record_written(
    store: &Store,
    path: &Path,
    flow: &Flow,
    kind: VersionUseKind,
    by: Option<String>,
) -> Result<(), StoreError> {
    let version = flow.version();
    store.record_flow_version(
        &version.json,
        &FlowVersionUse {
            path: version_path(path),
            hash: version.hash,
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            kind,
            run_id: None,
            by,
        },
    );
    store.flush()
}
