//! `weft versions FLOW [--json] [--restore HASH]` (SPEC §17): the versions of a flow file kept
//! in the run store (each distinct content it was run, run as a subflow, saved in the app or
//! restored in), newest first, with the runs that used each; `--restore` writes one back.

use std::path::Path;

use weft_api::versions::record_written;
use weft_flow::{Flow, short_hash};
use weft_history::versions::{FileVersion, file_versions};
use weft_store::VersionUseKind;

use crate::output::{self, Style};
use crate::{Exit, VersionsArgs, usage_error};

/// Run ids listed per version before "and N more".
const SHOWN_RUNS: usize = 3;

pub(crate) fn versions(args: &VersionsArgs) -> anyhow::Result<Exit> {
    let location = super::location(&args.store)?;
    let shown = location.to_string();
    let weft = super::open(location)?;
    let store = weft.store();
    if let Some(hash) = &args.restore {
        return restore(store, &args.flow, hash, &shown);
    }
    let versions =
        file_versions(store, &args.flow).map_err(|error| super::api_error(error.into()))?;
    if args.json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&versions)?))?;
        return Ok(Exit::Success);
    }
    let style = Style::stdout();
    if versions.versions.is_empty() {
        output::out(&format!(
            "no versions of {} in the store ({shown}): it has not been run or saved in the app \
             with this store\n",
            args.flow.display()
        ))?;
        return Ok(Exit::Success);
    }
    let mut text = style.bold(&format!(
        "{}: {}",
        args.flow.display(),
        output::count(versions.versions.len(), "version")
    ));
    text.push('\n');
    for version in &versions.versions {
        text.push_str(&version_line(version, style));
    }
    if versions.current.is_some() && !versions.versions.iter().any(|version| version.current) {
        text.push_str(
            &style.dim("  the file's content now is none of these (not run or saved since)\n"),
        );
    }
    output::out(&text)?;
    Ok(Exit::Success)
}

/// `* 3f2a9c1d0b4e  2026-11-28 01:02:03  2 runs (9bc1e0f2, 77aa03c1)  saved by ana 2026-11-28
/// 01:00:00  (the file now)`.
fn version_line(version: &FileVersion, style: Style) -> String {
    let mark = if version.current { '*' } else { ' ' };
    let mut parts = vec![output::date_time(&version.last_at)];
    if !version.runs.is_empty() {
        let mut ids: Vec<&str> = version
            .runs
            .iter()
            .rev()
            .take(SHOWN_RUNS)
            .map(|id| id.get(..8).unwrap_or(id))
            .collect();
        if version.runs.len() > SHOWN_RUNS {
            ids.push("…");
        }
        parts.push(format!(
            "{} ({})",
            output::count(version.runs.len(), "run"),
            ids.join(", ")
        ));
    }
    if !version.subflow_runs.is_empty() {
        parts.push(format!(
            "{} as a subflow",
            output::count(version.subflow_runs.len(), "run")
        ));
    }
    // The last save or restore, and how many there were: one line per version.
    if let Some(save) = version.saves.last() {
        let verb = match save.kind {
            VersionUseKind::Restore => "restored",
            _ => "saved",
        };
        let by = save
            .by
            .as_ref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        let times = match version.saves.len() {
            1 => String::new(),
            count => format!(" ({count} times)"),
        };
        parts.push(format!("{verb}{by} {}{times}", output::date_time(&save.at)));
    }
    let now = if version.current {
        style.green("  (the file now)")
    } else {
        String::new()
    };
    format!(
        "{mark} {}  {}{now}\n",
        style.bold(short_hash(&version.hash)),
        parts.join("  ")
    )
}

/// Writes the version `hash` names back to `path`, in canonical form, and records that.
fn restore(
    store: &weft_store::Store,
    path: &Path,
    hash: &str,
    shown: &str,
) -> anyhow::Result<Exit> {
    let version = store.flow_version(hash).map_err(|error| match error {
        weft_store::StoreError::NoSuchVersion(_) => usage_error(format!(
            "no flow version {hash} in the store ({shown}); `weft versions {}` lists them",
            path.display()
        )),
        other => super::api_error(other.into()),
    })?;
    let flow = Flow::parse(&version.flow_json, &format!("flow version {hash}"))
        .map_err(|error| usage_error(error.to_string()))?;
    let before = Flow::load(path).ok().map(|flow| flow.version().hash);
    flow.save(path)
        .map_err(|error| usage_error(format!("cannot write {}: {error}", path.display())))?;
    record_written(
        store,
        path,
        &flow,
        VersionUseKind::Restore,
        weft_api::decider(None),
    )
    .map_err(|error| super::api_error(error.into()))?;
    let was = match before {
        Some(before) if before == version.hash => " (it already held it)".to_string(),
        Some(before) => format!(" (it held {})", short_hash(&before)),
        None => String::new(),
    };
    output::out(&format!(
        "restored {} to version {}{was}\n",
        path.display(),
        short_hash(&version.hash)
    ))?;
    Ok(Exit::Success)
}
