//! `weft resume RUN_ID --decision approve|reject`: continues a paused run, possibly paused by
//! another process that has since exited. `weft resume RUN_ID --retry`: continues an interrupted
//! run (its process stopped before it ended) from its last checkpoint. `weft resume RUN_ID
//! --continue [--step] [--set JSON]`: goes on from the breakpoint a run is paused at.

use weft_engine::{Continue, Decision, ResumeOptions};

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
        .map_err(|message| usage_error(format!("--decision: {message}; the run was not changed")))?
        .map(|decision| Decision {
            fields: args
                .fields
                .iter()
                .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
                .collect(),
            ..decision.by(crate::decider(args.by.as_deref()))
        });
    if !args.fields.is_empty() && args.decision.is_none() {
        return Err(usage_error(
            "--field answers an approval's form: give --decision too",
        ));
    }
    let set = args
        .set
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .map_err(|error| {
            usage_error(format!(
                "--set: not JSON ({error}); write the value as JSON, a text in quotes: '\"like this\"'; the run was not changed"
            ))
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
                if args.retry || args.go_on {
                    "continuing"
                } else {
                    "resuming"
                }
            ))
        ));
    }
    let engine = engine(store).ending_with_process();
    super::run::settle_timeouts(&engine).await;
    let live = Live::start(args.events);
    let options = ResumeOptions {
        on_event: Some(live.listener.clone()),
        cancel: live.cancel.clone(),
        ..ResumeOptions::default()
    };
    let outcome = match (args.retry, decision) {
        _ if args.go_on => {
            let how = Continue {
                step: args.step,
                set,
            };
            engine.continue_run(&run_id, how, options).await
        }
        (true, answer) => engine.retry(&run_id, answer, options).await,
        (false, Some(decision)) => engine.resume(&run_id, decision, options).await,
        (false, None) => {
            return Err(usage_error("give --decision, --continue or --retry"));
        }
    };
    live.end();
    report(&outcome.map_err(run_error)?, args.events, &db)
}
