//! Runs another host drives (a run that is a Restate workflow is continued by its workflow, on
//! whichever worker Restate picks): this engine does not claim them. An answer for such a run is
//! handed to its host by the application layer (`weft-api`), which knows the hosts; the engine
//! knows only the host's name, stored with the run.

use super::{Engine, RunError};
use weft_store::StoreError;

/// Refuses to claim run `run_id` (resume, continue, retry or cancel it here) when another host
/// drives it; `doing` says what this process was about to do.
pub(super) async fn refuse_if_hosted(
    engine: &Engine,
    run_id: &str,
    doing: &str,
) -> Result<(), RunError> {
    let wanted = run_id.to_string();
    let Ok(record) = engine
        .blocking(move |store| {
            let run_id = store.resolve_run_id(&wanted)?;
            store.run(&run_id)
        })
        .await
    else {
        // The claim itself says what is wrong with the id.
        return Ok(());
    };
    match record.host {
        Some(host) if engine.host.as_deref() != Some(host.as_str()) => {
            Err(RunError::Store(StoreError::Refused {
                message: format!(
                    "run {} is driven by `{host}`, not by this process; it cannot {doing} here",
                    record.summary.id
                ),
            }))
        }
        _ => Ok(()),
    }
}
