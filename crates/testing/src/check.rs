//! What one assertion says about one finished run: passed or not, with the expected and the
//! actual value in words a person can act on.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{Assertion, AssertionOutcome, Check};
use weft_event::{EventType, RunEvent, RunStatus};
use weft_flow::output_schema::OutputSchema;
use weft_history::cost::{Cost, RunCost, usd_text};
use weft_history::visits::NodeVisit;
use weft_store::NodeOutputRecord;

/// What a finished case run left, as the assertions read it.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// The run's input.
    pub input: Value,
    pub status: Option<RunStatus>,
    pub result: Option<Value>,
    pub error: Option<String>,
    /// Each node's latest output, by node key.
    pub outputs: HashMap<String, Value>,
    /// Node keys that started at least once.
    pub started: HashSet<String>,
    pub cost: RunCost,
    pub duration_ms: Option<u64>,
    /// Time spent in each node over all its visits, by node key.
    pub node_ms: HashMap<String, u64>,
}

impl RunFacts {
    /// The facts of a stored run.
    #[allow(clippy::too_many_arguments)] // everything a finished run is read from
    pub fn of(
        input: Value,
        status: RunStatus,
        result: Option<Value>,
        error: Option<String>,
        events: &[RunEvent],
        outputs: Vec<NodeOutputRecord>,
        visits: &[NodeVisit],
        cost: RunCost,
    ) -> RunFacts {
        let started = events
            .iter()
            .filter(|event| event.kind == EventType::StepStart)
            .filter_map(|event| {
                let node = event.node_id.as_deref()?;
                Some(match &event.scope {
                    Some(scope) => format!("{scope}/{node}"),
                    None => node.to_string(),
                })
            })
            .collect();
        let mut node_ms: HashMap<String, u64> = HashMap::new();
        for visit in visits {
            *node_ms.entry(visit.key.clone()).or_default() += visit.duration_ms.unwrap_or(0);
        }
        let duration_ms = match (events.first(), events.last()) {
            (Some(first), Some(last)) => weft_history::compare::millis_between(&first.ts, &last.ts),
            _ => None,
        };
        RunFacts {
            input,
            status: Some(status),
            result,
            error,
            outputs: outputs
                .into_iter()
                .filter(|stored| !stored.output.is_null() || stored.visits > 0)
                .map(|stored| (stored.node_id, stored.output))
                .collect(),
            started,
            cost,
            duration_ms,
            node_ms,
        }
    }
}

/// Judges `assertion` (not a judge: those run flows, see the runner) against `facts`.
pub fn check(assertion: &Assertion, facts: &RunFacts) -> AssertionOutcome {
    let outcome = |passed: bool, expected: String, actual: String| AssertionOutcome {
        assertion: assertion.describe(),
        passed,
        expected,
        actual,
    };
    match &assertion.check {
        // Why a run failed is said once, with the case; assertions say what they saw.
        Check::Status(wanted) => {
            let actual = match facts.status {
                Some(status) => status.to_string(),
                None => "did not start".into(),
            };
            outcome(facts.status == Some(*wanted), wanted.to_string(), actual)
        }
        Check::Skipped(wanted) => {
            let node = assertion.node.as_deref().unwrap_or_default();
            let skipped = !facts.started.contains(node);
            let said = |skipped: bool| if skipped { "skipped" } else { "ran" }.to_string();
            outcome(skipped == *wanted, said(*wanted), said(skipped))
        }
        Check::MaxTokens(limit) => {
            let cost = scope_cost(assertion, facts);
            let used = cost.input_tokens + cost.output_tokens;
            outcome(
                used <= *limit,
                format!("at most {limit} tokens"),
                format!(
                    "{used} tokens ({} in, {} out)",
                    cost.input_tokens, cost.output_tokens
                ),
            )
        }
        Check::MaxCost(limit) => {
            let cost = scope_cost(assertion, facts);
            let expected = format!("at most {}", usd_text(*limit));
            match cost.known_usd() {
                Some(usd) => outcome(usd <= *limit, expected, usd_text(usd)),
                None => {
                    let models: Vec<&str> =
                        cost.unpriced_models.iter().map(String::as_str).collect();
                    outcome(
                        false,
                        expected,
                        format!(
                            "not known: no price for {} (WEFT_PRICES can add one)",
                            models.join(", ")
                        ),
                    )
                }
            }
        }
        Check::MaxDurationMs(limit) => {
            let spent = match &assertion.node {
                Some(node) => facts.node_ms.get(node).copied(),
                None => facts.duration_ms,
            };
            match spent {
                Some(ms) => outcome(
                    ms <= *limit,
                    format!("at most {limit} ms"),
                    format!("{ms} ms"),
                ),
                None => outcome(false, format!("at most {limit} ms"), "did not run".into()),
            }
        }
        check => {
            let value = match subject(assertion, facts) {
                Ok(value) => value,
                Err(missing) => return outcome(false, expected_of(check), missing),
            };
            let actual = quoted(&value);
            let passed = match check {
                Check::Equals(expected) => &value == expected,
                Check::Contains(expected) => contains(&value, expected),
                Check::Regex(regex) => regex.is_match(&text_of(&value)),
                Check::JsonSchema(schema) => match OutputSchema::compile(schema) {
                    Ok(schema) => {
                        let problems = schema.problems(&value);
                        if !problems.is_empty() {
                            return outcome(
                                false,
                                expected_of(check),
                                format!("{} — {}", short(&actual, 200), problems.join("; ")),
                            );
                        }
                        true
                    }
                    Err(error) => return outcome(false, expected_of(check), error),
                },
                Check::Gt(bound) | Check::Lt(bound) => match number_of(&value) {
                    Some(number) if matches!(check, Check::Gt(_)) => number > *bound,
                    Some(number) => number < *bound,
                    None => {
                        return outcome(
                            false,
                            expected_of(check),
                            format!("{} (not a number)", short(&actual, 200)),
                        );
                    }
                },
                _ => false,
            };
            outcome(passed, expected_of(check), short(&actual, 500))
        }
    }
}

/// The value an assertion is about: the run's result or the node's latest output, at `path`.
pub(crate) fn subject(assertion: &Assertion, facts: &RunFacts) -> Result<Value, String> {
    let value = match &assertion.node {
        Some(node) => facts
            .outputs
            .get(node)
            .cloned()
            .ok_or_else(|| format!("`{node}` did not run"))?,
        None => match (&facts.result, facts.status) {
            (Some(result), _) => result.clone(),
            (None, Some(status)) => {
                return Err(format!("no result ({})", super::report::the_run(status)));
            }
            (None, None) => return Err("no result (the run did not start)".into()),
        },
    };
    match &assertion.path {
        Some(path) => weft_flow::path::get(&value, path)
            .cloned()
            .ok_or_else(|| format!("no `{path}` in {}", short(&quoted(&value), 200))),
        None => Ok(value),
    }
}

fn scope_cost(assertion: &Assertion, facts: &RunFacts) -> Cost {
    match &assertion.node {
        Some(node) => facts.cost.node(node),
        None => facts.cost.total.clone(),
    }
}

fn expected_of(check: &Check) -> String {
    match check {
        Check::Equals(value) => quoted(value),
        Check::Contains(value) => format!("something containing {}", quoted(value)),
        Check::Regex(regex) => format!("a match of /{}/", regex.as_str()),
        Check::JsonSchema(schema) => {
            format!("a value matching {}", short(&schema.to_string(), 200))
        }
        Check::Gt(bound) => format!("more than {bound}"),
        Check::Lt(bound) => format!("less than {bound}"),
        _ => String::new(),
    }
}

/// A text contains the text; a list has the element; an object has every field of the object.
fn contains(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::String(text), Value::String(part)) => text.contains(part.as_str()),
        (Value::Array(items), wanted) => items.iter().any(|item| {
            item == wanted
                || matches!((item, wanted), (Value::String(text), Value::String(part)) if text == part)
        }),
        (Value::Object(fields), Value::Object(wanted)) => wanted
            .iter()
            .all(|(key, value)| fields.get(key) == Some(value)),
        (value, wanted) => text_of(value).contains(&text_of(wanted)),
    }
}

fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// A value as text: a string as it is, anything else as JSON.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A value as written in JSON (a string in quotes), so `"5"` and `5` read differently.
pub(crate) fn quoted(value: &Value) -> String {
    value.to_string()
}

/// At most `max` characters of `text`, on one line.
pub(crate) fn short(text: &str, max: usize) -> String {
    let line = text.replace('\n', "⏎");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max).collect();
    cut.push('…');
    cut
}
