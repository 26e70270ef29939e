//! Node kinds (docs/kinds.md). A kind is one file and one line: the file (`<kind>.rs`) holds its
//! config type and implements [`Kind`] for it (id, title, handles, scheduling, extra checks, and
//! how it runs); the line below names it in the registry, which makes [`NodeKind`], the parsed
//! [`NodeConfig`], and every dispatch over them. Each generated `match` is exhaustive, so a kind
//! cannot be half-registered; its description for the canvas is derived from the config type.
//!
//! - [`step`]: what a kind sees of a run while it runs (the step interface); the engine
//!   provides it, a kind's unit tests a fake.
//! - [`validate()`]: every problem of a flow at once, each naming its node or edge.

pub mod budget;
mod common;
pub mod decision;
mod describe;
mod field_order;
mod kind;
pub mod mcp_tools;
mod registry;
pub mod step;
pub mod validate;

use std::any::Any;
use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use common::{CommonSettings, RetrySettings, common_fields};
pub use describe::{FieldDescription, FieldType, HandleDescription, KindDescription};
pub use kind::{ChildFlowUse, FieldError, Handle, HandleKind, Kind, ModelUse, Scheduling};
pub use validate::{
    CheckedFlow, FlowToRun, Problem, ProblemCode, Severity, check_flow, check_for_run,
    provider_problems, validate,
};

use weft_flow::Node;

registry::kinds! {
    Start => start::StartConfig,
    Agent => agent::AgentConfig,
    #[path = "if.rs"] If => if_node::IfConfig,
    Approval => approval::ApprovalConfig,
    Template => template::TemplateConfig,
    Output => output::OutputConfig,
    Note => note::NoteConfig,
    Code => code::CodeConfig,
    Http => http::HttpConfig,
    Join => join::JoinConfig,
    ForEach => foreach::ForEachConfig,
    Subflow => subflow::SubflowConfig,
    Gate => gate::GateConfig,
    #[cfg(test)] Echo => echo::EchoConfig,
}

pub use agent::{AgentTools, ReasoningEffort};
pub use approval::{TIMEOUT as APPROVAL_TIMEOUT, seconds_text};
pub use decision::{Decision, DecisionChoice, FollowUpKind, FormField, FormFieldKind, Quorum};
pub use if_node::{Condition, Operator};
pub use subflow::OnError;

impl NodeKind {
    /// The kind of `node`, `None` for a type Weft does not know.
    pub fn of(node: &Node) -> Option<NodeKind> {
        NodeKind::from_id(&node.kind)
    }

    /// The handles edges may leave a node of this kind with `data` by: the described handles,
    /// a repeated one once per row of its list field (`if`: one per condition).
    pub fn handles(self, data: &Map<String, Value>) -> Vec<Cow<'static, str>> {
        let mut handles = Vec::new();
        for handle in self.handle_list() {
            match handle.rows {
                None => handles.push(Cow::Borrowed(handle.id)),
                Some(field) => {
                    let rows = data
                        .get(field)
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    handles.extend((0..rows).map(|index| Cow::Owned(handle.row(index))));
                }
            }
        }
        handles
    }

    /// The templated fields of a node of this kind with `data`: (field, source).
    pub fn templates(self, data: &Map<String, Value>) -> Vec<(String, &str)> {
        describe::templates(&self.describe().fields, data)
    }

    /// The source of one templated field (named as [`NodeKind::templates`] names it) of a
    /// node of this kind with `data`.
    pub fn template_source<'a>(self, data: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
        describe::template_source(&self.describe().fields, data, field)
    }
}

/// Every kind's description, in registry order.
pub fn all_kinds() -> Vec<KindDescription> {
    NodeKind::all()
        .iter()
        .map(|kind| kind.describe().clone())
        .collect()
}

/// Deserializes `data` into `T`, naming the offending field on error.
fn parse_fields<T: DeserializeOwned>(data: &Map<String, Value>) -> Result<T, FieldError> {
    // Deserializing from a borrowed map clones nothing but what `T` keeps.
    let deserializer = || {
        serde::de::value::MapDeserializer::new(data.iter().map(|(key, value)| {
            (
                key.as_str(),
                serde::de::IntoDeserializer::into_deserializer(value),
            )
        }))
    };
    // Tracking the path costs more than the parse itself (every node of a flow is parsed at
    // each validation): it is taken only to name what a config that does not parse got wrong.
    if let Ok(parsed) = T::deserialize(deserializer()) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(deserializer()).map_err(|error| {
        let field = error.path().to_string();
        let message = error.into_inner().to_string();
        FieldError::new(if field == "." { "data".into() } else { field }, message)
    })
}

/// A node as the validator parsed it and a run uses it: its kind, config and run settings.
/// A checked flow carries these, so a run does not parse every node again.
#[derive(Debug, Clone)]
pub struct ParsedNode {
    pub kind: NodeKind,
    pub config: NodeConfig,
    pub settings: CommonSettings,
}

impl ParsedNode {
    /// `node` parsed; `None` when its kind is unknown or a field does not parse (the
    /// validator refuses such a node and says why).
    pub fn parse(node: &weft_flow::Node) -> Option<ParsedNode> {
        let kind = NodeKind::of(node)?;
        Some(ParsedNode {
            kind,
            config: NodeConfig::parse(kind, &node.data).ok()?,
            settings: CommonSettings::parse(&node.data).ok()?,
        })
    }
}

impl NodeConfig {
    /// The config of another node of the same run, as [`StepEnv::config`] hands it to a kind.
    pub fn as_any(&self) -> &dyn Any {
        self.inner_any()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn data(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    /// A value of the wrong type for a field; `None` for a JSON field, which takes anything.
    fn wrong_value(field: &FieldDescription) -> Option<Value> {
        match field.field_type {
            FieldType::Text
            | FieldType::Template
            | FieldType::Code
            | FieldType::FlowPath
            | FieldType::Conditions { .. }
            | FieldType::StringList
            | FieldType::StringMap { .. } => Some(json!(42)),
            FieldType::Number { .. } | FieldType::Integer { .. } | FieldType::Boolean => {
                Some(json!("not a number or boolean"))
            }
            FieldType::Choice { .. } => Some(json!("not-an-option")),
            FieldType::Json => None,
        }
    }

    /// A valid value for a required field, so the rest of a node parses.
    fn filled(kind: NodeKind) -> Map<String, Value> {
        let mut data = Map::new();
        for field in kind.describe().fields.iter().filter(|field| field.required) {
            weft_flow::path::set_in(&mut data, &field.name, json!("something.json"));
        }
        data
    }

    #[test]
    fn every_kind_is_described_in_registry_order() {
        let ids: Vec<&str> = all_kinds().iter().map(|kind| kind.id).collect();
        assert_eq!(
            ids,
            [
                "start", "agent", "if", "approval", "template", "output", "note", "code", "http",
                "join", "forEach", "subflow", "gate", "echo"
            ]
        );
        for kind in NodeKind::all() {
            let description = kind.describe();
            assert_eq!(NodeKind::from_id(description.id), Some(*kind));
            assert!(description.help.ends_with('.'), "{}", kind.id());
            let mut names: Vec<&str> = description.fields.iter().map(|f| f.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), description.fields.len(), "{}", kind.id());
            for field in description.fields.iter().chain(common_fields()) {
                assert!(field.help.ends_with('.'), "{}.{}", kind.id(), field.name);
                assert!(!field.label.is_empty(), "{}.{}", kind.id(), field.name);
            }
        }
        assert_eq!(NodeKind::from_id("nope"), None);
    }

    /// A step renders the template sources its parsed config keeps ([`Kind::template`]) in
    /// place of the flow node's: for every kind and template field, set or left to its
    /// default, the two are the same text (or the config does not keep it).
    #[test]
    fn configs_keep_the_template_sources_of_their_nodes() {
        let mut kept = 0;
        for kind in NodeKind::all() {
            for field in &kind.describe().fields {
                let names: Vec<String> = match field.field_type {
                    FieldType::Template => vec![field.name.clone()],
                    FieldType::StringMap { templates: true } => {
                        vec![format!("{}.Accept", field.name)]
                    }
                    _ => continue,
                };
                for name in names {
                    let mut set = filled(*kind);
                    let value = match field.field_type {
                        FieldType::StringMap { .. } => json!({"Accept": "{{ input }} map"}),
                        _ => json!(format!("{{{{ input }}}} {name}")),
                    };
                    weft_flow::path::set_in(&mut set, &field.name, value);
                    let mut unset = filled(*kind);
                    unset.remove(&field.name);
                    for data in [set, unset] {
                        let Ok(config) = NodeConfig::parse(*kind, &data) else {
                            continue; // a required field left out
                        };
                        let from_flow = kind.template_source(&data, &name);
                        if let Some(from_config) = config.template(&name) {
                            kept += 1;
                            assert_eq!(Some(from_config), from_flow, "{}.{name}", kind.id());
                        }
                    }
                }
            }
        }
        // template, the agent's two prompts, approval, echo, forEach, gate, and HTTP's URL,
        // body and a header, set (and those with a default, unset).
        assert!(kept >= 10, "{kept}");
    }

    /// The derived description matches what the engine reads: every field's default parses,
    /// a value of the wrong type is refused naming the field, and numbers outside the
    /// described range are refused naming it too.
    #[test]
    fn descriptions_match_what_the_configs_read() {
        for kind in NodeKind::all() {
            let base = filled(*kind);
            NodeConfig::parse(*kind, &base)
                .unwrap_or_else(|error| panic!("{}: {error}", kind.id()));
            for field in &kind.describe().fields {
                let context = format!("{}.{}", kind.id(), field.name);
                if !field.default.is_null() {
                    let mut with_default = base.clone();
                    weft_flow::path::set_in(&mut with_default, &field.name, field.default.clone());
                    if !field.required {
                        NodeConfig::parse(*kind, &with_default).expect(&context);
                    }
                }
                if let Some(wrong) = wrong_value(field) {
                    let mut bad = base.clone();
                    weft_flow::path::set_in(&mut bad, &field.name, wrong);
                    let error = NodeConfig::parse(*kind, &bad).expect_err(&context);
                    assert_eq!(error.field, field.name, "{context}: {error}");
                }
                let (min, max) = match field.field_type {
                    FieldType::Number { min, max, .. } => (min, max),
                    FieldType::Integer { min, max } => {
                        (min.map(|n| n as f64), max.map(|n| n as f64))
                    }
                    _ => continue,
                };
                for outside in [min.map(|min| min - 1.0), max.map(|max| max + 1.0)]
                    .into_iter()
                    .flatten()
                {
                    let mut bad = base.clone();
                    weft_flow::path::set_in(&mut bad, &field.name, json!(outside));
                    let error = NodeConfig::parse(*kind, &bad).expect_err(&context);
                    assert_eq!(error.field, field.name, "{context} = {outside}: {error}");
                }
            }
        }
    }

    #[test]
    fn required_fields_and_ranges_say_what_is_wrong() {
        let error = NodeConfig::parse(NodeKind::Gate, &Map::new()).expect_err("no criteria");
        assert_eq!(
            error.to_string(),
            "field `criteria`: is empty: say what a passing output must satisfy"
        );
        let error =
            NodeConfig::parse(NodeKind::Http, &data(json!({"url": "  "}))).expect_err("blank");
        assert_eq!(error.to_string(), "field `url`: is empty");
        let error = NodeConfig::parse(NodeKind::Agent, &data(json!({"temperature": 2.5})))
            .expect_err("too hot");
        assert_eq!(
            error.to_string(),
            "field `temperature`: must be between 0 and 2"
        );
        let error = CommonSettings::parse(&data(json!({"timeoutSeconds": 0}))).expect_err("zero");
        assert_eq!(
            error.to_string(),
            "field `timeoutSeconds`: must be more than 0 and at most 2592000"
        );
        let error = CommonSettings::parse(&data(json!({"retry": {"maxAttempts": 21}})))
            .expect_err("too many");
        assert_eq!(error.field, "retry.maxAttempts");
        let method =
            NodeConfig::parse(NodeKind::Http, &data(json!({"url": "x", "method": "post"})));
        assert!(method.is_ok(), "methods are read in any case: {method:?}");
        let error = NodeConfig::parse(
            NodeKind::Http,
            &data(json!({"url": "x", "method": "FETCH"})),
        )
        .expect_err("no such method");
        assert!(
            error
                .to_string()
                .contains("GET, POST, PUT, PATCH, DELETE, HEAD"),
            "{error}"
        );
    }

    #[test]
    fn handles_follow_the_description_and_the_rows() {
        let conditions = data(json!({"conditions": [
            { "operator": "contains", "value": "a" },
            { "operator": "is_empty" },
        ]}));
        assert_eq!(
            NodeKind::If.handles(&conditions),
            ["condition-0", "condition-1", "false"]
        );
        assert_eq!(NodeKind::If.handles(&Map::new()), ["false"]);
        assert_eq!(
            NodeKind::Agent.handles(&Map::new()),
            ["output", "subagent", "error"]
        );
        assert!(NodeKind::Output.handles(&Map::new()).is_empty());
        let description = serde_json::to_value(NodeKind::If.describe()).expect("serializes");
        assert_eq!(description["handles"][0]["rows"], "conditions");
        assert_eq!(description["handles"][0]["id"], "condition-{i}");
    }

    #[test]
    fn templated_fields_are_listed_from_the_description() {
        let http =
            data(json!({"url": "https://x/{{ a }}", "headers": {"X-A": "{{ b }}"}, "body": "{}"}));
        let mut templates: Vec<(String, &str)> = NodeKind::Http.templates(&http);
        templates.sort();
        assert_eq!(
            templates,
            [
                ("body".to_string(), "{}"),
                ("headers.X-A".to_string(), "{{ b }}"),
                ("url".to_string(), "https://x/{{ a }}"),
            ]
        );
        // A field at its default is still a template (an approval's empty message).
        assert_eq!(
            NodeKind::Approval.templates(&Map::new()),
            [("message".to_string(), "")]
        );
        assert!(NodeKind::Code.templates(&Map::new()).is_empty());
    }
}
