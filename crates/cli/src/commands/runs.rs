//! `weft runs`: the most recent runs, newest first.

use weft_api::views::{RunListing, run_listings};
use weft_event::RunStatus;
use weft_store::RunSummary;

use crate::output::{self, Style};
use crate::{Exit, RunsArgs};

pub(crate) fn runs(args: &RunsArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    let location = super::location(&args.store)?;
    let weft = super::open(location.clone())?;
    // A paused run past its deadline is not listed as waiting: it goes on first.
    super::run::settle_deadlines_now(&weft)?;
    let runs = run_listings(weft.store(), args.limit, &prices)
        .map_err(|error| super::api_error(error.into()))?;
    if args.json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&runs)?))?;
    } else if runs.is_empty() {
        output::err(&format!("no runs in {location}\n"));
    } else {
        output::out(&table(&runs, Style::stdout()))?;
    }
    Ok(Exit::Success)
}

/// The runs as an aligned table with a header.
fn table(runs: &[RunListing], style: Style) -> String {
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(
            |RunListing {
                 summary: run, cost, ..
             }| {
                [
                    run.id.clone(),
                    run.status.as_str().to_string(),
                    output::one_line(
                        if run.flow_name.is_empty() {
                            "(unnamed)"
                        } else {
                            &run.flow_name
                        },
                        40,
                    ),
                    output::date_time(&run.started_at),
                    run.trigger
                        .as_ref()
                        .map(|trigger| match trigger.kind {
                            // The occurrence's time is in `weft show`; the table stays narrow.
                            weft_store::TriggerKind::Schedule => "schedule".to_string(),
                            _ => trigger.text(),
                        })
                        .unwrap_or_else(|| "—".into()),
                    cost.text(),
                    took(run),
                ]
            },
        )
        .collect();
    let header = ["ID", "STATUS", "FLOW", "STARTED", "BY", "COST", "TOOK"];
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let line = |cells: [String; 7], status: Option<RunStatus>| {
        let mut line = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            let padded = if index + 1 == cells.len() {
                cell.clone()
            } else {
                output::pad(cell, width)
            };
            match (index, status) {
                (1, Some(status)) => {
                    // Pad first, then color, so ANSI codes do not upset the alignment.
                    let padding = " ".repeat(width.saturating_sub(cell.chars().count()));
                    line.push_str(&format!("{}{padding}", style.status(status)));
                }
                _ => line.push_str(&padded),
            }
            if index + 1 < cells.len() {
                line.push_str("  ");
            }
        }
        format!("{}\n", line.trim_end())
    };
    text.push_str(&style.bold(line(header.map(str::to_string), None).trim_end()));
    text.push('\n');
    for (row, run) in rows.into_iter().zip(runs) {
        text.push_str(&line(row, Some(run.summary.status)));
    }
    text
}

/// How long the run took, `waiting at <node>` for a paused one, `running` for a running one.
fn took(run: &RunSummary) -> String {
    match (run.status, &run.ended_at) {
        (RunStatus::Paused, _) => format!(
            "waiting at {}",
            run.waiting_node_id.as_deref().unwrap_or("?")
        ),
        (RunStatus::Interrupted, _) => "stopped; continue with resume --retry".to_string(),
        (_, Some(ended)) => output::seconds_between(&run.started_at, ended)
            .map_or_else(String::new, output::duration),
        (_, None) => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_history::cost::Cost;

    fn summary(
        id: &str,
        status: RunStatus,
        ended: Option<&str>,
        waiting: Option<&str>,
    ) -> RunListing {
        RunListing {
            summary: RunSummary {
                id: id.into(),
                flow_name: "Triage".into(),
                flow_path: None,
                status,
                started_at: "2024-05-01T10:00:00.000Z".into(),
                ended_at: ended.map(str::to_string),
                updated_at: "2024-05-01T10:00:00.000Z".into(),
                waiting_node_id: waiting.map(str::to_string),
                trigger: Some(weft_store::Trigger::of(weft_store::TriggerKind::Api)),
            },
            cost: Cost::default(),
            server: None,
        }
    }

    #[test]
    fn table_aligns_and_says_what_waits() {
        let text = table(
            &[
                summary(
                    "run-a",
                    RunStatus::Completed,
                    Some("2024-05-01T10:00:02.500Z"),
                    None,
                ),
                summary("run-bb", RunStatus::Paused, None, Some("review")),
            ],
            Style { color: false },
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("ID      STATUS     FLOW    STARTED") && lines[0].contains("COST"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("run-a   completed  Triage  "),
            "{text}"
        );
        assert!(lines[1].ends_with("  2.5 s"), "{text}");
        assert!(lines[1].contains("  api  "), "the trigger: {text}");
        assert!(lines[2].ends_with("  waiting at review"), "{text}");
    }
}
