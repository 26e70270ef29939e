//! Checking JSON against the JSON Schema subset that structured output uses: `type`,
//! `properties`, `required`, `additionalProperties: false`, `items`, `enum`, `const`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, `anyOf`.
//! Keywords outside this subset are ignored (accepted), never guessed at.

use serde_json::Value;

/// Every way `value` breaks `schema`, each naming the place (`$.scores[2]`).
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    check(schema, value, "$", &mut found);
    found
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.as_i64().is_some()
                || value.as_u64().is_some()
                || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn check(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| type_matches(name, value)) {
            found.push(format!(
                "{path} should be {}, found {}",
                names.join(" or "),
                short(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        found.push(format!(
            "{path} should be one of {}, found {}",
            Value::Array(options.clone()),
            short(value)
        ));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        found.push(format!(
            "{path} should be {constant}, found {}",
            short(value)
        ));
    }
    if let Some(Value::Array(options)) = schema.get("anyOf")
        && !options
            .iter()
            .any(|option| violations(option, value).is_empty())
    {
        found.push(format!("{path} matches none of the allowed forms"));
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(number) = value.as_f64() {
        if let Some(min) = bound("minimum")
            && number < min
        {
            found.push(format!("{path} should be at least {min}, found {number}"));
        }
        if let Some(max) = bound("maximum")
            && number > max
        {
            found.push(format!("{path} should be at most {max}, found {number}"));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as f64;
        if bound("minLength").is_some_and(|min| length < min)
            || bound("maxLength").is_some_and(|max| length > max)
        {
            found.push(format!(
                "{path} has a length of {length} outside the allowed range"
            ));
        }
    }
    if let Some(items) = value.as_array() {
        let count = items.len() as f64;
        if bound("minItems").is_some_and(|min| count < min)
            || bound("maxItems").is_some_and(|max| count > max)
        {
            found.push(format!(
                "{path} has {count} items, outside the allowed range"
            ));
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{index}]"), found);
            }
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    found.push(format!("{path}.{name} is required but missing"));
                }
            }
        }
        for (name, field) in object {
            match properties.and_then(|properties| properties.get(name)) {
                Some(field_schema) => check(field_schema, field, &format!("{path}.{name}"), found),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    found.push(format!("{path}.{name} is not allowed"));
                }
                None => {}
            }
        }
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_each_problem_with_its_place() {
        let schema = json!({
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["yes", "no"]},
                "scores": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            },
            "required": ["verdict", "scores"],
            "additionalProperties": false,
        });
        assert!(violations(&schema, &json!({"verdict": "yes", "scores": [1, 2]})).is_empty());
        let found = violations(
            &schema,
            &json!({"verdict": "maybe", "scores": [1, -2, "x"], "extra": 1}),
        );
        assert_eq!(
            found,
            [
                "$.extra is not allowed",
                "$.scores[1] should be at least 0, found -2",
                "$.scores[2] should be integer, found \"x\"",
                "$.verdict should be one of [\"yes\",\"no\"], found \"maybe\"",
            ]
        );
        assert_eq!(
            violations(&schema, &json!([])),
            ["$ should be object, found []"]
        );
        assert_eq!(
            violations(&schema, &json!({"scores": []})),
            ["$.verdict is required but missing"]
        );
    }
}
