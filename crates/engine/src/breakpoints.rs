//! Breakpoints (docs/debugging.md): stop a run before a node runs or after it ran, optionally only
//! when
//! a condition holds. A breakpoint is debugging state, not flow semantics: it is given with the
//! run (`weft run --break`, the canvas's gutter), never written in the flow file. A hit pauses
//! the run exactly like an approval — stored, resumable by another process — and the person
//! continues, steps, or replaces the value at the breakpoint and continues.

use serde::{Deserialize, Serialize};

use weft_flow::Flow;
use weft_nodes::{NodeKind, Scheduling};
use weft_template::check_syntax;

/// Before the node runs (the value is its input) or after it ran (its output).
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum BreakWhen {
    #[default]
    Before,
    After,
    // Before each MCP tool call of an agent (the value is the call's arguments). A plain
    // comment: a documented variant would make the schema a `oneOf`.
    Tool,
}

impl BreakWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakWhen::Before => "before",
            BreakWhen::After => "after",
            BreakWhen::Tool => "tool",
        }
    }
}

/// One breakpoint on a node of the top-level flow.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Breakpoint {
    pub node_id: String,
    #[serde(default)]
    pub when: BreakWhen,
    /// A MiniJinja expression with the names templates have, plus `visit` (the node's visit
    /// count, 1 on the first): the run stops only when it is true. `visit == 3` stops at the
    /// third pass of a loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

impl Breakpoint {
    /// Reads the `--break` form: `NODE`, `NODE:before`, `NODE:after`, each optionally followed
    /// by ` if CONDITION`.
    pub fn parse(text: &str) -> Result<Breakpoint, String> {
        let (target, condition) = match text.split_once(" if ") {
            Some((target, condition)) => (target.trim(), Some(condition.trim().to_string())),
            None => (text.trim(), None),
        };
        let (node_id, when) = match target.rsplit_once(':') {
            Some((node, "after")) => (node, BreakWhen::After),
            Some((node, "before")) => (node, BreakWhen::Before),
            Some((node, "tool")) => (node, BreakWhen::Tool),
            Some((_, other)) => {
                return Err(format!(
                    "`{text}`: `{other}` is not a place to stop; write NODE, NODE:before, NODE:after or NODE:tool, then optionally `if CONDITION`"
                ));
            }
            None => (target, BreakWhen::Before),
        };
        if node_id.is_empty() {
            return Err(format!("`{text}`: name the node to stop at"));
        }
        if condition.as_deref() == Some("") {
            return Err(format!("`{text}`: the condition after `if` is empty"));
        }
        if when == BreakWhen::Tool && condition.is_some() {
            return Err(format!(
                "`{text}`: a tool breakpoint stops before every tool call of the agent; it takes no condition"
            ));
        }
        Ok(Breakpoint {
            node_id: node_id.to_string(),
            when,
            condition,
        })
    }

    /// The template whose render says whether the condition holds at visit `visit`.
    pub(crate) fn condition_template(&self, visit: u64) -> Option<String> {
        self.condition.as_ref().map(|condition| {
            format!("{{% set visit = {visit} %}}{{% if ({condition}) %}}stop{{% endif %}}")
        })
    }
}

/// What is wrong with `breakpoints` on `flow`, one message each: a node the flow lacks, one
/// that never runs (a note), a condition that does not parse.
pub fn check_breakpoints(flow: &Flow, breakpoints: &[Breakpoint]) -> Vec<String> {
    let mut problems = Vec::new();
    for breakpoint in breakpoints {
        let node_id = &breakpoint.node_id;
        let Some(node) = flow.node(node_id) else {
            problems.push(format!(
                "breakpoint at `{node_id}`: the flow has no such node"
            ));
            continue;
        };
        if breakpoint.when == BreakWhen::Tool && NodeKind::of(node) != Some(NodeKind::Agent) {
            problems.push(format!(
                "breakpoint at `{node_id}:tool`: it stops before an agent's tool calls, and `{node_id}` is a `{}` node",
                node.kind
            ));
        }
        if NodeKind::of(node).is_some_and(|kind| kind.scheduling() == Scheduling::Never) {
            problems.push(format!(
                "breakpoint at `{node_id}`: a `{}` node never runs",
                node.kind
            ));
        }
        if let Some(template) = breakpoint.condition_template(1)
            && let Err(error) = check_syntax(&template)
        {
            problems.push(format!(
                "breakpoint at `{node_id}`: its condition `{}` does not parse: {error}",
                breakpoint.condition.as_deref().unwrap_or_default()
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_breakpoint_is_read_and_takes_no_condition() {
        let stop = Breakpoint::parse("clerk:tool").expect("parses");
        assert_eq!(
            (stop.node_id.as_str(), stop.when),
            ("clerk", BreakWhen::Tool)
        );
        let error = Breakpoint::parse("clerk:tool if visit == 2").expect_err("refused");
        assert!(error.contains("takes no condition"), "{error}");
    }

    #[test]
    fn the_break_form_reads_place_and_condition() {
        assert_eq!(
            Breakpoint::parse("draft").expect("parses"),
            Breakpoint {
                node_id: "draft".into(),
                when: BreakWhen::Before,
                condition: None
            }
        );
        let breakpoint = Breakpoint::parse("loop:after if visit == 3").expect("parses");
        assert_eq!(breakpoint.when, BreakWhen::After);
        assert_eq!(breakpoint.node_id, "loop");
        assert_eq!(breakpoint.condition.as_deref(), Some("visit == 3"));
        assert!(Breakpoint::parse("draft:during").is_err());
        assert!(Breakpoint::parse(":after").is_err());
        assert!(Breakpoint::parse("draft if ").is_err());
    }

    #[test]
    fn breakpoints_are_checked_against_the_flow() {
        let flow = Flow::parse(
            &json!({
                "nodes": [
                    {"id": "start", "type": "start"},
                    {"id": "memo", "type": "note", "data": {"text": "x"}},
                    {"id": "t", "type": "template", "data": {"template": "x"}}
                ],
                "edges": []
            })
            .to_string(),
            "test",
        )
        .expect("flow");
        let breakpoints = [
            Breakpoint::parse("ghost").expect("parses"),
            Breakpoint::parse("memo").expect("parses"),
            Breakpoint::parse("t if visit ==").expect("parses"),
            Breakpoint::parse("t:after if visit > 1").expect("parses"),
        ];
        let problems = check_breakpoints(&flow, &breakpoints);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("`ghost`: the flow has no such node"));
        assert!(problems[1].contains("never runs"));
        assert!(problems[2].contains("does not parse"));
    }
}
