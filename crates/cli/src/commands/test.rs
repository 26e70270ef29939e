//! `weft test FLOW|DIR`: runs the cases beside flows (`NAME.tests.json`, docs/testing.md), offline
//! from
//! their recordings when they have them, and reports every failing assertion with what was
//! expected and what came. Exit 0 when every case passed, 1 when any failed, 2 for a tests file,
//! dataset or flow that cannot be used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use weft_nodes::{CheckedFlow, check_for_run};
use weft_providers::ProviderSettings;
use weft_testing::{
    CaseReport, RecordMode, SuiteReport, TestOptions, TestSuite, flow_of_tests, junit_xml,
    load_suite, run_suite,
};

use crate::output::{self, Style};
use crate::{Exit, TestArgs, usage_error};

/// How long a Ctrl-C waits for the cancelled runs to be stored.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn test(args: TestArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    if args.record && args.offline {
        return Err(usage_error(
            "--record asks the providers and --offline never does: give one",
        ));
    }
    if let Some(rate) = args.pass_rate
        && !(0.0..=1.0).contains(&rate)
    {
        return Err(usage_error(format!(
            "--pass-rate is a share between 0 and 1, not {rate}"
        )));
    }
    if args.repeat == Some(0) {
        return Err(usage_error("--repeat must be 1 or more"));
    }
    // Every flow and tests file is checked before anything runs.
    let mut suites: Vec<(CheckedFlow, TestSuite)> = Vec::new();
    for flow_path in flows_of(&args.target)? {
        let flow = super::load_flow(&flow_path)?;
        let checked = check_for_run(flow, Some(&flow_path), &ProviderSettings::from_env())
            .map_err(|problems| {
                let lines: Vec<String> = problems
                    .iter()
                    .filter(|problem| problem.is_error())
                    .map(ToString::to_string)
                    .collect();
                usage_error(format!(
                    "{} is not a valid flow:\n{}",
                    flow_path.display(),
                    lines.join("\n")
                ))
            })?;
        let suite = load_suite(&flow_path, checked.flow())
            .map_err(|error| usage_error(error.to_string()))?;
        suites.push((checked, suite));
    }
    if let Some(name) = &args.case {
        suites.retain(|(_, suite)| suite.cases.iter().any(|case| &case.name == name));
        if suites.is_empty() {
            return Err(usage_error(format!("no case is named \"{name}\"")));
        }
    }
    let weft = super::open(super::location(&args.store)?)?;
    super::run::settle_deadlines(&weft).await;
    let engine = weft.engine();
    let mode = match (args.record, args.offline) {
        (true, _) => RecordMode::Record,
        (_, true) => RecordMode::Offline,
        _ => RecordMode::Auto,
    };
    let progress = Style::stderr();
    let mut reports: Vec<SuiteReport> = Vec::new();
    let work = async {
        for (checked, suite) in &suites {
            let options = TestOptions {
                case: args.case.clone(),
                repeat: args.repeat,
                pass_rate: args.pass_rate,
                mode,
                jobs: args.jobs.max(1),
                prices: prices.clone(),
                command: format!(
                    "weft test {}",
                    output::shell_word(&suite.flow_path.display().to_string())
                ),
            };
            let flow_name = file_name(&suite.flow_path);
            let quiet = args.json;
            let on_case = Arc::new(move |case: &CaseReport| {
                if !quiet {
                    output::err(&format!("{}\n", case_line(&flow_name, case, progress)));
                }
            });
            let report = run_suite(engine, checked, suite, &options, on_case)
                .await
                .map_err(|error| usage_error(error.to_string()))?;
            reports.push(report);
        }
        anyhow::Ok(())
    };
    tokio::select! {
        done = work => done?,
        _ = tokio::signal::ctrl_c() => {
            output::err("cancelling the test runs\n");
            engine.shutdown(SHUTDOWN_GRACE).await;
            return Ok(Exit::Failure);
        }
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, junit_xml(&reports))
            .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
    }
    let failed: usize = reports.iter().map(SuiteReport::failed).sum();
    let passed: usize = reports.iter().map(SuiteReport::passed).sum();
    if args.json {
        let report = json!({ "suites": reports, "passed": passed, "failed": failed });
        output::out(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        output::out(&summary(&reports, Style::stdout()))?;
    }
    Ok(if failed == 0 {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The flows `target` names: a flow (its tests file beside it), a tests file (its flow beside
/// it), or a folder (every `*.tests.json` in it).
fn flows_of(target: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if target.is_dir() {
        let mut flows: Vec<PathBuf> = std::fs::read_dir(target)
            .map_err(|error| usage_error(format!("cannot read {}: {error}", target.display())))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter_map(|path| flow_of_tests(&path))
            .collect();
        flows.sort();
        if flows.is_empty() {
            return Err(usage_error(format!(
                "{} has no tests files (NAME.tests.json beside NAME.json)",
                target.display()
            )));
        }
        return Ok(flows);
    }
    Ok(vec![
        flow_of_tests(target).unwrap_or_else(|| target.to_path_buf()),
    ])
}

/// `12 ms` below a second, else as other durations read.
fn millis_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        output::duration(ms as f64 / 1000.0)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A case as it ends, one line: mark, flow, name, runs, time and where the answers came from.
fn case_line(flow: &str, case: &CaseReport, style: Style) -> String {
    let mark = if case.passed {
        style.green("✓")
    } else {
        style.red("✗")
    };
    let spent: u64 = case.runs.iter().map(|run| run.duration_ms).sum();
    let mut facts = vec![millis_text(spent)];
    if case.runs.len() > 1 {
        facts.push(format!(
            "{}/{} runs passed",
            case.passed_runs,
            case.runs.len()
        ));
    }
    if case.runs.iter().any(|run| run.recorded) {
        facts.push("recorded".into());
    } else if case.runs.iter().all(|run| run.offline) {
        facts.push("offline".into());
    }
    format!(
        "{mark} {flow}: {}  {}",
        case.name,
        style.dim(&format!("({})", facts.join(", ")))
    )
}

/// Every failing case with each failing assertion (expected and actual), then the counts.
fn summary(reports: &[SuiteReport], style: Style) -> String {
    let mut text = String::new();
    let (mut passed, mut failed) = (0, 0);
    for report in reports {
        passed += report.passed();
        failed += report.failed();
        let flow = file_name(Path::new(&report.flow));
        text.push_str(&format!(
            "{}  {} passed, {} failed  {}\n",
            style.bold(&flow),
            report.passed(),
            report.failed(),
            style.dim(&format!("({})", millis_text(report.duration_ms)))
        ));
        for case in report.cases.iter().filter(|case| !case.passed) {
            let run = case
                .runs
                .iter()
                .find(|run| !run.passed)
                .and_then(|run| run.run_id.as_deref())
                .map(|id| format!("  run {id}"))
                .unwrap_or_default();
            text.push_str(&format!(
                "  {} {}  {}\n",
                style.red("✗"),
                style.bold(&case.name),
                style.dim(&format!("{}{run}", case.origin))
            ));
            if case.runs.len() > 1 {
                text.push_str(&format!(
                    "      {} of {} runs passed; {:.0}% had to\n",
                    case.passed_runs,
                    case.runs.len(),
                    case.pass_rate * 100.0
                ));
            }
            for line in case.failures() {
                text.push_str(&format!("      {line}\n"));
            }
        }
    }
    let total = if failed == 0 {
        style.green(&format!("{passed} passed"))
    } else {
        format!(
            "{passed} passed, {}",
            style.red(&format!("{failed} failed"))
        )
    };
    text.push_str(&format!("{total}\n"));
    text
}
