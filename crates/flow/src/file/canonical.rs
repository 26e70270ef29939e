//! Reading a flow file that is in Weft's own form straight into nodes and edges.
//!
//! The general reader ([`super::Flow::from_value`]) builds a JSON tree of the whole file, checks
//! and rewrites it (AgentFlow `connections`, `x`/`y` positions, edges without ids) and then
//! takes each node apart: for a 10,000-node file that was a third of `weft run`'s set-up. A
//! file Weft or its app wrote needs none of that, so it is read here node by node; anything
//! this reader does not take as it is (a foreign or older form, a field of the wrong type)
//! makes it give up, and the general reader reads the file and names what is wrong.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::{Edge, Node, Position};

/// A flow file in Weft's own form, taken apart: every root field but `nodes` and `edges` in
/// `root`.
pub(super) struct CanonicalFlow {
    pub root: Map<String, Value>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// `text` in Weft's own form, or `None` (not JSON, or a form only the general reader takes).
pub(super) fn read(text: &str) -> Option<CanonicalFlow> {
    serde_json::from_str(text).ok()
}

/// Why this reader gave up; never shown (the general reader then reads the file).
fn foreign<E: de::Error>() -> E {
    E::custom("not in Weft's own form")
}

/// `Deserialize` for `$type`, read from a JSON object by `$body` (with the object's entries
/// in `$map`); `$what` names what was expected in serde's own errors.
macro_rules! read_from_object {
    ($type:ident, $what:literal, |$map:ident| $body:block) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ObjectVisitor;

                impl<'de> Visitor<'de> for ObjectVisitor {
                    type Value = $type;

                    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                        formatter.write_str($what)
                    }

                    fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$type, A::Error> {
                        $body
                    }
                }

                deserializer.deserialize_map(ObjectVisitor)
            }
        }
    };
}

read_from_object!(CanonicalFlow, "a flow object", |map| {
    let mut flow = CanonicalFlow {
        root: Map::new(),
        nodes: Vec::new(),
        edges: Vec::new(),
    };
    // A key given twice counts once, the last time, as in a JSON tree.
    while let Some(key) = map.next_key::<String>()? {
        match key.as_str() {
            "nodes" => {
                let nodes: Vec<CanonicalNode> = map.next_value()?;
                flow.nodes = nodes.into_iter().map(|node| node.0).collect();
            }
            "edges" => {
                let edges: Vec<CanonicalEdge> = map.next_value()?;
                flow.edges = edges.into_iter().map(|edge| edge.0).collect();
            }
            "connections" => return Err(foreign()),
            _ => {
                let value = map.next_value()?;
                flow.root.insert(key, value);
            }
        }
    }
    Ok(flow)
});

/// A node with a string `id` and `type`, `position` as `{"x", "y"}` numbers (either may be
/// left out), `data` an object or null.
struct CanonicalNode(Node);

read_from_object!(CanonicalNode, "a node object", |map| {
    let (mut id, mut kind) = (None, None);
    let mut position = Position::default();
    let mut data = Map::new();
    let mut extra = BTreeMap::new();
    while let Some(key) = map.next_key::<String>()? {
        match key.as_str() {
            "id" => id = Some(map.next_value::<String>()?),
            "type" => kind = Some(map.next_value::<String>()?),
            "position" => position = map.next_value::<CanonicalPosition>()?.0,
            "data" => {
                data = map
                    .next_value::<Option<Map<String, Value>>>()?
                    .unwrap_or_default()
            }
            // AgentFlow's coordinates: the general reader turns them into a position.
            "x" | "y" => return Err(foreign()),
            _ => {
                let value = map.next_value()?;
                extra.insert(key, value);
            }
        }
    }
    let (Some(id), Some(kind)) = (id, kind) else {
        return Err(foreign());
    };
    Ok(CanonicalNode(Node {
        id,
        kind,
        position,
        data,
        extra,
    }))
});

struct CanonicalPosition(Position);

read_from_object!(CanonicalPosition, "a position object", |map| {
    let mut position = Position::default();
    while let Some(key) = map.next_key::<String>()? {
        match key.as_str() {
            "x" => position.x = map.next_value()?,
            "y" => position.y = map.next_value()?,
            _ => return Err(foreign()),
        }
    }
    Ok(CanonicalPosition(position))
});

/// An edge with string `id`, `source` and `target`, handles strings or null.
struct CanonicalEdge(Edge);

read_from_object!(CanonicalEdge, "an edge object", |map| {
    let (mut id, mut source, mut target) = (None, None, None);
    let (mut source_handle, mut target_handle) = (None, None);
    let mut extra = BTreeMap::new();
    while let Some(key) = map.next_key::<String>()? {
        match key.as_str() {
            "id" => id = Some(map.next_value::<String>()?),
            "source" => source = Some(map.next_value::<String>()?),
            "target" => target = Some(map.next_value::<String>()?),
            "sourceHandle" => source_handle = map.next_value::<Option<String>>()?,
            "targetHandle" => target_handle = map.next_value::<Option<String>>()?,
            _ => {
                let value = map.next_value()?;
                extra.insert(key, value);
            }
        }
    }
    // An edge without an id gets one from the general reader, which sees all the others.
    let (Some(id), Some(source), Some(target)) = (id, source, target) else {
        return Err(foreign());
    };
    Ok(CanonicalEdge(Edge {
        id,
        source,
        target,
        source_handle,
        target_handle,
        extra,
    }))
});
