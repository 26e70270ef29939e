//! What running a suite found: per case, each run and each assertion's verdict; and the same
//! as JUnit XML, the format CI servers read.

use std::fmt::Write;

use serde::Serialize;

use weft_event::RunStatus;

/// One assertion's verdict on one run.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssertionOutcome {
    /// What it checks, in words (`draft contains "refund"`).
    pub assertion: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
}

/// One run of a case.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseRun {
    /// The run in the store (`None` when it could not start).
    pub run_id: Option<String>,
    pub status: Option<RunStatus>,
    /// Why the run failed or could not start (a request with no recording names its node).
    pub error: Option<String>,
    pub assertions: Vec<AssertionOutcome>,
    pub passed: bool,
    pub duration_ms: u64,
    /// Its LLM answers came from the case's recording (no provider was asked).
    pub offline: bool,
    /// Its LLM answers were recorded for the next runs (`--record`).
    pub recorded: bool,
}

/// One case: its runs, and whether enough of them passed.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseReport {
    pub name: String,
    /// Where it is written (`triage.tests.json:12`).
    pub origin: String,
    pub runs: Vec<CaseRun>,
    pub passed_runs: u32,
    /// The share of runs that had to pass.
    pub pass_rate: f64,
    pub passed: bool,
}

/// One flow's cases.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuiteReport {
    pub flow: String,
    pub tests_file: String,
    pub cases: Vec<CaseReport>,
    pub duration_ms: u64,
}

impl SuiteReport {
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|case| case.passed).count()
    }

    pub fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }
}

impl CaseReport {
    /// Why the case failed, one line each: the failing assertions of its failing runs.
    pub fn failures(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (index, run) in self.runs.iter().enumerate() {
            if run.passed {
                continue;
            }
            let prefix = if self.runs.len() > 1 {
                format!("run {}: ", index + 1)
            } else {
                String::new()
            };
            match (&run.error, run.status) {
                (Some(error), Some(status)) if status != RunStatus::Completed => {
                    lines.push(format!("{prefix}{}: {error}", the_run(status)));
                }
                (Some(error), _) => lines.push(format!("{prefix}{error}")),
                (None, Some(status)) if status != RunStatus::Completed => {
                    lines.push(format!("{prefix}{}", the_run(status)));
                }
                _ => {}
            }
            for outcome in run.assertions.iter().filter(|outcome| !outcome.passed) {
                lines.push(format!(
                    "{prefix}{}: expected {}, got {}",
                    outcome.assertion, outcome.expected, outcome.actual
                ));
            }
        }
        lines
    }
}

/// How a run ended, as a sentence's start: `the run failed`, `the run paused`.
pub(crate) fn the_run(status: RunStatus) -> String {
    match status {
        RunStatus::Failed => "the run failed".into(),
        RunStatus::Paused => "the run paused".into(),
        RunStatus::Cancelled => "the run was cancelled".into(),
        RunStatus::Interrupted => "the run was interrupted".into(),
        other => format!("the run is {other}"),
    }
}

/// The reports as JUnit XML: a `testsuite` per flow, a `testcase` per case with a `failure`
/// saying which assertions failed.
pub fn junit_xml(reports: &[SuiteReport]) -> String {
    let tests: usize = reports.iter().map(|report| report.cases.len()).sum();
    let failures: usize = reports.iter().map(SuiteReport::failed).sum();
    let seconds = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total_ms: u64 = reports.iter().map(|report| report.duration_ms).sum();
    let _ = writeln!(
        xml,
        "<testsuites name=\"weft test\" tests=\"{tests}\" failures=\"{failures}\" time=\"{}\">",
        seconds(total_ms)
    );
    for report in reports {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{}\">",
            escape(&report.flow),
            report.cases.len(),
            report.failed(),
            seconds(report.duration_ms)
        );
        for case in &report.cases {
            let time: u64 = case.runs.iter().map(|run| run.duration_ms).sum();
            let _ = write!(
                xml,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" time=\"{}\"",
                escape(&case.name),
                escape(&report.flow),
                escape(&case.origin),
                seconds(time)
            );
            if case.passed {
                xml.push_str("/>\n");
                continue;
            }
            let failures = case.failures();
            let message = format!(
                "{} of {} runs passed (needed {:.0}%){}",
                case.passed_runs,
                case.runs.len(),
                case.pass_rate * 100.0,
                failures
                    .first()
                    .map(|first| format!(": {first}"))
                    .unwrap_or_default()
            );
            let _ = writeln!(
                xml,
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                escape(&message),
                escape(&failures.join("\n"))
            );
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// `text` for an XML attribute or element; characters XML 1.0 cannot hold are dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(character),
            character if (character as u32) < 0x20 => {}
            character => out.push(character),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_names_each_case_and_its_failing_assertions() {
        let run = |passed: bool| CaseRun {
            run_id: Some("r".into()),
            status: Some(RunStatus::Completed),
            error: None,
            assertions: vec![AssertionOutcome {
                assertion: "draft contains \"refund\"".into(),
                passed,
                expected: "something containing \"refund\"".into(),
                actual: "\"a <b> & c\"".into(),
            }],
            passed,
            duration_ms: 1500,
            offline: true,
            recorded: false,
        };
        let report = SuiteReport {
            flow: "flows/triage.json".into(),
            tests_file: "flows/triage.tests.json".into(),
            cases: vec![
                CaseReport {
                    name: "ok".into(),
                    origin: "triage.tests.json:3".into(),
                    runs: vec![run(true)],
                    passed_runs: 1,
                    pass_rate: 1.0,
                    passed: true,
                },
                CaseReport {
                    name: "bad \"one\"".into(),
                    origin: "triage.tests.json:9".into(),
                    runs: vec![run(false)],
                    passed_runs: 0,
                    pass_rate: 1.0,
                    passed: false,
                },
            ],
            duration_ms: 2000,
        };
        let xml = junit_xml(&[report]);
        assert!(
            xml.contains("<testsuites name=\"weft test\" tests=\"2\" failures=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("<testcase name=\"ok\" classname=\"flows/triage.json\" file=\"triage.tests.json:3\" time=\"1.500\"/>"), "{xml}");
        assert!(
            xml.contains("<testcase name=\"bad &quot;one&quot;\""),
            "{xml}"
        );
        assert!(xml.contains("got &quot;a &lt;b&gt; &amp; c&quot;"), "{xml}");
        assert!(!xml.contains("<b>"));
    }
}
