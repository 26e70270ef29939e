//! One file per subcommand, plus what several of them share: opening the run store, loading
//! a flow, and turning store refusals into usage errors.

pub(crate) mod diff;
pub(crate) mod kinds;
pub(crate) mod restate;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod test;
pub(crate) mod validate;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weft_engine::cost::{PRICES_ENV, Prices};
use weft_engine::{Flow, Store, StoreError, WriterStart, shown_location};

use crate::{StoreArgs, usage_error};

/// The run store's path: `--db`, else `WEFT_DB` (both through clap), else `runs.db` in the
/// user's data directory.
pub(crate) fn db_path(args: &StoreArgs) -> anyhow::Result<PathBuf> {
    if let Some(path) = args.db.as_ref().filter(|path| !path.as_os_str().is_empty()) {
        return Ok(path.clone());
    }
    default_db_path().context(
        "cannot find the user's data directory for the run store; pass --db PATH or set WEFT_DB",
    )
}

/// `runs.db` in the user's data directory, if there is one.
pub(crate) fn default_db_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "weft").map(|dirs| dirs.data_dir().join("runs.db"))
}

/// Opens the run store `--db` names: a PostgreSQL URL, else a SQLite file (created when
/// missing); an error names where it is (a URL without its password).
pub(crate) fn open_store(path: &Path) -> anyhow::Result<Store> {
    let location = path.to_string_lossy();
    // A command may end in a moment: a thread of the store's is started only when needed.
    Store::open_location_with(&location, WriterStart::OnDemand).map_err(|error| match error {
        // It names the store already: once is enough.
        StoreError::Open { path, message } => {
            anyhow::anyhow!("cannot open the run store {path}: {message}")
        }
        error => anyhow::Error::new(error).context(format!(
            "cannot open the run store {}",
            shown_location(&location)
        )),
    })
}

/// The price table: the shipped prices and the file `WEFT_PRICES` names; a file that cannot be
/// used is a usage error (exit 2) naming it and what is wrong.
pub(crate) fn prices() -> anyhow::Result<Prices> {
    Prices::from_env().map_err(|error| usage_error(format!("{error} (set by {PRICES_ENV})")))
}

/// Loads a flow file; a file that cannot be read or is not a flow is a usage error (exit 2)
/// whose message names the file.
pub(crate) fn load_flow(path: &Path) -> anyhow::Result<Flow> {
    Flow::load(path).map_err(|error| usage_error(error.to_string()))
}

/// A store error as the CLI reports it: refusals that are the caller's to fix (no such run,
/// an ambiguous prefix, a finished or running run) exit 2, the rest 1.
pub(crate) fn store_error(error: StoreError) -> anyhow::Error {
    match error {
        StoreError::NoSuchRun(id) if id.is_empty() => usage_error("no run id given"),
        StoreError::NoSuchRun(_)
        | StoreError::Ambiguous(_)
        | StoreError::Finished { .. }
        | StoreError::NotPaused { .. }
        | StoreError::NotInterrupted { .. }
        | StoreError::NotWaiting { .. }
        | StoreError::Refused { .. } => usage_error(error.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// The full id of the run `id_or_prefix` names.
pub(crate) fn resolve_run(store: &Store, id_or_prefix: &str) -> anyhow::Result<String> {
    store
        .resolve_run_id(id_or_prefix.trim())
        .map_err(store_error)
}
