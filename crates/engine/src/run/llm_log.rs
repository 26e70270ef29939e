//! The LLM calls of a run: every answer is kept in the store (call `n` of node `k` in its visit
//! `v`, with a hash of the request), and a run continued after an interruption gets the answers
//! it already had for the same requests instead of asking the provider again.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::providers::{ChatRequest, ChatResponse, ModelRoute};
use crate::store::RecordedCall;

/// Shared by a run and its nested runs (node keys carry their scope).
#[derive(Default)]
pub(crate) struct LlmLog {
    /// Answers to give again, by (node key, visit, call number).
    recorded: HashMap<(String, u64, u64), RecordedCall>,
    /// How many calls each (node key, visit) has made so far in this process.
    calls: Mutex<HashMap<(String, u64), u64>>,
}

impl LlmLog {
    /// A log that gives `recorded` answers again (a run continued after an interruption).
    pub(crate) fn replaying(recorded: Vec<RecordedCall>) -> LlmLog {
        LlmLog {
            recorded: recorded
                .into_iter()
                .map(|call| ((call.node_key.clone(), call.visit, call.call), call))
                .collect(),
            calls: Mutex::default(),
        }
    }

    /// The number of the next call of `node_key` in visit `visit`.
    pub(crate) fn next_call(&self, node_key: &str, visit: u64) -> u64 {
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = calls.entry((node_key.to_string(), visit)).or_insert(0);
        let call = *count;
        *count += 1;
        call
    }

    /// The recorded answer of call `call` of `node_key` in visit `visit`, when the request is the
    /// one recorded (`request_hash`).
    pub(crate) fn recorded(
        &self,
        node_key: &str,
        visit: u64,
        call: u64,
        request_hash: &str,
    ) -> Option<ChatResponse> {
        let recorded = self.recorded.get(&(node_key.to_string(), visit, call))?;
        if recorded.request_hash != request_hash {
            return None;
        }
        serde_json::from_value(recorded.response.clone()).ok()
    }
}

/// A hash of what is sent: the provider, the model and the whole request.
pub(crate) fn request_hash(route: &ModelRoute, request: &ChatRequest) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&(route, request)).unwrap_or_default());
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
