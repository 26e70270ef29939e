//! `weft cancel RUN_ID`: cancels a run paused for a person (paused by any process: it is ended
//! as cancelled here), with the same policy as the app and `weft serve`; a run going in another
//! process is refused (stop it there, Ctrl-C), as is a finished one.

use crate::output::{self, Style};
use crate::{CancelArgs, Exit, Threads};

pub(crate) fn cancel(args: &CancelArgs) -> anyhow::Result<Exit> {
    let location = super::location(&args.store)?;
    let weft = super::open(location)?;
    let cancelled = crate::block_on(Threads::One, || async {
        super::run::settle_deadlines(&weft).await;
        weft.cancel(&args.run_id, None)
            .await
            .map_err(super::api_error)
    })?;
    let style = Style::stderr();
    output::err(&format!(
        "{} run {} {}\n",
        style.yellow("✗"),
        cancelled.run_id,
        cancelled.status
    ));
    Ok(Exit::Success)
}
