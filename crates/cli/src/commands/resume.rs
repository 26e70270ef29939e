//! `weft resume RUN_ID --decision approve|reject`: continues a paused run, possibly paused by
//! another process that has since exited. `weft resume RUN_ID --retry`: continues an interrupted
//! run (its process stopped before it ended) from its last checkpoint.

use weft_engine::{Decision, ResumeOptions};

use super::run::{Live, engine, report, run_error};
use crate::output::{self, Style};
use crate::{Exit, ResumeArgs, usage_error};

pub(crate) async fn resume(args: ResumeArgs) -> anyhow::Result<Exit> {
    // The decision is checked before the run is touched: a bad one leaves it paused.
    let decision = args
        .decision
        .as_deref()
        .map(|answer| Decision::parse(answer, args.note.clone()))
        .transpose()
        .map_err(|message| {
            usage_error(format!("--decision: {message}; the run was not changed"))
        })?;
    let db = super::db_path(&args.store)?;
    let store = super::open_store(&db)?;
    let run_id = super::resolve_run(&store, &args.run_id)?;
    if !args.events {
        let style = Style::stderr();
        output::err(&format!(
            "{}\n",
            style.dim(&format!(
                "{} run {run_id}",
                if args.retry { "continuing" } else { "resuming" }
            ))
        ));
    }
    let engine = engine(store);
    let live = Live::start(args.events, &engine);
    let options = ResumeOptions {
        on_event: Some(live.listener.clone()),
        ..ResumeOptions::default()
    };
    let outcome = match (args.retry, decision) {
        (true, answer) => engine.retry(&run_id, answer, options).await,
        (false, Some(decision)) => engine.resume(&run_id, decision, options).await,
        (false, None) => return Err(usage_error("give --decision or --retry")),
    };
    live.end();
    report(&outcome.map_err(run_error)?, args.events, &db)
}
