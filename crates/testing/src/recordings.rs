//! A case's recorded LLM answers, kept beside the flow (`triage.recordings/refund.json`): the
//! calls its run made (node, visit, call number, a hash of the request, the answer) and those
//! of its judges, so that the case runs again offline with the same answers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use weft_store::RecordedCall;

/// What one case recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording {
    pub case: String,
    pub recorded_at: String,
    pub calls: Vec<RecordedCall>,
    /// The calls of each judge, by the index of its assertion in the case's `expect`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, Vec<RecordedCall>>,
}

/// The file of case `name` in `dir`: its name in lower case, runs of other characters as `-`.
pub fn recording_path(dir: &Path, name: &str) -> PathBuf {
    let mut slug = String::new();
    for character in name.chars().flat_map(char::to_lowercase) {
        if character.is_alphanumeric() {
            slug.push(character);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-');
    let slug = if slug.is_empty() { "case" } else { slug };
    dir.join(format!("{slug}.json"))
}

/// The largest recording Weft reads (the LLM answers of one case: some KiB each).
pub const MAX_RECORDING_FILE_BYTES: u64 = weft_flow::MAX_FILE_BYTES;

/// The recording at `path`; `None` when there is none, an error naming the file when it
/// cannot be read (a named pipe or a device is refused, never waited on or read without end,
/// as is a file over [`MAX_RECORDING_FILE_BYTES`]).
pub fn read_recording(path: &Path) -> Result<Option<Recording>, String> {
    let text = match weft_flow::read_text_file(path, MAX_RECORDING_FILE_BYTES) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(format!(
                "cannot read the recording {}: {error}",
                path.display()
            ));
        }
    };
    serde_json::from_str(&text).map(Some).map_err(|error| {
        format!(
            "the recording {} is not valid ({error}); record the case again",
            path.display()
        )
    })
}

/// Writes `recording` to `path` (creating its folder), replacing it whole.
pub fn write_recording(path: &Path, recording: &Recording) -> Result<(), String> {
    let fail =
        |error: std::io::Error| format!("cannot write the recording {}: {error}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut text = serde_json::to_string_pretty(recording).unwrap_or_default();
    text.push('\n');
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text).map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

/// Removes the recording at `path`, if there is one.
pub fn remove_recording(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(format!(
            "cannot remove the recording {}: {error}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_name_becomes_a_plain_file_name() {
        let dir = Path::new("flows/triage.recordings");
        assert_eq!(
            recording_path(dir, "Refund approved"),
            dir.join("refund-approved.json")
        );
        assert_eq!(
            recording_path(dir, "../../etc/passwd"),
            dir.join("etc-passwd.json")
        );
        assert_eq!(
            recording_path(dir, "tickets #3"),
            dir.join("tickets-3.json")
        );
        assert_eq!(recording_path(dir, "///"), dir.join("case.json"));
    }
}
