//! What a canvas needs to draw a node kind and edit its `data` ([`KindDescription`]), derived
//! from the kind's config type: its JSON Schema (schemars) gives each field's name as spelled in
//! files, its type, default, range and help (the field's doc comment); `#[schemars(title = ..)]`
//! gives its label. The same description drives the checks every kind gets for free (ranges,
//! required fields) and lists the templated fields, so the canvas, the validator and the run
//! read one source.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::field_order::field_order;
use super::kind::{FieldError, Handle, HandleKind, Kind};

/// What a canvas needs to draw a node kind and edit its `data`: one generic node component and
/// a schema-driven inspector draw every kind from this.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindDescription {
    /// The `type` id in flow files (`agent`, `forEach`).
    pub id: &'static str,
    /// The kind's name as a person reads it (`Agent`, `For each`).
    pub title: &'static str,
    /// What the kind does: its config's doc comment.
    pub help: String,
    /// Whether the node has an `input` handle.
    pub inputs: bool,
    /// The handles edges may leave by, in the order they are drawn.
    pub handles: Vec<HandleDescription>,
    /// The kind's own keys of `data`; the common fields every kind has come on top of these,
    /// except where a kind describes one of them itself (agent's `description`), which then
    /// replaces it.
    pub fields: Vec<FieldDescription>,
}

/// A handle edges leave a node by.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleDescription {
    /// The `sourceHandle` of edges leaving by it (`output`, `error`, `pass`). For a handle
    /// repeated per row, a pattern where `{i}` stands for a row's index (`condition-{i}`).
    pub id: &'static str,
    pub label: &'static str,
    pub kind: HandleKind,
    /// For a handle repeated once per row of a list field rather than a fixed one: that
    /// field's name (`conditions` for `if`); `id` and `label` then hold `{i}`.
    pub rows: Option<&'static str>,
}

impl From<&Handle> for HandleDescription {
    fn from(handle: &Handle) -> HandleDescription {
        HandleDescription {
            id: handle.id,
            label: handle.label,
            kind: handle.kind,
            rows: handle.rows,
        }
    }
}

/// One key of a node's `data`, as the inspector edits it.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldDescription {
    /// The key in `data`, spelled as in files (`systemPrompt`). A dotted name is a key of a
    /// nested object (`tools.web_search` is `data.tools.web_search`), the same path a
    /// validation problem names.
    pub name: String,
    pub label: String,
    /// One sentence: its field's doc comment.
    pub help: String,
    pub field_type: FieldType,
    /// The value the engine uses when the key is absent (`null`: unset).
    pub default: Value,
    /// A node without a non-empty value here is invalid.
    pub required: bool,
}

/// How a field's value is edited, and what it may hold.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FieldType {
    /// Plain text.
    Text,
    /// A MiniJinja template (docs/flows.md#templates): the canvas offers the names a template can
    /// use.
    Template,
    /// A number within `min` and `max` when they are given; with `minExclusive`, `min` itself
    /// is not allowed.
    Number {
        #[serde(skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        min_exclusive: bool,
    },
    /// A whole number within `min` and `max` when they are given.
    Integer {
        #[serde(skip_serializing_if = "Option::is_none")]
        min: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max: Option<i64>,
    },
    Boolean,
    /// One of `options`, spelled as in files.
    Choice {
        options: Vec<String>,
    },
    /// Python source (a `code` node's function body).
    Code,
    /// Any JSON value (`outputSchema`, `initialInput`).
    Json,
    /// `if`'s rows: `[{ "operator", "value", "field"? }]`, `operator` one of `operators`.
    Conditions {
        operators: Vec<String>,
    },
    /// A list of text.
    StringList,
    /// Text keyed by text (HTTP headers); with `templates`, each value is a template.
    StringMap {
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        templates: bool,
    },
    /// A path to another flow file, relative to this flow's file.
    FlowPath,
}

/// The `x-weft` marks a config field may carry (`#[schemars(extend("x-weft" = "template"))]`),
/// for what a JSON Schema type alone does not say.
const MARK: &str = "x-weft";
/// Why a required field may not be empty, told after "is empty: " (`x-weft-empty`).
const EMPTY_HINT: &str = "x-weft-empty";

/// The description of kind `K`, derived once from its config type.
pub(super) fn describe<K: Kind>() -> KindDescription {
    let schema = schemars::schema_for!(K);
    let root = schema.as_value();
    KindDescription {
        id: K::ID,
        title: K::TITLE,
        help: text_of(root, "description"),
        inputs: K::INPUTS,
        handles: K::HANDLES.iter().map(HandleDescription::from).collect(),
        fields: fields_of::<K>(),
    }
}

/// The fields of config type `T`, nested structs flattened into dotted names, in the order
/// they are declared.
pub(super) fn fields_of<T: JsonSchema + DeserializeOwned>() -> Vec<FieldDescription> {
    let schema = schemars::schema_for!(T);
    let root = schema.as_value();
    let defs = root.get("$defs").and_then(Value::as_object);
    let mut fields = Vec::new();
    collect_fields(root, defs, "", &mut fields);
    let order = field_order::<T>();
    let place = |name: &str| -> Vec<usize> {
        let mut prefix = String::new();
        name.split('.')
            .map(|segment| {
                let index = order
                    .get(&prefix)
                    .and_then(|fields| fields.iter().position(|field| *field == segment))
                    .unwrap_or(usize::MAX);
                prefix = if prefix.is_empty() {
                    segment.to_string()
                } else {
                    format!("{prefix}.{segment}")
                };
                index
            })
            .collect()
    };
    fields.sort_by_cached_key(|field| place(&field.name));
    fields
}

fn collect_fields(
    schema: &Value,
    defs: Option<&Map<String, Value>>,
    prefix: &str,
    fields: &mut Vec<FieldDescription>,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let inner = resolve(property, defs);
        if property.get(MARK).is_none() && inner.get("properties").is_some() {
            collect_fields(inner, defs, &name, fields);
            continue;
        }
        let label = match property.get("title").and_then(Value::as_str) {
            Some(title) => title.to_string(),
            None => label_of(key),
        };
        fields.push(FieldDescription {
            label,
            help: text_of(property, "description"),
            field_type: field_type(property, inner, defs),
            default: property.get("default").cloned().unwrap_or(Value::Null),
            required: inner
                .get("minLength")
                .and_then(Value::as_u64)
                .is_some_and(|min| min > 0),
            name,
        });
    }
}

/// The schema a property stands for: its `$ref` followed, and the non-null alternative of an
/// `Option` (`anyOf: [T, {type: null}]`).
fn resolve<'a>(schema: &'a Value, defs: Option<&'a Map<String, Value>>) -> &'a Value {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
        && let Some(target) = reference
            .strip_prefix("#/$defs/")
            .and_then(|name| defs?.get(name))
    {
        return resolve(target, defs);
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        let mut not_null = options
            .iter()
            .filter(|option| option.get("type").and_then(Value::as_str) != Some("null"));
        if let (Some(only), None) = (not_null.next(), not_null.next()) {
            return resolve(only, defs);
        }
    }
    schema
}

/// The JSON Schema `type` of `schema` without `null` (`["number", "null"]` is a number).
fn type_of(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(kind) => Some(kind),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null"),
        _ => None,
    }
}

/// The string values an enum schema allows (`enum: [...]`, or `oneOf` of `const`s), in order.
fn options_of(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        );
    }
    let variants = schema.get("oneOf").and_then(Value::as_array)?;
    variants
        .iter()
        .map(|variant| variant.get("const")?.as_str().map(str::to_string))
        .collect()
}

fn field_type(property: &Value, inner: &Value, defs: Option<&Map<String, Value>>) -> FieldType {
    let mark = property.get(MARK).and_then(Value::as_str);
    match mark {
        Some("template") => return FieldType::Template,
        Some("code") => return FieldType::Code,
        Some("flowPath") => return FieldType::FlowPath,
        Some("json") => return FieldType::Json,
        Some("templateMap") => return FieldType::StringMap { templates: true },
        Some("conditions") => {
            let row = inner.get("items").map(|items| resolve(items, defs));
            let operator = row
                .and_then(|row| row.pointer("/properties/operator"))
                .map(|operator| resolve(operator, defs));
            return FieldType::Conditions {
                operators: operator.and_then(options_of).unwrap_or_default(),
            };
        }
        _ => {}
    }
    if let Some(options) = options_of(inner) {
        return FieldType::Choice { options };
    }
    let number = |key: &str| {
        property
            .get(key)
            .or_else(|| inner.get(key))
            .and_then(Value::as_f64)
    };
    match type_of(inner) {
        Some("boolean") => FieldType::Boolean,
        Some("integer") => FieldType::Integer {
            min: number("minimum").map(|min| min as i64),
            max: number("maximum").map(|max| max as i64),
        },
        Some("number") => {
            let exclusive = number("exclusiveMinimum");
            FieldType::Number {
                min: exclusive.or(number("minimum")),
                max: number("maximum"),
                min_exclusive: exclusive.is_some(),
            }
        }
        Some("string") => FieldType::Text,
        Some("array") => FieldType::StringList,
        Some("object") => FieldType::StringMap { templates: false },
        _ => FieldType::Json,
    }
}

fn text_of(schema: &Value, key: &str) -> String {
    schema
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A label from a key when the field gives none: `initialInput` → `Initial input`.
fn label_of(key: &str) -> String {
    let mut label = String::new();
    for (index, c) in key.chars().enumerate() {
        if index == 0 {
            label.extend(c.to_uppercase());
        } else if c.is_uppercase() {
            label.push(' ');
            label.extend(c.to_lowercase());
        } else if c == '_' {
            label.push(' ');
        } else {
            label.push(c);
        }
    }
    label
}

/// The described checks on `data` that a field type alone cannot make: numbers within their
/// range, required text not empty (with the hint its field gives).
pub(super) fn check_fields(
    fields: &[FieldDescription],
    hints: &[(String, String)],
    data: &Map<String, Value>,
) -> Result<(), FieldError> {
    for field in fields {
        let Some(value) = weft_flow::path::get_in(data, &field.name) else {
            if field.required {
                return Err(empty(field, hints));
            }
            continue;
        };
        if field.required && value.as_str().is_some_and(|text| text.trim().is_empty()) {
            return Err(empty(field, hints));
        }
        let Some(number) = value.as_f64() else {
            continue;
        };
        let (min, max, min_exclusive) = match field.field_type {
            FieldType::Number {
                min,
                max,
                min_exclusive,
            } => (min, max, min_exclusive),
            FieldType::Integer { min, max } => {
                (min.map(|n| n as f64), max.map(|n| n as f64), false)
            }
            _ => continue,
        };
        let below = min.is_some_and(|min| number < min || (min_exclusive && number == min));
        let above = max.is_some_and(|max| number > max);
        if below || above {
            return Err(FieldError::new(
                &field.name,
                range_text(min, max, min_exclusive),
            ));
        }
    }
    Ok(())
}

fn empty(field: &FieldDescription, hints: &[(String, String)]) -> FieldError {
    let hint = hints
        .iter()
        .find(|(name, _)| *name == field.name)
        .map(|(_, hint)| format!(": {hint}"))
        .unwrap_or_default();
    FieldError::new(&field.name, format!("is empty{hint}"))
}

/// `must be between 0 and 2`, `must be more than 0 and at most 86400`, `must be at least 1`.
fn range_text(min: Option<f64>, max: Option<f64>, min_exclusive: bool) -> String {
    let number = |n: f64| format!("{n}");
    match (min, max) {
        (Some(min), Some(max)) if min_exclusive => {
            format!(
                "must be more than {} and at most {}",
                number(min),
                number(max)
            )
        }
        (Some(min), Some(max)) => format!("must be between {} and {}", number(min), number(max)),
        (Some(min), None) if min_exclusive => format!("must be more than {}", number(min)),
        (Some(min), None) => format!("must be at least {}", number(min)),
        (None, Some(max)) => format!("must be at most {}", number(max)),
        (None, None) => String::new(),
    }
}

/// The `x-weft-empty` hints of a schema's fields: (field name, hint).
pub(super) fn empty_hints<K: Kind>() -> Vec<(String, String)> {
    let schema = schemars::schema_for!(K);
    let Some(properties) = schema
        .as_value()
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    properties
        .iter()
        .filter_map(|(name, property)| {
            let hint = property.get(EMPTY_HINT)?.as_str()?;
            Some((name.clone(), hint.to_string()))
        })
        .collect()
}

/// The templated fields of a node with `data`: (field name as problems name it, source).
/// Every field described as a template, or a map of templates, whether set or at its default.
pub(super) fn templates<'a>(
    fields: &'a [FieldDescription],
    data: &'a Map<String, Value>,
) -> Vec<(String, &'a str)> {
    let mut templates = Vec::new();
    for field in fields {
        let value = weft_flow::path::get_in(data, &field.name).unwrap_or(&field.default);
        match (&field.field_type, value) {
            (FieldType::Template, Value::String(source)) => {
                templates.push((field.name.clone(), source.as_str()));
            }
            (FieldType::StringMap { templates: true }, Value::Object(map)) => {
                for (key, value) in map {
                    if let Value::String(source) = value {
                        templates.push((format!("{}.{key}", field.name), source.as_str()));
                    }
                }
            }
            _ => {}
        }
    }
    templates
}

/// The source of the templated field `name` (as [`templates`] names it: `field`, or
/// `field.key` in a map of templates) of a node with `data`.
pub(super) fn template_source<'a>(
    fields: &'a [FieldDescription],
    data: &'a Map<String, Value>,
    name: &str,
) -> Option<&'a str> {
    fields.iter().find_map(|field| {
        let value = || weft_flow::path::get_in(data, &field.name).unwrap_or(&field.default);
        match &field.field_type {
            FieldType::Template if field.name == name => value().as_str(),
            FieldType::StringMap { templates: true } => {
                let key = name.strip_prefix(field.name.as_str())?.strip_prefix('.')?;
                value().as_object()?.get(key)?.as_str()
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ranges_read_well() {
        assert_eq!(label_of("initialInput"), "Initial input");
        assert_eq!(label_of("web_search"), "Web search");
        assert_eq!(
            range_text(Some(0.0), Some(2.0), false),
            "must be between 0 and 2"
        );
        assert_eq!(
            range_text(Some(0.0), Some(86400.0), true),
            "must be more than 0 and at most 86400"
        );
        assert_eq!(range_text(Some(1.0), None, false), "must be at least 1");
    }
}
