//! One file per subcommand, plus what several of them share: finding and opening the run
//! store through `weft-api`, loading a flow, and turning refusals into usage errors.

pub(crate) mod audit;
pub(crate) mod cancel;
pub(crate) mod diff;
pub(crate) mod flow_diff;
pub(crate) mod fmt;
pub(crate) mod kinds;
pub(crate) mod mcp;
pub(crate) mod restate;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod schedules;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod test;
pub(crate) mod tools;
pub(crate) mod validate;
pub(crate) mod versions;

use std::path::Path;
use std::sync::Arc;

use weft_api::{ErrorKind, Lifetime, StoreLocation, Weft};
use weft_flow::Flow;
use weft_history::cost::{PRICES_ENV, Prices};
use weft_providers::ProviderSettings;
use weft_restate::RestateIngress;

use crate::{StoreArgs, usage_error};

/// The run store `--db` names, else `WEFT_DB`, else `runs.db` in the user's data directory.
pub(crate) fn location(args: &StoreArgs) -> anyhow::Result<StoreLocation> {
    let given = args
        .db
        .as_ref()
        .map(|path| path.to_string_lossy().into_owned());
    StoreLocation::find(given.as_deref()).map_err(api_error)
}

/// Weft over the store `--db` names, for a command that may end in a moment: providers from
/// the environment (keys are never printed), answers for Restate workflows sent through their
/// ingress.
pub(crate) fn open(location: StoreLocation) -> anyhow::Result<Weft> {
    open_as(location, Lifetime::Command)
}

/// [`open`], for a process that lives on (`weft serve`, `weft restate`).
pub(crate) fn open_as(location: StoreLocation, lifetime: Lifetime) -> anyhow::Result<Weft> {
    // Approvals that name groups need the people file (`WEFT_PEOPLE_FILE`; `--people` for
    // the servers).
    let people = weft_api::People::from_file_or_env(None).map_err(api_error)?;
    Ok(Weft::open(location, lifetime, ProviderSettings::from_env())
        .map_err(api_error)?
        .with_host(Arc::new(RestateIngress::default()))
        .with_people(people))
}

/// `TRACEPARENT` (the W3C trace context a calling process hands down): the run's span is its
/// child when traces are exported (docs/traces.md).
pub(crate) fn traceparent() -> Option<String> {
    std::env::var("TRACEPARENT")
        .ok()
        .filter(|value| !value.trim().is_empty())
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

/// A refusal or failure as the CLI reports it: what the caller can fix (a refusal) exits 2,
/// a failure of Weft or its store 1.
pub(crate) fn api_error(error: weft_api::Error) -> anyhow::Error {
    match error.kind {
        ErrorKind::Failed => anyhow::anyhow!(error.message),
        _ => usage_error(error.message),
    }
}
