//! The LLM and MCP tool calls of a run: every answer is kept in the store (call `n` of node `k`
//! in its visit `v`, with a hash of the request; a node's LLM and tool calls are numbered
//! together), and a run continued after an interruption gets the answers it already had for the
//! same requests instead of asking the provider (or calling the tool) again.
//!
//! A replay (`weft run --replay RUN_ID`, docs/debugging.md) is a new run given another run's
//! answers the same way, with one rule more: once a node's request differs from the recording and goes
//! live, every node after it on that branch goes live too, even where a request happens to be
//! the recorded one, so what follows an edit is always asked afresh.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use weft_providers::{ChatRequest, ModelRoute};
use weft_store::RecordedCall;

/// Answers recorded earlier, by (node key, visit, call number).
type Recordings = HashMap<(String, u64, u64), RecordedCall>;

fn by_call(calls: Vec<RecordedCall>) -> Recordings {
    calls
        .into_iter()
        .map(|call| ((call.node_key.clone(), call.visit, call.call), call))
        .collect()
}

/// Shared by a run and its nested runs (node keys carry their scope).
#[derive(Default)]
pub(crate) struct LlmLog {
    /// This run's own answers, given again for the same requests (a run continued after an
    /// interruption), live or not.
    own: Recordings,
    /// How many calls each (node key, visit) has made so far in this process.
    calls: Mutex<HashMap<(String, u64), u64>>,
    /// Set when the answers are another run's (a replay).
    replay: Option<Replay>,
    /// Set when the answers come from a recording given to the run (a flow test offline):
    /// every request must have one.
    given: Option<Given>,
    /// How many answers this run has handed the store to keep, and how many of those are known
    /// to be committed: a live call waits while some are not (see [`LlmLog::unstored`]).
    answers_kept: AtomicU64,
    answers_committed: AtomicU64,
}

/// Where a recorded answer (a model's, or a tool's result) comes from.
pub(crate) enum Recorded<T> {
    /// This run had it before it was interrupted.
    Own(T),
    /// The replayed run had it.
    Replayed(T),
    /// The recording given to the run has it (with the tokens it used then).
    Given(T),
    /// The recording given to the run has none for this request: why, and how to record one.
    Missing(String),
}

/// Answers recorded outside the store (a flow test's recording), given to a new run: a request
/// with no answer there fails instead of going to the provider.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedAnswers {
    pub calls: Vec<RecordedCall>,
    /// Said when a request has no recorded answer: where the recording is and how to record it.
    pub missing: String,
}

struct Given {
    recorded: Recordings,
    missing: String,
}

/// Where a replay stands, kept with a paused run so that its resume replays on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReplayState {
    pub from_run: String,
    pub live: BTreeSet<String>,
}

/// A replay of run `from_run`.
struct Replay {
    from_run: String,
    /// Its answers.
    recorded: Recordings,
    /// Node keys that went live, and those after them on their branches.
    live: Mutex<HashSet<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LlmLog {
    /// A log that gives this run's `own` answers again (a run continued after an interruption).
    pub(crate) fn replaying(own: Vec<RecordedCall>) -> LlmLog {
        LlmLog {
            own: by_call(own),
            ..LlmLog::default()
        }
    }

    /// A log that answers from `answers` only (a flow test run offline).
    pub(crate) fn given(answers: RecordedAnswers) -> LlmLog {
        LlmLog {
            given: Some(Given {
                recorded: by_call(answers.calls),
                missing: answers.missing,
            }),
            ..LlmLog::default()
        }
    }

    /// A log that replays the answers `recorded` by run `state.from_run`, with the nodes that
    /// already went live (none for a new replay; a paused one's when resumed).
    pub(crate) fn replay(state: ReplayState, recorded: Vec<RecordedCall>) -> LlmLog {
        LlmLog {
            replay: Some(Replay {
                from_run: state.from_run,
                recorded: by_call(recorded),
                live: Mutex::new(state.live.into_iter().collect()),
            }),
            ..LlmLog::default()
        }
    }

    /// This log, also giving this run's `own` answers again (a replay continued after an
    /// interruption): those come first, whether their node went live or not.
    pub(crate) fn with_own(mut self, own: Vec<RecordedCall>) -> LlmLog {
        self.own = by_call(own);
        self
    }

    /// Where the replay stands (`None` when this is no replay).
    pub(crate) fn replay_state(&self) -> Option<ReplayState> {
        self.replay.as_ref().map(|replay| ReplayState {
            from_run: replay.from_run.clone(),
            live: lock(&replay.live).iter().cloned().collect(),
        })
    }

    /// The run whose answers this one replays.
    pub(crate) fn replayed_run(&self) -> Option<&str> {
        self.replay.as_ref().map(|replay| replay.from_run.as_str())
    }

    /// A call of `node_key` went to the provider: in a replay, it and what follows it go live.
    /// Counts an answer just handed to the store to keep.
    pub(crate) fn kept(&self) {
        self.answers_kept.fetch_add(1, Ordering::SeqCst);
    }

    /// How many answers were handed to the store when some of them may not be committed yet
    /// (`None`: all are). Counted after each is queued, so a commit of what is queued after
    /// this call covers them all: then [`LlmLog::committed_up_to`] with the count.
    pub(crate) fn unstored(&self) -> Option<u64> {
        let kept = self.answers_kept.load(Ordering::SeqCst);
        (kept > self.answers_committed.load(Ordering::SeqCst)).then_some(kept)
    }

    /// The first `kept` answers handed to the store are committed.
    pub(crate) fn committed_up_to(&self, kept: u64) {
        self.answers_committed.fetch_max(kept, Ordering::SeqCst);
    }

    pub(crate) fn went_live(&self, node_key: &str) {
        if let Some(replay) = &self.replay {
            lock(&replay.live).insert(node_key.to_string());
        }
    }

    /// A step of `node_key` starts from the output of `source_key`: in a replay, it goes live
    /// when its source did.
    pub(crate) fn follows(&self, node_key: &str, source_key: Option<&str>) {
        let (Some(replay), Some(source)) = (&self.replay, source_key) else {
            return;
        };
        let mut live = lock(&replay.live);
        if is_live(&live, source) {
            live.insert(node_key.to_string());
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
    /// one recorded (`request_hash`): this run's own, else (in a replay, for a node not live)
    /// the replayed run's.
    pub(crate) fn recorded<T: DeserializeOwned>(
        &self,
        node_key: &str,
        visit: u64,
        call: u64,
        request_hash: &str,
    ) -> Option<Recorded<T>> {
        let key = (node_key.to_string(), visit, call);
        let answer_of = |recordings: &Recordings| -> Option<T> {
            let recorded = recordings.get(&key)?;
            if recorded.request_hash != request_hash {
                return None;
            }
            serde_json::from_value(recorded.response.clone()).ok()
        };
        if let Some(answer) = answer_of(&self.own) {
            return Some(Recorded::Own(answer));
        }
        if let Some(given) = &self.given {
            return Some(match answer_of(&given.recorded) {
                Some(answer) => Recorded::Given(answer),
                None => {
                    let what = if given.recorded.contains_key(&key) {
                        "differs from the one recorded"
                    } else {
                        "has no recorded answer"
                    };
                    Recorded::Missing(format!(
                        "this request (visit {visit}, call {}) {what}: {}",
                        call + 1,
                        given.missing
                    ))
                }
            });
        }
        let replay = self.replay.as_ref()?;
        if is_live(&lock(&replay.live), node_key) {
            return None;
        }
        answer_of(&replay.recorded).map(Recorded::Replayed)
    }
}

/// Whether `node_key` is live: itself, or a run it is nested in (`sub` for `sub/x` and
/// `sub@2/x`, `each` and `each[2]` for `each[2]/x`).
fn is_live(live: &HashSet<String>, node_key: &str) -> bool {
    if live.is_empty() {
        return false;
    }
    let segments: Vec<&str> = node_key.split('/').collect();
    (1..=segments.len()).any(|end| {
        if live.contains(&segments[..end].join("/")) {
            return true;
        }
        // An item `each[2]` is inside its forEach `each`, and the second visit `sub@2` of a
        // subflow is the subflow step `sub` (whose key has no visit).
        let segment = segments[end - 1];
        let step = segment
            .split_once('[')
            .or_else(|| segment.split_once('@'))
            .map(|(node, _)| node);
        step.is_some_and(|node| {
            let mut outer = segments[..end - 1].to_vec();
            outer.push(node);
            live.contains(&outer.join("/"))
        })
    })
}

/// A hash of a tool call: the server, the tool and the arguments.
pub(crate) fn tool_call_hash(server: &str, tool: &str, arguments: &weft_mcp::JsonObject) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&("mcp", server, tool, arguments)).unwrap_or_default());
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A hash of what is sent: the provider, the model and the whole request.
pub(crate) fn request_hash(route: &ModelRoute, request: &ChatRequest) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&(route, request)).unwrap_or_default());
    hex(&hasher.finalize())
}

/// How one model's call of a step's `complete` ended when it gave no answer.
pub(crate) enum Attempt {
    Failed(weft_providers::ProviderError),
    /// The run's record says this call failed for good, and a fallback model answered.
    FailedWhenRecorded(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_live_inside_a_live_run_or_item() {
        let live: HashSet<String> = ["sub".to_string(), "each".to_string(), "x".to_string()].into();
        for key in [
            "x",
            "sub/a",
            "sub/inner/b",
            "each[3]/a",
            "each",
            "sub@2/a",
            "each[3]@2/a",
        ] {
            assert!(is_live(&live, key), "{key}");
        }
        for key in ["y", "subway", "other/sub", "eachx[1]/a", "subway@2/a"] {
            assert!(!is_live(&live, key), "{key}");
        }
        assert!(!is_live(&HashSet::new(), "x"));
    }
}
