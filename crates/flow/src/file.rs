//! The flow file (docs/flows.md): loading, normalization of older and foreign forms, and saving.
//!
//! A [`Flow`] keeps every field it does not know about (`extra` maps at each level and the
//! free-form `data` object of each node), so a load/save round trip never loses what another
//! tool or a newer Weft wrote. Saving writes known keys in a fixed order, unknown keys sorted,
//! node `data` keys sorted, 2-space indent and integer positions, so flow files diff well.
//!
//! Loading accepts, besides Weft's own form:
//! - the AgentFlow files of seed 003: `connections` instead of `edges` (without ids) and
//!   nodes with `x`/`y` instead of `position`;
//! - legacy forms: node type `input` (now `approval`), `if.data.condition` (now `conditions`),
//!   and the `true` handle of an `if` (now `condition-0`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

mod canonical;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The current flow file format version written on save.
pub const FLOW_FORMAT_VERSION: u64 = 1;

/// A workflow graph as stored in a `*.json` flow file.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flow {
    #[serde(default = "default_version")]
    pub version: u64,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub settings: Map<String, Value>,
    #[serde(default)]
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub edges: Vec<Edge>,
    /// Fields Weft does not know, kept as they were.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

fn default_version() -> u64 {
    FLOW_FORMAT_VERSION
}

/// A node on the canvas. `kind` is the node type id (`start`, `agent`, `if`, ...); it stays a
/// string here so that a file with an unknown type still loads and the validator can name it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Node {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub position: Position,
    #[serde(default)]
    pub data: Map<String, Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Node {
    /// The label a person sees: `data.label`, else the id.
    pub fn label(&self) -> &str {
        self.data
            .get("label")
            .and_then(Value::as_str)
            .filter(|label| !label.trim().is_empty())
            .unwrap_or(&self.id)
    }
}

/// A canvas position. Stored as integers; fractional positions from the canvas are rounded on save.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Position {
    // Written as integers, read as any number: a plain `number` on the TypeScript side.
    #[serde(default, serialize_with = "round_coordinate")]
    #[cfg_attr(feature = "specta", specta(type = f64))]
    pub x: f64,
    #[serde(default, serialize_with = "round_coordinate")]
    #[cfg_attr(feature = "specta", specta(type = f64))]
    pub y: f64,
}

fn round_coordinate<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    // Positions beyond i64 cannot come from a canvas; clamp rather than fail the save.
    serializer.serialize_i64(value.round().clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

/// The handle an edge leaves by when the file does not say.
pub const DEFAULT_SOURCE_HANDLE: &str = "output";
/// The handle an edge arrives at when the file does not say.
pub const DEFAULT_TARGET_HANDLE: &str = "input";
/// The source handle that marks a subagent edge (not an execution edge).
pub const SUBAGENT_HANDLE: &str = "subagent";

/// A connection between two nodes. An edge whose `source_handle` is `subagent` makes the target
/// agent a tool of the source agent; every other edge is an execution edge.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    pub id: String,
    pub source: String,
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_handle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_handle: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Edge {
    pub fn source_handle(&self) -> &str {
        self.source_handle
            .as_deref()
            .unwrap_or(DEFAULT_SOURCE_HANDLE)
    }

    pub fn target_handle(&self) -> &str {
        self.target_handle
            .as_deref()
            .unwrap_or(DEFAULT_TARGET_HANDLE)
    }

    pub fn is_subagent(&self) -> bool {
        self.source_handle() == SUBAGENT_HANDLE
    }
}

/// The largest flow file Weft reads (a flow with thousands of nodes is a few MiB).
pub const MAX_FLOW_FILE_BYTES: u64 = crate::MAX_FILE_BYTES;

/// The most `settings.maxNodeVisits` may allow: every visit is stored with its events, and a
/// loop allowed a million visits filled a disk before it ended.
pub const MAX_NODE_VISITS: u64 = 100_000;

/// Why a flow file could not be read. Problems *inside* a well-formed flow (a missing start,
/// a dangling edge, a field of the wrong type) are not load errors: the validator reports them
/// all at once.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is missing, unreadable, not a regular file, or not UTF-8 text.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {} MiB, too large for a flow file", MAX_FLOW_FILE_BYTES / 1024 / 1024)]
    TooLarge { path: PathBuf },
    #[error("{origin} is not valid JSON: {source}")]
    NotJson {
        origin: String,
        source: serde_json::Error,
    },
    #[error("{origin} is not a flow: {message}")]
    NotAFlow { origin: String, message: String },
}

impl Flow {
    /// Reads and normalizes a flow file: a regular file (so a named pipe is refused rather
    /// than waited on, a device such as `/dev/zero` rather than read without end) of at most
    /// [`MAX_FLOW_FILE_BYTES`].
    pub fn load(path: &Path) -> Result<Flow, LoadError> {
        let text = crate::read_text_file(path, MAX_FLOW_FILE_BYTES).map_err(|source| {
            if source.kind() == std::io::ErrorKind::FileTooLarge {
                LoadError::TooLarge {
                    path: path.to_path_buf(),
                }
            } else {
                LoadError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        Flow::parse(&text, &path.display().to_string())
    }

    /// Parses and normalizes flow JSON. `origin` names the source in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Flow, LoadError> {
        if let Some(canonical) = canonical::read(text) {
            return Flow::assembled(canonical.root, canonical.nodes, canonical.edges, origin);
        }
        let value: Value = serde_json::from_str(text).map_err(|source| LoadError::NotJson {
            origin: origin.to_string(),
            source,
        })?;
        Flow::from_value(value, origin)
    }

    /// Normalizes a JSON value (any of the accepted forms) into a flow.
    pub fn from_value(value: Value, origin: &str) -> Result<Flow, LoadError> {
        let not_a_flow = |message: String| LoadError::NotAFlow {
            origin: origin.to_string(),
            message,
        };
        let Value::Object(mut root) = value else {
            return Err(not_a_flow(format!(
                "expected a JSON object with `nodes` and `edges`, found {}",
                json_kind(&value)
            )));
        };
        normalize_root(&mut root).map_err(not_a_flow)?;
        // Nodes and edges are taken apart by hand: `normalize_root` has checked the type of
        // every field they have, and serde's `flatten` (the fields Weft does not know) buffers
        // each object first, which made reading a large flow several times slower.
        let nodes = take_array(&mut root, "nodes");
        let edges = take_array(&mut root, "edges");
        Flow::assembled(
            root,
            nodes.into_iter().filter_map(node_from_value).collect(),
            edges.into_iter().filter_map(edge_from_value).collect(),
            origin,
        )
    }

    /// The flow of the root fields `root` (all but `nodes` and `edges`), `nodes` and `edges`,
    /// with legacy kinds in today's form.
    fn assembled(
        root: Map<String, Value>,
        nodes: Vec<Node>,
        edges: Vec<Edge>,
        origin: &str,
    ) -> Result<Flow, LoadError> {
        let mut flow: Flow =
            serde_json::from_value(Value::Object(root)).map_err(|error| LoadError::NotAFlow {
                origin: origin.to_string(),
                message: error.to_string(),
            })?;
        flow.nodes = nodes;
        flow.edges = edges;
        normalize_legacy_kinds(&mut flow);
        Ok(flow)
    }

    /// The normalized file text: stable key order, 2-space indent, integer positions, newline at
    /// the end.
    pub fn to_file_string(&self) -> String {
        // Serializing a struct with plain maps cannot fail (all keys are strings).
        let mut text = if self.keys_sorted() {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string_pretty(&self.with_sorted_keys())
        }
        .unwrap_or_default();
        text.push('\n');
        text
    }

    /// This flow's version: its canonical form, compact (what a store keeps of the flow a run
    /// ran), and that text's SHA-256. Two flows that save to the same file have the same
    /// version, whatever their whitespace or key order.
    pub fn version(&self) -> FlowVersion {
        let json = if self.keys_sorted() {
            serde_json::to_string(self)
        } else {
            serde_json::to_string(&self.with_sorted_keys())
        }
        .unwrap_or_default();
        let hash = Sha256::digest(json.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        FlowVersion { hash, json }
    }

    /// Whether every key of the nodes' data and the settings is in order already, as it always
    /// is where serde_json keeps objects sorted (unless a crate in the build asks it to keep
    /// them in their order): then the flow is its own canonical form, with no copy to make.
    fn keys_sorted(&self) -> bool {
        self.nodes.iter().all(|node| map_keys_sorted(&node.data)) && map_keys_sorted(&self.settings)
    }

    fn with_sorted_keys(&self) -> Flow {
        let mut flow = self.clone();
        for node in &mut flow.nodes {
            sort_keys_in_map(&mut node.data);
        }
        sort_keys_in_map(&mut flow.settings);
        flow
    }

    /// Writes the normalized form to `path`, replacing the file whole ([`crate::replace_file`]).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::replace_file(
            path,
            self.to_file_string().as_bytes(),
            crate::Access::AsBefore,
        )
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// `settings.maxNodeVisits`, default 25, at most [`MAX_NODE_VISITS`] (validation refuses
    /// more).
    pub fn max_node_visits(&self) -> u64 {
        self.settings
            .get("maxNodeVisits")
            .and_then(Value::as_u64)
            .unwrap_or(25)
            .min(MAX_NODE_VISITS)
    }

    /// `settings.vars`, the flow's constants for templates.
    pub fn vars(&self) -> Value {
        self.settings
            .get("vars")
            .cloned()
            .unwrap_or(Value::Object(Map::new()))
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Structural normalization on raw JSON: AgentFlow `connections`, `x`/`y` positions, missing
/// edge ids, and field-type checks with messages that name the node or edge.
fn normalize_root(root: &mut Map<String, Value>) -> Result<(), String> {
    if !root.contains_key("edges")
        && let Some(connections) = root.remove("connections")
    {
        root.insert("edges".into(), connections);
    }
    if let Some(nodes) = root.get_mut("nodes") {
        let Value::Array(nodes) = nodes else {
            return Err(format!(
                "`nodes` must be an array, found {}",
                json_kind(nodes)
            ));
        };
        for (index, node) in nodes.iter_mut().enumerate() {
            let Value::Object(node) = node else {
                return Err(format!(
                    "nodes[{index}] must be an object, found {}",
                    json_kind(node)
                ));
            };
            let name = match node.get("id") {
                Some(Value::String(id)) => format!("node `{id}`"),
                Some(other) => {
                    return Err(format!(
                        "nodes[{index}].id must be a string, found {}",
                        json_kind(other)
                    ));
                }
                None => return Err(format!("nodes[{index}] has no `id`")),
            };
            match node.get("type") {
                Some(Value::String(_)) => {}
                Some(other) => {
                    return Err(format!(
                        "{name}: `type` must be a string, found {}",
                        json_kind(other)
                    ));
                }
                None => return Err(format!("{name} has no `type`")),
            }
            if !node.contains_key("position") && (node.contains_key("x") || node.contains_key("y"))
            {
                let x = node.remove("x").unwrap_or(Value::from(0));
                let y = node.remove("y").unwrap_or(Value::from(0));
                node.insert("position".into(), serde_json::json!({ "x": x, "y": y }));
            }
            if let Some(position) = node.get("position") {
                let ok = position.as_object().is_some_and(|p| {
                    p.values().all(Value::is_number) && p.keys().all(|k| k == "x" || k == "y")
                });
                if !ok {
                    return Err(format!(
                        "{name}: `position` must be {{\"x\": number, \"y\": number}}"
                    ));
                }
            }
            match node.get("data") {
                None | Some(Value::Object(_)) => {}
                Some(Value::Null) => {
                    node.remove("data");
                }
                Some(other) => {
                    return Err(format!(
                        "{name}: `data` must be an object, found {}",
                        json_kind(other)
                    ));
                }
            }
        }
    }
    if let Some(edges) = root.get_mut("edges") {
        let Value::Array(edges) = edges else {
            return Err(format!(
                "`edges` must be an array, found {}",
                json_kind(edges)
            ));
        };
        let mut taken: HashSet<String> = edges
            .iter()
            .filter_map(|edge| edge.get("id").and_then(Value::as_str).map(str::to_string))
            .collect();
        for (index, edge) in edges.iter_mut().enumerate() {
            let Value::Object(edge) = edge else {
                return Err(format!(
                    "edges[{index}] must be an object, found {}",
                    json_kind(edge)
                ));
            };
            for field in ["source", "target"] {
                match edge.get(field) {
                    Some(Value::String(_)) => {}
                    Some(other) => {
                        return Err(format!(
                            "edges[{index}].{field} must be a node id (a string), found {}",
                            json_kind(other)
                        ));
                    }
                    None => return Err(format!("edges[{index}] has no `{field}`")),
                }
            }
            for field in ["sourceHandle", "targetHandle"] {
                match edge.get(field) {
                    None | Some(Value::String(_)) => {}
                    Some(Value::Null) => {
                        edge.remove(field);
                    }
                    Some(other) => {
                        return Err(format!(
                            "edges[{index}].{field} must be a string, found {}",
                            json_kind(other)
                        ));
                    }
                }
            }
            match edge.get("id") {
                Some(Value::String(_)) => {}
                Some(other) => {
                    return Err(format!(
                        "edges[{index}].id must be a string, found {}",
                        json_kind(other)
                    ));
                }
                None => {
                    let id = unique_edge_id(edge, &mut taken);
                    edge.insert("id".into(), Value::String(id));
                }
            }
        }
    }
    Ok(())
}

fn take_array(root: &mut Map<String, Value>, key: &str) -> Vec<Value> {
    match root.remove(key) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.remove(key) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

/// A node object `normalize_root` accepted.
fn node_from_value(value: Value) -> Option<Node> {
    let Value::Object(mut map) = value else {
        return None;
    };
    let id = take_string(&mut map, "id")?;
    let kind = take_string(&mut map, "type")?;
    let position = match map.remove("position") {
        Some(Value::Object(position)) => {
            let coordinate = |key| position.get(key).and_then(Value::as_f64).unwrap_or(0.0);
            Position {
                x: coordinate("x"),
                y: coordinate("y"),
            }
        }
        _ => Position::default(),
    };
    let data = match map.remove("data") {
        Some(Value::Object(data)) => data,
        _ => Map::new(),
    };
    Some(Node {
        id,
        kind,
        position,
        data,
        extra: map.into_iter().collect(),
    })
}

/// An edge object `normalize_root` accepted.
fn edge_from_value(value: Value) -> Option<Edge> {
    let Value::Object(mut map) = value else {
        return None;
    };
    Some(Edge {
        id: take_string(&mut map, "id")?,
        source: take_string(&mut map, "source")?,
        target: take_string(&mut map, "target")?,
        source_handle: take_string(&mut map, "sourceHandle"),
        target_handle: take_string(&mut map, "targetHandle"),
        extra: map.into_iter().collect(),
    })
}

/// A readable, stable id for an edge that came without one (AgentFlow connections).
fn unique_edge_id(edge: &Map<String, Value>, taken: &mut HashSet<String>) -> String {
    let part = |key: &str| {
        edge.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let handle = edge
        .get("sourceHandle")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_SOURCE_HANDLE);
    let base = format!("e-{}-{}-{}", part("source"), handle, part("target"));
    let mut candidate = base.clone();
    let mut counter = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}-{counter}");
        counter += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// Legacy node types and `if` forms.
fn normalize_legacy_kinds(flow: &mut Flow) {
    for node in &mut flow.nodes {
        if node.kind == "input" {
            node.kind = "approval".into();
        }
        if node.kind == "if"
            && !node.data.contains_key("conditions")
            && let Some(condition) = node.data.remove("condition")
        {
            let condition = match condition {
                Value::String(text) => {
                    serde_json::json!({ "operator": "contains", "value": text })
                }
                other => other,
            };
            node.data
                .insert("conditions".into(), Value::Array(vec![condition]));
        }
    }
    // Only an older file has `true` handles: the set of `if` nodes is not built for the others.
    if !flow
        .edges
        .iter()
        .any(|edge| edge.source_handle.as_deref() == Some("true"))
    {
        return;
    }
    let if_nodes: HashSet<&str> = flow
        .nodes
        .iter()
        .filter(|node| node.kind == "if")
        .map(|node| node.id.as_str())
        .collect();
    for edge in &mut flow.edges {
        if edge.source_handle.as_deref() == Some("true") && if_nodes.contains(edge.source.as_str())
        {
            edge.source_handle = Some("condition-0".into());
        }
    }
}

/// A flow's content as stored once per distinct version: the canonical JSON (compact) and its
/// SHA-256 in lowercase hex, which names the version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowVersion {
    pub hash: String,
    pub json: String,
}

/// The name a file's uses of versions are recorded and looked up under: its resolved path
/// (links and `..` resolved), else (a file that is gone) its absolute path, else as given. A
/// run of `flows/a.json`, a subflow reached as `parts/../a.json` and a save by the app all
/// name the same file so.
pub fn version_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// How many leading characters of a version's hash name it where it is shown.
pub const SHORT_HASH: usize = 12;

/// The first [`SHORT_HASH`] characters of a version's hash.
pub fn short_hash(hash: &str) -> &str {
    hash.get(..SHORT_HASH).unwrap_or(hash)
}

fn sort_keys_in_map(map: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (key, mut value) in entries {
        sort_keys(&mut value);
        map.insert(key, value);
    }
}

fn map_keys_sorted(map: &Map<String, Value>) -> bool {
    let mut previous: Option<&String> = None;
    map.iter().all(|(key, value)| {
        let in_order = previous.is_none_or(|before| before < key);
        previous = Some(key);
        in_order && value_keys_sorted(value)
    })
}

fn value_keys_sorted(value: &Value) -> bool {
    match value {
        Value::Object(map) => map_keys_sorted(map),
        Value::Array(items) => items.iter().all(value_keys_sorted),
        _ => true,
    }
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => sort_keys_in_map(map),
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn an_endless_device_is_refused_as_no_file() {
        let error = Flow::load(Path::new("/dev/zero")).expect_err("refused");
        assert!(matches!(error, LoadError::Read { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "cannot read /dev/zero: not a regular file but a character device"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("big.json");
        std::fs::File::create(&path)
            .and_then(|file| file.set_len(MAX_FLOW_FILE_BYTES + 1))
            .expect("sparse file");
        let error = Flow::load(&path).expect_err("refused");
        assert!(matches!(error, LoadError::TooLarge { .. }), "{error:?}");
        assert!(error.to_string().contains("larger than 32 MiB"), "{error}");
    }

    #[test]
    fn agentflow_connections_and_xy_positions_load() {
        let flow = Flow::parse(
            r#"{"nodes":[{"id":"s","type":"start","x":10.6,"y":-3,"data":{}},
                         {"id":"g","type":"input","x":5,"y":5,"data":{"message":"ok?"}}],
                "connections":[{"source":"s","target":"g"},{"source":"s","target":"g"}]}"#,
            "test",
        )
        .expect("loads");
        assert_eq!(flow.edges.len(), 2);
        assert_eq!(flow.edges[0].id, "e-s-output-g");
        assert_eq!(flow.edges[1].id, "e-s-output-g-2");
        assert_eq!(flow.nodes[1].kind, "approval");
        assert_eq!(flow.nodes[0].position, Position { x: 10.6, y: -3.0 });
        let saved = flow.to_file_string();
        assert!(saved.contains("\"x\": 11,"), "{saved}");
        assert!(!saved.contains("connections"));
    }

    #[test]
    fn legacy_if_condition_and_true_handle_normalize() {
        let flow = Flow::parse(
            r#"{"nodes":[{"id":"i","type":"if","data":{"condition":"refund"}}],
                "edges":[{"id":"e","source":"i","target":"x","sourceHandle":"true"}]}"#,
            "test",
        )
        .expect("loads");
        assert_eq!(
            flow.nodes[0].data["conditions"],
            serde_json::json!([{ "operator": "contains", "value": "refund" }])
        );
        assert_eq!(flow.edges[0].source_handle(), "condition-0");
    }

    #[test]
    fn unknown_fields_survive_a_round_trip_in_stable_order() {
        let text = r#"{"zeta":1,"nodes":[{"type":"start","id":"s","data":{"b":1,"a":{"y":1,"x":2}},"custom":true,
                       "position":{"x":10.4,"y":-3}}],
                       "edges":[{"id":"e","source":"s","target":"s","sourceHandle":"output","animated":true}],
                       "name":"n","alpha":[1]}"#;
        let flow = Flow::parse(text, "test").expect("loads");
        let saved = flow.to_file_string();
        let again = Flow::parse(&saved, "saved").expect("reloads");
        assert_eq!(again.to_file_string(), saved);
        assert_eq!(again.extra["zeta"], 1);
        assert_eq!(again.nodes[0].extra["custom"], true);
        assert_eq!(again.nodes[0].data["a"]["x"], 2);
        assert_eq!(again.nodes[0].position, Position { x: 10.0, y: -3.0 });
        assert_eq!(again.edges[0].extra["animated"], true);
        assert_eq!(again.edges[0].source_handle.as_deref(), Some("output"));
        assert_eq!(again.edges[0].target_handle, None);
        let order: Vec<usize> = [
            "\"version\"",
            "\"name\"",
            "\"nodes\"",
            "\"edges\"",
            "\"alpha\"",
            "\"zeta\"",
        ]
        .iter()
        .map(|key| saved.find(key).expect("key present"))
        .collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{saved}");
        assert!(saved.find("\"a\"") < saved.find("\"b\""));
        assert!(saved.contains("\n  \"name\""), "2-space indent: {saved}");
    }

    #[test]
    fn structural_errors_name_the_place() {
        let error =
            Flow::parse(r#"{"nodes":[{"id":"a","type":7}]}"#, "f.json").expect_err("bad type");
        assert_eq!(
            error.to_string(),
            "f.json is not a flow: node `a`: `type` must be a string, found a number"
        );
        let error = Flow::parse("[1]", "f.json").expect_err("not object");
        assert!(error.to_string().contains("expected a JSON object"));
        let error = Flow::parse("{nope", "f.json").expect_err("not json");
        assert!(error.to_string().starts_with("f.json is not valid JSON"));
    }

    /// The general reader: a JSON tree, normalized.
    fn read_generally(text: &str) -> Result<Flow, LoadError> {
        let value: Value = serde_json::from_str(text).expect("JSON");
        Flow::from_value(value, "f.json")
    }

    #[test]
    fn files_in_weft_form_read_directly_the_same_as_through_a_json_tree() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
        let mut read = 0;
        for entry in std::fs::read_dir(&folder).expect("flows folder") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            if !name.ends_with(".json") || name.ends_with(".tests.json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            assert!(canonical::read(&text).is_some(), "{name} is in Weft's form");
            let direct = Flow::parse(&text, "f.json").expect("loads");
            assert_eq!(direct, read_generally(&text).expect("loads"), "{name}");
            read += 1;
        }
        assert!(read >= 10, "only {read} example flows");
        // Every field in every place, including the unknown ones kept as they are.
        let full = r#"{"version": 1, "name": "n", "settings": {"maxNodeVisits": 3}, "extraRoot": [1],
            "nodes": [{"id": "s", "type": "start", "position": {"x": 1.5}, "data": null, "z": 2},
                      {"id": "i", "type": "input", "data": {"prompt": "ok?"}},
                      {"id": "c", "type": "if", "position": {"y": -3, "x": 7}, "data": {"condition": {"operator": "contains", "value": "a"}}}],
            "edges": [{"id": "e1", "source": "s", "target": "c", "sourceHandle": null, "animated": true},
                      {"id": "e2", "source": "c", "target": "i", "sourceHandle": "true", "targetHandle": "input"}]}"#;
        assert!(canonical::read(full).is_some());
        assert_eq!(
            Flow::parse(full, "f.json").expect("loads"),
            read_generally(full).expect("loads")
        );
    }

    #[test]
    fn foreign_forms_and_wrong_fields_go_through_the_general_reader() {
        let foreign = [
            // AgentFlow: connections without ids, x/y coordinates.
            r#"{"nodes": [{"id": "s", "type": "start", "x": 1, "y": 2}], "connections": [{"source": "s", "target": "s"}]}"#,
            // An edge without an id gets one.
            r#"{"nodes": [{"id": "s", "type": "start"}], "edges": [{"source": "s", "target": "s"}]}"#,
            // Positions and fields of the wrong type are named by the general reader.
            r#"{"nodes": [{"id": "s", "type": "start", "position": {"x": "1"}}]}"#,
            r#"{"nodes": [{"id": "s", "type": "start", "position": {"x": 1, "z": 0}}]}"#,
            r#"{"nodes": [{"id": 1, "type": "start"}]}"#,
            r#"{"nodes": [{"id": "s", "type": "start", "data": []}]}"#,
            r#"{"nodes": [{"type": "start"}]}"#,
            r#"{"nodes": {}}"#,
            r#"{"edges": [{"id": "e", "source": "a", "target": "b", "sourceHandle": 3}]}"#,
        ];
        for text in foreign {
            assert!(canonical::read(text).is_none(), "{text}");
            let parsed = Flow::parse(text, "f.json").map_err(|error| error.to_string());
            let general = read_generally(text).map_err(|error| error.to_string());
            assert_eq!(parsed, general, "{text}");
        }
        assert_eq!(
            Flow::parse(foreign[2], "f.json")
                .expect_err("wrong position")
                .to_string(),
            "f.json is not a flow: node `s`: `position` must be {\"x\": number, \"y\": number}"
        );
    }
}
