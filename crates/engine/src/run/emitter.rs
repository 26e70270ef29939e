//! The ordered event stream of one run (docs/flows.md#events): numbers events and hands each to
//! the store,
//! which passes it on to the host's listener once it is committed, so every consumer sees the
//! same order and nothing shown can be lost.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};
use weft_event::call_segment;

use chrono::{DateTime, SecondsFormat, Utc};

pub use weft_event::EventListener;
use weft_event::{EventType, RunEvent};
use weft_providers::Usage;
use weft_store::Store;

use crate::trace::RunTrace;

/// The current time as stored in events and the store (RFC 3339, milliseconds, UTC).
pub(crate) fn now() -> String {
    now_shared().to_string()
}

/// [`now`] as a text shared with everything else stamped in the same millisecond.
pub(crate) fn now_shared() -> Arc<str> {
    // Formatting a date costs more than the rest of emitting an event, and a fast run emits
    // many events in the same millisecond: they share the text.
    thread_local! {
        static LAST: RefCell<(i64, Arc<str>)> = RefCell::new((i64::MIN, Arc::from("")));
    }
    // Read as milliseconds since the epoch, made a date only when that changes (making the
    // date costs more than reading the clock).
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    let millis = i64::try_from(since_epoch).unwrap_or(i64::MAX);
    LAST.with_borrow_mut(|(last, text)| {
        if *last != millis {
            *last = millis;
            *text = DateTime::<Utc>::from_timestamp_millis(millis)
                .unwrap_or_else(Utc::now)
                .to_rfc3339_opts(SecondsFormat::Millis, true)
                .into();
        }
        text.clone()
    })
}

/// `node_id` as an event holds it: shared with the events of the same node made just before on
/// this thread (a step's start, what it logs, its end) rather than a copy for each.
fn shared_id(node_id: &str) -> Arc<str> {
    LAST_NODE.with_borrow_mut(|last| match last {
        Some(id) if **id == *node_id => Arc::clone(id),
        _ => {
            let id: Arc<str> = Arc::from(node_id);
            *last = Some(Arc::clone(&id));
            id
        }
    })
}

thread_local! {
    /// The node id [`shared_id`] gave last (or a step's start was given).
    static LAST_NODE: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Shared by a run and all its nested runs.
struct EventLog {
    run_id: Arc<str>,
    store: Store,
    listener: Option<EventListener>,
    next_seq: Mutex<u64>,
    /// Tokens used by the whole run so far (nested runs included).
    usage: Mutex<Usage>,
    /// Events that announce a pause, numbered but not yet sent (see [`Emitter::emit_held`]).
    held: Mutex<Vec<RunEvent>>,
    /// What the run may spend (`settings.budget` of the run's own flow), when it has a budget.
    budget: std::sync::OnceLock<super::budget::BudgetTracker>,
    /// The run's trace, when the engine has a tracer ([`crate::trace`]).
    trace: Option<Arc<dyn RunTrace>>,
    /// The date of an event made but not yet sent (empty; shared, not allocated per event).
    undated: Arc<str>,
}

/// Emits the events of one (possibly nested) run into its run's log.
#[derive(Clone)]
pub(crate) struct Emitter {
    log: Arc<EventLog>,
    /// Path of the subflow / forEach step this emitter's run belongs to (`None` at the top).
    scope: Option<String>,
    /// [`Emitter::scope`] with the visit of each enclosing step that was not its first
    /// (`research@2` while the subflow `research` runs the second time): a nested node's LLM
    /// calls are recorded under it, so the calls of two visits of a subflow or forEach never
    /// share a key (the child run counts its own visits from 1 again).
    call_scope: Option<String>,
    item: Option<u64>,
}

/// A poisoned lock only means another step panicked mid-emit; the data is still sound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Emitter {
    pub(crate) fn new(
        run_id: Arc<str>,
        store: Store,
        listener: Option<EventListener>,
        next_seq: u64,
        usage: Usage,
        trace: Option<Arc<dyn RunTrace>>,
    ) -> Emitter {
        Emitter {
            log: Arc::new(EventLog {
                run_id,
                store,
                listener,
                next_seq: Mutex::new(next_seq),
                usage: Mutex::new(usage),
                held: Mutex::new(Vec::new()),
                budget: std::sync::OnceLock::new(),
                trace,
                undated: Arc::from(""),
            }),
            scope: None,
            call_scope: None,
            item: None,
        }
    }

    /// The emitter of a run nested in visit `visit` of step `node_id` of this one (item `item`
    /// of a forEach).
    pub(crate) fn nested(&self, node_id: &str, visit: u64, item: Option<u64>) -> Emitter {
        let segment = match item {
            Some(index) => format!("{node_id}[{index}]"),
            None => node_id.to_string(),
        };
        let call_segment = call_segment(&segment, visit);
        let join = |outer: &Option<String>, segment: String| match outer {
            Some(outer) => format!("{outer}/{segment}"),
            None => segment,
        };
        Emitter {
            log: self.log.clone(),
            scope: Some(join(&self.scope, segment)),
            call_scope: Some(join(&self.call_scope, call_segment)),
            item: item.or(self.item),
        }
    }

    /// `node_id` as its LLM calls are recorded: [`Emitter::store_key`] with the visits of the
    /// enclosing steps ([`Emitter::call_scope`]).
    pub(crate) fn call_key(&self, node_id: &str) -> String {
        match &self.call_scope {
            Some(scope) => format!("{scope}/{node_id}"),
            None => node_id.to_string(),
        }
    }

    /// `node_id` as the store knows it: prefixed with this run's scope in a nested run, so
    /// that it is unique in the whole run.
    pub(crate) fn store_key(&self, node_id: &str) -> String {
        match &self.scope {
            Some(scope) => format!("{scope}/{node_id}"),
            None => node_id.to_string(),
        }
    }

    pub(crate) fn emit(&self, kind: EventType, node_id: Option<&str>, content: String) {
        self.emit_event(kind, node_id, content, None, None);
    }

    /// Emits a model's answer (`llm_response`) with the tokens it used and the model that
    /// answered.
    pub(crate) fn emit_answer(
        &self,
        node_id: &str,
        content: String,
        usage: Option<Usage>,
        model: Option<String>,
    ) {
        let mut event = self.unnumbered(
            EventType::LlmResponse,
            Some(shared_id(node_id)),
            content,
            None,
            usage,
        );
        event.model = model;
        self.send_numbered(event);
    }

    /// Emits one event; `from` only on `step_start`, `usage` on `llm_response` and `run_end`.
    pub(crate) fn emit_event(
        &self,
        kind: EventType,
        node_id: Option<&str>,
        content: String,
        from: Option<&str>,
        usage: Option<Usage>,
    ) {
        let event = self.unnumbered(
            kind,
            node_id.map(shared_id),
            content,
            from.map(Arc::from),
            usage,
        );
        self.send_numbered(event);
    }

    /// Emits a step's `step_start`: `node_id` and `from` as the step holds them, and shared
    /// with the events the step emits next.
    pub(crate) fn emit_step_start(
        &self,
        node_id: &Arc<str>,
        content: String,
        from: Option<&Arc<str>>,
    ) {
        LAST_NODE.with_borrow_mut(|last| *last = Some(Arc::clone(node_id)));
        let event = self.unnumbered(
            EventType::StepStart,
            Some(Arc::clone(node_id)),
            content,
            from.cloned(),
            None,
        );
        self.send_numbered(event);
    }

    /// Emits an event that announces a pause (`wait_input`) once the pause itself is stored
    /// ([`Emitter::release_held`]): whoever sees it printed, or sees the approval on a canvas,
    /// finds the run paused, even if the process is killed right after.
    pub(crate) fn emit_held(&self, kind: EventType, node_id: Option<&str>, content: String) {
        // Numbered when sent: the store takes a run's events in order.
        let event = self.unnumbered(kind, node_id.map(shared_id), content, None, None);
        lock(&self.log.held).push(event);
    }

    /// Sends the events [`Emitter::emit_held`] kept, in order: once the run's pause is stored,
    /// or when it did not pause after all (a sibling failed it).
    pub(crate) fn release_held(&self) {
        let held = std::mem::take(&mut *lock(&self.log.held));
        for event in held {
            self.send_numbered(event);
        }
    }

    /// Numbers, dates and queues `event` under one lock: the store takes a run's events in
    /// order, so two steps emitting at once must queue them in the order they were numbered
    /// (and a held event is dated when it is sent).
    fn send_numbered(&self, mut event: RunEvent) {
        let mut next_seq = lock(&self.log.next_seq);
        event.seq = *next_seq;
        event.ts = now_shared();
        *next_seq += 1;
        // Under the lock, so the tracer sees the events in their order too.
        if let Some(trace) = &self.log.trace {
            trace.event(&event);
        }
        self.log
            .store
            .append_event(event, self.log.listener.clone());
    }

    /// An event of this emitter's run, numbered 0 and not yet dated: [`Emitter::send_numbered`]
    /// dates it (reading the clock costs as much as the rest of making the event).
    fn unnumbered(
        &self,
        kind: EventType,
        node_id: Option<Arc<str>>,
        content: String,
        from: Option<Arc<str>>,
        usage: Option<Usage>,
    ) -> RunEvent {
        RunEvent {
            seq: 0,
            run_id: self.log.run_id.clone(),
            ts: self.log.undated.clone(),
            kind,
            node_id,
            content,
            scope: self.scope.clone(),
            item: self.item,
            from,
            usage,
            model: None,
        }
    }

    /// The run's trace, if it is traced.
    pub(crate) fn trace(&self) -> Option<&Arc<dyn RunTrace>> {
        self.log.trace.as_ref()
    }

    /// The scope of this emitter's run (`None` at the top), as its events carry it.
    pub(crate) fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// The run's id, as its events carry it.
    pub(crate) fn run_id(&self) -> &Arc<str> {
        &self.log.run_id
    }

    pub(crate) fn add_usage(&self, usage: Usage) {
        *lock(&self.log.usage) += usage;
    }

    /// Gives the run (and its nested runs) its budget.
    pub(crate) fn arm_budget(&self, tracker: super::budget::BudgetTracker) {
        let _ = self.log.budget.set(tracker);
    }

    pub(crate) fn budget(&self) -> Option<&super::budget::BudgetTracker> {
        self.log.budget.get()
    }

    /// Whether this emitter is the run's own (not a nested run's).
    pub(crate) fn is_root(&self) -> bool {
        self.scope.is_none()
    }

    pub(crate) fn total_usage(&self) -> Usage {
        *lock(&self.log.usage)
    }

    /// The seq the run's next event takes, the held ones counted as sent: a pause stores it
    /// before it sends them.
    pub(crate) fn next_seq(&self) -> u64 {
        let held = lock(&self.log.held).len() as u64;
        *lock(&self.log.next_seq) + held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_the_current_time_in_utc_to_the_millisecond() {
        let before = Utc::now();
        let text = now();
        let after = Utc::now();
        // `2026-11-25T14:53:39.123Z`: milliseconds, and `Z` for UTC.
        assert_eq!(text.len(), 24, "{text}");
        assert!(text.ends_with('Z'), "{text}");
        let stamp = DateTime::parse_from_rfc3339(&text).expect("RFC 3339");
        let truncated = |time: DateTime<Utc>| time.timestamp_millis();
        assert!(
            truncated(before) <= stamp.timestamp_millis(),
            "{text} before {before}"
        );
        assert!(
            stamp.timestamp_millis() <= truncated(after),
            "{text} after {after}"
        );
        // The text kept for the millisecond is the same text again.
        let again = now();
        assert!(again >= text, "{again} went back from {text}");
    }
}
