//! Where the run store is: the one rule every host follows, so that the app, `weft` and a
//! server started without arguments all find the same runs.

use std::path::PathBuf;

use weft_store::{Store, StoreError, WriterStart, shown_location};

use crate::Error;

/// The environment variable that names the run store for every host.
pub const STORE_ENV: &str = "WEFT_DB";

/// The run store's location: a SQLite file or a PostgreSQL URL (`postgres://…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLocation(String);

impl StoreLocation {
    /// `given` (`--db`) when it is not empty, else `WEFT_DB`, else `runs.db` in the user's
    /// data directory (`~/.local/share/weft/runs.db` on Linux).
    pub fn find(given: Option<&str>) -> Result<StoreLocation, Error> {
        let given = given
            .map(str::to_string)
            .or_else(|| std::env::var(STORE_ENV).ok())
            .filter(|location| !location.trim().is_empty());
        match given {
            Some(location) => Ok(StoreLocation(location)),
            None => StoreLocation::default_file().map(|path| StoreLocation(path.display().to_string())).ok_or_else(|| {
                Error::failed(format!(
                    "cannot find the user's data directory for the run store; pass --db PATH or set {STORE_ENV}"
                ))
            }),
        }
    }

    /// `runs.db` in the user's data directory, if there is one.
    pub fn default_file() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "weft").map(|dirs| dirs.data_dir().join("runs.db"))
    }

    /// The location as given (a URL keeps its password: use [`StoreLocation::shown`] to print).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The location as a person may be shown it: a URL without its password.
    pub fn shown(&self) -> String {
        shown_location(&self.0)
    }

    /// Opens the store here (a SQLite file is created with its folders when missing) and
    /// brings its schema up to date. `start` says when a SQLite store's writer thread starts:
    /// a command that may end in a moment starts it only when needed.
    pub fn open(&self, start: WriterStart) -> Result<Store, Error> {
        Store::open_location_with(&self.0, start).map_err(|error| match error {
            // It names the store already: once is enough.
            StoreError::Open { path, message } => {
                Error::failed(format!("cannot open the run store {path}: {message}"))
            }
            error => Error::failed(format!(
                "cannot open the run store {}: {error}",
                self.shown()
            )),
        })
    }
}

impl From<PathBuf> for StoreLocation {
    fn from(path: PathBuf) -> StoreLocation {
        StoreLocation(path.display().to_string())
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}
