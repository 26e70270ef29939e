//! `outputSchema` (an agent's structured answer): a JSON Schema checked by a real implementation
//! (the `jsonschema` crate: `$ref`, `pattern`, `oneOf`, `allOf`, formats, ...). The schema itself
//! is checked against its meta-schema when a flow is validated, so a mistyped keyword value is
//! a validation problem rather than a surprise mid-run.

use serde_json::Value;

/// A compiled output schema.
pub struct OutputSchema(jsonschema::Validator);

impl OutputSchema {
    /// Compiles `schema`, or says what is wrong with it (not an object, a keyword with a value
    /// of the wrong type, a `$ref` that does not resolve). References outside the schema are
    /// not fetched.
    pub fn compile(schema: &Value) -> Result<OutputSchema, String> {
        if !schema.is_object() {
            return Err("must be a JSON Schema object".to_string());
        }
        jsonschema::validator_for(schema)
            .map(OutputSchema)
            .map_err(|error| format!("is not a valid JSON Schema: {}", describe(&error)))
    }

    /// What is wrong with `value`, one sentence per problem, each naming where (`/scores/0`).
    pub fn problems(&self, value: &Value) -> Vec<String> {
        self.0
            .iter_errors(value)
            .map(|error| describe(&error))
            .collect()
    }
}

fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    let place = error.instance_path().to_string();
    if place.is_empty() {
        error.to_string()
    } else {
        format!("at {place}: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_what_a_partial_checker_missed() {
        let schema = json!({
            "type": "object",
            "$defs": { "score": { "type": "integer", "minimum": 0 } },
            "properties": {
                "id": { "type": "string", "pattern": "^T-[0-9]+$" },
                "scores": { "type": "array", "items": { "$ref": "#/$defs/score" } },
                "verdict": { "oneOf": [{ "const": "yes" }, { "const": "no" }] }
            },
            "required": ["id"]
        });
        let compiled = OutputSchema::compile(&schema).expect("valid schema");
        assert!(
            compiled
                .problems(&json!({"id": "T-1", "scores": [1, 2], "verdict": "yes"}))
                .is_empty()
        );
        let problems =
            compiled.problems(&json!({"id": "X", "scores": [1, -2], "verdict": "maybe"}));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems.iter().any(|p| p.starts_with("at /id")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("at /scores/1")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("at /verdict")),
            "{problems:?}"
        );
        assert!(
            compiled
                .problems(&json!({}))
                .iter()
                .any(|p| p.contains("id"))
        );
    }

    #[test]
    fn a_broken_schema_is_named() {
        let error = OutputSchema::compile(&json!({"type": "objekt"}))
            .err()
            .expect("refused");
        assert!(error.starts_with("is not a valid JSON Schema"), "{error}");
        assert_eq!(
            OutputSchema::compile(&json!("string")).err().as_deref(),
            Some("must be a JSON Schema object")
        );
    }
}
