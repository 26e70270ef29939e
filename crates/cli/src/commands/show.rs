//! `weft show RUN_ID`: one run's summary, node outputs and event trace.

use weft_api::StoreLocation;
use weft_api::views::{RunDetail, run_detail};
use weft_event::{EventType, RunEvent};
use weft_history::compare::NodeStatus;
use weft_history::cost::{PRICES_ENV, RunCost, usd_text};
use weft_history::visits::NodeVisit;
use weft_store::{NodeOutputRecord, RunRecord};

use crate::output::{self, Style};
use crate::{Exit, ShowArgs};

/// Characters of an output or event content shown per line.
const CELL: usize = 200;

pub(crate) fn show(args: &ShowArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    let location = super::location(&args.store)?;
    let weft = super::open(location.clone())?;
    // A paused run past its deadline is not shown as waiting: it goes on first.
    super::run::settle_deadlines_now(&weft)?;
    let detail = run_detail(weft.store(), &args.run_id, &prices, weft.people())
        .map_err(|error| super::api_error(error.into()))?;
    if let Some(node) = &args.node {
        return show_visits(&detail, node, args.json);
    }
    if args.json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&detail)?))?;
        return Ok(Exit::Success);
    }
    let style = Style::stdout();
    let RunDetail {
        run,
        cost,
        node_outputs,
        events,
        ..
    } = &detail;
    let mut text = summary(run, detail.waiting.as_ref(), cost, &location, style);
    text.push_str(&decisions(&detail, style));
    text.push_str(&self::node_outputs(node_outputs, cost, style));
    text.push_str(&llm_calls(cost, style));
    text.push_str(&tool_calls(events, style));
    text.push_str(&trace(events, args.deltas, style));
    output::out(&text)?;
    Ok(Exit::Success)
}

/// Every visit of `node` (a node of the run's flow, or a nested step's key such as
/// `research/draft`): the steps it made and those made inside it, each with its input, output,
/// time, tokens and cost.
fn show_visits(detail: &RunDetail, node: &str, json: bool) -> anyhow::Result<Exit> {
    let (record, visits) = (&detail.run, &detail.visits);
    let chosen: Vec<&NodeVisit> = visits
        .iter()
        .filter(|visit| visit.node_id == node || visit.key == node)
        .collect();
    let known = visits
        .iter()
        .any(|visit| visit.node_id == node || visit.key == node)
        || detail.flow.node(node).is_some();
    if !known {
        output::err(&format!(
            "error: run {} has no node `{node}` (weft show {} lists its nodes)\n",
            record.summary.id, record.summary.id
        ));
        return Ok(Exit::Invalid);
    }
    if json {
        output::out(&format!("{}\n", serde_json::to_string_pretty(&chosen)?))?;
        return Ok(Exit::Success);
    }
    let style = Style::stdout();
    let mut text = style.bold(&format!(
        "{} of `{node}` in run {}",
        output::count(chosen.len(), "visit"),
        record.summary.id
    ));
    text.push('\n');
    if chosen.is_empty() {
        text.push_str("  (it did not run)\n");
    }
    for visit in chosen {
        let mut heading = format!("{} #{}", visit.key, visit.visit);
        if let Some(outer) = visit.outer_visit {
            heading.push_str(&format!(" (in visit {outer} of {})", visit.node_id));
        }
        let status = match visit.status {
            NodeStatus::Failed => style.red("failed"),
            NodeStatus::Waiting => style.yellow("waiting"),
            status => serde_json::to_value(status)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_default()
                .replace('_', " "),
        };
        let mut facts = vec![status, output::time_of_day(&visit.started_at)];
        if let Some(ms) = visit.duration_ms {
            facts.push(output::duration(ms as f64 / 1000.0));
        }
        if visit.cost.calls > 0 {
            facts.push(format!(
                "{}, tokens {}, {}",
                output::count(visit.cost.calls as usize, "LLM call"),
                output::tokens(&visit.cost.usage()),
                visit.cost.text()
            ));
        }
        text.push_str(&format!(
            "\n  {}  {}\n",
            style.bold(&heading),
            facts.join("  ")
        ));
        let shown = |value: &Option<serde_json::Value>| match value {
            Some(value) => output::one_line(&output::value_text(value), CELL),
            None => style.dim("(not known)"),
        };
        text.push_str(&format!("    input   {}\n", shown(&visit.input)));
        if let Some(error) = &visit.error {
            text.push_str(&format!(
                "    error   {}\n",
                style.red(&output::one_line(error, 400))
            ));
        } else {
            text.push_str(&format!("    output  {}\n", shown(&visit.output)));
        }
        for call in &visit.tool_calls {
            let took = call
                .duration_ms
                .map(|ms| output::duration(ms as f64 / 1000.0))
                .unwrap_or_default();
            let ended = match (&call.error, &call.result) {
                (Some(error), _) => style.red(&format!("failed: {}", output::one_line(error, 80))),
                (None, Some(result)) if call.is_error => {
                    style.red(&format!("error: {}", output::one_line(result, 80)))
                }
                (None, Some(result)) => output::one_line(result, 80),
                (None, None) => style.dim("(no result)"),
            };
            text.push_str(&format!(
                "    tool    {}/{} {}  {took}  {ended}\n",
                call.server,
                call.tool,
                output::one_line(&call.arguments.to_string(), 60)
            ));
        }
    }
    output::out(&text)?;
    Ok(Exit::Success)
}

/// Who decided the run's approvals (every decision the store's chain keeps for it), and for
/// an approval waiting on several people, who is still needed.
fn decisions(detail: &RunDetail, style: Style) -> String {
    let mut text = String::new();
    if let Some(progress) = &detail.approval {
        text.push_str(&format!(
            "{}  {} of {} ({}); still needed: {} more{}\n",
            style.bold("approvals"),
            progress.approved_by.len(),
            progress.required,
            if progress.approved_by.is_empty() {
                "nobody yet".to_string()
            } else {
                format!("approved by {}", progress.approved_by.join(", "))
            },
            progress.still_needed,
            if progress.may_still_approve.is_empty() {
                String::new()
            } else {
                format!(", from {}", progress.may_still_approve.join(", "))
            }
        ));
        for (what, at) in [
            ("reminded", &progress.reminded_at),
            ("escalated", &progress.escalated_at),
        ] {
            if let Some(at) = at {
                text.push_str(&format!(
                    "{}  {}\n",
                    style.bold(what),
                    output::date_time(at)
                ));
            }
        }
    }
    if detail.decisions.is_empty() {
        return text;
    }
    text.push_str(&format!("\n{}\n", style.bold("decisions")));
    for decision in &detail.decisions {
        let note = if decision.note.is_empty() {
            String::new()
        } else {
            format!(": {}", output::one_line(&decision.note, CELL))
        };
        text.push_str(&format!(
            "  {}  {}  {} by {} ({}){note}\n",
            output::date_time(&decision.at),
            decision.node_id,
            decision.decision,
            decision.by,
            decision.channel
        ));
    }
    text
}

/// The run's identity, status, times, cost, input, result or error, and what it waits for.
fn summary(
    record: &RunRecord,
    waiting: Option<&weft_engine::Waiting>,
    cost: &RunCost,
    store: &StoreLocation,
    style: Style,
) -> String {
    let run = &record.summary;
    let mut rows: Vec<(&str, String)> = vec![
        ("run", run.id.clone()),
        ("status", style.status(run.status)),
    ];
    let name = if run.flow_name.is_empty() {
        "(unnamed)"
    } else {
        run.flow_name.as_str()
    };
    rows.push((
        "flow",
        match &run.flow_path {
            Some(path) => format!("{name}  {}", style.dim(path)),
            None => name.to_string(),
        },
    ));
    rows.push((
        "version",
        match &record.flow_version {
            Some(hash) => weft_flow::short_hash(hash).to_string(),
            // Said, not guessed: its flow is kept, but under no version.
            None => style.dim("none kept (run by a Weft from before flow versions)"),
        },
    ));
    rows.push(("started", output::date_time(&run.started_at)));
    if let Some(trigger) = &run.trigger {
        rows.push(("by", trigger.text()));
    }
    if record.usage.input_tokens + record.usage.output_tokens > 0 {
        rows.push(("tokens", output::tokens(&record.usage)));
    }
    if cost.total.calls > 0 {
        let mut said = cost.total.text();
        if !cost.total.unpriced_models.is_empty() {
            let models: Vec<&str> = cost
                .total
                .unpriced_models
                .iter()
                .map(String::as_str)
                .collect();
            said.push_str(&style.dim(&format!(
                "  (no price for {}; {PRICES_ENV} can add one)",
                models.join(", ")
            )));
        }
        rows.push(("cost", said));
    }
    if let Some(ended) = &run.ended_at {
        let took = output::seconds_between(&run.started_at, ended)
            .map(|seconds| format!("  ({})", output::duration(seconds)))
            .unwrap_or_default();
        rows.push(("ended", format!("{}{took}", output::date_time(ended))));
    }
    rows.push((
        "input",
        output::one_line(&output::value_text(&record.input), CELL),
    ));
    if let Some(result) = &record.result {
        rows.push((
            "result",
            output::one_line(&output::value_text(result), CELL),
        ));
    }
    if let Some(error) = &record.error {
        rows.push(("error", style.red(&output::one_line(error, 400))));
    }
    if let Some(waiting) = waiting {
        let form: Vec<String> = waiting
            .fields
            .iter()
            .map(|field| {
                let kind = serde_json::to_value(field.kind)
                    .ok()
                    .and_then(|kind| kind.as_str().map(str::to_string))
                    .unwrap_or_default();
                let mut said = format!("{} ({kind}", field.name);
                if !field.options.is_empty() {
                    said.push_str(&format!(": {}", field.options.join(" | ")));
                }
                if field.required {
                    said.push_str(", required");
                }
                said.push(')');
                said
            })
            .collect();
        let deadline = waiting.deadline.clone();
        let message = output::one_line(&waiting.message, CELL);
        let waiting_text = if message.is_empty() {
            waiting.node_id.clone()
        } else {
            format!("{}: {message}", waiting.node_id)
        };
        rows.push(("waiting", style.yellow(&waiting_text)));
        if let Some(deadline) = deadline {
            rows.push((
                "timeout",
                format!(
                    "{} (then it goes on along `timeout`, or fails without that edge)",
                    output::date_time(&deadline)
                ),
            ));
        }
        if !form.is_empty() {
            rows.push(("form", form.join(", ")));
        }
        let fields: String = waiting
            .fields
            .iter()
            .map(|field| format!(" --field {}=…", field.name))
            .collect();
        let answer = if waiting.breakpoint.is_some() {
            " --continue".to_string()
        } else {
            format!(" --decision approve|reject{fields}")
        };
        rows.push((
            "resume",
            format!("{}{answer}", super::run::resume_command(&run.id, store)),
        ));
    }
    let mut text = String::new();
    for (key, value) in rows {
        text.push_str(&format!("{}  {value}\n", style.bold(&output::pad(key, 7))));
    }
    text
}

/// One line per node: id, visits, tokens, cost and the latest output (with the decision at
/// approvals).
fn node_outputs(outputs: &[NodeOutputRecord], cost: &RunCost, style: Style) -> String {
    let mut text = format!("\n{}\n", style.bold("node outputs"));
    if outputs.is_empty() {
        text.push_str("  (none)\n");
        return text;
    }
    let width = outputs
        .iter()
        .map(|record| record.node_id.chars().count())
        .max()
        .unwrap_or(0)
        .max("NODE".len());
    let costs: Vec<String> = outputs
        .iter()
        .map(|record| cost.node(&record.node_id).text())
        .collect();
    let cost_width = costs
        .iter()
        .map(|cost| cost.chars().count())
        .max()
        .unwrap_or(0)
        .max("COST".len());
    text.push_str(&style.dim(&format!(
        "  {}  VISITS  TOKENS (IN/OUT)  {}  OUTPUT",
        output::pad("NODE", width),
        output::pad("COST", cost_width)
    )));
    text.push('\n');
    for (record, node_cost) in outputs.iter().zip(costs) {
        let mut shown = output::one_line(&output::value_text(&record.output), CELL);
        if let Some(approval) = &record.approval {
            let decision = approval
                .get("decision")
                .map(output::value_text)
                .unwrap_or_default();
            let note = approval
                .get("note")
                .map(output::value_text)
                .unwrap_or_default();
            let mut said = format!("[{decision}");
            if let Some(by) = approval.get("by").and_then(|by| by.as_str()) {
                said.push_str(&format!(" by {by}"));
            }
            if let Some(at) = approval.get("at").and_then(|at| at.as_str()) {
                said.push_str(&format!(" at {}", output::date_time(at)));
            }
            if !note.is_empty() {
                said.push_str(&format!(": {}", output::one_line(&note, 80)));
            }
            said.push(']');
            shown = if shown.is_empty() {
                said
            } else {
                format!("{said} {shown}")
            };
        }
        let tokens = if record.usage.input_tokens + record.usage.output_tokens > 0 {
            format!(
                "{}/{}",
                record.usage.input_tokens, record.usage.output_tokens
            )
        } else {
            "-".to_string()
        };
        text.push_str(&format!(
            "  {}  {}  {}  {}  {shown}\n",
            output::pad(&record.node_id, width),
            output::pad(&record.visits.to_string(), 6),
            output::pad(&tokens, 15),
            output::pad(&node_cost, cost_width)
        ));
    }
    text
}

/// One line per LLM call: node, visit, call number, model, tokens and cost (none without calls).
/// A visit's LLM calls are numbered 1, 2, ... among themselves (the store numbers them with the
/// visit's tool calls).
fn llm_calls(cost: &RunCost, style: Style) -> String {
    if cost.calls.is_empty() {
        return String::new();
    }
    let mut previous: Option<(&str, u64)> = None;
    let mut number = 0;
    let rows: Vec<[String; 6]> = cost
        .calls
        .iter()
        .map(|call| {
            let visit = (call.node_key.as_str(), call.visit);
            number = if previous == Some(visit) {
                number + 1
            } else {
                1
            };
            previous = Some(visit);
            [
                call.node_key.clone(),
                call.visit.to_string(),
                number.to_string(),
                call.model
                    .clone()
                    .unwrap_or_else(|| "(not recorded)".into()),
                format!("{}/{}", call.usage.input_tokens, call.usage.output_tokens),
                call.usd.map_or_else(|| "no price".into(), usd_text),
            ]
        })
        .collect();
    let header = ["NODE", "VISIT", "CALL", "MODEL", "TOKENS (IN/OUT)", "COST"];
    table("llm calls", header, rows, style)
}

/// A section: its title, then `rows` in columns under `header`.
fn table<const N: usize>(
    title: &str,
    header: [&str; N],
    rows: Vec<[String; N]>,
    style: Style,
) -> String {
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [String; N]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| output::pad(cell, width))
            .collect();
        format!("  {}", padded.join("  ").trim_end())
    };
    let mut text = format!("\n{}\n", style.bold(title));
    text.push_str(&style.dim(&line(header.map(str::to_string))));
    text.push('\n');
    for row in rows {
        text.push_str(&line(row));
        text.push('\n');
    }
    text
}

/// One line per MCP tool call, from the run's events: node, tool, time and how it ended
/// (none without calls). A tool call costs no tokens.
fn tool_calls(events: &[RunEvent], style: Style) -> String {
    let parse = |event: &RunEvent| -> serde_json::Value {
        serde_json::from_str(&event.content).unwrap_or_default()
    };
    let mut rows: Vec<[String; 4]> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        if event.kind != EventType::ToolCall {
            continue;
        }
        let call = parse(event);
        let call_id = &call["callId"];
        let ended = events[index + 1..].iter().find(|later| {
            matches!(later.kind, EventType::ToolResult | EventType::ToolError)
                && later.node_id == event.node_id
                && later.scope == event.scope
                && parse(later)["callId"] == *call_id
        });
        let (took, how) = match ended {
            Some(ended) => {
                let result = parse(ended);
                let took = result["durationMs"]
                    .as_f64()
                    .map(|ms| output::duration(ms / 1000.0))
                    .unwrap_or_default();
                let how = if ended.kind == EventType::ToolError {
                    format!(
                        "failed: {}",
                        output::one_line(&output::value_text(&result["error"]), 60)
                    )
                } else if result["isError"] == true {
                    format!(
                        "error result: {}",
                        output::one_line(&output::value_text(&result["content"]), 50)
                    )
                } else {
                    "ok".to_string()
                };
                (took, how)
            }
            None => (String::new(), "no result".to_string()),
        };
        rows.push([
            output::event_node(event),
            format!(
                "{}/{}",
                output::value_text(&call["server"]),
                output::value_text(&call["tool"])
            ),
            took,
            how,
        ]);
    }
    if rows.is_empty() {
        return String::new();
    }
    table(
        "tool calls",
        ["NODE", "TOOL", "TIME", "RESULT"],
        rows,
        style,
    )
}

/// The event trace: seq, time, type, node and content, one line each; `llm_delta` events only
/// with `deltas` (their count is said otherwise).
fn trace(events: &[RunEvent], deltas: bool, style: Style) -> String {
    let hidden = if deltas {
        0
    } else {
        events
            .iter()
            .filter(|event| event.kind == EventType::LlmDelta)
            .count()
    };
    let mut heading = format!("events ({}", events.len());
    if hidden > 0 {
        heading.push_str(&format!(
            "; {} hidden, --deltas shows them",
            output::count(hidden, "llm_delta event")
        ));
    }
    heading.push(')');
    let mut text = format!("\n{}\n", style.bold(&heading));
    let shown: Vec<&RunEvent> = events
        .iter()
        .filter(|event| deltas || event.kind != EventType::LlmDelta)
        .collect();
    let seq_width = shown
        .iter()
        .map(|event| event.seq.to_string().len())
        .max()
        .unwrap_or(0)
        .max(3);
    let node_width = shown
        .iter()
        .map(|event| output::event_node(event).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let type_width = shown
        .iter()
        .map(|event| event.kind.as_str().len())
        .max()
        .unwrap_or(0)
        .max(4);
    text.push_str(&style.dim(&format!(
        "  {}  {}  {}  {}  CONTENT",
        output::pad("SEQ", seq_width),
        output::pad("TIME", 12),
        output::pad("TYPE", type_width),
        output::pad("NODE", node_width)
    )));
    text.push('\n');
    for event in shown {
        let kind = output::pad(event.kind.as_str(), type_width);
        let kind = match event.kind {
            EventType::Error
            | EventType::LlmError
            | EventType::SubagentCallError
            | EventType::ToolError => style.red(&kind),
            EventType::WaitInput => style.yellow(&kind),
            _ => kind,
        };
        let line = format!(
            "  {}  {}  {kind}  {}  {}",
            output::pad(&event.seq.to_string(), seq_width),
            output::pad(&output::time_of_day(&event.ts), 12),
            output::pad(&output::event_node(event), node_width),
            output::one_line(&event.content, CELL)
        );
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}
