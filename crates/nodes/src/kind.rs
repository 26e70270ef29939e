//! What one node kind is: the [`Kind`] trait each kind's config type implements in its own
//! file. The registry in `nodes/mod.rs` turns one line per kind into [`super::NodeKind`],
//! [`super::NodeConfig`] and every dispatch over them.

use std::future::Future;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::step::{Step, StepEnv, StepError, StepOutput};
use weft_flow::SUBAGENT_HANDLE;

/// How the scheduler runs a node of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduling {
    /// Finishes at once without I/O (its future is ready on the first poll): run inline on the
    /// scheduler's thread, saving a task spawn and a cross-thread wake-up per step.
    Instant,
    /// Like [`Scheduling::Instant`], and the step may stop the run for a person's decision (an
    /// `approval`). Reached while the run is already paused, it waits in the queue (seed 003).
    Pause,
    /// Waits on something (a model, the network, the sandbox, a child flow): run as a task,
    /// with the node's timeout and retries.
    Task,
    /// Waits for every incoming branch that can still arrive, then runs once, instantly, with
    /// the arrived outputs by source node as its input.
    Join,
    /// Never runs (a comment on the canvas).
    Never,
}

/// What an edge leaving by a handle means.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HandleKind {
    /// The run continues along it.
    Execution,
    /// It makes the target agent a tool of this one; nothing runs along it.
    Subagent,
    /// The run continues along it when the node fails.
    Error,
}

/// A handle edges leave a node by, as a kind declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    /// The `sourceHandle` of edges leaving by it. For a handle repeated per row, a pattern
    /// where `{i}` stands for the row's index (`condition-{i}`).
    pub id: &'static str,
    pub label: &'static str,
    pub kind: HandleKind,
    /// For a handle repeated once per row of a list field: that field's name.
    pub rows: Option<&'static str>,
}

impl Handle {
    /// A handle the run continues by.
    pub const fn execution(id: &'static str, label: &'static str) -> Handle {
        Handle {
            id,
            label,
            kind: HandleKind::Execution,
            rows: None,
        }
    }

    /// The `error` handle: taken when the node fails (after its retries).
    pub const ERROR: Handle = Handle {
        kind: HandleKind::Error,
        ..Handle::execution("error", "Error")
    };

    /// The handle subagent edges leave an agent by.
    pub const SUBAGENT: Handle = Handle {
        kind: HandleKind::Subagent,
        ..Handle::execution(SUBAGENT_HANDLE, "Subagents")
    };

    /// The usual `output` handle.
    pub const OUTPUT: Handle = Handle::execution("output", "Output");

    /// A handle repeated once per row of the list field `rows`; `id` and `label` hold `{i}`.
    pub const fn per_row(id: &'static str, label: &'static str, rows: &'static str) -> Handle {
        Handle {
            rows: Some(rows),
            ..Handle::execution(id, label)
        }
    }

    /// The id of row `index`'s copy of a repeated handle.
    pub fn row(&self, index: usize) -> String {
        // Spliced into one allocation rather than `str::replace`d, `format!`ted or searched
        // for with a substring searcher (each cost more than the rest of the step): an `if`
        // node makes its handle's id at its first visit, which on a long chain of them is
        // every step.
        let marker = self
            .id
            .match_indices('{')
            .map(|(at, _)| at)
            .find(|&at| self.id[at..].starts_with("{i}"));
        let Some(at) = marker else {
            return self.id.to_string();
        };
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(index);
        let mut id = String::with_capacity(self.id.len() + digits.len());
        id.push_str(&self.id[..at]);
        id.push_str(digits);
        id.push_str(&self.id[at + "{i}".len()..]);
        id
    }
}

/// A field of a node's `data` that has the wrong type or is out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A model a node calls, for checks before a run (provider configured, web search offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelUse<'a> {
    /// `provider/name`, a bare name, or empty for the default model.
    pub model: &'a str,
    /// Models tried in order when `model`'s call fails for good (`fallbackModels`).
    pub fallbacks: &'a [String],
    pub web_search: bool,
}

/// A flow file a node runs, for checks before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildFlowUse<'a> {
    /// As written in the node, relative to the flow's file.
    pub path: &'a str,
    /// Whether an approval inside may pause the run (a `subflow`; not one `forEach` item).
    pub may_pause: bool,
}

/// A node kind: its config type (the node's `data`) and everything about the kind. The config's
/// doc comment is the kind's help and its fields' doc comments are the fields' help; the
/// canvas's description of the kind is derived from the config type's JSON Schema (field
/// names, types, defaults, ranges, `#[schemars(title = ..)]` labels), so nothing about a field
/// is written twice. `#[schemars(extend("x-weft" = ..))]` marks fields whose text is a
/// `template`, `code`, a `flowPath`, or `conditions` rows.
pub trait Kind:
    DeserializeOwned + JsonSchema + Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static
{
    /// The `type` id in flow files (`agent`, `forEach`).
    const ID: &'static str;
    /// The kind's name as a person reads it (`Agent`, `For each`).
    const TITLE: &'static str;
    const SCHEDULING: Scheduling;
    /// Whether nodes of this kind take incoming edges.
    const INPUTS: bool = true;
    /// The handles edges may leave by, in the order they are drawn.
    const HANDLES: &'static [Handle];
    /// Seconds one attempt may take when the node does not set `timeoutSeconds`.
    const DEFAULT_TIMEOUT_SECONDS: f64 = 300.0;

    /// Checks beyond what the description says (field types, ranges, required fields are
    /// checked from it): a regular expression that compiles, Python that passes the sandbox's
    /// refusal list.
    fn check(&self) -> Result<(), FieldError> {
        Ok(())
    }

    /// The model this node calls, if it calls one.
    fn model(&self) -> Option<ModelUse<'_>> {
        None
    }

    /// The source of template field `field` (`headers.Accept` for one of a template map), as
    /// parsed into this config: a step renders it without reading the flow's node again (a
    /// cold map on long flows). `None` where the config does not keep it; the run then reads
    /// the flow's node.
    fn template(&self, field: &str) -> Option<&str> {
        let _ = field;
        None
    }

    /// The flow file this node runs, if it runs one.
    fn child_flow(&self) -> Option<ChildFlowUse<'_>> {
        None
    }

    /// Runs one step. An [`Scheduling::Instant`] kind must not wait on anything.
    fn run(
        &self,
        step: &Step<'_>,
        env: &dyn StepEnv,
    ) -> impl Future<Output = Result<StepOutput, StepError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::Handle;

    #[test]
    fn a_row_handle_has_its_row_number_where_the_id_says() {
        let per_row = Handle::per_row("condition-{i}", "Condition {i}", "conditions");
        assert_eq!(per_row.row(0), "condition-0");
        assert_eq!(per_row.row(12), "condition-12");
        assert_eq!(
            Handle::per_row("case-{i}-of", "Case {i}", "cases").row(7),
            "case-7-of"
        );
        // A brace that is not the marker is kept as it is.
        assert_eq!(
            Handle::per_row("{x}-{i}", "Row {i}", "rows").row(3),
            "{x}-3"
        );
        assert_eq!(Handle::OUTPUT.row(3), "output");
    }
}
