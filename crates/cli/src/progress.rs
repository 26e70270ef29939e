//! The live progress printer: one line per thing worth seeing, on stderr, driven by the run's
//! events. On a terminal it also keeps a status line at the bottom (a spinner, the step in
//! flight, its time and the tokens streamed so far), redrawn in place with `\r`. Off a
//! terminal it prints plain lines only: no spinner, no `\r`, no ANSI codes.
//!
//! The engine calls the listener synchronously from its tasks, while it holds its event lock,
//! so [`Progress::handle`] only formats and writes a few lines; the status line is redrawn by
//! a small timer task ([`Progress::start_ticker`]), not by every streamed token.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use weft_event::{EventType, RunEvent};

use crate::output::{self, Style};

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// How often the status line is redrawn on a terminal.
const TICK: Duration = Duration::from_millis(100);

/// How long a step runs before the status line shows it.
const SHOW_AFTER: Duration = Duration::from_millis(200);

/// Characters of an output shown after a finished step.
const PREVIEW: usize = 80;

pub(crate) struct Progress {
    /// Whether stderr is a terminal (status line, `\r`).
    terminal: bool,
    style: Style,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Steps (and subagent calls) in flight, in the order they started.
    active: Vec<Active>,
    frame: usize,
    /// The status line is on screen (the cursor is at its end).
    status_shown: bool,
    /// The run has ended; nothing is redrawn any more.
    done: bool,
    /// MCP tool calls in flight: call id → `server/tool`.
    tool_calls: std::collections::HashMap<String, String>,
}

struct Active {
    node_id: String,
    started: Instant,
    /// `llm_delta` events received (about one token each) and their characters.
    tokens: u64,
    chars: u64,
}

impl Active {
    fn new(node_id: &str) -> Active {
        Active {
            node_id: node_id.to_string(),
            started: Instant::now(),
            tokens: 0,
            chars: 0,
        }
    }
}

impl Progress {
    /// A printer for this process's stderr: status line only on a terminal, colors only on a
    /// terminal without `NO_COLOR`.
    pub fn for_stderr() -> Arc<Progress> {
        Arc::new(Progress::new(
            std::io::stderr().is_terminal(),
            Style::stderr(),
        ))
    }

    fn new(terminal: bool, style: Style) -> Progress {
        Progress {
            terminal,
            style,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Shows one event.
    pub fn handle(&self, event: &RunEvent) {
        let mut state = self.lock();
        let lines = self.lines_for(&mut state, event);
        if event.kind == EventType::RunEnd {
            state.done = true;
        }
        if lines.is_empty() {
            return;
        }
        let mut text = self.clear_status(&mut state);
        text.push_str(&lines);
        text.push_str(&self.status_line(&mut state));
        output::err(&text);
    }

    /// Redraws the status line (terminal only): advances the spinner.
    pub fn tick(&self) {
        if !self.terminal {
            return;
        }
        let mut state = self.lock();
        if state.done {
            return;
        }
        state.frame = state.frame.wrapping_add(1);
        let mut text = self.clear_status(&mut state);
        text.push_str(&self.status_line(&mut state));
        if !text.is_empty() {
            output::err(&text);
        }
    }

    /// Prints a line of the command's own (`text` ends with a newline) without garbling the
    /// status line.
    pub fn message(&self, text: &str) {
        let mut state = self.lock();
        let mut out = self.clear_status(&mut state);
        out.push_str(text);
        out.push_str(&self.status_line(&mut state));
        output::err(&out);
    }

    /// Removes the status line for good (before the command prints its outcome).
    pub fn finish(&self) {
        let mut state = self.lock();
        state.done = true;
        let text = self.clear_status(&mut state);
        if !text.is_empty() {
            output::err(&text);
        }
    }

    /// On a terminal, a task that redraws the status line every [`TICK`] until aborted or the
    /// run ends. Must be called within a tokio runtime.
    pub fn start_ticker(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        if !self.terminal {
            return None;
        }
        let progress = Arc::clone(self);
        Some(tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                progress.tick();
                if progress.lock().done {
                    break;
                }
            }
        }))
    }

    /// Text that erases the status line, if it is shown.
    fn clear_status(&self, state: &mut State) -> String {
        if self.terminal && state.status_shown {
            state.status_shown = false;
            "\r\x1b[2K".to_string()
        } else {
            String::new()
        }
    }

    /// The status line (terminal only, while something is in flight), without a newline.
    fn status_line(&self, state: &mut State) -> String {
        if !self.terminal || state.done {
            return String::new();
        }
        // Steps that end quickly never get a status line (no flicker).
        let visible =
            |active: &&Active| active.tokens > 0 || active.started.elapsed() >= SHOW_AFTER;
        let Some(current) = state
            .active
            .iter()
            .rev()
            .find(|active| active.tokens > 0)
            .or_else(|| state.active.iter().rev().find(visible))
        else {
            return String::new();
        };
        let spinner = SPINNER[state.frame % SPINNER.len()];
        let mut line = format!(
            "{} {}  {}",
            self.style.cyan(&spinner.to_string()),
            output::one_line(&current.node_id, 30),
            output::duration(current.started.elapsed().as_secs_f64()),
        );
        if current.tokens > 0 {
            line.push_str(&format!(
                " · {} · {} chars",
                output::count(
                    usize::try_from(current.tokens).unwrap_or(usize::MAX),
                    "token"
                ),
                current.chars
            ));
        } else {
            line.push_str(" · waiting");
        }
        let others = state.active.len() - 1;
        if others > 0 {
            line.push_str(&format!(" (+{others} more)"));
        }
        state.status_shown = true;
        line
    }

    /// The lines (each ending with a newline) that show `event`, updating what is in flight.
    fn lines_for(&self, state: &mut State, event: &RunEvent) -> String {
        let style = self.style;
        let node = output::event_node(event);
        let node = node.as_str();
        match event.kind {
            EventType::RunStart => {
                format!("{}\n", style.dim(&format!("run {}", event.run_id)))
            }
            EventType::StepStart => {
                state.active.push(Active::new(node));
                let label = event.content.trim();
                if label.is_empty() || label == node {
                    format!("{} {}\n", style.cyan("▸"), style.bold(node))
                } else {
                    format!(
                        "{} {} ({})\n",
                        style.cyan("▸"),
                        style.bold(node),
                        output::one_line(label, 60)
                    )
                }
            }
            EventType::StepEnd => {
                let elapsed = take_active(state, node).map(|active| active.started.elapsed());
                let mut line = format!("{} {}", style.green("✓"), style.bold(node));
                if let Some(elapsed) = elapsed {
                    line.push_str(&format!("  {}", output::duration(elapsed.as_secs_f64())));
                }
                let preview = output::one_line(&event.content, PREVIEW);
                if !preview.is_empty() {
                    line.push_str(&format!("  {}", style.dim(&preview)));
                }
                line.push('\n');
                line
            }
            EventType::LogicCheck => {
                format!(
                    "  {} {node}: {}\n",
                    style.dim("◆"),
                    output::one_line(&event.content, 120)
                )
            }
            EventType::WaitInput => {
                let message = output::one_line(&event.content, 200);
                if message.starts_with("breakpoint ") {
                    // A breakpoint's message names its node and place.
                    format!("{} stopped at a {message}\n", style.yellow("⏸"))
                } else if message.is_empty() {
                    format!(
                        "{} {} waits for approval\n",
                        style.yellow("⏸"),
                        style.bold(node)
                    )
                } else {
                    format!(
                        "{} {} waits for approval: {message}\n",
                        style.yellow("⏸"),
                        style.bold(node)
                    )
                }
            }
            EventType::ApprovalReminder | EventType::ApprovalEscalated => {
                format!(
                    "  {} {node}: {}\n",
                    style.yellow("⏰"),
                    output::one_line(&event.content, 160)
                )
            }
            EventType::InputReceived => {
                let (decision, note) = decision_parts(&event.content);
                let mut line = format!("  {} {node}: {}", style.dim("→"), style.bold(&decision));
                if !note.is_empty() {
                    line.push_str(&format!(" ({})", output::one_line(&note, 80)));
                }
                line.push('\n');
                line
            }
            EventType::LlmDelta => {
                let index = match state
                    .active
                    .iter()
                    .rposition(|active| active.node_id == node)
                {
                    Some(index) => index,
                    None => {
                        state.active.push(Active::new(node));
                        state.active.len() - 1
                    }
                };
                if let Some(active) = state.active.get_mut(index) {
                    active.tokens += 1;
                    active.chars += u64::try_from(event.content.chars().count()).unwrap_or(0);
                }
                String::new()
            }
            // The step's end shows the answer; an `error` event follows a failed call.
            EventType::StartPrompt | EventType::LlmResponse | EventType::LlmError => String::new(),
            EventType::SubagentCallStart => {
                let call = SubagentCall::parse(&event.content, node);
                state.active.push(Active::new(&call.child));
                format!(
                    "  {} {} → {}: {}\n",
                    style.cyan("↳"),
                    call.parent,
                    style.bold(&call.child),
                    output::one_line(&call.task, PREVIEW)
                )
            }
            EventType::SubagentCallEnd => {
                let call = SubagentCall::parse(&event.content, node);
                let elapsed =
                    take_active(state, &call.child).map(|active| active.started.elapsed());
                let mut line = format!("  {} {} → {}", style.green("↲"), call.child, call.parent);
                if let Some(elapsed) = elapsed {
                    line.push_str(&format!("  {}", output::duration(elapsed.as_secs_f64())));
                }
                let preview = output::one_line(&call.output, PREVIEW);
                if !preview.is_empty() {
                    line.push_str(&format!("  {}", style.dim(&preview)));
                }
                line.push('\n');
                line
            }
            EventType::SubagentCallError => {
                let call = SubagentCall::parse(&event.content, node);
                take_active(state, &call.child);
                format!(
                    "  {} {} → {}: {}\n",
                    style.red("✗"),
                    call.child,
                    call.parent,
                    output::one_line(&call.error, 200)
                )
            }
            EventType::ToolCall => {
                let call: Value = serde_json::from_str(&event.content).unwrap_or(Value::Null);
                let named = format!(
                    "{}/{}",
                    output::value_text(&call["server"]),
                    output::value_text(&call["tool"])
                );
                state
                    .tool_calls
                    .insert(output::value_text(&call["callId"]), named.clone());
                format!(
                    "  {} {} → {} {}\n",
                    style.cyan("⚒"),
                    node,
                    style.bold(&named),
                    style.dim(&output::one_line(&call["arguments"].to_string(), PREVIEW))
                )
            }
            EventType::ToolResult | EventType::ToolError => {
                let result: Value = serde_json::from_str(&event.content).unwrap_or(Value::Null);
                let named = state
                    .tool_calls
                    .remove(&output::value_text(&result["callId"]))
                    .unwrap_or_else(|| {
                        format!(
                            "{}/{}",
                            output::value_text(&result["server"]),
                            output::value_text(&result["tool"])
                        )
                    });
                let took = result["durationMs"]
                    .as_f64()
                    .map(|ms| output::duration(ms / 1000.0))
                    .unwrap_or_default();
                let failed = event.kind == EventType::ToolError || result["isError"] == true;
                let text = if event.kind == EventType::ToolError {
                    output::value_text(&result["error"])
                } else {
                    output::value_text(&result["content"])
                };
                let (mark, text) = if failed {
                    (style.red("✗"), output::one_line(&text, 200))
                } else {
                    (
                        style.green("↲"),
                        style.dim(&output::one_line(&text, PREVIEW)),
                    )
                };
                format!("  {mark} {named} → {node}  {took}  {text}\n")
            }
            EventType::Error => {
                take_active(state, node);
                let message = output::one_line(&event.content, 400);
                if node.is_empty() {
                    format!("{} {message}\n", style.red("✗"))
                } else {
                    format!("{} {}: {message}\n", style.red("✗"), style.bold(node))
                }
            }
            EventType::RunEnd => {
                state.active.clear();
                String::new()
            }
        }
    }
}

/// Removes the most recent in-flight entry of `node_id`.
fn take_active(state: &mut State, node_id: &str) -> Option<Active> {
    let index = state
        .active
        .iter()
        .rposition(|active| active.node_id == node_id)?;
    Some(state.active.remove(index))
}

/// `approve`/`reject` and the note of an `input_received` event.
fn decision_parts(content: &str) -> (String, String) {
    let value: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    let decision = value
        .get("decision")
        .map_or_else(|| content.to_string(), output::value_text);
    let note = value
        .get("note")
        .map(output::value_text)
        .unwrap_or_default();
    (decision, note)
}

/// The content of a `subagent_call_*` event.
struct SubagentCall {
    parent: String,
    child: String,
    task: String,
    output: String,
    error: String,
}

impl SubagentCall {
    fn parse(content: &str, node: &str) -> SubagentCall {
        let value: Value = serde_json::from_str(content).unwrap_or(Value::Null);
        let field = |name: &str| value.get(name).map(output::value_text).unwrap_or_default();
        let parent = Some(field("parent"))
            .filter(|parent| !parent.is_empty())
            .unwrap_or_else(|| node.to_string());
        SubagentCall {
            parent,
            child: field("child"),
            task: field("task"),
            output: field("output"),
            error: field("error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventType, node: Option<&str>, content: &str) -> RunEvent {
        RunEvent {
            seq: 1,
            run_id: "run-1".into(),
            ts: "2024-05-01T10:00:00.000Z".into(),
            kind,
            node_id: node.map(Into::into),
            content: content.into(),
            scope: None,
            item: None,
            from: None,
            usage: None,
            model: None,
        }
    }

    fn plain() -> Progress {
        Progress::new(false, Style { color: false })
    }

    fn show(progress: &Progress, events: &[RunEvent]) -> String {
        let mut state = progress.lock();
        let mut text = String::new();
        for event in events {
            text.push_str(&progress.lines_for(&mut state, event));
            text.push_str(&progress.status_line(&mut state));
        }
        text
    }

    #[test]
    fn plain_lines_for_a_step() {
        let text = show(
            &plain(),
            &[
                event(EventType::StepStart, Some("classify"), "Classifier"),
                event(EventType::LlmDelta, Some("classify"), "ref"),
                event(EventType::LlmDelta, Some("classify"), "und"),
                event(EventType::StepEnd, Some("classify"), "refund\nplease"),
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "▸ classify (Classifier)");
        assert!(
            lines[1].starts_with("✓ classify  0.0 s  refund ⏎ please"),
            "{text}"
        );
        assert_eq!(lines.len(), 2);
        assert!(!text.contains('\r') && !text.contains('\x1b'));
    }

    #[test]
    fn approvals_subagents_and_errors() {
        let text = show(
            &plain(),
            &[
                event(EventType::WaitInput, Some("review"), "Ship it?"),
                event(
                    EventType::InputReceived,
                    Some("review"),
                    r#"{"decision":"reject","note":"too long"}"#,
                ),
                event(
                    EventType::SubagentCallStart,
                    Some("lead"),
                    r#"{"parent":"lead","child":"researcher","task":"find facts"}"#,
                ),
                event(
                    EventType::Error,
                    Some("lead"),
                    "openai answered HTTP 500: down",
                ),
            ],
        );
        assert!(
            text.contains("⏸ review waits for approval: Ship it?"),
            "{text}"
        );
        assert!(text.contains("  → review: reject (too long)"), "{text}");
        assert!(text.contains("  ↳ lead → researcher: find facts"), "{text}");
        assert!(
            text.contains("✗ lead: openai answered HTTP 500: down"),
            "{text}"
        );
    }

    #[test]
    fn terminal_status_line_counts_tokens() {
        let progress = Progress::new(true, Style { color: false });
        let text = show(
            &progress,
            &[
                event(EventType::StepStart, Some("writer"), "writer"),
                event(EventType::LlmDelta, Some("writer"), "Hello"),
                event(EventType::LlmDelta, Some("writer"), " world"),
            ],
        );
        assert!(text.ends_with("· 2 tokens · 11 chars"), "{text}");
        let mut state = progress.lock();
        assert_eq!(progress.clear_status(&mut state), "\r\x1b[2K");
    }
}
