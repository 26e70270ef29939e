//! The commonest template, rendered without MiniJinja: text with `{{ name }}` or
//! `{{ name.field }}` holes whose values are strings (`Summarize: {{ PREVIOUS_OUTPUT }}`). A
//! MiniJinja render of such a template sets up a state, a context and a VM and goes through its
//! formatter for each hole: several thousand instructions, most of a template step's time.
//! Anything else (blocks, comments, filters, calls, literals, indexes, values that are not
//! strings, a trailing newline MiniJinja would trim, a name that does not resolve) is left to
//! MiniJinja, which renders it or names the error exactly as before: this returns `None`.

use serde_json::Value;

use super::{MAX_RENDERED_BYTES, Scope, output_text};

/// `source` rendered in `scope`, if it is text and string-valued names only.
pub(super) fn render(source: &str, scope: &Scope<'_>) -> Option<String> {
    // MiniJinja drops one newline at the end of a template.
    if matches!(source.as_bytes().last(), Some(b'\n' | b'\r')) {
        return None;
    }
    let mut text = String::with_capacity(source.len() + 64);
    let mut rest = source;
    // Searched byte by byte: the texts are short, and `str::find` sets up a searcher per call
    // that costs more than the search. `{` and `}` are ASCII, so every index is a boundary.
    while let Some(brace) = rest.bytes().position(|byte| byte == b'{') {
        let after = &rest[brace + 1..];
        match after.as_bytes().first() {
            Some(b'%' | b'#') => return None,
            Some(b'{') => {}
            _ => {
                text.push_str(&rest[..=brace]);
                rest = after;
                continue;
            }
        }
        text.push_str(&rest[..brace]);
        let hole = &after[1..];
        let end = hole.as_bytes().windows(2).position(|pair| pair == b"}}")?;
        push_value(&mut text, hole[..end].trim_ascii(), scope)?;
        if text.len() > MAX_RENDERED_BYTES {
            return None;
        }
        rest = &hole[end + 2..];
    }
    text.push_str(rest);
    (text.len() <= MAX_RENDERED_BYTES).then_some(text)
}

/// Appends the string `name` (a dotted path of identifiers) names in `scope`.
fn push_value(text: &mut String, name: &str, scope: &Scope<'_>) -> Option<()> {
    let dotted = path_shape(name)?;
    // Most holes name one thing (`{{ PREVIOUS_OUTPUT }}`): no splitting then.
    let (head, rest) = if dotted {
        name.split_once('.')?
    } else {
        (name, "")
    };
    if is_literal(head) {
        return None;
    }
    let mut parts = rest.split('.').filter(|_| dotted);
    let root: &Value = match head {
        "PREVIOUS_OUTPUT" => {
            if parts.next().is_some() {
                return None;
            }
            match scope.input {
                Value::String(output) => text.push_str(output),
                other => text.push_str(&output_text(other)),
            }
            return Some(());
        }
        "input" => scope.input,
        "initial" => scope.initial,
        "vars" => scope.vars,
        "approval" => scope.approval?,
        "nodes" => {
            let id = parts.next()?;
            return scope
                .nodes
                .with(id, |output| push_string(text, field(output, parts)?))?;
        }
        field => scope.input.as_object()?.get(field)?,
    };
    push_string(text, field(root, parts)?)
}

/// The value at `path` (object fields only) under `value`.
fn field<'v, 'p>(value: &'v Value, path: impl Iterator<Item = &'p str>) -> Option<&'v Value> {
    path.into_iter()
        .try_fold(value, |value, part| value.as_object()?.get(part))
}

fn push_string(text: &mut String, value: &Value) -> Option<()> {
    text.push_str(value.as_str()?);
    Some(())
}

/// Whether `name` is ASCII identifiers joined by dots (MiniJinja's names may also be other
/// letters: those go to MiniJinja), and whether it has a dot; `None` if it is not.
fn path_shape(name: &str) -> Option<bool> {
    let mut dotted = false;
    let mut segment_start = true;
    for byte in name.bytes() {
        match byte {
            b'.' if !segment_start => {
                dotted = true;
                segment_start = true;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => segment_start = false,
            b'0'..=b'9' if !segment_start => {}
            _ => return None,
        }
    }
    (!segment_start).then_some(dotted)
}

/// Names MiniJinja reads as constants, not as names of the scope.
fn is_literal(name: &str) -> bool {
    matches!(name, "true" | "false" | "none" | "True" | "False" | "None")
}
