//! What the engine tells a tracer about a run (docs/traces.md): every event as it is emitted,
//! each LLM call with its request and answer, and where the run's segment in this process
//! ends. The engine knows no tracing library; `weft-otel` turns these into OpenTelemetry spans.
//! An engine without a tracer pays one `None` check per event.

use std::sync::Arc;
use std::time::SystemTime;

use weft_event::{RunEvent, RunStatus};
use weft_providers::{ChatRequest, ChatResponse, ModelRoute, ProviderError};

/// Makes the trace of each run an engine starts, resumes or continues.
pub trait Tracer: Send + Sync {
    fn run(&self, start: TraceStart<'_>) -> Arc<dyn RunTrace>;
}

/// A run's segment in this process: a new run, or one resumed or continued.
#[derive(Debug, Clone, Copy)]
pub struct TraceStart<'a> {
    pub run_id: &'a str,
    pub flow_name: &'a str,
    /// A W3C `traceparent` the host was given with the request (an HTTP header, `TRACEPARENT`):
    /// the run's span becomes its child.
    pub parent: Option<&'a str>,
    /// The `traceparent` of the run's first span, stored with the run: a resumed run's span
    /// links to it and, without a `parent` of its own, continues its trace.
    pub earlier: Option<&'a str>,
}

/// One LLM call as the step that made it saw it.
#[derive(Debug)]
pub struct LlmCall<'a> {
    pub route: &'a ModelRoute,
    pub request: &'a ChatRequest,
    pub started: SystemTime,
    pub answer: Result<&'a ChatResponse, &'a ProviderError>,
}

/// The trace of one run's segment. Called on the run's own tasks, so it must not wait.
pub trait RunTrace: Send + Sync {
    /// Every event of the run (nested runs included) as it is numbered, before the store has
    /// it: the moment it happened.
    fn event(&self, event: &RunEvent);

    /// An LLM call of node `node_id` (in the nested run `scope`) that just ended.
    fn llm_call(&self, scope: Option<&str>, node_id: &str, call: &LlmCall<'_>);

    /// The run's `traceparent`, stored with the run for a later segment to link to.
    fn traceparent(&self) -> Option<String>;

    /// The segment ended: the run ended, paused, or stopped with the process (`None`).
    fn end(&self, status: Option<RunStatus>);
}
