//! `weft run FLOW`: validates and runs a flow. Also what `weft resume` shares with it: the live
//! session (event listener, Ctrl-C and SIGTERM handling) and the report of a run's outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weft_api::{RunFrom, StartRequest, StoreLocation, Weft, check_start};
use weft_engine::RunOutcome;
use weft_engine::pins::{Pins, load_pins, pins_path};
use weft_event::{EventListener, EventSink, RunEvent, RunStatus};
use weft_nodes::{CheckedFlow, check_for_run};
use weft_providers::ProviderSettings;

use super::validate::print_problems_to_stderr;
use crate::output::{self, Style};
use crate::progress::Progress;
use crate::{Exit, RunArgs, Threads, usage_error};

pub(crate) fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let flow = super::load_flow(&args.flow)?;
    let checked = match check_for_run(flow, Some(&args.flow), &ProviderSettings::from_env()) {
        Ok(checked) => checked,
        Err(problems) => {
            print_problems_to_stderr(&problems);
            return Ok(Exit::Invalid);
        }
    };
    if !checked.warnings().is_empty() {
        print_problems_to_stderr(checked.warnings());
    }
    // Known before the runtime is made: a flow that runs one step at a time has no use for a
    // pool of threads, whose start and stop are a large share of a short run. Flows that
    // branch keep the pool: a thousand agents' answers are parsed on every core
    // (docs/benchmarks.md has both measurements).
    let threads = if checked.runs_one_step_at_a_time() {
        Threads::One
    } else {
        Threads::Pool
    };
    crate::block_on(threads, || run_checked(args, checked))
}

async fn run_checked(args: RunArgs, checked: CheckedFlow) -> anyhow::Result<Exit> {
    let flow = checked.flow();
    let mut decisions = HashMap::new();
    let by = weft_api::decider(None);
    for (node_id, decision) in args.decisions {
        if decisions
            .insert(node_id.clone(), decision.by(by.clone()))
            .is_some()
        {
            return Err(usage_error(format!(
                "--decide {node_id}: given more than once"
            )));
        }
    }
    let pins = if args.pins {
        load_pins(&pins_path(&args.flow))
            .map_err(|error| usage_error(format!("{error} (read because of --pins)")))?
    } else {
        Pins::new()
    };
    let from = match (&args.after, &args.from, &args.only) {
        (Some(after), Some(node), None) => Some((after, node, false)),
        (Some(after), None, Some(node)) => Some((after, node, true)),
        (Some(_), _, _) => return Err(usage_error("--after needs --from NODE or --only NODE")),
        (None, _, _) => None,
    };
    let mut request = StartRequest {
        input: args.input,
        decisions,
        flow_path: Some(std::path::absolute(&args.flow).unwrap_or_else(|_| args.flow.clone())),
        from: from.map(|(run_id, node_id, only)| RunFrom {
            run_id: run_id.clone(),
            node_id: node_id.clone(),
            only,
        }),
        pins,
        replay: args.replay,
        breakpoints: args.breakpoints,
        trigger: Some(
            weft_store::Trigger::of(weft_store::TriggerKind::Manual).by(weft_api::decider(None)),
        ),
        traceparent: super::traceparent(),
        ..StartRequest::default()
    };
    // Checked before the store is opened, so a wrong target leaves no trace.
    check_start(flow, &request).map_err(super::api_error)?;
    // Found and opened once the flow is known to run: a refused flow leaves no store behind.
    let location = super::location(&args.store)?;
    let weft = super::open(location.clone())?.ending_with_process();
    settle_deadlines(&weft).await;
    let live = Live::start(args.events);
    request.on_event = Some(live.listener.clone());
    request.cancel = live.cancel.clone();
    let handle = weft.start(checked, request).await;
    let outcome = match handle {
        Ok(handle) => handle.outcome().await.map_err(weft_api::Error::from),
        Err(error) => Err(error),
    };
    live.end();
    report(&outcome.map_err(super::api_error)?, args.events, &location)
}

/// Before a command's own work: every approval whose `timeoutSeconds` ran out while no Weft
/// process was running takes its `timeout` branch (or fails naming the timeout) here, each run
/// going on until it ends or pauses, with a line on stderr saying so.
pub(crate) async fn settle_deadlines(weft: &Weft) {
    // Read when the store was opened: with no paused run waiting with a deadline, there is
    // nothing to settle, and nothing to read (a short command never opens the read
    // connection). A run another process pauses from now on is settled by the next command,
    // as one paused just after the query would be.
    if !weft.has_deadlines() {
        return;
    }
    let handles = match weft.settle_deadlines(None).await {
        Ok(handles) => handles,
        Err(error) => {
            output::err(&format!(
                "warning: timed-out approvals could not be settled: {error}\n"
            ));
            return;
        }
    };
    let style = Style::stderr();
    for handle in handles {
        let run_id = handle.run_id.clone();
        let said = match handle.outcome().await {
            Ok(outcome) => {
                let why = outcome
                    .error
                    .map(|error| format!(": {error}"))
                    .unwrap_or_default();
                format!("{}{why}", style.status(outcome.status))
            }
            Err(error) => format!("not settled: {error}"),
        };
        output::err(&format!(
            "{}\n",
            style.dim(&format!(
                "run {run_id}: nobody decided its approval in time; it went on: {said}"
            ))
        ));
    }
}

/// [`settle_deadlines`] for a command that runs no flow (`weft runs`, `weft show`): a runtime
/// is made only when a deadline may have passed.
pub(crate) fn settle_deadlines_now(weft: &Weft) -> anyhow::Result<()> {
    if weft.has_deadlines() {
        crate::block_on(Threads::One, || async {
            settle_deadlines(weft).await;
            Ok(())
        })?;
    }
    Ok(())
}

/// What runs alongside a run in this process: the event listener (NDJSON on stdout, or the
/// progress printer on stderr), the status-line ticker, and the signal watcher that shuts the
/// engine down (the run is cancelled and stored so) on Ctrl-C or SIGTERM.
pub(crate) struct Live {
    pub listener: EventListener,
    /// The run's cancellation, which the first Ctrl-C or SIGTERM triggers: given to the run
    /// as its `cancel`.
    pub cancel: CancellationToken,
    progress: Option<Arc<Progress>>,
    ticker: Option<JoinHandle<()>>,
    signals: SignalWatch,
}

/// How long a Ctrl-C waits for the cancelled run to be stored before the process moves on.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl Live {
    /// Starts listening; with `events`, every event is a JSON line on stdout. Must be called
    /// within the tokio runtime.
    pub fn start(events: bool) -> Live {
        let progress = (!events).then(Progress::for_stderr);
        let listener: EventListener = match &progress {
            Some(progress) => {
                let progress = Arc::clone(progress);
                Arc::new(move |event: &RunEvent| progress.handle(event))
            }
            None => Arc::new(NdjsonPrinter::default()),
        };
        let ticker = progress.as_ref().and_then(Progress::start_ticker);
        let cancel = CancellationToken::new();
        let signals = watch_signals(cancel.clone(), progress.clone());
        Live {
            listener,
            cancel,
            progress,
            ticker,
            signals,
        }
    }

    /// Stops the ticker and the signal watcher and clears the status line.
    pub fn end(self) {
        if let Some(ticker) = self.ticker {
            ticker.abort();
        }
        self.signals.close();
        if let Some(progress) = self.progress {
            progress.finish();
        }
    }
}

/// Events as NDJSON on stdout: one compact JSON line each, a committed batch written at once
/// (a fast run commits hundreds of events together; one write each cost more than the run).
/// JSON escapes every control character, so nothing needs stripping.
#[derive(Default)]
struct NdjsonPrinter {
    lines: std::sync::Mutex<String>,
}

impl EventSink for NdjsonPrinter {
    fn event(&self, event: &RunEvent) {
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        event.write_json(&mut lines, true);
        lines.push('\n');
    }

    fn flush(&self) {
        use std::io::Write as _;
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A closed stdout must not stop the run; the store keeps every event anyway.
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(lines.as_bytes())
            .and_then(|()| stdout.flush());
        lines.clear();
    }
}

/// How a first Ctrl-C (or SIGTERM) is said.
const CANCELLING: &str = "cancelling the run (press Ctrl-C again to quit at once)\n";

/// The first Ctrl-C (or SIGTERM) cancels the run (`cancel`): it ends as `cancelled`, or, when
/// it does not stop within the grace period, the process quits and the run is left to be found
/// `interrupted`; a second one quits at once.
///
/// A task of the runtime waits for the signals: no thread is started for them (a thread cost a
/// short run a twentieth of its time). A step that holds the runtime's only thread without
/// yielding, a long template render, keeps that task from running: the signal also sets the
/// engine's stop flag, which the render looks at and cancels the run by; and a second signal
/// quits the process from the signal handler itself, whatever the runtime is doing.
#[cfg(unix)]
fn watch_signals(cancel: CancellationToken, progress: Option<Arc<Progress>>) -> SignalWatch {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use tokio::signal::unix::{SignalKind, signal};
    // Once per process: registered twice, a first signal would meet a second `quits` after
    // the first `flags` had set the flag, and quit at once.
    static HANDLERS: std::sync::Once = std::sync::Once::new();
    HANDLERS.call_once(|| {
        let stop = weft_template::stop::flag();
        for number in [SIGINT, SIGTERM] {
            // In this order: a first signal finds the flag unset (and sets it), a second one
            // quits with the exit code of an interrupted command.
            let quits = signal_hook::flag::register_conditional_shutdown(number, 130, stop.clone());
            let flags = signal_hook::flag::register(number, stop.clone());
            if let Err(error) = quits.and(flags) {
                tracing::warn!("Ctrl-C and SIGTERM cannot be caught: {error}");
            }
        }
    });
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("Ctrl-C and SIGTERM cannot be waited for");
        return SignalWatch { task: None };
    };
    let task = tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        match &progress {
            Some(progress) => progress.message(CANCELLING),
            None => output::err(CANCELLING),
        }
        cancel.cancel();
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        // A step that cannot be interrupted holds the run: leave it to the lease, so the
        // next `weft` finds this process gone and marks the run interrupted.
        output::err(&format!(
            "the run did not stop within {} s; quitting (it will read `interrupted`, and \
             `weft resume RUN --retry` continues it)\n",
            SHUTDOWN_GRACE.as_secs()
        ));
        weft_mcp::stop_all_servers();
        std::process::exit(130);
    });
    SignalWatch { task: Some(task) }
}

/// Off Unix, Ctrl-C through the runtime (there is no SIGTERM to read).
#[cfg(not(unix))]
fn watch_signals(cancel: CancellationToken, progress: Option<Arc<Progress>>) -> SignalWatch {
    let task = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        match &progress {
            Some(progress) => progress.message(CANCELLING),
            None => output::err(CANCELLING),
        }
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            output::err("quit before the run ended\n");
            std::process::exit(130);
        }
    });
    SignalWatch { task: Some(task) }
}

/// The signal watcher of a run; closing it ends its task.
struct SignalWatch {
    task: Option<JoinHandle<()>>,
}

impl SignalWatch {
    fn close(self) {
        if let Some(task) = self.task {
            task.abort();
        }
    }
}

/// Prints how the run ended and picks the exit code. On stdout only the result (completed) or
/// the run id (paused), and nothing at all with `events`.
pub(crate) fn report(
    outcome: &RunOutcome,
    events: bool,
    store: &StoreLocation,
) -> anyhow::Result<Exit> {
    let style = Style::stderr();
    let id = &outcome.run_id;
    match outcome.status {
        RunStatus::Completed => {
            if !events {
                let result = outcome.result.clone().unwrap_or_default();
                output::out(&output::result_text(&result))?;
                output::err(&format!("{}\n", style.dim(&format!("completed: run {id}"))));
            }
            Ok(Exit::Success)
        }
        RunStatus::Failed => {
            let error = outcome.error.as_deref().unwrap_or("no reason was recorded");
            output::err(&format!(
                "{} run {id} failed: {error}\n",
                style.red_bold("✗")
            ));
            Ok(Exit::Failure)
        }
        RunStatus::Cancelled => {
            output::err(&format!("{} run {id} was cancelled\n", style.yellow("✗")));
            Ok(Exit::Failure)
        }
        RunStatus::Paused => {
            let (node, message) = outcome.waiting.as_ref().map_or(("?", ""), |waiting| {
                (waiting.node_id.as_str(), waiting.message.as_str())
            });
            let mut text = format!("{} run {id} waits at {node}\n", style.yellow("paused:"));
            if !message.trim().is_empty() {
                text.push_str(&format!("  {}\n", message.trim().replace('\n', "\n  ")));
            }
            let how = match outcome
                .waiting
                .as_ref()
                .and_then(|waiting| waiting.breakpoint)
            {
                Some(_) => "--continue [--step] [--set JSON]",
                None => "--decision approve|reject",
            };
            if let Some(quorum) = outcome
                .waiting
                .as_ref()
                .map(|waiting| &waiting.quorum)
                .filter(|quorum| !quorum.is_anybody())
            {
                text.push_str(&format!(
                    "  needs {} {}{}\n",
                    quorum.required,
                    if quorum.required == 1 {
                        "approval"
                    } else {
                        "approvals"
                    },
                    if quorum.approvers.is_empty() {
                        String::new()
                    } else {
                        format!(" from {}", quorum.approvers.join(", "))
                    }
                ));
            }
            text.push_str(&format!(
                "resume with: {}\n",
                style.bold(&format!("{} {how}", resume_command(id, store)))
            ));
            output::err(&text);
            if !events {
                output::out(&format!("{id}\n"))?;
            }
            Ok(Exit::Paused)
        }
        RunStatus::Running | RunStatus::Interrupted => {
            output::err(&format!(
                "{} run {id} stopped while still running; continue it with: {} --retry\n",
                style.red_bold("✗"),
                resume_command(id, store)
            ));
            Ok(Exit::Failure)
        }
    }
}

/// `weft resume <id>`, with `--db` when the store is not the default one.
pub(crate) fn resume_command(id: &str, store: &StoreLocation) -> String {
    let mut command = format!("weft resume {id}");
    let default = StoreLocation::default_file().map(StoreLocation::from);
    if default.as_ref() != Some(store) {
        // A PostgreSQL URL is shown without its password (PGPASSWORD can carry it instead).
        command.push_str(&format!(" --db {}", output::shell_word(&store.shown())));
    }
    command
}
