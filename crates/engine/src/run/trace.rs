//! The LLM calls of a traced run, told to its tracer as they end ([`crate::trace`]).

use std::future::Future;
use std::time::SystemTime;

use weft_providers::{ChatRequest, ChatResponse, ModelRoute, ProviderError};

use super::context::RunContext;
use super::llm_log::Attempt;
use crate::trace::LlmCall;

/// Runs `call` (an LLM call of `node_id`) and, when the run is traced, tells its tracer when
/// it started, what it asked and what came back. Untraced, it is `call` itself.
pub(super) async fn traced_llm_call<F>(
    ctx: &RunContext,
    node_id: &str,
    route: &ModelRoute,
    request: &ChatRequest,
    call: F,
) -> Result<ChatResponse, Attempt>
where
    F: Future<Output = Result<ChatResponse, Attempt>>,
{
    let Some(trace) = ctx.events.trace() else {
        return call.await;
    };
    let started = SystemTime::now();
    let answer = call.await;
    // A failure kept from when the run was recorded is told as what it was then.
    let recorded;
    let told = match &answer {
        Ok(answer) => Ok(answer),
        Err(Attempt::Failed(error)) => Err(error),
        Err(Attempt::FailedWhenRecorded(why)) => {
            recorded = ProviderError::NotRecorded(why.clone());
            Err(&recorded)
        }
    };
    trace.llm_call(
        ctx.events.scope(),
        node_id,
        &LlmCall {
            route,
            request,
            started,
            answer: told,
        },
    );
    answer
}
