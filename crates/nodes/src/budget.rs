//! A run's budget (`settings.budget`): the most it may spend on models, in US dollars at the
//! price table's prices and in tokens, and what happens when it has spent it: the run fails,
//! or a person approves going on without the limit. Checked before each LLM call of the run,
//! its subagents, forEach items and subflows included.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `settings.budget`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// US dollars, at the prices the run is costed at (a model with no price counts tokens only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Input and output tokens together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub on_exceed: OnExceed,
}

/// What a run that has spent its budget does before its next LLM call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExceed {
    /// The step fails, naming the budget (an `error` edge may take it; else the run fails).
    #[default]
    Fail,
    /// The run pauses as an approval; approved, it goes on without the limit.
    Approve,
}

/// A budget spent: what the run is told, and whether a person may let it go on.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStop {
    /// `budget reached: $0.51 of $0.50 (settings.budget.maxCostUsd)`.
    pub message: String,
    pub approve: bool,
}

/// Reads `settings.budget` (absent: none). Every problem is named by its path.
pub fn parse_budget(value: Option<&Value>) -> Result<Option<Budget>, Vec<String>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let budget: Budget = serde_json::from_value(value.clone()).map_err(|error| {
        vec![format!(
            "settings.budget: {error} (expected {{\"maxCostUsd\": 0.5, \"maxTokens\": 200000, \"onExceed\": \"fail\" or \"approve\"}})"
        )]
    })?;
    let mut problems = Vec::new();
    if let Some(usd) = budget.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        problems.push(format!(
            "settings.budget.maxCostUsd: must be a positive number of US dollars, found {usd}"
        ));
    }
    if budget.max_tokens == Some(0) {
        problems.push("settings.budget.maxTokens: must be a positive number of tokens".into());
    }
    if budget.max_cost_usd.is_none() && budget.max_tokens.is_none() {
        problems.push("settings.budget: give maxCostUsd, maxTokens or both".into());
    }
    if problems.is_empty() {
        Ok(Some(budget))
    } else {
        Err(problems)
    }
}

impl Budget {
    /// The stop a run that has spent `usd` and `tokens` has reached, if any.
    pub fn reached(&self, usd: f64, tokens: u64) -> Option<BudgetStop> {
        let message = match (self.max_cost_usd, self.max_tokens) {
            (Some(max), _) if usd >= max => format!(
                "budget reached: ${} of ${} (settings.budget.maxCostUsd)",
                dollars(usd),
                dollars(max)
            ),
            (_, Some(max)) if tokens >= max => {
                format!("budget reached: {tokens} of {max} tokens (settings.budget.maxTokens)")
            }
            _ => return None,
        };
        Some(BudgetStop {
            message,
            approve: self.on_exceed == OnExceed::Approve,
        })
    }
}

/// Cents when that is exact enough, else as many places as the amount needs.
fn dollars(usd: f64) -> String {
    if (usd * 100.0).fract().abs() < 1e-9 {
        format!("{usd:.2}")
    } else {
        let text = format!("{usd:.6}");
        text.trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budgets_are_read_and_bad_ones_named_by_their_field() {
        let budget = parse_budget(Some(&json!({"maxCostUsd": 0.5, "onExceed": "approve"})))
            .expect("valid")
            .expect("a budget");
        assert_eq!(budget.on_exceed, OnExceed::Approve);
        assert_eq!(parse_budget(None), Ok(None));
        let problems = |value: Value| parse_budget(Some(&value)).expect_err("invalid").join("; ");
        assert!(
            problems(json!({"maxCostUsd": -1}))
                .contains("settings.budget.maxCostUsd: must be a positive")
        );
        assert!(problems(json!({"maxTokens": 0})).contains("settings.budget.maxTokens"));
        assert!(problems(json!({})).contains("give maxCostUsd, maxTokens or both"));
        assert!(problems(json!({"maxCost": 1})).contains("unknown field `maxCost`"));
        assert!(
            problems(json!({"maxTokens": 5, "onExceed": "warn"}))
                .contains("unknown variant `warn`")
        );
    }

    #[test]
    fn the_stop_names_what_was_spent_of_which_limit() {
        let budget = Budget {
            max_cost_usd: Some(0.5),
            max_tokens: Some(1000),
            on_exceed: OnExceed::Fail,
        };
        assert_eq!(budget.reached(0.49, 999), None);
        assert_eq!(
            budget.reached(0.51, 10).map(|stop| stop.message),
            Some("budget reached: $0.51 of $0.50 (settings.budget.maxCostUsd)".into())
        );
        assert_eq!(
            budget.reached(0.000123, 1000).map(|stop| stop.message),
            Some("budget reached: 1000 of 1000 tokens (settings.budget.maxTokens)".into())
        );
        assert_eq!(dollars(0.000123), "0.000123");
    }
}
