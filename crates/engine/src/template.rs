//! Templates (SPEC §3): MiniJinja, compiled once per run, with the names Weft puts in scope.
//!
//! Names: `PREVIOUS_OUTPUT` (text of the previous output), `input` (the previous output as a
//! value), `approval` (latest decision), `initial` (the run's input), `nodes.<id>` (latest
//! output of a finished node), `vars` (`settings.vars`) and, when the previous output is a JSON
//! object, each of its top-level keys. A name that does not exist is an error naming it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use minijinja::value::{Enumerator, Object, ObjectRepr, Serde};
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::Value;

/// Latest output of every node that has finished in this run; shared by the running steps
/// and read lazily by templates (`nodes.<id>`), so rendering never copies all outputs.
#[derive(Debug, Default)]
pub(crate) struct NodeOutputs(RwLock<HashMap<String, Value>>);

impl NodeOutputs {
    pub(crate) fn from_map(outputs: HashMap<String, Value>) -> NodeOutputs {
        NodeOutputs(RwLock::new(outputs))
    }

    pub(crate) fn set(&self, node_id: &str, value: Value) {
        if let Ok(mut map) = self.0.write() {
            map.insert(node_id.to_string(), value);
        }
    }

    pub(crate) fn get(&self, node_id: &str) -> Option<Value> {
        self.0.read().ok().and_then(|map| map.get(node_id).cloned())
    }

    pub(crate) fn snapshot(&self) -> HashMap<String, Value> {
        self.0.read().map(|map| map.clone()).unwrap_or_default()
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
        Some(minijinja::Value::from(Serde(&value)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<minijinja::Value> = self
            .0
            .snapshot()
            .into_keys()
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

/// What a template can see while one node runs.
pub(crate) struct Scope<'a> {
    pub input: &'a Value,
    pub initial: &'a Value,
    pub approval: Option<&'a Value>,
    pub vars: &'a Value,
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

/// Why a template failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    #[error("template does not parse: {0}")]
    Syntax(String),
    #[error("template refers to `{name}`, which does not exist here{hint}")]
    UnknownName { name: String, hint: String },
    #[error("template failed: {0}")]
    Render(String),
}

fn new_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
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

/// Checks that `source` parses; used by the validator.
pub fn check_syntax(source: &str) -> Result<(), TemplateError> {
    let env = new_environment();
    env.template_from_str(source)
        .map(|_| ())
        .map_err(|error| TemplateError::Syntax(describe_error(&error)))
}

/// The templates of one flow, compiled once and rendered many times.
pub(crate) struct Templates {
    env: Environment<'static>,
}

impl Templates {
    pub(crate) fn new() -> Templates {
        Templates {
            env: new_environment(),
        }
    }

    fn key(node_id: &str, field: &str) -> String {
        format!("{node_id}\u{1f}{field}")
    }

    /// Compiles the template of `field` of `node_id`.
    pub(crate) fn add(
        &mut self,
        node_id: &str,
        field: &str,
        source: &str,
    ) -> Result<(), TemplateError> {
        self.env
            .add_template_owned(Templates::key(node_id, field), source.to_string())
            .map_err(|error| TemplateError::Syntax(describe_error(&error)))
    }

    /// Renders a template added earlier with [`Templates::add`].
    pub(crate) fn render(
        &self,
        node_id: &str,
        field: &str,
        scope: &Scope<'_>,
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(&Templates::key(node_id, field))
            .map_err(|error| TemplateError::Render(describe_error(&error)))?;
        let context = build_context(scope);
        template.render(&context).map_err(|error| {
            if error.kind() == ErrorKind::UndefinedError {
                let mut names: Vec<String> =
                    template.undeclared_variables(true).into_iter().collect();
                names.sort();
                if let Some(missing) = names.iter().find_map(|name| missing_part(name, scope)) {
                    return missing;
                }
            }
            TemplateError::Render(describe_error(&error))
        })
    }
}

fn build_context(scope: &Scope<'_>) -> minijinja::Value {
    let mut context: std::collections::BTreeMap<String, minijinja::Value> = Default::default();
    if let Value::Object(fields) = scope.input {
        for (key, value) in fields {
            context.insert(key.clone(), minijinja::Value::from(Serde(value)));
        }
    }
    context.insert(
        "PREVIOUS_OUTPUT".into(),
        minijinja::Value::from(output_text(scope.input)),
    );
    context.insert("input".into(), minijinja::Value::from(Serde(scope.input)));
    context.insert(
        "initial".into(),
        minijinja::Value::from(Serde(scope.initial)),
    );
    context.insert("vars".into(), minijinja::Value::from(Serde(scope.vars)));
    context.insert(
        "nodes".into(),
        minijinja::Value::from_object(NodesView(scope.nodes.clone())),
    );
    if let Some(approval) = scope.approval {
        context.insert("approval".into(), minijinja::Value::from(Serde(approval)));
    }
    minijinja::Value::from(context)
}

/// The first part of a dotted name (`nodes.classify.verdict`) that does not resolve, as an
/// error naming it, or `None` when the whole name resolves.
fn missing_part(name: &str, scope: &Scope<'_>) -> Option<TemplateError> {
    let mut parts = name.split('.');
    let head = parts.next()?;
    let unknown = |name: String, hint: String| Some(TemplateError::UnknownName { name, hint });
    let current: Value = match head {
        "PREVIOUS_OUTPUT" => return None,
        "input" => scope.input.clone(),
        "initial" => scope.initial.clone(),
        "vars" => scope.vars.clone(),
        "approval" => match scope.approval {
            Some(value) => value.clone(),
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
                Some(value) => value,
                None => {
                    return unknown(
                        format!("nodes.{id}"),
                        format!(" (node `{id}` has not finished in this run)"),
                    );
                }
            }
        }
        field => match scope.input.get(field) {
            Some(value) => value.clone(),
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
    match crate::path::resolve(&current, &rest.join(".")) {
        Ok(_) => None,
        Err(resolved) => {
            let path: Vec<&str> = name.split('.').take(kept + resolved + 1).collect();
            unknown(path.join("."), String::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(
        source: &str,
        input: Value,
        nodes: &[(&str, Value)],
    ) -> Result<String, TemplateError> {
        let outputs = Arc::new(NodeOutputs::from_map(
            nodes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ));
        let mut templates = Templates::new();
        templates.add("n", "f", source)?;
        let initial = json!({"topic": "rust"});
        let vars = json!({"tone": "dry"});
        let approval = json!({"decision": "approve", "note": "fine"});
        templates.render(
            "n",
            "f",
            &Scope {
                input: &input,
                initial: &initial,
                approval: Some(&approval),
                vars: &vars,
                nodes: &outputs,
            },
        )
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
    }

    #[test]
    fn syntax_errors_are_reported_with_line() {
        let error = check_syntax("ok\n{{ broken").expect_err("syntax");
        assert!(error.to_string().contains("line 2"), "{error}");
        assert!(check_syntax("{% if x is defined %}{{x}}{% endif %}").is_ok());
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
