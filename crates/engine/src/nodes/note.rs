//! `note`: a comment on the canvas. It has no handles and never runs.

use serde::Deserialize;

/// A comment on the canvas; it never runs and takes no edges.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct NoteConfig {
    /// The note's text.
    #[serde(default)]
    pub text: String,
}
