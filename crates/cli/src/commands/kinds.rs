//! `weft kinds [--json]`: every node kind as the engine describes it to a canvas: its handles
//! and the fields of its `data`, with their types, defaults and help.

use serde_json::{Value, json};
use weft_engine::nodes::{
    FieldDescription, FieldType, HandleDescription, HandleKind, KindDescription, all_kinds,
    common_fields,
};

use crate::output::{self, Style};
use crate::{Exit, KindsArgs};

/// Help text is wrapped to this many columns (after its indentation).
const WIDTH: usize = 92;

pub(crate) fn kinds(args: &KindsArgs) -> anyhow::Result<Exit> {
    if args.json {
        let described = json!({ "kinds": all_kinds(), "commonFields": common_fields() });
        output::out(&format!("{}\n", serde_json::to_string_pretty(&described)?))?;
    } else {
        output::out(&text(&all_kinds(), common_fields(), Style::stdout()))?;
    }
    Ok(Exit::Success)
}

/// One block per kind, then the fields every kind has.
fn text(kinds: &[KindDescription], common: &[FieldDescription], style: Style) -> String {
    let mut text = String::new();
    for kind in kinds {
        text.push_str(&format!("{}  {}\n", style.bold(kind.id), kind.title));
        for line in wrap(&kind.help, WIDTH) {
            text.push_str(&format!("  {}\n", style.dim(&line)));
        }
        let input = if kind.inputs { "input" } else { "none" };
        text.push_str(&format!("  in:  {input}\n"));
        let handles: Vec<String> = kind.handles.iter().map(handle).collect();
        let handles = if handles.is_empty() {
            "none".to_string()
        } else {
            handles.join(", ")
        };
        text.push_str(&format!("  out: {handles}\n"));
        text.push_str(&fields(&kind.fields, style));
        text.push('\n');
    }
    text.push_str(&format!(
        "{}  every kind, besides its own fields\n",
        style.bold("common fields")
    ));
    text.push_str(&fields(common, style));
    text
}

fn handle(handle: &HandleDescription) -> String {
    let note = match (handle.kind, handle.rows.is_some()) {
        (_, true) => " (one per row)",
        (HandleKind::Subagent, false) => " (subagent edges)",
        (HandleKind::Error, false) => " (on failure)",
        (HandleKind::Execution, false) => "",
    };
    format!("{}{note}", handle.id)
}

/// The fields as aligned rows: name, type (and default), help.
fn fields(fields: &[FieldDescription], style: Style) -> String {
    if fields.is_empty() {
        return "  fields: none\n".to_string();
    }
    let rows: Vec<(&str, String, &str)> = fields
        .iter()
        .map(|field| (field.name.as_str(), type_text(field), field.help.as_str()))
        .collect();
    let name_width = rows
        .iter()
        .map(|row| row.0.chars().count())
        .max()
        .unwrap_or(0);
    let type_width = rows
        .iter()
        .map(|row| row.1.chars().count())
        .max()
        .unwrap_or(0);
    let mut text = "  fields:\n".to_string();
    for (name, kind, help) in rows {
        let name_pad = " ".repeat(name_width - name.chars().count());
        let type_pad = " ".repeat(type_width - kind.chars().count());
        text.push_str(&format!(
            "    {}{name_pad}  {kind}{type_pad}  {}\n",
            style.cyan(name),
            style.dim(help)
        ));
    }
    text
}

/// `template, required`, `number 0–2`, `GET|POST|… = GET`.
fn type_text(field: &FieldDescription) -> String {
    let bounds = |min: Option<String>, max: Option<String>| match (min, max) {
        (Some(min), Some(max)) => format!(" {min}–{max}"),
        (Some(min), None) => format!(" ≥ {min}"),
        (None, Some(max)) => format!(" ≤ {max}"),
        (None, None) => String::new(),
    };
    let mut text = match &field.field_type {
        FieldType::Text => "text".to_string(),
        FieldType::Template => "template".to_string(),
        FieldType::Number {
            min,
            max,
            min_exclusive: false,
        } => format!(
            "number{}",
            bounds(min.map(|n| n.to_string()), max.map(|n| n.to_string()))
        ),
        FieldType::Number {
            min,
            max,
            min_exclusive: true,
        } => match (min, max) {
            (Some(min), Some(max)) => format!("number > {min}, ≤ {max}"),
            (Some(min), None) => format!("number > {min}"),
            (None, max) => format!("number{}", bounds(None, max.map(|n| n.to_string()))),
        },
        FieldType::Integer { min, max } => format!(
            "integer{}",
            bounds(min.map(|n| n.to_string()), max.map(|n| n.to_string()))
        ),
        FieldType::Boolean => "boolean".to_string(),
        FieldType::Choice { options } => options.join("|"),
        FieldType::Code => "python".to_string(),
        FieldType::Json => "json".to_string(),
        FieldType::Conditions { .. } => "conditions".to_string(),
        FieldType::StringList => "list of text".to_string(),
        FieldType::StringMap { templates: false } => "map of text".to_string(),
        FieldType::StringMap { templates: true } => "map of templates".to_string(),
        FieldType::FlowPath => "flow file".to_string(),
    };
    if field.required {
        text.push_str(", required");
    }
    match &field.default {
        Value::String(default) if !default.is_empty() => text.push_str(&format!(" = {default}")),
        Value::Number(default) => text.push_str(&format!(" = {default}")),
        _ => {}
    }
    text
}

/// `text` broken into lines of at most `width` characters at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
    }

    #[test]
    fn types_read_briefly() {
        let text = text(&all_kinds(), common_fields(), Style { color: false });
        let line = |start: &str| {
            text.lines()
                .find(|line| line.trim_start().starts_with(start))
                .unwrap_or_else(|| panic!("no line starting {start}"))
                .to_string()
        };
        assert!(line("temperature").contains("number 0–2"), "{text}");
        assert!(line("url").contains("template, required"), "{text}");
        assert!(line("method").contains("GET|POST|PUT|PATCH|DELETE|HEAD = GET"));
        assert_eq!(
            line("out: pass").trim(),
            "out: pass, fail, error (on failure)"
        );
    }
}
