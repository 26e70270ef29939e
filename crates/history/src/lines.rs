//! Two texts line by line: what was removed and added (a longest common subsequence), as run
//! comparisons show a changed text output and flow diffs a changed text field.

use serde::Serialize;

/// Above this many line pairs, two texts are shown as replaced instead of diffed line by line.
const MAX_LINE_PAIRS: usize = 4_000_000;

/// One line of a text diff.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "text")]
pub enum DiffLine {
    Same(String),
    Removed(String),
    Added(String),
}

/// The lines of `a` and `b` with what was removed and added (a longest common subsequence).
pub fn line_diff(a: &str, b: &str) -> Vec<DiffLine> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.len().saturating_mul(b.len()) > MAX_LINE_PAIRS {
        return a
            .iter()
            .map(|line| DiffLine::Removed(line.to_string()))
            .chain(b.iter().map(|line| DiffLine::Added(line.to_string())))
            .collect();
    }
    // common[i][j]: the longest common subsequence of a[i..] and b[j..].
    let width = b.len() + 1;
    let mut common = vec![0u32; (a.len() + 1) * width];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i * width + j] = if a[i] == b[j] {
                common[(i + 1) * width + j + 1] + 1
            } else {
                common[(i + 1) * width + j].max(common[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut lines = Vec::with_capacity(a.len().max(b.len()));
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push(DiffLine::Same(a[i].to_string()));
            i += 1;
            j += 1;
        } else if i < a.len()
            && (j == b.len() || common[(i + 1) * width + j] >= common[i * width + j + 1])
        {
            // Removals first, as diffs read.
            lines.push(DiffLine::Removed(a[i].to_string()));
            i += 1;
        } else {
            lines.push(DiffLine::Added(b[j].to_string()));
            j += 1;
        }
    }
    lines
}
