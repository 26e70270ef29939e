//! `agent`: one LLM call, with a tool loop when the agent has subagents.

use std::collections::HashSet;

use futures_util::future::{BoxFuture, FutureExt, join_all};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{FieldError, NodeConfig};
use crate::event::EventType;
use crate::providers::{
    ChatMessage, ChatRequest, ChatResponse, ModelRoute, ProviderError, ToolCall, ToolSpec,
    route_model, supports_web_search,
};
use crate::run::{RunContext, Step, StepError, StepOutput};
use crate::template::output_text;

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Calls a language model. `{{PREVIOUS_OUTPUT}}` in either prompt is the previous output; an \
         empty user prompt sends the previous output as the user message. With `tools.subagents`, \
         agents connected by subagent edges become tools the model may call."
    };
    (systemPrompt) => {
        "Instructions for the model (a template)."
    };
    (userPrompt) => {
        "The user message (a template); empty means the previous output."
    };
    (model) => {
        "`provider/name` or a bare name; empty uses the default model."
    };
    (reasoningEffort) => {
        "How hard a reasoning model thinks: `low`, `medium` or `high`."
    };
    (temperature) => {
        "Sampling temperature, 0–2."
    };
    (outputSchema) => {
        "A JSON Schema: the answer must be JSON, and the output is the parsed value."
    };
    (keepHistory) => {
        "On a revisit inside a loop, send the conversation so far again."
    };
    (agentName) => {
        "The tool name this agent has when it is another agent's subagent (else its label)."
    };
    (description) => {
        "What this agent does, told to a parent agent that may call it."
    };
    (web_search) => {
        "The provider's own web search."
    };
    (subagents) => {
        "Agents connected by subagent edges become tools of this one."
    };
}

#[doc = help!(kind)]
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    #[doc = help!(systemPrompt)]
    #[serde(default)]
    pub system_prompt: String,
    #[doc = help!(userPrompt)]
    #[serde(default)]
    pub user_prompt: String,
    #[doc = help!(model)]
    #[serde(default)]
    pub model: String,
    #[doc = help!(reasoningEffort)]
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[doc = help!(temperature)]
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub tools: AgentTools,
    #[doc = help!(outputSchema)]
    #[serde(default)]
    pub output_schema: Option<Value>,
    #[doc = help!(keepHistory)]
    #[serde(default)]
    pub keep_history: bool,
    #[doc = help!(agentName)]
    #[serde(default)]
    pub agent_name: Option<String>,
    #[doc = help!(description)]
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// The tools an agent may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct AgentTools {
    #[doc = help!(web_search)]
    #[serde(default)]
    pub web_search: bool,
    #[doc = help!(subagents)]
    #[serde(default)]
    pub subagents: bool,
}

/// Rounds of tool calls one agent step may make before it must answer.
const MAX_TOOL_ROUNDS: usize = 10;

impl AgentConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if let Some(temperature) = self.temperature
            && !(0.0..=2.0).contains(&temperature)
        {
            return Err(FieldError::new("temperature", "must be between 0 and 2"));
        }
        if let Some(schema) = &self.output_schema
            && !schema.is_object()
        {
            return Err(FieldError::new(
                "outputSchema",
                "must be a JSON Schema object",
            ));
        }
        Ok(())
    }
}

pub(super) async fn run(config: &AgentConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let system = step.render("systemPrompt")?;
    let mut user = step.render("userPrompt")?;
    if user.trim().is_empty() {
        user = output_text(step.input);
    }
    let value = run_agent(step.ctx, &step.node.id, config, system, user).await?;
    Ok(StepOutput::new(value, "output"))
}

/// Runs agent `node_id` once: the model call, the subagent tool loop, and the answer.
/// Used for agent steps and, nested, for subagent calls.
pub(crate) fn run_agent<'a>(
    ctx: &'a RunContext,
    node_id: &'a str,
    config: &'a AgentConfig,
    system: String,
    user: String,
) -> BoxFuture<'a, Result<Value, StepError>> {
    async move {
        let route = route_for(ctx, node_id, &config.model, config.tools.web_search)?;
        let tools = if config.tools.subagents {
            subagent_tools(ctx, node_id)
        } else {
            Vec::new()
        };

        let mut messages = Vec::new();
        if !system.trim().is_empty() {
            messages.push(ChatMessage::System { content: system });
        }
        let history_start = messages.len();
        if config.keep_history {
            messages.extend(ctx.history(node_id));
        }
        messages.push(ChatMessage::User { content: user });
        let base = ChatRequest {
            tools: tools.iter().map(|(spec, _)| spec.clone()).collect(),
            reasoning_effort: config
                .reasoning_effort
                .map(|effort| effort.as_str().to_string()),
            temperature: config.temperature,
            web_search: config.tools.web_search,
            response_schema: config.output_schema.clone(),
            ..ChatRequest::new(route.model.clone(), Vec::new())
        };

        for _round in 0..MAX_TOOL_ROUNDS {
            let request = ChatRequest {
                messages: messages.clone(),
                ..base.clone()
            };
            let response = call_model(ctx, node_id, &route, &request).await?;
            if response.tool_calls.is_empty() || tools.is_empty() {
                messages.push(ChatMessage::Assistant {
                    content: response.content.clone(),
                    tool_calls: Vec::new(),
                });
                let value = match &config.output_schema {
                    None => Value::String(response.content),
                    Some(schema) => {
                        let repair = ChatRequest {
                            tools: Vec::new(),
                            ..base.clone()
                        };
                        structured_answer(
                            ctx,
                            node_id,
                            &route,
                            repair,
                            &mut messages,
                            schema,
                            response.content,
                        )
                        .await?
                    }
                };
                if config.keep_history {
                    ctx.set_history(node_id, messages[history_start..].to_vec());
                }
                return Ok(value);
            }

            messages.push(ChatMessage::Assistant {
                content: response.content.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            let results = join_all(
                response
                    .tool_calls
                    .iter()
                    .map(|call| call_subagent(ctx, node_id, &tools, call)),
            )
            .await;
            for (call, content) in response.tool_calls.iter().zip(results) {
                messages.push(ChatMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
        }
        let error = StepError::new(
            "provider",
            format!("the model was still calling tools after {MAX_TOOL_ROUNDS} rounds"),
        );
        ctx.emit(EventType::LlmError, Some(node_id), error.message.clone());
        Err(error)
    }
    .boxed()
}

/// The provider and model an LLM node of `node_id` uses, checked for web search support.
pub(crate) fn route_for(
    ctx: &RunContext,
    node_id: &str,
    model: &str,
    web_search: bool,
) -> Result<ModelRoute, StepError> {
    let route =
        route_model(model, ctx.llm.settings()).map_err(|error| llm_failure(ctx, node_id, error))?;
    if web_search && !supports_web_search(route.provider) {
        let error = StepError::new(
            "provider",
            format!(
                "tools.web_search: provider {} has no web search; use an openai/ or anthropic/ model",
                route.provider.as_str()
            ),
        );
        ctx.emit(EventType::LlmError, Some(node_id), error.message.clone());
        return Err(error);
    }
    Ok(route)
}

/// One model call: streams `llm_delta` events, then `llm_response` with the tokens used
/// (a call that only asks for tools logs no `llm_response`), and records the usage.
async fn call_model(
    ctx: &RunContext,
    node_id: &str,
    route: &ModelRoute,
    request: &ChatRequest,
) -> Result<ChatResponse, StepError> {
    let on_delta = |piece: &str| ctx.emit(EventType::LlmDelta, Some(node_id), piece.to_string());
    let response = ctx
        .llm
        .complete(route, request, &on_delta, &ctx.cancel)
        .await
        .map_err(|error| llm_failure(ctx, node_id, error))?;
    if let Some(usage) = response.usage {
        ctx.record_usage(node_id, usage);
    }
    if response.tool_calls.is_empty() || request.tools.is_empty() {
        ctx.events.emit_with_usage(
            EventType::LlmResponse,
            Some(node_id),
            response.content.clone(),
            response.usage,
        );
        if !response.sources.is_empty() {
            let sources: Vec<&str> = response
                .sources
                .iter()
                .map(|source| source.url.as_str())
                .collect();
            ctx.emit(
                EventType::LogicCheck,
                Some(node_id),
                format!("web sources: {}", sources.join(" ")),
            );
            ctx.record_metadata(node_id, &json!({ "sources": response.sources }));
        }
    }
    Ok(response)
}

/// A structured answer: `first` parsed as JSON and checked against `schema`; when it does not
/// match, the model is told what is wrong and asked once more (one repair try).
async fn structured_answer(
    ctx: &RunContext,
    node_id: &str,
    route: &ModelRoute,
    request: ChatRequest,
    messages: &mut Vec<ChatMessage>,
    schema: &Value,
    first: String,
) -> Result<Value, StepError> {
    let problems = match parse_against(schema, &first) {
        Ok(value) => return Ok(value),
        Err(problems) => problems,
    };
    ctx.emit(
        EventType::LogicCheck,
        Some(node_id),
        format!("the answer does not match the output schema ({problems}); asking once more"),
    );
    messages.push(ChatMessage::User {
        content: format!(
            "Your answer does not match the required JSON schema: {problems}. Answer again with only JSON that matches this schema:\n{schema}"
        ),
    });
    let retry = ChatRequest {
        messages: messages.clone(),
        ..request
    };
    let response = call_model(ctx, node_id, route, &retry).await?;
    messages.push(ChatMessage::Assistant {
        content: response.content.clone(),
        tool_calls: Vec::new(),
    });
    parse_against(schema, &response.content).map_err(|problems| {
        StepError::new(
            "output_schema",
            format!(
                "the model's answer does not match outputSchema after one repair try: {problems}"
            ),
        )
    })
}

/// Asks `node_id`'s model for JSON matching `schema` (with one repair try) and returns it.
/// Used by nodes that need a structured verdict (`gate`).
pub(crate) async fn complete_structured(
    ctx: &RunContext,
    node_id: &str,
    route: &ModelRoute,
    mut request: ChatRequest,
    schema: &Value,
) -> Result<Value, StepError> {
    request.response_schema = Some(schema.clone());
    let response = call_model(ctx, node_id, route, &request).await?;
    let mut messages = request.messages.clone();
    messages.push(ChatMessage::Assistant {
        content: response.content.clone(),
        tool_calls: Vec::new(),
    });
    structured_answer(
        ctx,
        node_id,
        route,
        request,
        &mut messages,
        schema,
        response.content,
    )
    .await
}

fn llm_failure(ctx: &RunContext, node_id: &str, error: ProviderError) -> StepError {
    if error == ProviderError::Cancelled {
        return StepError::new("cancelled", error.to_string());
    }
    let message = error.to_string();
    ctx.emit(EventType::LlmError, Some(node_id), message.clone());
    StepError::new("provider", message)
}

/// `content` as JSON matching `schema`, or what is wrong with it.
fn parse_against(schema: &Value, content: &str) -> Result<Value, String> {
    let trimmed = content.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed)
        .trim();
    let value: Value =
        serde_json::from_str(unfenced).map_err(|error| format!("it is not JSON ({error})"))?;
    let problems = crate::schema::violations(schema, &value);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems.join("; "))
    }
}

/// The subagents of `node_id` as tools: (spec, child node id).
fn subagent_tools(ctx: &RunContext, node_id: &str) -> Vec<(ToolSpec, String)> {
    let mut taken = HashSet::new();
    ctx.subagents_of(node_id)
        .iter()
        .filter_map(|child_id| {
            let node = ctx.node(child_id)?;
            let Some(NodeConfig::Agent(child)) = ctx.config(child_id) else {
                return None;
            };
            let name = unique_tool_name(child.agent_name.as_deref().unwrap_or(node.label()), &mut taken);
            let description = child
                .description
                .clone()
                .filter(|text| !text.trim().is_empty())
                .unwrap_or_else(|| {
                    let start: String = child.system_prompt.chars().take(200).collect();
                    if start.trim().is_empty() {
                        format!("Asks the agent `{}` to do a task.", node.label())
                    } else {
                        start
                    }
                });
            let parameters = json!({
                "type": "object",
                "properties": { "task": { "type": "string", "description": "What the agent should do." } },
                "required": ["task"],
            });
            Some((
                ToolSpec {
                    name,
                    description,
                    parameters,
                },
                child_id.clone(),
            ))
        })
        .collect()
}

/// `text` as a function name providers accept (`[A-Za-z0-9_]`, at most 64), unique in `taken`.
fn unique_tool_name(text: &str, taken: &mut HashSet<String>) -> String {
    let mut name: String = text
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    let mut name = name.trim_matches('_').to_string();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name = format!("agent_{name}");
    }
    name.truncate(60);
    let mut candidate = name.clone();
    let mut counter = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}_{counter}");
        counter += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// Runs the subagent a tool call names and returns the tool result text.
async fn call_subagent(
    ctx: &RunContext,
    parent: &str,
    tools: &[(ToolSpec, String)],
    call: &ToolCall,
) -> String {
    let task = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|args| args.get("task").map(output_text))
        .unwrap_or_else(|| call.arguments.clone());
    let Some((_, child_id)) = tools.iter().find(|(spec, _)| spec.name == call.name) else {
        let error = format!("there is no tool named `{}`", call.name);
        let payload = json!({ "parent": parent, "child": call.name, "task": task, "error": error });
        ctx.emit(
            EventType::SubagentCallError,
            Some(parent),
            payload.to_string(),
        );
        return format!("error: {error}");
    };
    let start = json!({ "parent": parent, "child": child_id, "task": task });
    ctx.emit(
        EventType::SubagentCallStart,
        Some(parent),
        start.to_string(),
    );
    let result = match ctx.config(child_id) {
        Some(NodeConfig::Agent(child)) => {
            let system = ctx.render(child_id, "systemPrompt", &Value::String(task.clone()));
            match system {
                Ok(system) => run_agent(ctx, child_id, child, system, task.clone()).await,
                Err(error) => Err(error),
            }
        }
        _ => Err(StepError::new(
            "internal",
            format!("`{child_id}` is not an agent"),
        )),
    };
    match result {
        Ok(output) => {
            let output = output_text(&output);
            let end =
                json!({ "parent": parent, "child": child_id, "task": task, "output": output });
            ctx.emit(EventType::SubagentCallEnd, Some(parent), end.to_string());
            output
        }
        Err(error) => {
            let failed = json!({ "parent": parent, "child": child_id, "task": task, "error": error.message });
            ctx.emit(
                EventType::SubagentCallError,
                Some(parent),
                failed.to_string(),
            );
            format!("error: {}", error.message)
        }
    }
}

/// What a canvas needs to draw an agent (see [`super::KindDescription`]).
pub(super) fn describe() -> super::KindDescription {
    use super::{FieldDescription, FieldType, HandleDescription, HandleKind, KindDescription};
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription {
                kind: HandleKind::Subagent,
                ..HandleDescription::execution(crate::flow::SUBAGENT_HANDLE, "Subagents")
            },
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new(
                "systemPrompt",
                "System prompt",
                help!(systemPrompt),
                FieldType::Template,
            )
            .default(""),
            FieldDescription::new(
                "userPrompt",
                "User prompt",
                help!(userPrompt),
                FieldType::Template,
            )
            .default(""),
            FieldDescription::new("model", "Model", help!(model), FieldType::Text).default(""),
            FieldDescription::new(
                "reasoningEffort",
                "Reasoning effort",
                help!(reasoningEffort),
                FieldType::Choice {
                    options: super::serde_names::<ReasoningEffort>(),
                },
            ),
            FieldDescription::new(
                "temperature",
                "Temperature",
                help!(temperature),
                FieldType::Number {
                    min: Some(0.0),
                    max: Some(2.0),
                },
            ),
            FieldDescription::new(
                "tools.web_search",
                "Web search",
                help!(web_search),
                FieldType::Boolean,
            )
            .default(false),
            FieldDescription::new(
                "tools.subagents",
                "Subagents",
                help!(subagents),
                FieldType::Boolean,
            )
            .default(false),
            FieldDescription::new(
                "outputSchema",
                "Output schema",
                help!(outputSchema),
                FieldType::Json,
            ),
            FieldDescription::new(
                "keepHistory",
                "Keep history",
                help!(keepHistory),
                FieldType::Boolean,
            )
            .default(false),
            FieldDescription::new("agentName", "Tool name", help!(agentName), FieldType::Text),
            FieldDescription::new(
                "description",
                "Description",
                help!(description),
                FieldType::Text,
            ),
        ],
        ..KindDescription::new(super::NodeKind::Agent, "Agent", help!(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_identifiers_and_unique() {
        let mut taken = HashSet::new();
        assert_eq!(
            unique_tool_name("Web Researcher!", &mut taken),
            "Web_Researcher"
        );
        assert_eq!(
            unique_tool_name("Web Researcher?", &mut taken),
            "Web_Researcher_2"
        );
        assert_eq!(unique_tool_name("42", &mut taken), "agent_42");
        assert_eq!(unique_tool_name("  ", &mut taken), "agent_");
    }
}
