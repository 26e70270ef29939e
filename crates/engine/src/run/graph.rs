//! The parts of a flow a run looks up on every step, built once per run.

use std::collections::HashMap;
use std::sync::Arc;

use weft_flow::Flow;
use weft_nodes::{CommonSettings, NodeConfig, NodeKind, ParsedNode};

/// A node as a run sees it: its place in the flow, kind, parsed config and run settings.
pub(crate) struct GraphNode {
    /// Position in `flow.nodes`.
    pub index: usize,
    pub kind: NodeKind,
    pub config: NodeConfig,
    pub settings: CommonSettings,
    /// The label a person sees ([`weft_flow::Node::label`]) when it is not the id: kept
    /// here so that a step's events do not read the flow's node again.
    label: Option<Box<str>>,
}

impl GraphNode {
    /// The label a person sees of this node, whose id is `id`.
    pub(crate) fn label<'a>(&'a self, id: &'a str) -> &'a str {
        self.label.as_deref().unwrap_or(id)
    }
}

/// A map by node id. Looked up several times per step, so with a faster hash than std's
/// SipHash (the ids come from the flow being run, not from a stranger).
pub(crate) type ByNode<V> = HashMap<String, V, foldhash::fast::RandomState>;

pub(crate) struct Graph {
    pub nodes: ByNode<GraphNode>,
    /// Execution edges by source node: (source handle, target node). The target's id is
    /// shared with the steps queued along the edge.
    pub outgoing: ByNode<Vec<(String, Arc<str>)>>,
    /// Subagent children by parent agent, in edge order.
    pub subagents: ByNode<Vec<String>>,
    /// Sources of the execution edges arriving at each node (each once).
    pub incoming: ByNode<Vec<String>>,
}

impl Graph {
    /// Builds the graph of a flow the validator accepted. Nodes whose kind is unknown or whose
    /// config does not parse are left out (validation has already refused such flows).
    pub(crate) fn build(flow: &Flow) -> Graph {
        Graph::from_parsed(flow, flow.nodes.iter().map(ParsedNode::parse).collect())
    }

    /// [`Graph::build`] from the nodes the validator parsed (`parsed[i]` is `flow.nodes[i]`).
    pub(crate) fn from_parsed(flow: &Flow, parsed: Vec<Option<ParsedNode>>) -> Graph {
        let mut nodes = ByNode::with_capacity_and_hasher(flow.nodes.len(), Default::default());
        for (index, (node, parsed)) in flow.nodes.iter().zip(parsed).enumerate() {
            let Some(ParsedNode {
                kind,
                config,
                settings,
            }) = parsed
            else {
                continue;
            };
            let label = Some(node.label())
                .filter(|label| *label != node.id)
                .map(Box::from);
            nodes.entry(node.id.clone()).or_insert(GraphNode {
                index,
                kind,
                config,
                settings,
                label,
            });
        }
        let mut outgoing: ByNode<Vec<(String, Arc<str>)>> = ByNode::default();
        let mut subagents: ByNode<Vec<String>> = ByNode::default();
        let mut incoming: ByNode<Vec<String>> = ByNode::default();
        for edge in &flow.edges {
            if edge.is_subagent() {
                subagents
                    .entry(edge.source.clone())
                    .or_default()
                    .push(edge.target.clone());
            } else {
                let sources = incoming.entry(edge.target.clone()).or_default();
                if !sources.contains(&edge.source) {
                    sources.push(edge.source.clone());
                }
                outgoing.entry(edge.source.clone()).or_default().push((
                    edge.source_handle().to_string(),
                    Arc::from(edge.target.as_str()),
                ));
            }
        }
        Graph {
            nodes,
            outgoing,
            subagents,
            incoming,
        }
    }

    /// Sources of the execution edges arriving at `node_id`.
    pub(crate) fn sources_of<'a>(&'a self, node_id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.incoming
            .get(node_id)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Targets of every execution edge leaving `node_id`, whatever the handle.
    pub(crate) fn all_targets<'a>(&'a self, node_id: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.outgoing
            .get(node_id)
            .into_iter()
            .flatten()
            .map(|(_, target)| &**target)
    }

    /// Targets of the execution edges leaving `node_id` by `handle`.
    pub(crate) fn targets<'a>(
        &'a self,
        node_id: &str,
        handle: &'a str,
    ) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        self.outgoing
            .get(node_id)
            .into_iter()
            .flatten()
            .filter(move |(edge_handle, _)| edge_handle == handle)
            .map(|(_, target)| target)
    }
}
