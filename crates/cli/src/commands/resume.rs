//! `weft resume RUN_ID --decision approve|reject`: continues a paused run, possibly paused by
//! another process that has since exited. `weft resume RUN_ID --retry`: continues an interrupted
//! run (its process stopped before it ended) from its last checkpoint. `weft resume RUN_ID
//! --continue [--step] [--set JSON]`: goes on from the breakpoint a run is paused at.

use weft_api::{ApprovalProgress, Channel, Decided, ResumeOptions};
use weft_engine::Continue;
use weft_nodes::Decision;

use super::run::{Live, report};
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
            ..decision
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
    let location = super::location(&args.store)?;
    let weft = super::open(location.clone())?.ending_with_process();
    let run_id = args.run_id.trim();
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
    super::run::settle_deadlines(&weft).await;
    let live = Live::start(args.events);
    let options = ResumeOptions {
        on_event: Some(live.listener.clone()),
        cancel: live.cancel.clone(),
        traceparent: super::traceparent(),
        ..ResumeOptions::default()
    };
    let by = weft_api::decider(args.by.as_deref());
    let going = match (args.retry, decision) {
        _ if args.go_on => {
            let how = Continue {
                step: args.step,
                set,
            };
            weft.go_on(run_id, how, options).await
        }
        (true, answer) => weft.retry(run_id, answer, by, options).await,
        (false, Some(decision)) => {
            match weft
                .decide(run_id, decision, by, Channel::Cli, options)
                .await
            {
                Ok(Decided::GoingOn(handle)) => Ok(handle),
                Ok(Decided::Counted {
                    run_id,
                    node_id,
                    progress,
                }) => {
                    live.end();
                    return counted(&run_id, &node_id, &progress);
                }
                Err(error) => Err(error),
            }
        }
        (false, None) => {
            return Err(usage_error("give --decision, --continue or --retry"));
        }
    };
    let outcome = match going {
        Ok(handle) => handle.outcome().await.map_err(weft_api::Error::from),
        Err(error) => Err(error),
    };
    live.end();
    report(&outcome.map_err(super::api_error)?, args.events, &location)
}

/// An approval that needs more people: the decision is kept, the run still waits (exit 3).
fn counted(run_id: &str, node_id: &str, progress: &ApprovalProgress) -> anyhow::Result<Exit> {
    let style = Style::stderr();
    let mut text = format!(
        "{} run {run_id} waits at {node_id}: approved by {} ({} of {} needed)\n",
        style.yellow("kept:"),
        progress.approved_by.join(", "),
        progress.approved_by.len(),
        progress.required,
    );
    text.push_str(&format!(
        "still needed: {} more{}\n",
        progress.still_needed,
        if progress.may_still_approve.is_empty() {
            String::new()
        } else {
            format!(", from {}", progress.may_still_approve.join(", "))
        }
    ));
    output::err(&text);
    Ok(Exit::Paused)
}
