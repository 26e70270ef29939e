//! The LLM calls of a traced run, told to its tracer as they end ([`crate::trace`]).

use std::future::Future;
use std::time::SystemTime;

use weft_providers::{ChatRequest, ChatResponse, ModelRoute, ProviderError};

use super::context::RunContext;
use crate::trace::LlmCall;

/// Runs `call` (an LLM call of `node_id`) and, when the run is traced, tells its tracer when
/// it started, what it asked and what came back. Untraced, it is `call` itself.
pub(super) async fn traced_llm_call<F>(
    ctx: &RunContext,
    node_id: &str,
    route: &ModelRoute,
    request: &ChatRequest,
    call: F,
) -> Result<ChatResponse, ProviderError>
where
    F: Future<Output = Result<ChatResponse, ProviderError>>,
{
    let Some(trace) = ctx.events.trace() else {
        return call.await;
    };
    let started = SystemTime::now();
    let answer = call.await;
    trace.llm_call(
        ctx.events.scope(),
        node_id,
        &LlmCall {
            route,
            request,
            started,
            answer: answer.as_ref(),
        },
    );
    answer
}
