//! `weft audit [--run ID] [--json] [--verify]` (SPEC §16): every approval decision the run
//! store keeps, in the order of its hash chain: who decided, when, through which channel, the
//! form's answers and the edit made to a draft. `--verify` walks the chain and names the first
//! decision altered or removed.

use weft_store::{ChainCheck, StoredDecision};

use crate::output::{self, Style};
use crate::{AuditArgs, Exit};

/// Notes and answers are cut to this many characters a line.
const CELL: usize = 120;

pub(crate) fn audit(args: &AuditArgs) -> anyhow::Result<Exit> {
    let location = super::location(&args.store)?;
    let weft = super::open(location.clone())?;
    let store = weft.store();
    if args.verify {
        let check = store
            .verify_decisions()
            .map_err(|error| super::api_error(error.into()))?;
        return verified(&check, &location.shown());
    }
    let run = args
        .run
        .as_deref()
        .map(|run| store.resolve_run_id(run.trim()))
        .transpose()
        .map_err(|error| super::api_error(error.into()))?;
    let decisions = store
        .decisions(run.as_deref())
        .map_err(|error| super::api_error(error.into()))?;
    if args.json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&decisions)?))?;
        return Ok(Exit::Success);
    }
    if decisions.is_empty() {
        output::out(&match &run {
            Some(run) => format!("no decisions kept for run {run}\n"),
            None => format!("no decisions kept in {}\n", location.shown()),
        })?;
        return Ok(Exit::Success);
    }
    let style = Style::stdout();
    let mut text = String::new();
    for decision in &decisions {
        text.push_str(&line(decision, style));
    }
    output::out(&text)?;
    Ok(Exit::Success)
}

/// `#3  2026-11-28 08:01:02  run 6c4ba313 review  approve by grace (api)  3f2a9c1d0b4e`, then
/// the note, the answers and the draft's edit indented below it.
fn line(decision: &StoredDecision, style: Style) -> String {
    let run = decision.run_id.get(..8).unwrap_or(&decision.run_id);
    let choice = match decision.decision.as_str() {
        "approve" => style.green(&decision.decision),
        "reject" => style.red(&decision.decision),
        other => style.yellow(other),
    };
    let mut text = format!(
        "#{}  {}  run {run} {}  {choice} by {} ({})  {}\n",
        decision.seq,
        output::date_time(&decision.at),
        decision.node_id,
        style.bold(&decision.by),
        decision.channel,
        style.dim(decision.hash.get(..12).unwrap_or(&decision.hash)),
    );
    if !decision.note.is_empty() {
        text.push_str(&format!(
            "    note: {}\n",
            output::one_line(&decision.note, CELL)
        ));
    }
    if let Some(fields) = decision
        .fields
        .as_object()
        .filter(|fields| !fields.is_empty())
    {
        for (name, answer) in fields {
            text.push_str(&format!(
                "    {name}: {}\n",
                output::one_line(&output::value_text(answer), CELL)
            ));
        }
    }
    if let Some(edit) = &decision.draft_edit {
        let side = |key: &str| {
            output::one_line(
                &edit.get(key).map(output::value_text).unwrap_or_default(),
                CELL,
            )
        };
        text.push_str(&format!(
            "    draft edited: {} → {}\n",
            side("before"),
            side("after")
        ));
    }
    text
}

/// What `--verify` found: intact (exit 0), or the first decision altered or removed (exit 1).
fn verified(check: &ChainCheck, store: &str) -> anyhow::Result<Exit> {
    let style = Style::stdout();
    match check {
        ChainCheck::Intact { count } => {
            output::out(&format!(
                "{} {} in {store}: the chain is intact\n",
                style.green("✓"),
                output::count(*count as usize, "decision")
            ))?;
            Ok(Exit::Success)
        }
        ChainCheck::Altered { seq, run_id, by } => {
            output::out(&format!(
                "{} decision #{seq} (run {run_id}, by {by}) was altered: it is not as it was kept\n",
                style.red_bold("✗"),
            ))?;
            Ok(Exit::Failure)
        }
        ChainCheck::Removed { seq } => {
            output::out(&format!(
                "{} decision #{seq} was removed from the chain\n",
                style.red_bold("✗"),
            ))?;
            Ok(Exit::Failure)
        }
    }
}
