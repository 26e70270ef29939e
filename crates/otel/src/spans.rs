//! Spans from what a run reports: one for the run's segment in this process, one per step
//! (a nested run's steps under the subflow or forEach step that runs them), one per LLM call
//! (`chat MODEL`) and per tool call (`execute_tool NAME`) under their step; approvals and
//! breakpoints are events of the step that waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Link, Span as _, SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _,
};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, Span};
use serde_json::Value as Json;
use weft_engine::trace::{LlmCall, RunTrace, TraceStart, Tracer};
use weft_event::{EventType, RunEvent, RunStatus};
use weft_history::cost::Prices;
use weft_providers::Usage;

/// Makes the spans of every run of one engine.
pub struct RunTracer {
    tracer: SdkTracer,
    prices: Prices,
    capture_content: bool,
}

impl RunTracer {
    pub(crate) fn new(tracer: SdkTracer, prices: Prices, capture_content: bool) -> RunTracer {
        RunTracer {
            tracer,
            prices,
            capture_content,
        }
    }
}

/// The span context a W3C `traceparent` names.
fn parse_traceparent(traceparent: &str) -> Option<SpanContext> {
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.trim().to_string())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| span_context.clone())
}

fn traceparent_of(span_context: &SpanContext) -> Option<String> {
    let mut carrier = HashMap::new();
    let context = Context::new().with_remote_span_context(span_context.clone());
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

impl Tracer for RunTracer {
    fn run(&self, start: TraceStart<'_>) -> Arc<dyn RunTrace> {
        let earlier = start.earlier.and_then(parse_traceparent);
        // A resumed run continues the trace it began (unless the request that resumed it came
        // with a trace of its own), and links to the span it began with.
        let parent = start
            .parent
            .and_then(parse_traceparent)
            .or_else(|| earlier.clone());
        let mut attributes = vec![
            KeyValue::new("weft.run.id", start.run_id.to_string()),
            KeyValue::new("weft.flow.name", start.flow_name.to_string()),
            KeyValue::new("openinference.span.kind", "CHAIN"),
        ];
        let mut links = Vec::new();
        if let Some(earlier) = &earlier {
            attributes.push(KeyValue::new("weft.run.resumed", true));
            links.push(Link::with_context(earlier.clone()));
        }
        let name = if start.flow_name.is_empty() {
            "run".to_string()
        } else {
            format!("run {}", start.flow_name)
        };
        let builder = SpanBuilder::from_name(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .with_links(links);
        let parent_context = match parent {
            Some(parent) => Context::new().with_remote_span_context(parent),
            None => Context::new(),
        };
        let span = self.tracer.build_with_context(builder, &parent_context);
        let run_context = span.span_context().clone();
        let first = start
            .earlier
            .map(str::to_string)
            .or_else(|| traceparent_of(&run_context));
        Arc::new(OtelRun {
            tracer: self.tracer.clone(),
            prices: self.prices.clone(),
            capture_content: self.capture_content,
            run_parent: Context::new().with_remote_span_context(run_context.clone()),
            run_context,
            first,
            state: Mutex::new(RunSpans {
                run: Some(span),
                ..RunSpans::default()
            }),
        })
    }
}

/// A step's place in the run: its nested run's scope (`""` for the run's own steps) and its
/// node. Borrowed, so that finding a step's span allocates nothing.
type StepKey<'a> = (&'a str, &'a str);

fn key_of(event: &RunEvent) -> Option<StepKey<'_>> {
    Some((
        event.scope.as_deref().unwrap_or(""),
        event.node_id.as_deref()?,
    ))
}

#[derive(Default)]
struct RunSpans {
    run: Option<Span>,
    /// Open step spans by scope, then node; oldest first for each step (a node in a loop runs
    /// one visit at a time).
    steps: HashMap<String, HashMap<String, Vec<Span>>>,
    /// Open tool calls by their call id.
    tools: HashMap<String, Span>,
    cost_usd: f64,
    priced: bool,
    usage: Option<Usage>,
    status: Option<String>,
}

struct OtelRun {
    tracer: SdkTracer,
    prices: Prices,
    capture_content: bool,
    run_context: SpanContext,
    /// `run_context` as the parent of the run's own steps, made once.
    run_parent: Context,
    /// The `traceparent` of the run's first span (this one, or the earlier one it continues).
    first: Option<String>,
    state: Mutex<RunSpans>,
}

impl OtelRun {
    fn lock(&self) -> MutexGuard<'_, RunSpans> {
        // A panic while a span was being made leaves spans that are still worth ending.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The step of the enclosing run that runs the nested run `scope` (`research`, `outer/each[2]`).
fn enclosing_step(scope: &str) -> StepKey<'_> {
    let (outer, segment) = scope.rsplit_once('/').unwrap_or(("", scope));
    let node = segment.split_once('[').map_or(segment, |(node, _)| node);
    (outer, node)
}

impl RunSpans {
    fn open_spans(&self, (scope, node): StepKey<'_>) -> Option<&Vec<Span>> {
        self.steps.get(scope)?.get(node)
    }

    fn step_context(&self, key: StepKey<'_>) -> Option<SpanContext> {
        self.open_spans(key)
            .and_then(|spans| spans.last())
            .map(|span| span.span_context().clone())
    }

    /// The latest open span of step `key`, else the run's span.
    fn span_of(&mut self, (scope, node): StepKey<'_>) -> Option<&mut Span> {
        let step = self
            .steps
            .get_mut(scope)
            .and_then(|nodes| nodes.get_mut(node))
            .and_then(|spans| spans.last_mut());
        match step {
            Some(span) => Some(span),
            None => self.run.as_mut(),
        }
    }

    fn take_step(&mut self, (scope, node): StepKey<'_>) -> Option<Span> {
        let nodes = self.steps.get_mut(scope)?;
        let spans = nodes.get_mut(node)?;
        let span = (!spans.is_empty()).then(|| spans.remove(0));
        if spans.is_empty() {
            nodes.remove(node);
        }
        span
    }

    fn push_step(&mut self, (scope, node): StepKey<'_>, span: Span) {
        // The maps keep their entries once made: a step's next visit (and every later step of
        // the same scope) then allocates no key.
        let nodes = match self.steps.get_mut(scope) {
            Some(nodes) => nodes,
            None => self.steps.entry(scope.to_string()).or_default(),
        };
        match nodes.get_mut(node) {
            Some(spans) => spans.push(span),
            None => {
                nodes.insert(node.to_string(), vec![span]);
            }
        }
    }
}

impl RunTrace for OtelRun {
    fn event(&self, event: &RunEvent) {
        match event.kind {
            EventType::StepStart => self.step_start(event),
            EventType::StepEnd => {
                if let Some(key) = key_of(event)
                    && let Some(mut span) = self.lock().take_step(key)
                {
                    span.end();
                }
            }
            EventType::Error => {
                let mut state = self.lock();
                let span = match key_of(event) {
                    Some(key) => state.take_step(key),
                    None => None,
                };
                match span {
                    Some(mut span) => {
                        span.set_status(Status::error(event.content.clone()));
                        span.end();
                    }
                    None => {
                        if let Some(run) = state.run.as_mut() {
                            run.set_status(Status::error(event.content.clone()));
                        }
                    }
                }
            }
            EventType::WaitInput | EventType::InputReceived => self.step_event(event),
            EventType::ToolCall => self.tool_call(event),
            EventType::ToolResult | EventType::ToolError => self.tool_end(event),
            EventType::RunEnd => {
                let status = serde_json::from_str::<Json>(&event.content)
                    .ok()
                    .and_then(|end| end.get("status")?.as_str().map(str::to_string));
                let mut state = self.lock();
                state.usage = event.usage;
                if status.is_some() {
                    state.status = status;
                }
            }
            _ => {}
        }
    }

    fn llm_call(&self, scope: Option<&str>, node_id: &str, call: &LlmCall<'_>) {
        let provider = call.route.provider.as_str();
        let model = call.route.model.as_str();
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("openinference.span.kind", "LLM"),
        ];
        if let Some(temperature) = call.request.temperature {
            attributes.push(KeyValue::new("gen_ai.request.temperature", temperature));
        }
        let mut cost = None;
        match call.answer {
            Ok(answer) => {
                if let Some(response_model) = &answer.response_model {
                    attributes.push(KeyValue::new(
                        "gen_ai.response.model",
                        response_model.clone(),
                    ));
                }
                if let Some(reason) = &answer.finish_reason {
                    attributes.push(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        Value::Array(Array::String(vec![StringValue::from(reason.clone())])),
                    ));
                }
                if let Some(usage) = answer.usage {
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
                    ));
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
                    ));
                    cost = self
                        .prices
                        .price(&format!("{provider}/{model}"))
                        .map(|price| price.of(usage));
                    if let Some(usd) = cost {
                        attributes.push(KeyValue::new("weft.cost.usd", usd));
                    }
                }
                if self.capture_content {
                    attributes.push(KeyValue::new(
                        "gen_ai.input.messages",
                        serde_json::to_string(&call.request.messages).unwrap_or_default(),
                    ));
                    let output = serde_json::json!([{
                        "role": "assistant",
                        "content": answer.content,
                        "tool_calls": answer.tool_calls,
                    }]);
                    attributes.push(KeyValue::new("gen_ai.output.messages", output.to_string()));
                }
            }
            Err(error) => {
                attributes.push(KeyValue::new("error.type", error_type(error)));
            }
        }
        let mut state = self.lock();
        if let Some(usd) = cost {
            state.cost_usd += usd;
            state.priced = true;
        }
        let parent = state
            .step_context((scope.unwrap_or(""), node_id))
            .unwrap_or_else(|| self.run_context.clone());
        drop(state);
        let builder = SpanBuilder::from_name(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_start_time(call.started)
            .with_attributes(attributes);
        let mut span = self
            .tracer
            .build_with_context(builder, &Context::new().with_remote_span_context(parent));
        if let Err(error) = call.answer {
            span.set_status(Status::error(error.to_string()));
        }
        span.end();
    }

    fn traceparent(&self) -> Option<String> {
        self.first.clone()
    }

    fn end(&self, status: Option<RunStatus>) {
        let mut state = self.lock();
        let now = SystemTime::now();
        // Steps and tool calls still open waited on a person (an approval, a breakpoint) or
        // were stopped with the process: they end with the run's segment.
        for (_, mut span) in state.tools.drain() {
            span.end_with_timestamp(now);
        }
        for (_, nodes) in state.steps.drain() {
            for mut span in nodes.into_values().flatten() {
                span.end_with_timestamp(now);
            }
        }
        let status = status
            .map(|status| status.as_str().to_string())
            .or_else(|| state.status.take());
        let usage = state.usage.take();
        let cost = state.priced.then_some(state.cost_usd);
        let Some(mut run) = state.run.take() else {
            return;
        };
        drop(state);
        if let Some(status) = status {
            if status == RunStatus::Failed.as_str() {
                run.set_status(Status::error("the run failed"));
            }
            run.set_attribute(KeyValue::new("weft.run.status", status));
        }
        if let Some(usage) = usage {
            run.set_attribute(KeyValue::new(
                "gen_ai.usage.input_tokens",
                i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
            ));
            run.set_attribute(KeyValue::new(
                "gen_ai.usage.output_tokens",
                i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
            ));
        }
        if let Some(usd) = cost {
            run.set_attribute(KeyValue::new("weft.cost.usd", usd));
        }
        run.end_with_timestamp(now);
    }
}

impl OtelRun {
    fn step_start(&self, event: &RunEvent) {
        let Some(node_id) = &event.node_id else {
            return;
        };
        let mut attributes = Vec::with_capacity(5);
        attributes.push(KeyValue::new("weft.node.id", node_id.clone()));
        attributes.push(KeyValue::new("openinference.span.kind", "CHAIN"));
        if let Some(scope) = &event.scope {
            attributes.push(KeyValue::new("weft.scope", scope.clone()));
        }
        if let Some(item) = event.item {
            attributes.push(KeyValue::new(
                "weft.item",
                i64::try_from(item).unwrap_or(i64::MAX),
            ));
        }
        if let Some(from) = &event.from {
            attributes.push(KeyValue::new("weft.step.from", from.clone()));
        }
        let builder = SpanBuilder::from_name(format!("step {node_id}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        let mut state = self.lock();
        // A nested run's step is made under the step that runs it; the run's own, under the run.
        let enclosing = event
            .scope
            .as_deref()
            .and_then(|scope| state.step_context(enclosing_step(scope)));
        let span = match enclosing {
            Some(parent) => self
                .tracer
                .build_with_context(builder, &Context::new().with_remote_span_context(parent)),
            None => self.tracer.build_with_context(builder, &self.run_parent),
        };
        state.push_step((event.scope.as_deref().unwrap_or(""), node_id), span);
    }

    /// An approval or a breakpoint waited on, or its answer, as an event of its step.
    fn step_event(&self, event: &RunEvent) {
        let Some(key) = key_of(event) else {
            return;
        };
        let name = match event.kind {
            EventType::InputReceived => "weft.input_received",
            _ if event.content.starts_with("breakpoint ") => "weft.breakpoint",
            _ => "weft.approval",
        };
        let mut attributes = vec![KeyValue::new("weft.node.id", key.1.to_string())];
        if self.capture_content {
            attributes.push(KeyValue::new("weft.message", event.content.clone()));
        }
        if let Some(span) = self.lock().span_of(key) {
            span.add_event(name, attributes);
        }
    }

    fn tool_call(&self, event: &RunEvent) {
        let Ok(call) = serde_json::from_str::<Json>(&event.content) else {
            return;
        };
        let text = |field: &str| call.get(field).and_then(Json::as_str).unwrap_or_default();
        let (server, tool, call_id) = (text("server"), text("tool"), text("callId"));
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
            KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
            KeyValue::new("gen_ai.tool.type", "extension"),
            KeyValue::new("weft.mcp.server", server.to_string()),
            KeyValue::new("openinference.span.kind", "TOOL"),
        ];
        if self.capture_content
            && let Some(arguments) = call.get("arguments")
        {
            attributes.push(KeyValue::new(
                "gen_ai.tool.call.arguments",
                arguments.to_string(),
            ));
        }
        let mut state = self.lock();
        let parent = key_of(event)
            .and_then(|key| state.step_context(key))
            .unwrap_or_else(|| self.run_context.clone());
        let builder = SpanBuilder::from_name(format!("execute_tool {tool}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        let span = self
            .tracer
            .build_with_context(builder, &Context::new().with_remote_span_context(parent));
        state.tools.insert(call_id.to_string(), span);
    }

    fn tool_end(&self, event: &RunEvent) {
        let Ok(end) = serde_json::from_str::<Json>(&event.content) else {
            return;
        };
        let Some(call_id) = end.get("callId").and_then(Json::as_str) else {
            return;
        };
        let Some(mut span) = self.lock().tools.remove(call_id) else {
            return;
        };
        let failed = event.kind == EventType::ToolError
            || end.get("isError").and_then(Json::as_bool) == Some(true);
        if failed {
            let message = end
                .get("error")
                .and_then(Json::as_str)
                .unwrap_or("the tool reported an error");
            span.set_status(Status::error(message.to_string()));
        }
        if self.capture_content
            && let Some(content) = end.get("content")
        {
            let text = match content {
                Json::String(text) => text.clone(),
                other => other.to_string(),
            };
            span.set_attribute(KeyValue::new("gen_ai.tool.call.result", text));
        }
        span.end();
    }
}

/// The `error.type` of a failed LLM call: its kind, never its message (which may quote input).
fn error_type(error: &weft_providers::ProviderError) -> String {
    let debug = format!("{error:?}");
    let kind = debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or("error");
    kind.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_run_belongs_to_the_step_that_runs_it() {
        assert_eq!(enclosing_step("research"), ("", "research"));
        assert_eq!(enclosing_step("each[2]"), ("", "each"));
        assert_eq!(enclosing_step("outer/each[2]"), ("outer", "each"));
    }

    #[test]
    fn a_traceparent_is_read_and_written_back() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(text).expect("valid");
        assert_eq!(traceparent_of(&context).as_deref(), Some(text));
        assert!(parse_traceparent("00-zz-00f067aa0ba902b7-01").is_none());
    }
}
