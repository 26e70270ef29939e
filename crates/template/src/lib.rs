//! Templates (docs/flows.md#templates): MiniJinja, compiled once per run, with the names Weft puts
//! in scope.
//!
//! Names: `PREVIOUS_OUTPUT` (text of the previous output), `input` (the previous output as a
//! value), `approval` (latest decision), `initial` (the run's input), `nodes.<id>` (latest
//! output of a finished node), `vars` (`settings.vars`) and, when the previous output is a JSON
//! object, each of its top-level keys. A name that does not exist is an error naming it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use minijinja::value::{Enumerator, Object, ObjectRepr, Serde};
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};
use serde_json::Value;

mod bounded;
mod nesting;
pub mod stop;
mod substitute;
mod worker;

pub use bounded::RenderLimits;
use bounded::{BoundedText, Stopped, Watch};
use nesting::check_nesting;

/// Latest output of every node that has finished in this run; shared by the running steps
/// and read lazily by templates (`nodes.<id>`), so rendering never copies all outputs. Each
/// output is shared with the step that gave it and the steps it went on to, not copied.
#[derive(Debug, Default)]
pub struct NodeOutputs(RwLock<weft_flow::ByNode<Arc<Value>>>);

impl NodeOutputs {
    #[cfg(test)]
    pub(crate) fn from_map(outputs: HashMap<String, Value>) -> NodeOutputs {
        NodeOutputs::with_room(outputs, 0)
    }

    /// `outputs`, with room for `nodes` outputs: a long run does not grow (and rehash) the map
    /// step by step.
    pub fn with_room<V: Into<Arc<Value>>>(
        outputs: impl IntoIterator<Item = (String, V)>,
        nodes: usize,
    ) -> NodeOutputs {
        let outputs = outputs.into_iter();
        let mut map = weft_flow::ByNode::with_capacity_and_hasher(
            nodes.max(outputs.size_hint().0),
            Default::default(),
        );
        map.extend(outputs.map(|(id, value)| (id, value.into())));
        NodeOutputs(RwLock::new(map))
    }

    pub fn set(&self, node_id: &str, value: Arc<Value>) {
        if let Ok(mut map) = self.0.write() {
            match map.get_mut(node_id) {
                Some(slot) => *slot = value,
                None => {
                    map.insert(node_id.to_string(), value);
                }
            }
        }
    }

    /// Node `node_id`'s output (shared, not copied).
    pub fn get(&self, node_id: &str) -> Option<Arc<Value>> {
        self.0.read().ok()?.get(node_id).cloned()
    }

    /// `read` applied to node `node_id`'s output, under the lock.
    pub(crate) fn with<R>(&self, node_id: &str, read: impl FnOnce(&Value) -> R) -> Option<R> {
        self.0.read().ok()?.get(node_id).map(|value| read(value))
    }

    /// Every output, shared, by node id.
    pub fn snapshot(&self) -> HashMap<String, Arc<Value>> {
        self.0
            .read()
            .map(|map| {
                map.iter()
                    .map(|(id, value)| (id.clone(), Arc::clone(value)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The ids of the nodes with an output.
    fn node_ids(&self) -> Vec<String> {
        self.0
            .read()
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
struct NodesView(Arc<NodeOutputs>);

impl Object for NodesView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let value = self.0.get(key.as_str()?)?;
        Some(minijinja::Value::from(Serde(&*value)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<minijinja::Value> = self
            .0
            .node_ids()
            .into_iter()
            .map(minijinja::Value::from)
            .collect();
        keys.sort();
        Enumerator::Values(keys)
    }
}

/// The text form of an output: strings as they are, anything else as compact JSON.
pub fn output_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What a template can see while one node runs. The run-wide values are shared (`Arc`), so a
/// render copies nothing but the step's input.
pub struct Scope<'a> {
    pub input: &'a Value,
    pub initial: &'a Arc<Value>,
    pub approval: Option<&'a Arc<Value>>,
    pub vars: &'a Arc<Value>,
    pub nodes: &'a Arc<NodeOutputs>,
}

/// The names every template may use, for messages and the canvas.
pub const SCOPE_NAMES: &[&str] = &[
    "PREVIOUS_OUTPUT",
    "input",
    "approval",
    "initial",
    "nodes",
    "vars",
];

/// How much work one rendering may do: MiniJinja instructions (well under a second of CPU).
/// A template never needs more to shape an LLM prompt or a message; a runaway loop stops here
/// instead of holding up the run.
pub const MAX_TEMPLATE_STEPS: u64 = 5_000_000;
/// The longest text one rendering may produce.
pub const MAX_RENDERED_BYTES: usize = 10 * 1024 * 1024;
/// Operators (and brackets) one `{{ }}` or `{% %}` tag may hold. Each nests the expression one
/// level deeper, and MiniJinja parses and compiles nesting by recursion: bounding it keeps the
/// stack safe on any thread (the app validates on 2 MiB worker threads).
pub const MAX_OPERATORS_PER_TAG: usize = 200;
/// The largest count or width the filters that build text or lists from a number accept
/// (`indent`, `slice`, `batch` with a filler, `format` widths).
pub const MAX_FILTER_SIZE: usize = 10_000;

/// What one rendering may allocate before it stops at its next checkpoint (see
/// [`weft_alloc`]): far more than a prompt needs, far less than a machine has.
pub const RENDER_MEMORY_SOFT_LIMIT: usize = 128 * 1024 * 1024;
/// What one rendering may allocate at all: the allocator stops it there, between two
/// checkpoints if need be.
pub const RENDER_MEMORY_HARD_LIMIT: usize = 384 * 1024 * 1024;
pub use worker::MAX_PARKED;

/// Why a template failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    #[error("template does not parse: {0}")]
    Syntax(String),
    #[error("template refers to `{name}`, which does not exist here{hint}")]
    UnknownName { name: String, hint: String },
    #[error("template failed: {0}")]
    Render(String),
    #[error(
        "template did too much work (more than {MAX_TEMPLATE_STEPS} steps): a loop over too much, or one that does not end"
    )]
    TooMuchWork,
    #[error("template rendered more than {} MiB of text", MAX_RENDERED_BYTES / 1024 / 1024)]
    TooLarge,
    #[error("template was still rendering when the step's time was up (timeoutSeconds)")]
    TimedOut,
    #[error("template rendering stopped: the run was cancelled")]
    Cancelled,
    #[error(
        "template needed more than {} MiB of memory for its values: a value that doubles in a loop, or one far too large",
        RENDER_MEMORY_SOFT_LIMIT / 1024 / 1024
    )]
    TooMuchMemory,
    #[error(
        "templates cannot be rendered in this process any more: {MAX_PARKED} renders ran out of memory and still hold it (restart it)"
    )]
    Unavailable,
}

fn new_environment() -> Environment<'static> {
    let mut env = Environment::new();
    // A template's name is its source text (see `Templates`), and MiniJinja escapes by the
    // name's ending by default: a prompt that happened to end in `page.html` HTML-escaped every
    // value, one ending in `out.json` quoted them. Prompts are text, never escaped.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // MiniJinja's debug mode is on in unoptimized builds only; off in both, the errors people
    // see are the ones the tests check.
    env.set_debug(false);
    env.set_fuel(Some(MAX_TEMPLATE_STEPS));
    bounded::add_filters(&mut env);
    env.set_formatter(bounded::formatter);
    env
}

fn describe_error(error: &minijinja::Error) -> String {
    let mut text = error
        .detail()
        .unwrap_or(error.kind().to_string().as_str())
        .to_string();
    if let Some(line) = error.line() {
        text.push_str(&format!(" (line {line})"));
    }
    text
}

thread_local! {
    /// Parsing needs no filters, tests or globals (MiniJinja looks them up when it renders,
    /// so an unknown filter is a render error either way): an empty environment, which costs
    /// nothing to make where a full one (its filters above all) costs more than a short run's
    /// whole validation.
    static SYNTAX: Environment<'static> = Environment::empty();
    static PARSED: RefCell<ParsedSources> = RefCell::default();
    /// Set while [`Templates`] looks up the template a step renders (see its loader).
    static LOADING_RENDERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Checks that `source` parses; used by the validator.
pub fn check_syntax(source: &str) -> Result<(), TemplateError> {
    if PARSED.with(|parsed| parsed.borrow().sources.contains(source)) {
        return Ok(());
    }
    check_nesting(source)?;
    SYNTAX.with(|env| {
        env.template_from_str(source)
            .map(|_| ())
            .map_err(|error| TemplateError::Syntax(describe_error(&error)))
    })?;
    PARSED.with(|parsed| parsed.borrow_mut().remember(source));
    Ok(())
}

/// Template sources known to parse. The app checks the whole flow on every edit, and nearly
/// all its templates are the ones checked a moment ago; a flow may also repeat one template in
/// many nodes. Bounded: forgotten all at once when full.
#[derive(Default)]
struct ParsedSources {
    sources: HashSet<Box<str>>,
    bytes: usize,
}

impl ParsedSources {
    const MAX_SOURCES: usize = 20_000;
    const MAX_BYTES: usize = 8 * 1024 * 1024;

    fn remember(&mut self, source: &str) {
        if self.sources.len() >= Self::MAX_SOURCES || self.bytes + source.len() > Self::MAX_BYTES {
            self.sources.clear();
            self.bytes = 0;
        }
        if source.len() <= Self::MAX_BYTES && self.sources.insert(source.into()) {
            self.bytes += source.len();
        }
    }
}

/// The templates of one run (with its nested runs), each compiled when it is first rendered
/// and kept by its source text: a template that many steps render (a loop, the items of a
/// forEach, one prompt in many nodes) is compiled once, and one that never runs is never
/// compiled. The validator has already checked every template's syntax.
pub struct Templates {
    /// Shared with the render threads (see `worker`).
    env: Arc<Environment<'static>>,
}

impl Default for Templates {
    fn default() -> Templates {
        Templates::new()
    }
}

impl Templates {
    pub fn new() -> Templates {
        let mut env = new_environment();
        // A template's name is its source text: MiniJinja asks the loader for a name it has
        // not compiled yet, compiles what it returns and keeps it under that name. Only the
        // template a step renders is loaded so: an `{% include %}` (or `extends`, `import`)
        // names no template of the flow, and loading its text would let a loop in one
        // template compile and keep any number of others.
        env.set_loader(|source: &str| {
            if !LOADING_RENDERED.get() {
                return Ok(None);
            }
            match check_nesting(source) {
                Ok(()) => Ok(Some(source.to_string())),
                Err(error) => Err(minijinja::Error::new(
                    ErrorKind::SyntaxError,
                    match error {
                        TemplateError::Syntax(message) => message,
                        other => other.to_string(),
                    },
                )),
            }
        });
        Templates { env: Arc::new(env) }
    }

    /// The compiled template `source`, compiled now if this run has not rendered it yet.
    fn template(&self, source: &str) -> Result<minijinja::Template<'_, '_>, TemplateError> {
        load(&self.env, source)
    }

    /// Compiles `source` now (it is kept for later renders); the error a render would meet.
    pub fn compile(&self, source: &str) -> Result<(), TemplateError> {
        self.template(source).map(|_| ())
    }

    /// Renders the template `source` (compiled on its first render) in `scope`.
    pub fn render(
        &self,
        source: &str,
        scope: &Scope<'_>,
        limits: RenderLimits,
    ) -> Result<String, TemplateError> {
        self.render_telling(source, scope, limits, || {})
    }

    /// [`Templates::render`], calling `may_take_a_while` before a render that is not a plain
    /// substitution: MiniJinja holds the thread for as long as the render's limits allow.
    pub fn render_telling(
        &self,
        source: &str,
        scope: &Scope<'_>,
        limits: RenderLimits,
        may_take_a_while: impl FnOnce(),
    ) -> Result<String, TemplateError> {
        // A render stopped before it starts is left to MiniJinja, which says why.
        let stopped = limits.cancel.is_cancelled() || std::time::Instant::now() >= limits.deadline;
        if !stopped && let Some(text) = substitute::render(source, scope) {
            return Ok(text);
        }
        may_take_a_while();
        self.render_with_minijinja(source, scope, limits)
    }

    /// [`Templates::render`] by MiniJinja, whatever the template, on a render thread (see
    /// `worker`: only there is what a render allocates bounded).
    fn render_with_minijinja(
        &self,
        source: &str,
        scope: &Scope<'_>,
        limits: RenderLimits,
    ) -> Result<String, TemplateError> {
        let env = Arc::clone(&self.env);
        let source = source.to_owned();
        let names = Arc::new(ScopeNames::of(scope));
        let render_limits = limits.clone();
        worker::render(
            Box::new(move || render_here(&env, &source, names, render_limits)),
            &limits,
        )
    }
}

/// The compiled template `source` of `env`, compiled now if it was not yet.
fn load<'env>(
    env: &'env Environment<'static>,
    source: &str,
) -> Result<minijinja::Template<'env, 'env>, TemplateError> {
    LOADING_RENDERED.set(true);
    let template = env.get_template(source);
    LOADING_RENDERED.set(false);
    template.map_err(|error| TemplateError::Syntax(describe_error(&error)))
}

/// Renders `source` by MiniJinja on this thread.
fn render_here(
    env: &Environment<'static>,
    source: &str,
    names: Arc<ScopeNames>,
    limits: RenderLimits,
) -> Result<String, TemplateError> {
    let template = load(env, source)?;
    let context = minijinja::Value::from_dyn_object(Arc::clone(&names));
    let mut output = BoundedText::default();
    let watch = Watch::start(limits);
    let rendered = template.render_captured_to(&context, &mut output);
    match watch.stopped() {
        Some(Stopped::TimedOut) => return Err(TemplateError::TimedOut),
        Some(Stopped::Cancelled) => return Err(TemplateError::Cancelled),
        Some(Stopped::OutOfMemory) => return Err(TemplateError::TooMuchMemory),
        None => {}
    }
    drop(watch);
    if output.too_large {
        return Err(TemplateError::TooLarge);
    }
    rendered.map(|_| output.text()).map_err(|error| {
        if error.kind() == ErrorKind::OutOfFuel {
            return TemplateError::TooMuchWork;
        }
        // A missing name surfaces as an undefined error, or (in an optimized build, where
        // MiniJinja keeps no debug information) as an operation refused on `undefined`.
        let about_undefined = error.kind() == ErrorKind::UndefinedError
            || (error.kind() == ErrorKind::InvalidOperation
                && error.to_string().contains("undefined"));
        if about_undefined {
            // Functions such as `range` are globals, not names of the scope.
            let globals: Vec<&str> = env.globals().map(|(name, _)| name).collect();
            let mut undeclared: Vec<String> = template
                .undeclared_variables(true)
                .into_iter()
                .filter(|name| {
                    let head = name.split('.').next().unwrap_or(name);
                    !globals.contains(&head)
                })
                .collect();
            undeclared.sort();
            let scope = names.scope();
            if let Some(missing) = undeclared
                .iter()
                .find_map(|name| missing_part(name, &scope))
            {
                return missing;
            }
        }
        TemplateError::Render(describe_error(&error))
    })
}

/// The names of a [`Scope`], converted to template values only when a template asks for them:
/// a prompt that reads `PREVIOUS_OUTPUT` pays nothing for `vars`, `initial` or the fields of a
/// large previous output.
#[derive(Debug)]
struct ScopeNames {
    input: Value,
    /// `input` converted, at its first use (a template may read it many times).
    input_value: std::sync::OnceLock<minijinja::Value>,
    initial: Arc<Value>,
    approval: Option<Arc<Value>>,
    vars: Arc<Value>,
    nodes: Arc<NodeOutputs>,
}

impl ScopeNames {
    fn of(scope: &Scope<'_>) -> ScopeNames {
        ScopeNames {
            input: scope.input.clone(),
            input_value: std::sync::OnceLock::new(),
            initial: Arc::clone(scope.initial),
            approval: scope.approval.cloned(),
            vars: Arc::clone(scope.vars),
            nodes: Arc::clone(scope.nodes),
        }
    }

    /// The scope these names were taken from.
    fn scope(&self) -> Scope<'_> {
        Scope {
            input: &self.input,
            initial: &self.initial,
            approval: self.approval.as_ref(),
            vars: &self.vars,
            nodes: &self.nodes,
        }
    }
}

impl Object for ScopeNames {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    /// Weft's names first; then, when the previous output is an object, its fields.
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let value = match key.as_str()? {
            "PREVIOUS_OUTPUT" => minijinja::Value::from(output_text(&self.input)),
            "input" => self
                .input_value
                .get_or_init(|| minijinja::Value::from(Serde(&self.input)))
                .clone(),
            "initial" => minijinja::Value::from(Serde(&*self.initial)),
            "vars" => minijinja::Value::from(Serde(&*self.vars)),
            "nodes" => minijinja::Value::from_object(NodesView(Arc::clone(&self.nodes))),
            "approval" => minijinja::Value::from(Serde(self.approval.as_deref()?)),
            field => minijinja::Value::from(Serde(self.input.as_object()?.get(field)?)),
        };
        Some(value)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<minijinja::Value> = SCOPE_NAMES
            .iter()
            .filter(|name| **name != "approval" || self.approval.is_some())
            .map(|name| minijinja::Value::from(*name))
            .collect();
        if let Value::Object(fields) = &self.input {
            keys.extend(
                fields
                    .keys()
                    .filter(|key| !SCOPE_NAMES.contains(&key.as_str()))
                    .map(|key| minijinja::Value::from(key.as_str())),
            );
        }
        Enumerator::Values(keys)
    }
}

/// The first part of a dotted name (`nodes.classify.verdict`) that does not resolve, as an
/// error naming it, or `None` when the whole name resolves.
fn missing_part(name: &str, scope: &Scope<'_>) -> Option<TemplateError> {
    let mut parts = name.split('.');
    let head = parts.next()?;
    let unknown = |name: String, hint: String| Some(TemplateError::UnknownName { name, hint });
    // Read in place: the values may be large, and only a path is looked up in them.
    let node_output;
    let current: &Value = match head {
        "PREVIOUS_OUTPUT" => return None,
        "input" => scope.input,
        "initial" => scope.initial,
        "vars" => scope.vars,
        "approval" => match scope.approval {
            Some(value) => value,
            None => {
                return unknown(
                    head.into(),
                    " (no approval has been decided in this run yet)".into(),
                );
            }
        },
        "nodes" => {
            let id = parts.next()?;
            match scope.nodes.get(id) {
                Some(value) => {
                    node_output = value;
                    &node_output
                }
                None => {
                    return unknown(
                        format!("nodes.{id}"),
                        format!(" (node `{id}` has not finished in this run)"),
                    );
                }
            }
        }
        field => match scope.input.get(field) {
            Some(value) => value,
            None => {
                let keys = match scope.input {
                    Value::Object(map) if !map.is_empty() => {
                        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                        format!("; the previous output has the fields {}", keys.join(", "))
                    }
                    _ => "; the previous output is not a JSON object".to_string(),
                };
                return unknown(
                    field.into(),
                    format!(" (names in scope: {}{keys})", SCOPE_NAMES.join(", ")),
                );
            }
        },
    };
    let kept = if head == "nodes" { 2 } else { 1 };
    let rest: Vec<&str> = name.split('.').skip(kept).collect();
    match weft_flow::path::resolve(current, &rest.join(".")) {
        Ok(_) => None,
        Err(resolved) => {
            let path: Vec<&str> = name.split('.').take(kept + resolved + 1).collect();
            unknown(path.join("."), String::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    // As the hosts do (see `worker`): what a render allocates is bounded under this allocator.
    #[global_allocator]
    static ALLOCATOR: weft_alloc::Counting<std::alloc::System> =
        weft_alloc::Counting(std::alloc::System);

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn render(
        source: &str,
        input: Value,
        nodes: &[(&str, Value)],
    ) -> Result<String, TemplateError> {
        let limits =
            RenderLimits::within(Duration::from_secs(60), &Arc::new(CancellationToken::new()));
        render_within(source, input, nodes, limits)
    }

    fn render_within(
        source: &str,
        input: Value,
        nodes: &[(&str, Value)],
        limits: RenderLimits,
    ) -> Result<String, TemplateError> {
        let outputs = Arc::new(NodeOutputs::from_map(
            nodes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ));
        let templates = Templates::new();
        let initial = Arc::new(json!({"topic": "rust"}));
        let vars = Arc::new(json!({"tone": "dry"}));
        let approval = Arc::new(json!({"decision": "approve", "note": "fine"}));
        templates.render(
            source,
            &Scope {
                input: &input,
                initial: &initial,
                approval: Some(&approval),
                vars: &vars,
                nodes: &outputs,
            },
            limits,
        )
    }

    /// The error of a render that must fail (a success is reported by its length alone).
    fn render_error(source: &str, limits: RenderLimits) -> TemplateError {
        match render_within(source, json!(""), &[], limits) {
            Ok(text) => panic!("{source}: rendered {} bytes instead of failing", text.len()),
            Err(error) => error,
        }
    }

    #[test]
    fn a_render_stops_at_its_deadline_or_when_its_run_is_cancelled() {
        // No output and no filter in the loop: only the `range` items are checkpoints.
        let copies = "{% set s = 'a' * 5000000 %}\
            {% for i in range(100000) %}{% set t = s ~ 'b' %}{% endfor %}done";
        let started = std::time::Instant::now();
        let limits = RenderLimits::within(
            Duration::from_millis(200),
            &Arc::new(CancellationToken::new()),
        );
        assert_eq!(render_error(copies, limits), TemplateError::TimedOut);
        // Without the deadline the loop copies 500 GB: minutes, not seconds.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );

        // Printed values and filters are checkpoints too; a plain substitution, which is not
        // rendered by MiniJinja, stops likewise.
        let items = "{% for i in [1, 2, 3] %}{{ i }}{% endfor %}";
        let filtered = "{% set x = ['a', 'b'] | join(',') %}";
        let plain = "Say {{ PREVIOUS_OUTPUT }}";
        for source in [items, filtered, plain] {
            let limits = RenderLimits::within(Duration::ZERO, &Arc::new(CancellationToken::new()));
            assert_eq!(
                render_error(source, limits),
                TemplateError::TimedOut,
                "{source}"
            );
            let cancel = Arc::new(CancellationToken::new());
            cancel.cancel();
            let limits = RenderLimits::within(Duration::from_secs(60), &cancel);
            let error = render_error(source, limits);
            assert_eq!(error, TemplateError::Cancelled, "{source}");
            assert!(
                error.to_string().contains("the run was cancelled"),
                "{error}"
            );
        }
        // Within the limits, the same loops render.
        assert_eq!(render(items, json!(""), &[]).expect("renders"), "123");
        let text = render("{% for i in range(3) %}{{ i }}{% endfor %}", json!(""), &[]);
        assert_eq!(text.expect("renders"), "012");
    }

    #[test]
    fn every_scope_name_renders() {
        let text = render(
            "{{PREVIOUS_OUTPUT}}|{{input.verdict}}|{{verdict}}|{{initial.topic}}|{{vars.tone}}|{{nodes.a}}|{{approval.decision}}",
            json!({"verdict": "yes"}),
            &[("a", json!("from a"))],
        )
        .expect("renders");
        assert_eq!(text, r#"{"verdict":"yes"}|yes|yes|rust|dry|from a|approve"#);
    }

    /// Plain substitutions are rendered without MiniJinja (`substitute`), and render as
    /// MiniJinja renders them; everything else is MiniJinja's, errors included.
    #[test]
    fn plain_substitutions_render_as_minijinja_renders_them() {
        let outputs = Arc::new(NodeOutputs::from_map(
            [
                ("a".to_string(), json!("from a")),
                ("b".to_string(), json!({"text": "deep", "n": 2})),
            ]
            .into(),
        ));
        let inputs = [
            json!({"verdict": "yes", "n": 1.0, "none": "field", "nested": {"x": "y"}}),
            json!("plain <text> & \"quotes\""),
            json!(null),
            json!([1, "two"]),
        ];
        let fast = [
            "{{ PREVIOUS_OUTPUT }}",
            "Say: {{PREVIOUS_OUTPUT}}, {{ initial }}{{ vars.tone }}.",
            "{{ nodes.a }}/{{ nodes.b.text }} { not a hole } }} {",
            "{{\tapproval.decision\t}} é ü {{ verdict }}{{ nested.x }}",
            "{{ input }}",
        ];
        let minijinja_only = [
            "{{ input.n }}",
            "{{ none }}",
            "{{ true }}",
            "{{ nodes.b.n }}",
            "{{ nodes.b }}",
            "{{ PREVIOUS_OUTPUT.x }}",
            "{{ missing }}",
            "{{ nodes.zz }}",
            "{{ verdict | upper }}",
            "{{- verdict }}",
            "{{ input.0 }}",
            "{{ 'a' }}",
            "{# c #}{{ verdict }}",
            "{% if true %}{{ verdict }}{% endif %}",
            "{{ verdict }}\n",
            "{{ verdict",
            "{{ range }}",
        ];
        let initial = Arc::new(json!("start"));
        let vars = Arc::new(json!({"tone": "dry"}));
        let approval = Arc::new(json!({"decision": "approve"}));
        let templates = Templates::new();
        let limits =
            || RenderLimits::within(Duration::from_secs(60), &Arc::new(CancellationToken::new()));
        let mut substituted = 0;
        for input in &inputs {
            let scope = Scope {
                input,
                initial: &initial,
                approval: Some(&approval),
                vars: &vars,
                nodes: &outputs,
            };
            for source in fast.iter().chain(&minijinja_only) {
                let full = templates.render_with_minijinja(source, &scope, limits());
                let rendered = templates.render(source, &scope, limits());
                assert_eq!(rendered, full, "{source} with {input}");
                if let Some(text) = substitute::render(source, &scope) {
                    substituted += 1;
                    assert!(!minijinja_only.contains(source), "{source} with {input}");
                    assert_eq!(Ok(text), full, "{source} with {input}");
                }
            }
        }
        // Every `fast` source with the object input; the ones naming only the scope's own
        // names with the others.
        assert!(substituted >= fast.len() + 3, "{substituted}");
    }

    /// A template's text, whatever it ends with, renders values as they are: MiniJinja picks
    /// an escaping by the template's name, and a template's name here is its source.
    #[test]
    fn values_are_never_escaped_whatever_the_template_ends_with() {
        let value = r#"a <b> & "c""#;
        for ending in [
            "page.html",
            "page.htm",
            "page.xml",
            "out.json",
            "out.json5",
            "x.yaml",
        ] {
            let text = render(
                &format!("{{{{ PREVIOUS_OUTPUT }}}} went to {ending}"),
                json!(value),
                &[],
            )
            .expect("renders");
            assert_eq!(text, format!("{value} went to {ending}"));
        }
    }

    #[test]
    fn missing_names_are_named() {
        let error = render("Hi {{ nodes.classify }}", json!("x"), &[]).expect_err("missing node");
        assert_eq!(
            error.to_string(),
            "template refers to `nodes.classify`, which does not exist here (node `classify` has not finished in this run)"
        );
        let error = render("{{ verdict }}", json!({"score": 1}), &[]).expect_err("missing field");
        assert!(
            error
                .to_string()
                .starts_with("template refers to `verdict`"),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("the previous output has the fields score"),
            "{error}"
        );
        let error = render("{{ initial.nope.deeper }}", json!(""), &[]).expect_err("missing path");
        assert_eq!(
            error.to_string(),
            "template refers to `initial.nope`, which does not exist here"
        );
        // A function is not blamed for a missing name beside it.
        let error = render(
            "{% for i in range(2) %}{{ unset }}{% endfor %}",
            json!(""),
            &[],
        )
        .expect_err("missing name");
        assert!(
            error.to_string().starts_with("template refers to `unset`"),
            "{error}"
        );
    }

    #[test]
    fn syntax_errors_are_reported_with_line() {
        let error = check_syntax("ok\n{{ broken").expect_err("syntax");
        assert!(error.to_string().contains("line 2"), "{error}");
        assert!(check_syntax("{% if x is defined %}{{x}}{% endif %}").is_ok());
    }

    #[test]
    fn hostile_templates_end_with_a_clear_error_quickly() {
        let started = std::time::Instant::now();
        let cases = [
            (
                "{{ 'a\nb' | indent(1000000000000) }}",
                "indent: a width of 1000000000000 is more than 10000",
            ),
            (
                "{{ 'a\nb' | indent(18446744073709551615) }}",
                "indent: a width of",
            ),
            (
                "{{ 'x' | indent(width=99999) }}",
                "indent: a width of 99999",
            ),
            (
                "{{ [1, 2] | slice(1000000000) }}",
                "slice: a count of 1000000000",
            ),
            (
                "{{ [1] | batch(1000000000, 0) }}",
                "batch: a count of 1000000000",
            ),
            (
                "{{ '%999999999s' | format('x') }}",
                "format: a width of 999999999",
            ),
            (
                "{{ '%.99999999f' | format(1.5) }}",
                "format: a width of 99999999",
            ),
            (
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}done",
                "did too much work",
            ),
            (
                "{{ [1] * 100000000 }}",
                "a list of 100000000 items is too long to print",
            ),
            ("{{ ['abcd'] * 3000000 }}", "rendered more than 10 MiB"),
            ("{{ 'a' * 50000000 }}", "rendered more than 10 MiB"),
        ];
        for (source, expected) in cases {
            let limits =
                RenderLimits::within(Duration::from_secs(60), &Arc::new(CancellationToken::new()));
            let error = render_error(source, limits);
            assert!(error.to_string().contains(expected), "{source}: {error}");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "took {:?}",
            started.elapsed()
        );
        // Within the bounds, the filters still work.
        assert_eq!(
            render("{{ 'a\nb' | indent(2) }}", json!(""), &[]).expect("ok"),
            "a\n  b"
        );
        assert_eq!(
            render("{{ '%5s|' | format('ab') }}", json!(""), &[]).expect("ok"),
            "   ab|"
        );
        assert_eq!(
            render("{{ [1,2,3] | slice(2) | list }}", json!(""), &[]).expect("ok"),
            "[[1, 2], [3]]"
        );
    }

    #[test]
    fn values_that_grow_in_a_render_stop_at_the_memory_limit() {
        let sixty_four = "x".repeat(64);
        let cases = [
            // Sized before they are built.
            (
                "{{ ('x' * 10000) | replace('', 'y' * 1000000) }}".to_string(),
                "replace: a result of 10001010000 bytes is more than 10 MiB",
            ),
            (
                "{{ ([1] * 100000) | join('x' * 1000000) }}".to_string(),
                "join: a result of 99999000000 bytes is more than 10 MiB",
            ),
            // Stopped at a checkpoint past the soft limit: the items of a `range`.
            (
                "{% set ns = namespace(s='x') %}{% for i in range(64) %}\
                 {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"
                    .to_string(),
                "needed more than 128 MiB of memory",
            ),
            (
                "{{ range(100000) | join('x' * 1000000) }}".to_string(),
                "needed more than 128 MiB of memory",
            ),
            // No checkpoint between the allocations: stopped by the allocator.
            (
                format!(
                    "{{% set ns = namespace(s='x') %}}{{% for i in '{sixty_four}' %}}\
                     {{% set ns.s = ns.s ~ ns.s %}}{{% endfor %}}{{{{ ns.s | length }}}}"
                ),
                "needed more than 128 MiB of memory",
            ),
        ];
        for (source, expected) in cases {
            let limits =
                RenderLimits::within(Duration::from_secs(60), &Arc::new(CancellationToken::new()));
            let error = render_error(&source, limits);
            assert!(error.to_string().contains(expected), "{source}: {error}");
        }
        // Under the limits the same filters work, and a render after those above still runs.
        assert_eq!(
            render("{{ 'abc' | replace('', '-') }}", json!(""), &[]).expect("ok"),
            "-a-b-c-"
        );
        assert_eq!(
            render("{{ range(3) | join(', ') }}", json!(""), &[]).expect("ok"),
            "0, 1, 2"
        );
    }

    #[test]
    fn deep_expressions_are_refused_before_parsing() {
        for source in [
            format!("{{{{ {}1 }}}}", "-".repeat(20_000)),
            format!("{{{{ 1{} }}}}", " + 1".repeat(50_000)),
            format!("{{{{ x{} }}}}", " | abs".repeat(50_000)),
            format!("{{{{ x{} }}}}", ".a".repeat(50_000)),
            format!("{{{{ {}x }}}}", "not ".repeat(50_000)),
            format!("{{% if {}x %}}{{% endif %}}", "(".repeat(50_000)),
        ] {
            let error = check_syntax(&source).expect_err("too deep");
            assert!(
                error.to_string().contains("more than 200 operators"),
                "{error}"
            );
            assert!(Templates::new().compile(&source).is_err());
        }
        // Ordinary expressions, and operators inside strings, are fine.
        check_syntax(
            "{{ a.b.c | default('x') ~ (1 + 2 * 3) }} {% if not x or y in z %}{% endif %}",
        )
        .expect("ordinary");
        check_syntax(&format!("{{{{ '{}' }}}}", "-+.|".repeat(5_000))).expect("a string");
    }

    #[test]
    fn the_syntax_check_remembers_only_templates_that_parse() {
        let good = "{{ input.a }} remembered";
        let bad = "{{ input.a ";
        for _ in 0..3 {
            check_syntax(good).expect("parses, checked again from memory");
            assert!(matches!(check_syntax(bad), Err(TemplateError::Syntax(_))));
        }
        // Many distinct templates (more than it keeps) still check right.
        for index in 0..(ParsedSources::MAX_SOURCES + 10) {
            check_syntax(&format!("{{{{ input.a }}}} {index}")).expect("parses");
        }
        assert!(check_syntax(bad).is_err());
        let remembered = PARSED.with(|parsed| parsed.borrow().sources.len());
        assert!(
            remembered <= ParsedSources::MAX_SOURCES,
            "bounded: {remembered}"
        );
    }

    #[test]
    fn a_template_rendered_by_many_steps_is_compiled_once() {
        let templates = Templates::new();
        let outputs = Arc::new(NodeOutputs::default());
        let initial = Arc::new(json!("go"));
        let vars = Arc::new(json!({}));
        for step in 0..5 {
            let input = json!({"n": step});
            let scope = Scope {
                input: &input,
                initial: &initial,
                approval: None,
                vars: &vars,
                nodes: &outputs,
            };
            let limits =
                RenderLimits::within(Duration::from_secs(5), &Arc::new(CancellationToken::new()));
            let text = templates
                .render("item {{ n }} of {{ initial }}", &scope, limits)
                .expect("renders");
            assert_eq!(text, format!("item {step} of go"));
        }
        assert_eq!(
            templates.env.templates().count(),
            1,
            "one compiled template"
        );
    }

    #[test]
    fn is_defined_checks_do_not_trip_strict_mode() {
        assert_eq!(
            render(
                "{% if nope is defined %}y{% else %}n{% endif %}",
                json!(""),
                &[]
            )
            .expect("ok"),
            "n"
        );
    }
}

/// Random templates built from MiniJinja's grammar (and the values that once crashed Weft):
/// checking and rendering must end with text or an error, never a panic, an abort or a hang.
/// Another property runs free-form strings of the language's pieces through the checker.
#[cfg(test)]
mod fuzz {
    use std::time::Duration;

    use proptest::prelude::*;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;
    use weft_fuzz::config;

    use super::*;

    const LEAVES: &[&str] = &[
        "'a'",
        "'%s'",
        "'%999999999s'",
        "'a\nb'",
        "\"\"",
        "[1]",
        "[1, 2]",
        "{'k': 1}",
        "0",
        "1",
        "-1",
        "3",
        "100000",
        "100000000",
        "1000000000000",
        "18446744073709551615",
        "99999999999999999999",
        "1.5",
        "true",
        "none",
        "input",
        "initial",
        "nodes",
        "nodes.a",
        "vars",
        "vars.tone",
        "approval",
        "PREVIOUS_OUTPUT",
        "verdict",
        "list",
        "x",
        "loop",
        "range(3)",
        "range(100000)",
        "missing",
        "namespace()",
        "dict(a=1)",
        "lipsum(2)",
    ];
    const OPERATORS: &[&str] = &[
        " ~ ",
        " * ",
        " + ",
        " - ",
        " / ",
        " // ",
        " % ",
        " ** ",
        " == ",
        " < ",
        " and ",
        " or ",
        " in ",
        " is defined",
        " if x else ",
    ];
    const FILTERS: &[&str] = &[
        "indent",
        "format",
        "batch",
        "slice",
        "tojson",
        "join",
        "replace",
        "length",
        "list",
        "upper",
        "default",
        "abs",
        "first",
        "last",
        "reverse",
        "sort",
        "unique",
        "string",
        "int",
        "float",
        "round",
        "title",
        "trim",
        "items",
        "dictsort",
        "map",
        "select",
        "reject",
        "groupby",
        "sum",
        "min",
        "max",
        "pprint",
        "lines",
        "split",
        "urlencode",
        "center",
    ];
    const PIECES: &[&str] = &[
        "{{ ",
        " }}",
        "{% ",
        " %}",
        "{# ",
        " #}",
        "{%- ",
        " -%}",
        "for ",
        " in ",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ".",
        "if ",
        "endif",
        "endfor",
        "set ",
        "x",
        " = ",
        " ~ ",
        " | ",
        "raw",
        "endraw",
        "macro ",
        "endmacro",
        "call ",
        "endcall",
        "filter ",
        "endfilter",
        "include ",
        "import ",
        "extends ",
        "block ",
        "endblock",
        "super()",
        "recursive",
        "'a",
        "\n",
        "text ",
    ];

    fn expression() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(LEAVES).prop_map(str::to_string);
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                (
                    inner.clone(),
                    prop::sample::select(OPERATORS),
                    inner.clone()
                )
                    .prop_map(|(left, op, right)| format!("{left}{op}{right}")),
                (
                    inner.clone(),
                    prop::sample::select(FILTERS),
                    prop::collection::vec(inner.clone(), 0..3)
                )
                    .prop_map(|(value, filter, args)| if args.is_empty() {
                        format!("{value} | {filter}")
                    } else {
                        format!("{value} | {filter}({})", args.join(", "))
                    }),
                inner.clone().prop_map(|value| format!("({value})")),
                inner.clone().prop_map(|value| format!("-{value}")),
                inner.clone().prop_map(|value| format!("not {value}")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("[{a}, {b}]")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
                inner.clone().prop_map(|value| format!("{value}.b")),
            ]
        })
    }

    fn template() -> impl Strategy<Value = String> {
        let text = prop::sample::select(&["", "text ", "\n", "é "][..]).prop_map(str::to_string);
        let part = prop_oneof![
            text,
            expression().prop_map(|e| format!("{{{{ {e} }}}}")),
            expression().prop_map(|e| format!("{{% set x = {e} %}}")),
        ];
        let body = prop::collection::vec(part, 0..4).prop_map(|parts| parts.concat());
        let block = prop_oneof![
            body.clone(),
            (expression(), body.clone())
                .prop_map(|(e, b)| format!("{{% for x in {e} %}}{b}{{% endfor %}}")),
            (expression(), body.clone(), body)
                .prop_map(|(e, a, b)| format!("{{% if {e} %}}{a}{{% else %}}{b}{{% endif %}}")),
        ];
        prop::collection::vec(block, 1..4).prop_map(|blocks| blocks.concat())
    }

    fn free_form() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(PIECES);
        prop::collection::vec(piece, 1..40).prop_map(|pieces| pieces.concat())
    }

    /// Checks and renders `source`; a failure is an error value, never a panic.
    fn check_and_render(source: &str) -> Result<(), TestCaseError> {
        let checked = check_syntax(source);
        let templates = Templates::new();
        let added = templates.compile(source);
        prop_assert_eq!(checked.is_ok(), added.is_ok(), "check and compile agree");
        if added.is_err() {
            return Ok(());
        }
        let outputs = Arc::new(NodeOutputs::from_map(
            [("a".to_string(), json!({"b": [1, "two"]}))].into(),
        ));
        let input = json!({"verdict": "yes", "list": [1, 2, 3]});
        let scope = Scope {
            input: &input,
            initial: &Arc::new(json!("start")),
            approval: None,
            vars: &Arc::new(json!({"tone": "dry"})),
            nodes: &outputs,
        };
        let limits =
            RenderLimits::within(Duration::from_secs(10), &Arc::new(CancellationToken::new()));
        if let Ok(text) = templates.render(source, &scope, limits) {
            prop_assert!(text.len() <= MAX_RENDERED_BYTES);
        }
        Ok(())
    }

    /// Text between holes, near what `substitute` renders itself.
    const SUBSTITUTION_TEXT: &[&str] = &[
        "", " ", "text", "é", "{", "}", "}}", "{%", "{#", "{{", "\t", "\n", "\r", " x ",
    ];
    /// What a hole of a source names.
    const SUBSTITUTION_NAMES: &[&str] = &[
        "PREVIOUS_OUTPUT",
        "input",
        "verdict",
        "list",
        "a.b",
        "initial",
        "vars.tone",
        "vars",
        "nodes.a",
        "nodes.b.a",
        "nodes.b.b",
        "nodes.c",
        "approval.decision",
        "input.verdict",
        "true",
        "none",
        "None",
        "range",
        "_x1",
        "a..b",
        "0",
        "'a'",
        "verdict|upper",
        "list.0",
        "PREVIOUS_OUTPUT.a",
        "-verdict",
        "verdict-",
        "spaced out",
    ];
    /// How a hole opens and closes.
    const SUBSTITUTION_DELIMITERS: &[(&str, &str)] = &[
        ("{{ ", " }}"),
        ("{{", "}}"),
        ("{{\t", " }}"),
        ("{{ ", ""),
        ("{{- ", " -}}"),
        ("{{+", "}}"),
        ("{{\n", "\r\n}}"),
    ];

    /// Text and holes, mostly well formed.
    fn substitution() -> impl Strategy<Value = String> {
        let text = prop::sample::select(SUBSTITUTION_TEXT).prop_map(str::to_string);
        let hole = (
            prop::sample::select(SUBSTITUTION_DELIMITERS),
            prop::sample::select(SUBSTITUTION_NAMES),
        )
            .prop_map(|((open, close), name)| format!("{open}{name}{close}"));
        let part = prop_oneof![text, hole.clone(), hole];
        prop::collection::vec(part, 1..6).prop_map(|parts| parts.concat())
    }

    /// What `substitute` renders, MiniJinja renders the same; what it does not render, it
    /// leaves to MiniJinja.
    fn substitutes_as_minijinja_renders(source: &str, input: &Value) -> Result<(), TestCaseError> {
        let outputs = Arc::new(NodeOutputs::from_map(
            [
                ("a".to_string(), json!("from a")),
                ("b".to_string(), json!({"a": "deep", "b": 2})),
            ]
            .into(),
        ));
        let scope = Scope {
            input,
            initial: &Arc::new(json!("start")),
            approval: Some(&Arc::new(json!({"decision": "approve"}))),
            vars: &Arc::new(json!({"tone": "dry"})),
            nodes: &outputs,
        };
        if let Some(text) = substitute::render(source, &scope) {
            let templates = Templates::new();
            let limits =
                RenderLimits::within(Duration::from_secs(10), &Arc::new(CancellationToken::new()));
            prop_assert_eq!(
                Ok(text),
                templates.render_with_minijinja(source, &scope, limits)
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(500))]

        #[test]
        fn plain_substitutions_render_as_minijinja_does(source in substitution()) {
            for input in [
                json!({"verdict": " yes ", "list": "l", "a": {"b": "c"}, "true": "t"}),
                json!(" text\n"),
                json!(null),
                json!(7),
            ] {
                substitutes_as_minijinja_renders(&source, &input)?;
            }
        }

        #[test]
        fn random_templates_check_and_render_without_panic(source in template()) {
            check_and_render(&source)?;
        }

        #[test]
        fn free_form_template_text_checks_and_renders_without_panic(source in free_form()) {
            check_and_render(&source)?;
        }
    }
}
