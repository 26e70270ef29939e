//! `weft validate FLOW [--json]`: every problem of a flow, one line each.

use serde_json::json;
use weft_nodes::{Problem, check_flow};
use weft_providers::ProviderSettings;

use crate::output::{self, Style};
use crate::{Exit, ValidateArgs};

pub(crate) fn validate(args: &ValidateArgs) -> anyhow::Result<Exit> {
    let flow = super::load_flow(&args.flow)?;
    // Provider settings come from this machine's environment: they warn, never block.
    let mut problems = check_flow(&flow, Some(&args.flow), &ProviderSettings::from_env());
    if args.connect {
        let connected = crate::block_on(crate::Threads::Pool, || async {
            Ok(super::tools::connected_problems(&flow, &args.flow).await)
        })?;
        problems.extend(connected);
    }
    let valid = !problems.iter().any(Problem::is_error);
    if args.json {
        let report = json!({ "valid": valid, "problems": problems });
        let text = serde_json::to_string_pretty(&report)?;
        output::out(&format!("{text}\n"))?;
    } else {
        let lines: String = problems
            .iter()
            .map(|problem| format!("{problem}\n"))
            .collect();
        output::out(&lines)?;
        let style = Style::stderr();
        let summary = summary(&problems);
        let summary = if valid {
            style.green(&summary)
        } else {
            style.red(&summary)
        };
        output::err(&format!("{summary}\n"));
    }
    Ok(if valid { Exit::Success } else { Exit::Invalid })
}

/// `valid`, `valid, 1 warning`, or `3 errors, 1 warning`.
pub(crate) fn summary(problems: &[Problem]) -> String {
    let errors = problems.iter().filter(|problem| problem.is_error()).count();
    let warnings = problems.len() - errors;
    match (errors, warnings) {
        (0, 0) => "valid".to_string(),
        (0, warnings) => format!("valid, {}", output::count(warnings, "warning")),
        (errors, 0) => output::count(errors, "error"),
        (errors, warnings) => format!(
            "{}, {}",
            output::count(errors, "error"),
            output::count(warnings, "warning")
        ),
    }
}

/// Prints problems on stderr, one line each, then the summary (`weft run` of an invalid flow).
pub(crate) fn print_problems_to_stderr(problems: &[Problem]) {
    use std::fmt::Write as _;
    let style = Style::stderr();
    let mut text = String::new();
    for problem in problems {
        // Uncolored (stderr not a terminal, or NO_COLOR), written as it is: a long chain of
        // `if` nodes warns once a node, and a line made, colored and copied again cost more
        // than its node's step.
        let _ = match (style.colors(), problem.is_error()) {
            (false, _) => writeln!(text, "{problem}"),
            (true, true) => writeln!(text, "{}", style.red(&problem.to_string())),
            (true, false) => writeln!(text, "{}", style.yellow(&problem.to_string())),
        };
    }
    if problems.iter().any(Problem::is_error) {
        text.push_str(&format!("the flow is not valid: {}\n", summary(problems)));
    }
    output::err(&text);
}
