//! `weft fmt FLOW... [--check]`: writes flow files in Weft's one canonical form (the form the
//! app saves: keys in a stable order, 2-space indent, integer positions, a newline at the end),
//! so that a flow under git diffs by what changed. With `--check`, writes nothing and exits 1
//! when a file is not in that form. A file that cannot be read as a flow exits 2; tests and
//! pins files (`NAME.tests.json`, `NAME.pins.json`) are passed over.

use std::path::Path;

use weft_flow::{Flow, MAX_FLOW_FILE_BYTES};

use crate::output::{self, Style};
use crate::{Exit, FmtArgs};

/// What `weft fmt` found or did for one file.
enum Outcome {
    Canonical,
    /// With `--check`: it would be rewritten.
    WouldChange,
    Written,
    /// A tests or pins file: not a flow.
    Skipped,
    Unreadable(String),
}

pub(crate) fn fmt(args: &FmtArgs) -> anyhow::Result<Exit> {
    let style = Style::stdout();
    let (mut differ, mut unreadable) = (0usize, 0usize);
    for path in &args.flows {
        match format_file(path, args.check) {
            Outcome::Canonical | Outcome::Skipped => {}
            Outcome::WouldChange => {
                differ += 1;
                output::out(&format!(
                    "{}: not in canonical form (`weft fmt {}` writes it)\n",
                    path.display(),
                    path.display()
                ))?;
            }
            Outcome::Written => {
                output::out(&format!("{} {}\n", style.dim("formatted"), path.display()))?;
            }
            Outcome::Unreadable(message) => {
                unreadable += 1;
                output::err(&format!("error: {message}\n"));
            }
        }
    }
    Ok(if unreadable > 0 {
        Exit::Invalid
    } else if differ > 0 {
        Exit::Failure
    } else {
        Exit::Success
    })
}

/// Weft's files beside a flow that are not flows (`weft fmt flows/*.json` names them too).
const NOT_FLOWS: [&str; 2] = [".tests.json", ".pins.json"];

fn format_file(path: &Path, check: bool) -> Outcome {
    if let Some(name) = path.file_name().and_then(|name| name.to_str())
        && NOT_FLOWS.iter().any(|suffix| name.ends_with(suffix))
    {
        return Outcome::Skipped;
    }
    let text = match weft_flow::read_text_file(path, MAX_FLOW_FILE_BYTES) {
        Ok(text) => text,
        Err(error) => return Outcome::Unreadable(format!("{}: {error}", path.display())),
    };
    // The loader reads a file without `nodes` as an empty flow; written back, that would
    // turn any JSON file into one.
    let has_nodes = serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|root| root.get("nodes").is_some_and(serde_json::Value::is_array));
    if !has_nodes {
        return Outcome::Unreadable(format!(
            "{}: not a flow file (it has no `nodes` list); left as it is",
            path.display()
        ));
    }
    let flow = match Flow::parse(&text, &path.display().to_string()) {
        Ok(flow) => flow,
        Err(error) => return Outcome::Unreadable(error.to_string()),
    };
    let canonical = flow.to_file_string();
    if canonical == text {
        return Outcome::Canonical;
    }
    if check {
        return Outcome::WouldChange;
    }
    match weft_flow::replace_file(path, canonical.as_bytes(), weft_flow::Access::AsBefore) {
        Ok(()) => Outcome::Written,
        Err(error) => Outcome::Unreadable(format!("cannot write {}: {error}", path.display())),
    }
}
