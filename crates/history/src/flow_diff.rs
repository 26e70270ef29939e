//! Two versions of a flow compared (SPEC §17, `weft flow-diff`, and `weft diff` when two runs
//! ran different flows): the nodes added, removed and changed (each changed field with its old
//! and new value, a text of several lines as a line diff), the nodes moved, the edges added and
//! removed, and the settings changed.
//!
//! Nodes are matched by id. Edges are matched by what they join (source, handle, target), not by
//! id: an editor may give an edge a new id without changing the flow.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;
use weft_flow::{Edge, Flow, Node};

use crate::lines::{DiffLine, line_diff};

/// A node as the diff names it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeName {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub label: String,
}

/// One field whose value differs: `type`, a key of `data` (`userPrompt`), of `settings`, or a
/// field Weft does not know.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    pub field: String,
    /// Absent when the field was added.
    pub a: Option<Value>,
    /// Absent when the field was removed.
    pub b: Option<Value>,
    /// For two texts of which one has several lines: their lines, marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<DiffLine>>,
}

/// A node in both versions whose kind or fields differ.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeChange {
    pub node: NodeName,
    pub fields: Vec<FieldChange>,
}

/// An edge as the diff names it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeName {
    pub id: String,
    pub source: String,
    pub source_handle: String,
    pub target: String,
}

/// How flow `b` differs from flow `a`.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowDiff {
    /// `name`, `version` and the root fields Weft does not know.
    pub flow: Vec<FieldChange>,
    pub settings: Vec<FieldChange>,
    pub nodes_added: Vec<NodeName>,
    pub nodes_removed: Vec<NodeName>,
    pub nodes_changed: Vec<NodeChange>,
    /// Nodes only placed elsewhere on the canvas.
    pub nodes_moved: Vec<NodeName>,
    pub edges_added: Vec<EdgeName>,
    pub edges_removed: Vec<EdgeName>,
}

impl FlowDiff {
    /// Whether the two flows are the same, positions included.
    pub fn is_empty(&self) -> bool {
        self.flow.is_empty()
            && self.settings.is_empty()
            && self.nodes_added.is_empty()
            && self.nodes_removed.is_empty()
            && self.nodes_changed.is_empty()
            && self.nodes_moved.is_empty()
            && self.edges_added.is_empty()
            && self.edges_removed.is_empty()
    }
}

/// How flow `b` differs from flow `a`.
pub fn diff_flows(a: &Flow, b: &Flow) -> FlowDiff {
    let mut flow = Vec::new();
    if a.name != b.name {
        flow.push(change(
            "name",
            Some(&Value::from(a.name.as_str())),
            Some(&Value::from(b.name.as_str())),
        ));
    }
    if a.version != b.version {
        flow.push(change(
            "version",
            Some(&Value::from(a.version)),
            Some(&Value::from(b.version)),
        ));
    }
    flow.extend(map_changes(
        a.extra.iter().map(|(key, value)| (key.as_str(), value)),
        b.extra.iter().map(|(key, value)| (key.as_str(), value)),
    ));
    let settings = map_changes(
        a.settings.iter().map(|(key, value)| (key.as_str(), value)),
        b.settings.iter().map(|(key, value)| (key.as_str(), value)),
    );

    let in_b: HashMap<&str, &Node> = b
        .nodes
        .iter()
        .map(|node| (node.id.as_str(), node))
        .collect();
    let in_a: HashSet<&str> = a.nodes.iter().map(|node| node.id.as_str()).collect();
    let mut diff = FlowDiff {
        flow,
        settings,
        ..FlowDiff::default()
    };
    for node in &a.nodes {
        let Some(other) = in_b.get(node.id.as_str()) else {
            diff.nodes_removed.push(name_of(node));
            continue;
        };
        let fields = node_changes(node, other);
        if !fields.is_empty() {
            diff.nodes_changed.push(NodeChange {
                node: name_of(other),
                fields,
            });
        } else if node.position != other.position {
            diff.nodes_moved.push(name_of(other));
        }
    }
    diff.nodes_added = b
        .nodes
        .iter()
        .filter(|node| !in_a.contains(node.id.as_str()))
        .map(name_of)
        .collect();

    // Keyed by what they join, borrowed: only the edges listed are named.
    let in_b: HashSet<Join<'_>> = b.edges.iter().map(join_of).collect();
    let in_a: HashSet<Join<'_>> = a.edges.iter().map(join_of).collect();
    diff.edges_removed = a
        .edges
        .iter()
        .filter(|edge| !in_b.contains(&join_of(edge)))
        .map(edge_name)
        .collect();
    diff.edges_added = b
        .edges
        .iter()
        .filter(|edge| !in_a.contains(&join_of(edge)))
        .map(edge_name)
        .collect();
    diff
}

/// What an edge joins: source, its handle, target, its handle.
type Join<'a> = (&'a str, &'a str, &'a str, &'a str);

fn join_of(edge: &Edge) -> Join<'_> {
    (
        edge.source.as_str(),
        edge.source_handle(),
        edge.target.as_str(),
        edge.target_handle(),
    )
}

fn edge_name(edge: &Edge) -> EdgeName {
    EdgeName {
        id: edge.id.clone(),
        source: edge.source.clone(),
        source_handle: edge.source_handle().to_string(),
        target: edge.target.clone(),
    }
}

fn name_of(node: &Node) -> NodeName {
    NodeName {
        id: node.id.clone(),
        kind: node.kind.clone(),
        label: node.label().to_string(),
    }
}

/// What differs in a node found in both flows, its position aside.
fn node_changes(a: &Node, b: &Node) -> Vec<FieldChange> {
    // Most nodes of two versions are the same: compared whole first, they cost no field map.
    if a.kind == b.kind && a.data == b.data && a.extra == b.extra {
        return Vec::new();
    }
    let mut fields = Vec::new();
    if a.kind != b.kind {
        fields.push(change(
            "type",
            Some(&Value::from(a.kind.as_str())),
            Some(&Value::from(b.kind.as_str())),
        ));
    }
    fields.extend(map_changes(
        a.data.iter().map(|(key, value)| (key.as_str(), value)),
        b.data.iter().map(|(key, value)| (key.as_str(), value)),
    ));
    fields.extend(map_changes(
        a.extra.iter().map(|(key, value)| (key.as_str(), value)),
        b.extra.iter().map(|(key, value)| (key.as_str(), value)),
    ));
    fields
}

/// The keys whose values differ between two maps, in key order.
fn map_changes<'a>(
    a: impl Iterator<Item = (&'a str, &'a Value)>,
    b: impl Iterator<Item = (&'a str, &'a Value)>,
) -> Vec<FieldChange> {
    let mut keys: BTreeMap<&str, (Option<&Value>, Option<&Value>)> = BTreeMap::new();
    for (key, value) in a {
        keys.entry(key).or_default().0 = Some(value);
    }
    for (key, value) in b {
        keys.entry(key).or_default().1 = Some(value);
    }
    keys.into_iter()
        .filter(|(_, (a, b))| a != b)
        .map(|(key, (a, b))| change(key, a, b))
        .collect()
}

fn change(field: &str, a: Option<&Value>, b: Option<&Value>) -> FieldChange {
    let lines = match (a, b) {
        (Some(Value::String(a)), Some(Value::String(b)))
            if a.contains('\n') || b.contains('\n') =>
        {
            Some(line_diff(a, b))
        }
        _ => None,
    };
    FieldChange {
        field: field.to_string(),
        a: a.cloned(),
        b: b.cloned(),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(value: Value) -> Flow {
        Flow::from_value(value, "test").expect("a flow")
    }

    fn base() -> Value {
        json!({
            "version": 1,
            "name": "Triage",
            "settings": {"maxNodeVisits": 10},
            "nodes": [
                {"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                {"id": "draft", "type": "agent", "position": {"x": 200, "y": 0}, "data": {"model": "gpt-4o-mini", "userPrompt": "Write a reply.\nBe kind."}},
                {"id": "old", "type": "template", "position": {"x": 400, "y": 0}, "data": {"template": "x"}}
            ],
            "edges": [
                {"id": "e1", "source": "start", "target": "draft"},
                {"id": "e2", "source": "draft", "target": "old"}
            ]
        })
    }

    #[test]
    fn names_what_was_added_removed_changed_and_moved() {
        let a = flow(base());
        let mut changed = base();
        changed["settings"]["maxNodeVisits"] = json!(20);
        changed["nodes"][0]["position"]["x"] = json!(-40);
        changed["nodes"][1]["data"]["userPrompt"] = json!("Write a reply.\nBe brief.");
        changed["nodes"][1]["data"]["temperature"] = json!(0.2);
        changed["nodes"][2] =
            json!({"id": "send", "type": "output", "position": {"x": 400, "y": 0}});
        // The same join under another id is the same edge.
        changed["edges"][0]["id"] = json!("renamed");
        changed["edges"][1] = json!({"id": "e3", "source": "draft", "target": "send"});
        let b = flow(changed);

        let diff = diff_flows(&a, &b);
        assert!(!diff.is_empty());
        assert_eq!(diff.settings[0].field, "maxNodeVisits");
        assert_eq!(
            (diff.settings[0].a.clone(), diff.settings[0].b.clone()),
            (Some(json!(10)), Some(json!(20)))
        );
        assert_eq!(
            diff.nodes_added
                .iter()
                .map(|n| n.id.as_str())
                .collect::<Vec<_>>(),
            ["send"]
        );
        assert_eq!(
            diff.nodes_removed
                .iter()
                .map(|n| n.id.as_str())
                .collect::<Vec<_>>(),
            ["old"]
        );
        assert_eq!(
            diff.nodes_moved
                .iter()
                .map(|n| n.id.as_str())
                .collect::<Vec<_>>(),
            ["start"]
        );
        let draft = &diff.nodes_changed[0];
        assert_eq!(draft.node.id, "draft");
        let fields: Vec<&str> = draft.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["temperature", "userPrompt"]);
        assert_eq!(draft.fields[0].a, None, "temperature was added");
        assert_eq!(
            draft.fields[1].lines.as_deref(),
            Some(
                &[
                    DiffLine::Same("Write a reply.".into()),
                    DiffLine::Removed("Be kind.".into()),
                    DiffLine::Added("Be brief.".into()),
                ][..]
            )
        );
        assert_eq!(
            diff.edges_removed
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            ["e2"]
        );
        assert_eq!(
            diff.edges_added
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            ["e3"]
        );
    }

    #[test]
    fn the_same_flow_and_a_moved_node_are_told_apart() {
        let a = flow(base());
        assert!(diff_flows(&a, &a).is_empty());
        let mut moved = base();
        moved["nodes"][1]["position"]["y"] = json!(80);
        let diff = diff_flows(&a, &flow(moved));
        assert!(!diff.is_empty());
        // Only moved: listed apart from the changes that can make a run differ.
        assert_eq!(
            diff.nodes_moved
                .iter()
                .map(|n| n.id.as_str())
                .collect::<Vec<_>>(),
            ["draft"]
        );
        assert!(
            diff.nodes_changed.is_empty() && diff.settings.is_empty(),
            "{diff:?}"
        );
    }
}
