//! `weft runs`: the most recent runs, newest first.

use weft_engine::RunStatus;
use weft_engine::cost::{Cost, run_total};
use weft_engine::store::RunSummary;

use crate::output::{self, Style};
use crate::{Exit, RunsArgs};

/// A run as `weft runs` lists it: its summary and what it cost.
struct Listed {
    summary: RunSummary,
    cost: Cost,
}

pub(crate) fn runs(args: &RunsArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    let db = super::db_path(&args.store)?;
    let store = super::open_store(&db)?;
    let summaries = store.list_runs(args.limit).map_err(super::store_error)?;
    let mut runs = Vec::with_capacity(summaries.len());
    for summary in summaries {
        let cost = run_total(&store, &summary.id, &prices).map_err(super::store_error)?;
        runs.push(Listed { summary, cost });
    }
    if args.json {
        let listed = weft_engine::history::listed_runs(&store, args.limit, &prices)
            .map_err(super::store_error)?;
        output::out(&format!("{}\n", serde_json::to_string_pretty(&listed)?))?;
    } else if runs.is_empty() {
        output::err(&format!(
            "no runs in {}\n",
            weft_engine::shown_location(&db.to_string_lossy())
        ));
    } else {
        output::out(&table(&runs, Style::stdout()))?;
    }
    Ok(Exit::Success)
}

/// The runs as an aligned table with a header.
fn table(runs: &[Listed], style: Style) -> String {
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|Listed { summary: run, cost }| {
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
                cost.text(),
                took(run),
            ]
        })
        .collect();
    let header = ["ID", "STATUS", "FLOW", "STARTED", "COST", "TOOK"];
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let line = |cells: [String; 6], status: Option<RunStatus>| {
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

    fn summary(id: &str, status: RunStatus, ended: Option<&str>, waiting: Option<&str>) -> Listed {
        Listed {
            summary: RunSummary {
                id: id.into(),
                flow_name: "Triage".into(),
                flow_path: None,
                status,
                started_at: "2024-05-01T10:00:00.000Z".into(),
                ended_at: ended.map(str::to_string),
                updated_at: "2024-05-01T10:00:00.000Z".into(),
                waiting_node_id: waiting.map(str::to_string),
            },
            cost: Cost::default(),
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
        assert!(lines[2].ends_with("  waiting at review"), "{text}");
    }
}
