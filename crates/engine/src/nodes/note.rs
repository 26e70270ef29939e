//! `note`: a comment on the canvas. It has no handles and never runs.

use serde::Deserialize;

use super::{FieldDescription, FieldType, KindDescription, NodeKind};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "A comment on the canvas; it never runs and takes no edges."
    };
    (text) => {
        "The note's text."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct NoteConfig {
    #[doc = help!(text)]
    #[serde(default)]
    pub text: String,
}

pub(super) fn describe() -> KindDescription {
    KindDescription {
        fields: vec![
            FieldDescription::new("text", "Text", help!(text), FieldType::Text).default(""),
        ],
        ..KindDescription::new(NodeKind::Note, "Note", help!(kind))
    }
}
