//! The validator (docs/flows.md#validation). One function, used by `weft
//! validate`, `weft run` and the canvas, that returns every problem at once, each naming the
//! node or edge it concerns.

use std::borrow::Cow;
use std::collections::VecDeque;

// Validation runs on every edit in the app and before every run, over maps keyed by node id:
// a faster hash than std's SipHash (ids come from the flow being checked, not a stranger).
use foldhash::{HashMap, HashMapExt as _, HashSet, HashSetExt as _};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::step::MAX_CHILD_DEPTH;
use crate::{CommonSettings, NodeConfig, NodeKind, ParsedNode, Scheduling};
use weft_flow::{DEFAULT_TARGET_HANDLE, Flow, Node, SUBAGENT_HANDLE};
use weft_providers::{ProviderSettings, route_model, supports_web_search};
use weft_template::check_syntax;

#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The flow cannot run.
    Error,
    /// Shown, but does not stop a run.
    Warning,
}

/// Which rule a problem breaks: a stable name the canvas and scripts can branch on.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ProblemCode {
    /// The flow has no `start` node.
    NoStart,
    /// A second `start` node.
    SeveralStarts,
    /// Two nodes or two edges share an id.
    DuplicateId,
    EmptyId,
    /// A node type Weft does not know.
    UnknownType,
    /// A field of the wrong type, out of range, or empty where it is required.
    InvalidField,
    /// A template that does not parse.
    TemplateSyntax,
    /// `settings.maxNodeVisits` or `settings.vars` of the wrong shape.
    InvalidSetting,
    /// A key of a node's `data` its kind does not read, or of the flow's `settings` (a
    /// warning: a misspelt key is otherwise ignored in silence).
    UnknownField,
    /// An edge whose source or target node does not exist.
    DanglingEdge,
    /// An edge leaving or entering by a handle its node does not have.
    UnknownHandle,
    /// A broken subagent rule (docs/kinds.md).
    SubagentRule,
    /// `start` has no outgoing edge.
    StartUnconnected,
    /// A node that can never run.
    Unreachable,
    /// An `if` with no branch, or only some, connected.
    IfBranches,
    /// An `approval` with no branch, or only some, connected.
    ApprovalBranches,
    /// A `subflow` or `forEach` flow file that is missing, invalid, or in a cycle.
    ChildFlow,
    /// Web search on a provider that has none.
    WebSearch,
    /// A model this machine's provider settings cannot serve.
    Provider,
    /// An MCP server of `settings.mcpServers` that cannot be used as written, or a
    /// `tools.mcp` entry naming a server the flow does not define (or, checked against the
    /// servers, a tool it does not list).
    McpTool,
}

impl ProblemCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One problem with a flow. At most one of `node_id` and `edge_id` is set; neither means the
/// flow as a whole.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub severity: Severity,
    /// The rule it breaks (`no-start`, `unknown-handle`, ...).
    pub code: ProblemCode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge_id: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn node_error(node_id: &str, code: ProblemCode, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            code,
            node_id: Some(node_id.to_string()),
            edge_id: None,
            message: message.into(),
        }
    }

    fn node_warning(node_id: &str, code: ProblemCode, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Warning,
            ..Problem::node_error(node_id, code, message)
        }
    }

    fn edge_error(edge_id: &str, code: ProblemCode, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            code,
            node_id: None,
            edge_id: Some(edge_id.to_string()),
            message: message.into(),
        }
    }

    fn flow_error(code: ProblemCode, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            code,
            node_id: None,
            edge_id: None,
            message: message.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match (&self.node_id, &self.edge_id) {
            (Some(id), _) => write!(f, "node {id}: {level}: {}", self.message),
            (None, Some(id)) => write!(f, "edge {id}: {level}: {}", self.message),
            (None, None) => write!(f, "flow: {level}: {}", self.message),
        }
    }
}

/// Every problem of `flow`, errors and warnings, in a stable order (flow-level first, then by
/// the order of nodes and edges in the file). `flow_path` locates files a flow refers to
/// (`subflow` and `forEach`), which are checked too.
pub fn validate(flow: &Flow, flow_path: Option<&Path>) -> Vec<Problem> {
    validate_parsing(flow, flow_path).0
}

/// [`validate`], with every node as it parsed (by position in `flow.nodes`), for a run.
pub fn validate_parsing(
    flow: &Flow,
    flow_path: Option<&Path>,
) -> (Vec<Problem>, Vec<Option<ParsedNode>>) {
    let mut stack: Vec<PathBuf> = flow_path.map(canonical).into_iter().collect();
    validate_within(flow, flow_path, &mut stack)
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `validate` for a flow reached through the files in `stack` (outermost first).
fn validate_within(
    flow: &Flow,
    flow_path: Option<&Path>,
    stack: &mut Vec<PathBuf>,
) -> (Vec<Problem>, Vec<Option<ParsedNode>>) {
    let mut problems = Vec::new();
    check_settings(flow, &mut problems);

    // Nodes: ids, types, fields, templates.
    let mut parsed: Vec<Option<ParsedNode>> = Vec::with_capacity(flow.nodes.len());
    // Sized for the flow up front: growing three maps of 10,000 nodes rehashed each of them
    // a dozen times.
    let node_count = flow.nodes.len();
    let mut handles: HashMap<&str, Vec<Cow<'static, str>>> = HashMap::with_capacity(node_count);
    let mut kinds: HashMap<&str, Option<NodeKind>> = HashMap::with_capacity(node_count);
    let mut seen = HashSet::with_capacity(node_count);
    for node in &flow.nodes {
        parsed.push(None);
        if !seen.insert(node.id.as_str()) {
            problems.push(Problem::node_error(
                &node.id,
                ProblemCode::DuplicateId,
                "another node has the same id",
            ));
            continue;
        }
        if node.id.trim().is_empty() {
            problems.push(Problem::node_error(
                &node.id,
                ProblemCode::EmptyId,
                "a node id cannot be empty",
            ));
        }
        let kind = NodeKind::of(node);
        kinds.insert(&node.id, kind);
        let Some(kind) = kind else {
            let known: Vec<&str> = NodeKind::all().iter().map(|kind| kind.id()).collect();
            problems.push(Problem::node_error(
                &node.id,
                ProblemCode::UnknownType,
                format!(
                    "node type `{}` is unknown (known types: {})",
                    node.kind,
                    known.join(", ")
                ),
            ));
            continue;
        };
        check_keys(node, kind, &mut problems);
        let settings = CommonSettings::parse(&node.data)
            .map_err(|error| {
                problems.push(Problem::node_error(
                    &node.id,
                    ProblemCode::InvalidField,
                    error.to_string(),
                ));
            })
            .ok();
        match NodeConfig::parse(kind, &node.data) {
            Ok(config) => {
                for (field, source) in kind.templates(&node.data) {
                    if let Err(error) = check_syntax(source) {
                        problems.push(Problem::node_error(
                            &node.id,
                            ProblemCode::TemplateSyntax,
                            format!("{field}: {error}"),
                        ));
                    }
                }
                handles.insert(&node.id, kind.handles(&node.data));
                if let (Some(settings), Some(slot)) = (settings, parsed.last_mut()) {
                    *slot = Some(ParsedNode {
                        kind,
                        config,
                        settings,
                    });
                }
            }
            Err(error) => problems.push(Problem::node_error(
                &node.id,
                ProblemCode::InvalidField,
                error.to_string(),
            )),
        }
    }

    let starts: Vec<&str> = flow
        .nodes
        .iter()
        .filter(|node| NodeKind::of(node) == Some(NodeKind::Start))
        .map(|node| node.id.as_str())
        .collect();
    match starts.as_slice() {
        [] => problems.push(Problem::flow_error(
            ProblemCode::NoStart,
            "the flow has no `start` node",
        )),
        [_] => {}
        [_, rest @ ..] => {
            for id in rest {
                problems.push(Problem::node_error(
                    id,
                    ProblemCode::SeveralStarts,
                    "a flow has exactly one `start` node; this is another",
                ));
            }
        }
    }

    let configs: HashMap<&str, &NodeConfig> = flow
        .nodes
        .iter()
        .zip(&parsed)
        .filter_map(|(node, parsed)| Some((node.id.as_str(), &parsed.as_ref()?.config)))
        .collect();
    for node in &flow.nodes {
        if let Some(config) = configs.get(node.id.as_str()) {
            check_child_flow(&node.id, config, flow_path, stack, &mut problems);
            check_web_search(&node.id, config, &mut problems);
        }
    }
    check_edges(flow, &kinds, &handles, &mut problems);
    check_subagents(flow, &kinds, &configs, &mut problems);
    check_mcp_entries(flow, &configs, &mut problems);
    check_reachability(
        flow,
        starts.first().copied(),
        &kinds,
        &handles,
        &mut problems,
    );
    (problems, parsed)
}

/// A `subflow` or `forEach` node's flow file: present, valid itself, no cycle of files, at most
/// [`MAX_CHILD_DEPTH`] deep, and (for `forEach`) without approvals, which cannot pause one item.
fn check_child_flow(
    node_id: &str,
    config: &NodeConfig,
    flow_path: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    problems: &mut Vec<Problem>,
) {
    let Some(child) = config.child_flow() else {
        return;
    };
    let folder = flow_path.and_then(Path::parent).unwrap_or(Path::new(""));
    let path = folder.join(child.path);
    let mut error = |message: String| {
        problems.push(Problem::node_error(
            node_id,
            ProblemCode::ChildFlow,
            message,
        ))
    };
    let written = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if flow_path.is_none() {
        error(
            "the flow must be saved to a file first: `flow` is a path relative to it".to_string(),
        );
        return;
    }
    if !path.is_file() {
        error(format!(
            "the flow file {written} does not exist (next to this flow's file)"
        ));
        return;
    }
    let key = canonical(&path);
    if stack.contains(&key) {
        let chain: Vec<String> = stack
            .iter()
            .chain(std::iter::once(&key))
            .map(|path| {
                path.file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        error(format!("flow files form a cycle: {}", chain.join(" → ")));
        return;
    }
    if stack.len() > MAX_CHILD_DEPTH {
        error(format!("flows nest more than {MAX_CHILD_DEPTH} deep here"));
        return;
    }
    let flow = match Flow::load(&path) {
        Ok(flow) => flow,
        Err(load) => {
            error(load.to_string());
            return;
        }
    };
    let pauses = flow
        .nodes
        .iter()
        .any(|node| NodeKind::of(node).is_some_and(|kind| kind.scheduling() == Scheduling::Pause));
    if !child.may_pause && pauses {
        error(format!(
            "{written} has an approval node; approvals cannot pause a single forEach item (use a subflow)"
        ));
    }
    stack.push(key);
    let child_errors: Vec<String> = validate_within(&flow, Some(&path), stack)
        .0
        .into_iter()
        .filter(Problem::is_error)
        .map(|problem| problem.to_string())
        .collect();
    stack.pop();
    if !child_errors.is_empty() {
        error(format!(
            "{written} is not valid: {}",
            child_errors.join("; ")
        ));
    }
}

/// Every problem of `flow` that stops it from running on this machine: the validator's, plus
/// warnings for models that `settings` cannot serve. What `weft validate`, `weft run` and the
/// canvas show.
pub fn check_flow(
    flow: &Flow,
    flow_path: Option<&Path>,
    settings: &ProviderSettings,
) -> Vec<Problem> {
    check_parsing(flow, flow_path, settings).0
}

/// [`check_flow`], with every node as it parsed.
fn check_parsing(
    flow: &Flow,
    flow_path: Option<&Path>,
    settings: &ProviderSettings,
) -> (Vec<Problem>, Vec<Option<ParsedNode>>) {
    let (mut problems, parsed) = validate_parsing(flow, flow_path);
    let configs = flow
        .nodes
        .iter()
        .zip(&parsed)
        .filter_map(|(node, parsed)| Some((node, &parsed.as_ref()?.config)));
    problems.extend(provider_problems_of(configs, settings));
    (problems, parsed)
}

/// A flow that passed [`check_flow`] without errors, with the warnings found. A host that
/// shows the problems before a run hands it to [`crate::Engine::spawn`], which then does not
/// validate it a second time (on a large flow, validation is a tenth of a run).
#[derive(Debug, Clone)]
pub struct CheckedFlow {
    flow: Flow,
    warnings: Vec<Problem>,
    /// Every node as validation parsed it (by position), which the run uses.
    parsed: Vec<Option<ParsedNode>>,
}

impl CheckedFlow {
    pub fn flow(&self) -> &Flow {
        &self.flow
    }

    pub fn warnings(&self) -> &[Problem] {
        &self.warnings
    }

    /// Whether at most one step of a run of this flow can be going at any moment: no node
    /// has two or more outgoing edges (branches, loops, both ways of an `if`), no agent has
    /// subagents, and no `forEach` or `subflow` runs items or a nested flow. Conservative:
    /// `false` when in doubt. A host may then drive the run from a single thread, which costs
    /// less to start than a pool of them; nothing else differs.
    pub fn runs_one_step_at_a_time(&self) -> bool {
        let mut outgoing: HashMap<&str, usize> = HashMap::new();
        for edge in &self.flow.edges {
            if edge.is_subagent() {
                return false;
            }
            let count = outgoing.entry(edge.source.as_str()).or_default();
            *count += 1;
            if *count > 1 {
                return false;
            }
        }
        self.flow.nodes.iter().all(|node| {
            !matches!(
                NodeKind::of(node),
                Some(NodeKind::ForEach | NodeKind::Subflow) | None
            )
        })
    }

    pub fn into_parts(self) -> (Flow, Vec<Option<ParsedNode>>) {
        (self.flow, self.parsed)
    }
}

/// [`check_flow`] for a flow about to run: every problem when there is an error, else the
/// flow with its warnings.
pub fn check_for_run(
    flow: Flow,
    flow_path: Option<&Path>,
    settings: &ProviderSettings,
) -> Result<CheckedFlow, Vec<Problem>> {
    let (problems, parsed) = check_parsing(&flow, flow_path, settings);
    if problems.iter().any(Problem::is_error) {
        return Err(problems);
    }
    Ok(CheckedFlow {
        flow,
        warnings: problems,
        parsed,
    })
}

/// A flow for [`crate::Engine::spawn`]: one it will validate, or one a host has checked.
pub enum FlowToRun {
    Unchecked(Flow),
    Checked(CheckedFlow),
}

impl From<Flow> for FlowToRun {
    fn from(flow: Flow) -> FlowToRun {
        FlowToRun::Unchecked(flow)
    }
}

impl From<CheckedFlow> for FlowToRun {
    fn from(checked: CheckedFlow) -> FlowToRun {
        FlowToRun::Checked(checked)
    }
}

/// Problems of LLM nodes this machine's provider settings cannot serve: an error for a node
/// with no model when no default model is set (the run could not even start it), a warning for
/// a provider without its key (a run would stop at such a node with the same message).
pub fn provider_problems(flow: &Flow, settings: &ProviderSettings) -> Vec<Problem> {
    let configs: Vec<(&Node, NodeConfig)> = flow
        .nodes
        .iter()
        .filter_map(|node| {
            let kind = NodeKind::of(node)?;
            Some((node, NodeConfig::parse(kind, &node.data).ok()?))
        })
        .collect();
    provider_problems_of(
        configs.iter().map(|(node, config)| (*node, config)),
        settings,
    )
}

/// [`provider_problems`] of nodes already parsed.
fn provider_problems_of<'a>(
    configs: impl Iterator<Item = (&'a Node, &'a NodeConfig)>,
    settings: &ProviderSettings,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (node, config) in configs {
        let Some(model) = config.model() else {
            continue;
        };
        fallback_problems(
            &node.id,
            model.model,
            model.fallbacks,
            settings,
            &mut problems,
        );
        let checked = route_model(model.model, settings)
            .and_then(|route| settings.check_configured(route.provider));
        match checked {
            Ok(_) => {}
            Err(weft_providers::ProviderError::NoModel) => problems.push(Problem::node_error(
                &node.id,
                ProblemCode::Provider,
                "model: no model is set, and no default model either; fill in this node's Model field, or set a default model (the app's Settings, WEFT_DEFAULT_MODEL for `weft`)",
            )),
            Err(error) => problems.push(Problem::node_warning(
                &node.id,
                ProblemCode::Provider,
                error.to_string(),
            )),
        }
    }
    problems
}

/// `fallbackModels`: an empty entry, or one the node tries already, is an error naming it; a
/// provider it needs that the settings leave unconfigured is a warning, as for the model.
fn fallback_problems(
    node_id: &str,
    model: &str,
    fallbacks: &[String],
    settings: &ProviderSettings,
    problems: &mut Vec<Problem>,
) {
    for (index, fallback) in fallbacks.iter().enumerate() {
        let field = format!("fallbackModels[{index}]");
        let tried_before = std::iter::once(model)
            .chain(fallbacks[..index].iter().map(String::as_str))
            .any(|earlier| earlier.trim() == fallback.trim());
        if fallback.trim().is_empty() {
            problems.push(Problem::node_error(
                node_id,
                ProblemCode::Provider,
                format!("{field}: empty; name a model such as `ollama/llama3.2` or remove it"),
            ));
        } else if tried_before {
            problems.push(Problem::node_error(
                node_id,
                ProblemCode::Provider,
                format!("{field}: `{fallback}` is tried before it already"),
            ));
        } else if let Err(error) = route_model(fallback, settings)
            .and_then(|route| settings.check_configured(route.provider))
        {
            problems.push(Problem::node_warning(
                node_id,
                ProblemCode::Provider,
                format!("{field}: {error}"),
            ));
        }
    }
}

/// Web search on a model whose provider has none is refused before the run starts.
fn check_web_search(node_id: &str, config: &NodeConfig, problems: &mut Vec<Problem>) {
    let Some(model) = config.model() else {
        return;
    };
    if !model.web_search || model.model.trim().is_empty() {
        return;
    }
    let models = std::iter::once(model.model).chain(model.fallbacks.iter().map(String::as_str));
    for route in models.filter_map(|model| route_model(model, &ProviderSettings::default()).ok()) {
        if supports_web_search(route.provider) {
            continue;
        }
        problems.push(Problem::node_error(
            node_id,
            ProblemCode::WebSearch,
            format!(
                "tools.web_search: provider {} has no web search",
                route.provider.as_str()
            ),
        ));
    }
}

/// The keys of `settings` Weft reads.
const SETTINGS_KEYS: &[&str] = &["maxNodeVisits", "vars", "mcpServers", "budget", "schedules"];

/// A warning for each key of `node.data` its kind does not read (its own fields and the
/// common ones), and for each unknown key of an object whose keys the kind names
/// (`tools.web_search`, `retry.maxAttempts`), naming the nearest known key.
fn check_keys(node: &Node, kind: NodeKind, problems: &mut Vec<Problem>) {
    let known = known_keys(kind);
    for (key, value) in &node.data {
        if !known
            .iter()
            .any(|field| field.split('.').next() == Some(key.as_str()))
        {
            let mut tops: Vec<String> = known
                .iter()
                .filter_map(|field| field.split('.').next())
                .map(str::to_string)
                .collect();
            tops.dedup();
            problems.push(Problem::node_warning(
                &node.id,
                ProblemCode::UnknownField,
                unknown_key_message(key, &tops, &format!("`{}` nodes", kind.id())),
            ));
            continue;
        }
        let Some(fields) = value.as_object() else {
            continue;
        };
        let prefix = format!("{key}.");
        let children: Vec<&str> = known
            .iter()
            .filter_map(|field| field.strip_prefix(prefix.as_str()))
            .collect();
        if children.is_empty() {
            continue;
        }
        for inner in fields.keys() {
            if !children.contains(&inner.as_str()) {
                problems.push(Problem::node_warning(
                    &node.id,
                    ProblemCode::UnknownField,
                    unknown_key_message(
                        &format!("{key}.{inner}"),
                        &children
                            .iter()
                            .map(|child| format!("{key}.{child}"))
                            .collect::<Vec<_>>(),
                        &format!("`{}` nodes", kind.id()),
                    ),
                ));
            }
        }
    }
}

/// The fields of `kind` and the common ones, dotted names included: as `known-keys.txt` lists
/// them, or as the kind describes them where the file has no line for it (a kind only tests
/// have). Describing a kind builds its JSON schema, which cost a short run more than reading
/// the file; a test keeps the file equal to what the kinds describe.
fn known_keys(kind: NodeKind) -> &'static [&'static str] {
    static KNOWN: std::sync::OnceLock<Vec<std::sync::OnceLock<Vec<&'static str>>>> =
        std::sync::OnceLock::new();
    KNOWN
        .get_or_init(|| {
            NodeKind::all()
                .iter()
                .map(|_| std::sync::OnceLock::new())
                .collect()
        })
        .get(kind.index())
        .map_or(&[], |known| {
            known.get_or_init(|| listed_keys(kind.id()).unwrap_or_else(|| described_keys(kind)))
        })
}

/// The known keys of each kind, a line each: the kind's id, then its keys, split by spaces.
const KNOWN_KEYS_FILE: &str = include_str!("known-keys.txt");

/// The keys `known-keys.txt` lists for the kind `id`.
fn listed_keys(id: &str) -> Option<Vec<&'static str>> {
    KNOWN_KEYS_FILE.lines().find_map(|line| {
        let mut words = line.split(' ');
        (words.next() == Some(id)).then(|| words.collect())
    })
}

/// The described fields of `kind` and the common ones.
fn described_keys(kind: NodeKind) -> Vec<&'static str> {
    kind.describe()
        .fields
        .iter()
        .chain(crate::common_fields().iter())
        .map(|field| field.name.as_str())
        .collect()
}

/// "`systemPromt` is not a field of `agent` nodes (did you mean `systemPrompt`?); it is
/// ignored".
fn unknown_key_message(key: &str, known: &[String], owner: &str) -> String {
    match nearest(key, known) {
        Some(near) => {
            format!("`{key}` is not a field of {owner} (did you mean `{near}`?); it is ignored")
        }
        None => format!(
            "`{key}` is not a field of {owner}; it is ignored (fields: {})",
            known.join(", ")
        ),
    }
}

/// The known name closest to `key` by edit distance, when close enough to be a misspelling.
fn nearest<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    known
        .iter()
        .map(|name| (edit_distance(&lower, &name.to_lowercase()), name.as_str()))
        .filter(|(distance, name)| *distance <= (name.chars().count() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn check_settings(flow: &Flow, problems: &mut Vec<Problem>) {
    for key in flow.settings.keys() {
        if !SETTINGS_KEYS.contains(&key.as_str()) {
            problems.push(Problem {
                severity: Severity::Warning,
                ..Problem::flow_error(
                    ProblemCode::UnknownField,
                    unknown_key_message(
                        &format!("settings.{key}"),
                        &SETTINGS_KEYS
                            .iter()
                            .map(|known| format!("settings.{known}"))
                            .collect::<Vec<_>>(),
                        "the flow's settings",
                    ),
                )
            });
        }
    }
    if let Some(value) = flow.settings.get("maxNodeVisits")
        && value
            .as_u64()
            .is_none_or(|n| !(1..=weft_flow::MAX_NODE_VISITS).contains(&n))
    {
        problems.push(Problem::flow_error(
            ProblemCode::InvalidSetting,
            format!(
                "settings.maxNodeVisits must be a whole number from 1 to {}, found {value}",
                weft_flow::MAX_NODE_VISITS
            ),
        ));
    }
    if let Some(value) = flow.settings.get("vars")
        && !value.is_object()
    {
        problems.push(Problem::flow_error(
            ProblemCode::InvalidSetting,
            format!("settings.vars must be an object of names and values, found {value}"),
        ));
    }
    if let Err(found) = weft_schedule::parse_schedules(flow.settings.get("schedules")) {
        problems.extend(
            found
                .into_iter()
                .map(|message| Problem::flow_error(ProblemCode::InvalidSetting, message)),
        );
    }
    if let Err(found) = crate::budget::parse_budget(flow.settings.get("budget")) {
        problems.extend(
            found
                .into_iter()
                .map(|message| Problem::flow_error(ProblemCode::InvalidSetting, message)),
        );
    }
    if let Err(found) = weft_mcp::parse_servers(flow.settings.get("mcpServers")) {
        problems.extend(
            found
                .into_iter()
                .map(|message| Problem::flow_error(ProblemCode::McpTool, message)),
        );
    }
}

/// Each agent's `tools.mcp` entries name a server of `settings.mcpServers` (whether the server
/// lists the tool is known only by asking it: `weft validate --connect`).
fn check_mcp_entries(
    flow: &Flow,
    configs: &HashMap<&str, &NodeConfig>,
    problems: &mut Vec<Problem>,
) {
    // Names of servers defined, valid or not (an invalid one is reported on its own).
    let defined: Vec<&str> = flow
        .settings
        .get("mcpServers")
        .and_then(serde_json::Value::as_object)
        .map(|map| map.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for node in &flow.nodes {
        let Some(NodeConfig::Agent(agent)) = configs.get(node.id.as_str()) else {
            continue;
        };
        for pattern in &agent.approve_tools {
            let (server, _) = crate::mcp_tools::split_entry(pattern);
            if server != "*" && !defined.contains(&server) {
                problems.push(Problem::node_error(
                    &node.id,
                    ProblemCode::McpTool,
                    format!(
                        "approveTools: `{pattern}` names server `{server}`, which settings.mcpServers does not define"
                    ),
                ));
            }
        }
        for entry in &agent.tools.mcp {
            let (server, tool) = crate::mcp_tools::split_entry(entry);
            if server.is_empty() || tool.is_some_and(str::is_empty) {
                problems.push(Problem::node_error(
                    &node.id,
                    ProblemCode::McpTool,
                    format!("tools.mcp: `{entry}` is not `server` or `server/tool`"),
                ));
            } else if !defined.contains(&server) {
                problems.push(Problem::node_error(
                    &node.id,
                    ProblemCode::McpTool,
                    if defined.is_empty() {
                        format!(
                            "tools.mcp: `{entry}` names server `{server}`, but the flow's settings.mcpServers defines none"
                        )
                    } else {
                        format!(
                            "tools.mcp: `{entry}` names server `{server}`, which settings.mcpServers does not define (it has: {})",
                            defined.join(", ")
                        )
                    },
                ));
            }
        }
    }
}

fn check_edges(
    flow: &Flow,
    kinds: &HashMap<&str, Option<NodeKind>>,
    handles: &HashMap<&str, Vec<Cow<'static, str>>>,
    problems: &mut Vec<Problem>,
) {
    let mut seen = HashSet::new();
    for edge in &flow.edges {
        if !seen.insert(edge.id.as_str()) {
            problems.push(Problem::edge_error(
                &edge.id,
                ProblemCode::DuplicateId,
                "another edge has the same id",
            ));
            continue;
        }
        let source = kinds.get(edge.source.as_str());
        let target = kinds.get(edge.target.as_str());
        if source.is_none() {
            problems.push(Problem::edge_error(
                &edge.id,
                ProblemCode::DanglingEdge,
                format!("its source node `{}` does not exist", edge.source),
            ));
        }
        if target.is_none() {
            problems.push(Problem::edge_error(
                &edge.id,
                ProblemCode::DanglingEdge,
                format!("its target node `{}` does not exist", edge.target),
            ));
        }
        // The source handle must be one the source node has.
        if let Some(handles) = handles.get(edge.source.as_str())
            && !handles.iter().any(|handle| handle == edge.source_handle())
        {
            let has = if handles.is_empty() {
                "it has no outgoing handles".to_string()
            } else {
                format!("it has {}", handles.join(", "))
            };
            problems.push(Problem::edge_error(
                &edge.id,
                ProblemCode::UnknownHandle,
                format!(
                    "node `{}` ({}) has no handle `{}`; {has}",
                    edge.source,
                    kinds
                        .get(edge.source.as_str())
                        .copied()
                        .flatten()
                        .map_or("?", NodeKind::id),
                    edge.source_handle()
                ),
            ));
        }
        // Every node that takes input has exactly one input handle.
        if let Some(Some(kind)) = target {
            if !kind.has_input() {
                problems.push(Problem::edge_error(
                    &edge.id,
                    ProblemCode::UnknownHandle,
                    format!(
                        "node `{}` ({}) takes no incoming edges",
                        edge.target,
                        kind.id()
                    ),
                ));
            } else if edge.target_handle() != DEFAULT_TARGET_HANDLE {
                problems.push(Problem::edge_error(
                    &edge.id,
                    ProblemCode::UnknownHandle,
                    format!(
                        "node `{}` has no input handle `{}`; its only input handle is `input`",
                        edge.target,
                        edge.target_handle()
                    ),
                ));
            }
        }
    }
}

fn check_subagents(
    flow: &Flow,
    kinds: &HashMap<&str, Option<NodeKind>>,
    configs: &HashMap<&str, &NodeConfig>,
    problems: &mut Vec<Problem>,
) {
    let mut parents: HashMap<&str, &str> = HashMap::new();
    let execution_ends: HashSet<&str> = flow
        .edges
        .iter()
        .filter(|edge| !edge.is_subagent())
        .flat_map(|edge| [edge.source.as_str(), edge.target.as_str()])
        .collect();
    let mut reported_targets = HashSet::new();
    for edge in flow.edges.iter().filter(|edge| edge.is_subagent()) {
        let (Some(source_kind), Some(target_kind)) = (
            kinds.get(edge.source.as_str()),
            kinds.get(edge.target.as_str()),
        ) else {
            continue; // dangling: reported already
        };
        let mut broken = |message: String| {
            problems.push(Problem::edge_error(
                &edge.id,
                ProblemCode::SubagentRule,
                message,
            ))
        };
        if *source_kind != Some(NodeKind::Agent) || *target_kind != Some(NodeKind::Agent) {
            // The unknown-handle check reports non-agent sources; say it plainly for targets.
            if *source_kind == Some(NodeKind::Agent) {
                broken(format!(
                    "a subagent edge must end at an agent; `{}` is a `{}`",
                    edge.target,
                    target_kind.map_or("unknown type", |kind| kind.id())
                ));
            }
            continue;
        }
        if edge.source == edge.target {
            broken(format!(
                "agent `{}` cannot be its own subagent",
                edge.source
            ));
            continue;
        }
        if let Some(NodeConfig::Agent(config)) = configs.get(edge.source.as_str())
            && !config.tools.subagents
        {
            broken(format!(
                "agent `{}` has tools.subagents off; turn it on to give it subagents",
                edge.source
            ));
        }
        if let Some(first) = parents.get(edge.target.as_str()) {
            broken(format!(
                "agent `{}` is already a subagent of `{first}`; a subagent has one parent",
                edge.target
            ));
            continue;
        }
        parents.insert(&edge.target, &edge.source);
        if execution_ends.contains(edge.target.as_str())
            && reported_targets.insert(edge.target.as_str())
        {
            problems.push(Problem::node_error(
                &edge.target,
                ProblemCode::SubagentRule,
                "a subagent cannot also be connected by execution edges",
            ));
        }
    }
    // A cycle: some agent reaches itself by following subagent edges (self-references are
    // reported above, so they are left out here).
    let mut graph: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in flow
        .edges
        .iter()
        .filter(|edge| edge.is_subagent() && edge.source != edge.target)
    {
        graph.entry(&edge.source).or_default().push(&edge.target);
    }
    let mut in_cycle: Vec<&str> = graph
        .keys()
        .copied()
        .filter(|start| {
            let mut seen = HashSet::new();
            let mut stack: Vec<&str> = graph.get(start).cloned().unwrap_or_default();
            while let Some(node) = stack.pop() {
                if node == *start {
                    return true;
                }
                if seen.insert(node) {
                    stack.extend(graph.get(node).into_iter().flatten().copied());
                }
            }
            false
        })
        .collect();
    in_cycle.sort_unstable();
    for node in in_cycle {
        problems.push(Problem::node_error(
            node,
            ProblemCode::SubagentRule,
            "subagent edges form a cycle through this agent",
        ));
    }
}

fn check_reachability(
    flow: &Flow,
    start: Option<&str>,
    kinds: &HashMap<&str, Option<NodeKind>>,
    handles: &HashMap<&str, Vec<Cow<'static, str>>>,
    problems: &mut Vec<Problem>,
) {
    let Some(start) = start else { return };
    let mut outgoing: HashMap<&str, Vec<(&str, &str)>> = HashMap::new();
    let mut subagents: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in &flow.edges {
        if edge.source_handle() == SUBAGENT_HANDLE {
            subagents
                .entry(&edge.source)
                .or_default()
                .push(&edge.target);
        } else {
            outgoing
                .entry(&edge.source)
                .or_default()
                .push((edge.source_handle(), &edge.target));
        }
    }
    if outgoing.get(start).is_none_or(Vec::is_empty) {
        problems.push(Problem::node_error(
            start,
            ProblemCode::StartUnconnected,
            "`start` has no outgoing edge, so nothing would run",
        ));
    }
    let mut reachable: HashSet<&str> = HashSet::from_iter([start]);
    let mut frontier = VecDeque::from([start]);
    while let Some(node) = frontier.pop_front() {
        let next = outgoing
            .get(node)
            .into_iter()
            .flatten()
            .map(|(_, target)| *target)
            .chain(subagents.get(node).into_iter().flatten().copied());
        for target in next {
            if kinds.contains_key(target) && reachable.insert(target) {
                frontier.push_back(target);
            }
        }
    }
    for node in &flow.nodes {
        let id = node.id.as_str();
        if kinds.get(id).copied().flatten() == Some(NodeKind::Note) {
            continue;
        }
        if !reachable.contains(id) {
            problems.push(Problem::node_warning(
                id,
                ProblemCode::Unreachable,
                "not reachable from `start`; it will never run",
            ));
            continue;
        }
        // A node that takes exactly one of its branches (docs/flows.md): none connected is an
        // error,
        // some is a warning.
        let (code, none_connected) = match kinds.get(id).copied().flatten() {
            Some(NodeKind::If) => (
                ProblemCode::IfBranches,
                "`if` has no outgoing branch; connect condition-N or false",
            ),
            Some(NodeKind::Approval) => (
                ProblemCode::ApprovalBranches,
                "`approval` has neither an `approve` nor a `reject` edge",
            ),
            _ => continue,
        };
        let Some(branch_handles) = handles.get(id) else {
            continue;
        };
        // A branching node has a few edges out: looked through rather than hashed.
        let edges_out = outgoing.get(id).map_or(&[][..], Vec::as_slice);
        // `timeout` is optional: without an edge, a run nobody decided in time fails.
        let branch_handles = branch_handles
            .iter()
            .map(|handle| handle.as_ref())
            .filter(|handle| *handle != crate::APPROVAL_TIMEOUT.id);
        let branches = branch_handles.clone().count();
        let missing: Vec<&str> = branch_handles
            .filter(|handle| !edges_out.iter().any(|(out, _)| out == handle))
            .collect();
        if missing.len() == branches {
            problems.push(Problem::node_error(id, code, none_connected));
        } else if !missing.is_empty() {
            problems.push(Problem::node_warning(
                id,
                code,
                format!(
                    "branch {} is not connected; the run simply ends there",
                    missing.join(", ")
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `known-keys.txt` is kept, for writing it again.
    const KNOWN_KEYS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/known-keys.txt");

    #[test]
    fn the_known_keys_file_is_what_the_kinds_describe() {
        let described: String = NodeKind::all()
            .iter()
            .filter(|kind| **kind != NodeKind::Echo)
            .map(|kind| format!("{} {}\n", kind.id(), described_keys(*kind).join(" ")))
            .collect();
        if std::env::var_os("WEFT_WRITE_KNOWN_KEYS").is_some() {
            std::fs::write(KNOWN_KEYS_PATH, &described).expect("write the file");
        }
        assert!(
            KNOWN_KEYS_FILE == described,
            "{KNOWN_KEYS_PATH} is not what the node kinds describe now (a field was added, \
             renamed or removed): write it again with WEFT_WRITE_KNOWN_KEYS=1 cargo test -p \
             weft-nodes known_keys, then build again"
        );
        for kind in NodeKind::all() {
            assert_eq!(known_keys(*kind), described_keys(*kind), "{}", kind.id());
        }
    }
}
