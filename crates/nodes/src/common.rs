//! The keys every node's `data` may hold whatever its kind (docs/flows.md): its label and
//! description, and the run settings (timeout, retries).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::describe::{FieldDescription, check_fields, fields_of};
use super::kind::FieldError;

/// Run settings every node may carry in its `data` (docs/flows.md#running).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonSettings {
    /// The name shown on the canvas and in run logs; the node's id when empty.
    #[serde(default)]
    pub label: String,
    /// A note about what this node is for.
    #[serde(default)]
    pub description: String,
    /// Seconds one attempt may take (default 300, `code` 30); for an `approval`, how long it
    /// waits for a person before it takes its `timeout` edge (no limit when unset). At most
    /// 30 days.
    #[serde(default)]
    #[schemars(title = "Timeout (seconds)", extend("exclusiveMinimum" = 0, "maximum" = 2592000))]
    pub timeout_seconds: Option<f64>,
    /// Retry a failed attempt: `{ "maxAttempts": 3, "backoffMs": 1000 }`.
    #[serde(default)]
    pub retry: Option<RetrySettings>,
}

/// How often, and how far apart, a failing node is tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    /// Attempts in all, including the first.
    #[serde(default = "one")]
    #[schemars(title = "Attempts", range(min = 1, max = 20))]
    pub max_attempts: u32,
    /// Milliseconds before the second attempt; doubled for each further one.
    #[serde(default = "default_backoff_ms")]
    #[schemars(title = "Backoff (ms)")]
    pub backoff_ms: u64,
}

fn one() -> u32 {
    1
}

fn default_backoff_ms() -> u64 {
    1000
}

impl CommonSettings {
    /// Reads the common keys of `data`: types, then the described ranges.
    pub fn parse(data: &Map<String, Value>) -> Result<CommonSettings, FieldError> {
        let settings: CommonSettings = super::parse_fields(data)?;
        // Only these keys have described ranges; a node that sets neither (most nodes) has
        // nothing to check, and describing the settings (a JSON Schema, derived at the first
        // use) would cost a short run more than the rest of its validation.
        if CHECKED_KEYS.iter().any(|key| data.contains_key(*key)) {
            check_fields(common_fields(), &[], data)?;
        }
        Ok(settings)
    }

    /// The timeout of one attempt, `default_seconds` when the node sets none.
    pub fn timeout(&self, default_seconds: f64) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds.unwrap_or(default_seconds))
    }

    pub fn max_attempts(&self) -> u32 {
        self.retry.as_ref().map_or(1, |retry| retry.max_attempts)
    }

    /// Wait before attempt `attempt` (2, 3, ...): `backoffMs`, doubled for each further one.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let initial = self.retry.as_ref().map_or(0, |retry| retry.backoff_ms);
        weft_providers::backoff::Backoff {
            initial: Duration::from_millis(initial),
            max: Duration::MAX,
            jitter: false,
        }
        .delay(attempt.saturating_sub(1))
    }
}

/// The keys of [`CommonSettings`] whose described fields have a range or are required (checked
/// by a test against the description).
const CHECKED_KEYS: [&str; 2] = ["timeoutSeconds", "retry"];

/// The keys every node's `data` may hold whatever its kind, described once.
pub fn common_fields() -> &'static [FieldDescription] {
    static FIELDS: std::sync::OnceLock<Vec<FieldDescription>> = std::sync::OnceLock::new();
    FIELDS.get_or_init(fields_of::<CommonSettings>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::FieldType;

    #[test]
    fn every_common_field_with_a_range_is_under_a_checked_key() {
        let checked: Vec<&str> = common_fields()
            .iter()
            .filter(|field| {
                field.required
                    || matches!(
                        field.field_type,
                        FieldType::Number { min: Some(_), .. }
                            | FieldType::Number { max: Some(_), .. }
                            | FieldType::Integer { min: Some(_), .. }
                            | FieldType::Integer { max: Some(_), .. }
                    )
            })
            .map(|field| field.name.split('.').next().unwrap_or_default())
            .collect();
        assert!(!checked.is_empty(), "{:?}", common_fields());
        for key in checked {
            assert!(
                CHECKED_KEYS.contains(&key),
                "{key} has a range but is not checked"
            );
        }
    }

    #[test]
    fn a_setting_out_of_range_is_refused_and_one_unset_is_not_checked() {
        let parse = |data: Value| CommonSettings::parse(data.as_object().expect("an object"));
        assert!(parse(serde_json::json!({ "label": "x" })).is_ok());
        let error = parse(serde_json::json!({ "timeoutSeconds": 0 })).expect_err("refused");
        assert!(error.to_string().contains("timeoutSeconds"), "{error}");
        let error =
            parse(serde_json::json!({ "retry": { "maxAttempts": 50 } })).expect_err("refused");
        assert!(error.to_string().contains("maxAttempts"), "{error}");
    }
}
