//! What a run with a budget (`settings.budget`) has spent: its tokens (the run's usage, nested
//! runs included) and their cost at the engine's prices, checked before each LLM call; and
//! whether a person lifted the limit. One tracker per run, shared by its nested runs through
//! their event log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use weft_nodes::budget::{Budget, BudgetStop};
use weft_providers::Usage;
use weft_store::Store;

/// The price of `usage` by `model` (`provider/model`) in US dollars; `None` for a model with
/// no price, whose tokens then count against `maxTokens` only.
pub type Pricer = Arc<dyn Fn(&str, Usage) -> Option<f64> + Send + Sync>;

pub(crate) struct BudgetTracker {
    budget: Budget,
    pricer: Option<Pricer>,
    /// What the run's calls cost before this process took it up.
    earlier: f64,
    spent_here: Mutex<f64>,
    lifted: AtomicBool,
}

impl BudgetTracker {
    /// A tracker for run `run_id`; `resumed` when it ran in an earlier process too, whose
    /// calls are read from the store once, now, before this process makes any.
    pub(crate) fn new(
        budget: Budget,
        pricer: Option<Pricer>,
        store: &Store,
        run_id: &str,
        resumed: bool,
        lifted: bool,
    ) -> BudgetTracker {
        let earlier = match &pricer {
            // A store that cannot be read counts nothing earlier: the run's own calls still
            // count, and the store's error shows elsewhere.
            Some(price) if resumed => store
                .call_usage(run_id)
                .unwrap_or_default()
                .iter()
                .filter_map(|call| price(call.model.as_deref()?, call.usage))
                .sum(),
            _ => 0.0,
        };
        BudgetTracker {
            budget,
            pricer,
            earlier,
            spent_here: Mutex::new(0.0),
            lifted: AtomicBool::new(lifted),
        }
    }

    /// The stop reached with `tokens` used by the run so far, unless a person lifted the limit.
    pub(crate) fn reached(&self, tokens: Usage) -> Option<BudgetStop> {
        if self.lifted() {
            return None;
        }
        let usd = self.earlier
            + *self
                .spent_here
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.budget
            .reached(usd, tokens.input_tokens + tokens.output_tokens)
    }

    /// Counts what one answer of `model` cost.
    pub(crate) fn spent(&self, model: &str, usage: Usage) {
        if let Some(usd) = self.pricer.as_ref().and_then(|price| price(model, usage)) {
            *self
                .spent_here
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) += usd;
        }
    }

    pub(crate) fn lift(&self) {
        self.lifted.store(true, Ordering::Relaxed);
    }

    pub(crate) fn lifted(&self) -> bool {
        self.lifted.load(Ordering::Relaxed)
    }
}
