//! `agent`: one LLM call, with a tool loop when the agent has subagents.

use std::collections::HashSet;

use futures_util::future::{BoxFuture, FutureExt, join_all};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{FieldError, Handle, Kind, ModelUse, Scheduling};
use weft_event::EventType;
use weft_flow::output_schema::OutputSchema;
use weft_providers::{
    ChatMessage, ChatRequest, ChatResponse, ModelRoute, ProviderError, ToolCall, ToolSpec,
    route_model, supports_web_search,
};
use crate::mcp_tools::{McpTool, ToolApprovals, ToolReply, ToolStep, call_mcp_tool, mcp_tools};
use crate::decision::DecisionChoice;
use crate::step::{ChildPause, Step, StepEnv, StepError, StepErrorKind, StepOutput, Wait};
use weft_template::output_text;

/// Calls a language model. `{{PREVIOUS_OUTPUT}}` in either prompt is the previous output; an
/// empty user prompt sends the previous output as the user message. With `tools.subagents`,
/// agents connected by subagent edges become tools the model may call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// Instructions for the model (a template).
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub system_prompt: String,
    /// The user message (a template); empty means the previous output.
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub user_prompt: String,
    /// `provider/name` or a bare name; empty uses the default model.
    #[serde(default)]
    pub model: String,
    /// Models tried in order when the model's call fails for good (a rate limit, a server
    /// error, a timeout, a refused connection).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    /// How hard a reasoning model thinks.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Sampling temperature.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2))]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub tools: AgentTools,
    /// A JSON Schema: the answer must be JSON matching it, and the output is the parsed value.
    #[serde(default)]
    #[schemars(extend("x-weft" = "json"))]
    pub output_schema: Option<Value>,
    /// On a revisit inside a loop, send the conversation so far again.
    #[serde(default)]
    pub keep_history: bool,
    /// The tool name this agent has when it is another agent's subagent (else its label).
    #[serde(default)]
    #[schemars(title = "Tool name")]
    pub agent_name: Option<String>,
    /// What this agent does, told to a parent agent that may call it.
    #[serde(default)]
    pub description: Option<String>,
    /// MCP tools whose calls a person approves first (`server/tool`, `server/*`, `*`): the run
    /// pauses before each, with the arguments as a form to edit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve_tools: Vec<String>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The tools an agent may use.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub struct AgentTools {
    /// The provider's own web search.
    #[serde(default)]
    pub web_search: bool,
    /// Agents connected by subagent edges become tools of this one.
    #[serde(default)]
    pub subagents: bool,
    /// MCP tools the model may call: `server` (all of that server's) or `server/tool`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(title = "MCP tools")]
    pub mcp: Vec<String>,
}

/// Rounds of tool calls one agent step may make before it must answer.
const MAX_TOOL_ROUNDS: usize = 10;

impl Kind for AgentConfig {
    const ID: &'static str = "agent";
    const TITLE: &'static str = "Agent";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::SUBAGENT, Handle::ERROR];

    fn template(&self, field: &str) -> Option<&str> {
        match field {
            "systemPrompt" => Some(&self.system_prompt),
            "userPrompt" => Some(&self.user_prompt),
            _ => None,
        }
    }

    fn check(&self) -> Result<(), FieldError> {
        if let Some(schema) = &self.output_schema {
            OutputSchema::compile(schema)
                .map_err(|problem| FieldError::new("outputSchema", problem))?;
        }
        Ok(())
    }

    fn model(&self) -> Option<ModelUse<'_>> {
        Some(ModelUse {
            model: &self.model,
            fallbacks: &self.fallback_models,
            web_search: self.tools.web_search,
        })
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        let system = env.render(step.node_id, "systemPrompt", step.input)?;
        let mut user = env.render(step.node_id, "userPrompt", step.input)?;
        if user.trim().is_empty() {
            user = output_text(step.input);
        }
        let approvals = ToolApprovals::resumed(
            step.resume.as_ref(),
            step.stop_before_tools.then_some(step.node_id),
        );
        let turn = Turn {
            env,
            visit: step.visit,
            approvals: &approvals,
        };
        match run_agent(turn, step.node_id, self, system, user).await? {
            AgentEnd::Answer(value) => Ok(StepOutput::new(value, Handle::OUTPUT.id)),
            AgentEnd::Wait(pause) => Ok(StepOutput::waiting(
                pause.input.clone(),
                Wait::Tool(pause),
            )),
        }
    }
}

/// What one agent step shares with the subagents it calls.
#[derive(Clone, Copy)]
pub(crate) struct Turn<'a> {
    pub env: &'a dyn StepEnv,
    pub visit: u64,
    pub approvals: &'a ToolApprovals,
}

/// How an agent's turn ended: with its answer, or waiting for a person to approve a tool call.
pub(crate) enum AgentEnd {
    Answer(Value),
    Wait(ChildPause),
}

/// Runs agent `node_id` once: the model call, the tool loop, and the answer.
/// Used for agent steps and, nested, for subagent calls.
pub(crate) fn run_agent<'a>(
    turn: Turn<'a>,
    node_id: &'a str,
    config: &'a AgentConfig,
    system: String,
    user: String,
) -> BoxFuture<'a, Result<AgentEnd, StepError>> {
    let Turn { env, visit, .. } = turn;
    async move {
        let routes = routes_for(
            env,
            node_id,
            &config.model,
            &config.fallback_models,
            config.tools.web_search,
        )?;
        let tools = if config.tools.subagents {
            subagent_tools(env, node_id)
        } else {
            Vec::new()
        };
        let taken: Vec<String> = tools.iter().map(|(spec, _)| spec.name.clone()).collect();
        let mcp = mcp_tools(
            env,
            node_id,
            visit,
            &config.tools.mcp,
            &config.approve_tools,
            &taken,
        )
        .await?;

        let mut messages = Vec::new();
        if !system.trim().is_empty() {
            messages.push(ChatMessage::System { content: system });
        }
        let history_start = messages.len();
        if config.keep_history {
            messages.extend(env.history(node_id));
        }
        messages.push(ChatMessage::User { content: user });
        let base = ChatRequest {
            tools: tools
                .iter()
                .map(|(spec, _)| spec.clone())
                .chain(mcp.iter().map(|tool| tool.spec.clone()))
                .collect(),
            reasoning_effort: config
                .reasoning_effort
                .map(|effort| effort.as_str().to_string()),
            temperature: config.temperature,
            web_search: config.tools.web_search,
            response_schema: config.output_schema.clone(),
            ..ChatRequest::new(routes[0].model.clone(), Vec::new())
        };

        for round in 0..MAX_TOOL_ROUNDS {
            if let Some(pause) = budget_pause(turn, node_id)? {
                return Ok(AgentEnd::Wait(pause));
            }
            let request = ChatRequest {
                messages: messages.clone(),
                ..base.clone()
            };
            let response = call_model(env, node_id, visit, &routes, &request).await?;
            if response.tool_calls.is_empty() || base.tools.is_empty() {
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
                            env,
                            node_id,
                            visit,
                            &routes,
                            repair,
                            &mut messages,
                            schema,
                            response.content,
                        )
                        .await?
                    }
                };
                if config.keep_history {
                    env.set_history(node_id, messages[history_start..].to_vec());
                }
                return Ok(AgentEnd::Answer(value));
            }

            messages.push(ChatMessage::Assistant {
                content: response.content.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            // Several calls of one answer run together (subagents and MCP tools alike).
            let results = join_all(
                response
                    .tool_calls
                    .iter()
                    .map(|call| call_tool(turn, node_id, round, &tools, &mcp, call)),
            )
            .await;
            let mut wait = None;
            for (call, step) in response.tool_calls.iter().zip(results) {
                match step? {
                    ToolStep::Reply(reply) => messages.push(ChatMessage::Tool {
                        tool_call_id: call.id.clone(),
                        content: reply.content,
                        is_error: reply.is_error,
                    }),
                    // The first call waited at; the others' results are kept with the run,
                    // and given back when the step runs again.
                    ToolStep::Wait(pause) => {
                        wait.get_or_insert(pause);
                    }
                }
            }
            if let Some(pause) = wait {
                return Ok(AgentEnd::Wait(pause));
            }
        }
        let error = StepError::new(
            StepErrorKind::Provider,
            format!("the model was still calling tools after {MAX_TOOL_ROUNDS} rounds"),
        );
        env.emit(node_id, EventType::LlmError, error.message.clone(), None);
        Err(error)
    }
    .boxed()
}

/// Before a model call of a run whose budget is spent with `onExceed: approve`: the pause that
/// asks a person, or, once a person approved, nothing more (the run goes on without its
/// limit); a rejection fails the step. With `onExceed: fail` the call itself is refused.
pub(crate) fn budget_pause(
    turn: Turn<'_>,
    node_id: &str,
) -> Result<Option<ChildPause>, StepError> {
    const KEY: &str = "budget";
    let env = turn.env;
    let Some(stop) = env.over_budget().filter(|stop| stop.approve) else {
        return Ok(None);
    };
    let Some(decision) = turn.approvals.decision(KEY) else {
        return Ok(Some(ChildPause {
            path: KEY.to_string(),
            message: format!("{}. Go on without the limit?", stop.message),
            fields: Vec::new(),
            quorum: Box::default(),
            since: None,
            breakpoint: false,
            deadline: None,
            input: Value::Null,
            state: turn.approvals.state(KEY),
        }));
    };
    env.emit(
        node_id,
        EventType::InputReceived,
        decision.event_content().to_string(),
        None,
    );
    let by = decision
        .by
        .as_deref()
        .map(|by| format!(" by {by}"))
        .unwrap_or_default();
    if decision.decision != DecisionChoice::Approve {
        return Err(StepError::new(
            StepErrorKind::Budget,
            format!("{}; going on was rejected{by}", stop.message),
        ));
    }
    env.lift_budget();
    env.emit(
        node_id,
        EventType::LogicCheck,
        format!("{}; going on without the limit, as approved{by}", stop.message),
        None,
    );
    Ok(None)
}

/// The providers and models an LLM node of `node_id` asks, in order: its model, then its
/// fallback models; each checked for web search support.
pub(crate) fn routes_for(
    env: &dyn StepEnv,
    node_id: &str,
    model: &str,
    fallbacks: &[String],
    web_search: bool,
) -> Result<Vec<ModelRoute>, StepError> {
    std::iter::once(model)
        .chain(fallbacks.iter().map(String::as_str))
        .map(|model| {
            let route = route_model(model, env.llm().settings())
                .map_err(|error| llm_failure(env, node_id, error))?;
            if web_search && !supports_web_search(route.provider) {
                let error = StepError::new(
                    StepErrorKind::Provider,
                    format!(
                        "tools.web_search: provider {} has no web search; use an openai/ or anthropic/ model",
                        route.provider.as_str()
                    ),
                );
                env.emit(node_id, EventType::LlmError, error.message.clone(), None);
                return Err(error);
            }
            Ok(route)
        })
        .collect()
}

/// One model call (its fallback models tried in order when it fails for good): streams
/// `llm_delta` events, then `llm_response` with the tokens used and the model that answered
/// (a call that only asks for tools logs no `llm_response`), and records the usage.
async fn call_model(
    env: &dyn StepEnv,
    node_id: &str,
    visit: u64,
    routes: &[ModelRoute],
    request: &ChatRequest,
) -> Result<ChatResponse, StepError> {
    let on_delta = |piece: &str| env.emit(node_id, EventType::LlmDelta, piece.to_string(), None);
    let (response, answered) = env
        .complete(node_id, visit, routes, request, &on_delta)
        .await
        .map_err(|error| llm_failure(env, node_id, error))?;
    if let Some(usage) = response.usage {
        env.record_usage(node_id, usage);
    }
    if response.tool_calls.is_empty() || request.tools.is_empty() {
        let model = routes
            .get(answered)
            .map(|route| format!("{}/{}", route.provider.as_str(), route.model));
        env.emit_answer(node_id, response.content.clone(), response.usage, model);
        if !response.sources.is_empty() {
            let sources: Vec<&str> = response
                .sources
                .iter()
                .map(|source| source.url.as_str())
                .collect();
            env.emit(node_id, EventType::LogicCheck, format!("web sources: {}", sources.join(" ")), None);
            env.record_metadata(node_id, &json!({ "sources": response.sources }));
        }
    }
    Ok(response)
}

/// A structured answer: `first` parsed as JSON and checked against `schema`; when it does not
/// match, the model is told what is wrong and asked once more (one repair try).
#[allow(clippy::too_many_arguments)] // the repair needs the whole conversation so far
async fn structured_answer(
    env: &dyn StepEnv,
    node_id: &str,
    visit: u64,
    routes: &[ModelRoute],
    request: ChatRequest,
    messages: &mut Vec<ChatMessage>,
    schema: &Value,
    first: String,
) -> Result<Value, StepError> {
    let problems = match parse_against(schema, &first) {
        Ok(value) => return Ok(value),
        Err(problems) => problems,
    };
    env.emit(node_id, EventType::LogicCheck, format!("the answer does not match the output schema ({problems}); asking once more"),
        None,
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
    let response = call_model(env, node_id, visit, routes, &retry).await?;
    messages.push(ChatMessage::Assistant {
        content: response.content.clone(),
        tool_calls: Vec::new(),
    });
    parse_against(schema, &response.content).map_err(|problems| {
        StepError::new(
            StepErrorKind::OutputSchema,
            format!(
                "the model's answer does not match outputSchema after one repair try: {problems}"
            ),
        )
    })
}

/// Asks `node_id`'s model for JSON matching `schema` (with one repair try) and returns it.
/// Used by nodes that need a structured verdict (`gate`).
pub(crate) async fn complete_structured(
    env: &dyn StepEnv,
    node_id: &str,
    visit: u64,
    routes: &[ModelRoute],
    mut request: ChatRequest,
    schema: &Value,
) -> Result<Value, StepError> {
    request.response_schema = Some(schema.clone());
    let response = call_model(env, node_id, visit, routes, &request).await?;
    let mut messages = request.messages.clone();
    messages.push(ChatMessage::Assistant {
        content: response.content.clone(),
        tool_calls: Vec::new(),
    });
    structured_answer(
        env,
        node_id,
        visit,
        routes,
        request,
        &mut messages,
        schema,
        response.content,
    )
    .await
}

fn llm_failure(env: &dyn StepEnv, node_id: &str, error: ProviderError) -> StepError {
    if error == ProviderError::Cancelled {
        return StepError::cancelled();
    }
    let message = error.to_string();
    env.emit(node_id, EventType::LlmError, message.clone(), None);
    let kind = if matches!(error, ProviderError::OverBudget(_)) {
        StepErrorKind::Budget
    } else {
        StepErrorKind::Provider
    };
    StepError::new(kind, message)
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
    let problems = OutputSchema::compile(schema)?.problems(&value);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems.join("; "))
    }
}

/// The subagents of `node_id` as tools: (spec, child node id).
fn subagent_tools(env: &dyn StepEnv, node_id: &str) -> Vec<(ToolSpec, String)> {
    let mut taken = HashSet::new();
    env.subagents(node_id)
        .iter()
        .filter_map(|child_id| {
            let label = env.label(child_id)?;
            let child = env.config(child_id)?.downcast_ref::<AgentConfig>()?;
            let name = unique_tool_name(child.agent_name.as_deref().unwrap_or(label), &mut taken);
            let description = child
                .description
                .clone()
                .filter(|text| !text.trim().is_empty())
                .unwrap_or_else(|| {
                    let start: String = child.system_prompt.chars().take(200).collect();
                    if start.trim().is_empty() {
                        format!("Asks the agent `{label}` to do a task.")
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

/// Runs what a tool call of the model names: an MCP tool, else a subagent. Fails only when
/// the run is cancelled (or a recording lacks a call); anything else is an error result for
/// the model, or a wait for a person.
async fn call_tool(
    turn: Turn<'_>,
    node_id: &str,
    round: usize,
    subagents: &[(ToolSpec, String)],
    mcp: &[McpTool],
    call: &ToolCall,
) -> Result<ToolStep, StepError> {
    if let Some(tool) = mcp.iter().find(|tool| tool.spec.name == call.name) {
        return call_mcp_tool(
            turn.env,
            node_id,
            turn.visit,
            round,
            tool,
            call,
            turn.approvals,
        )
        .await;
    }
    let step = call_subagent(turn, node_id, subagents, call).await;
    if turn.env.cancel().is_cancelled() {
        return Err(StepError::cancelled());
    }
    Ok(step)
}

/// Runs the subagent a tool call names and returns the tool result text.
async fn call_subagent(
    turn: Turn<'_>,
    parent: &str,
    tools: &[(ToolSpec, String)],
    call: &ToolCall,
) -> ToolStep {
    let env = turn.env;
    let reply = |content: String| {
        ToolStep::Reply(ToolReply {
            content,
            is_error: false,
        })
    };
    let task = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|args| args.get("task").map(output_text))
        .unwrap_or_else(|| call.arguments.clone());
    let Some((_, child_id)) = tools.iter().find(|(spec, _)| spec.name == call.name) else {
        let error = format!("there is no tool named `{}`", call.name);
        let payload = json!({ "parent": parent, "child": call.name, "task": task, "error": error });
        env.emit(parent, EventType::SubagentCallError, payload.to_string(), None);
        return reply(format!("error: {error}"));
    };
    let start = json!({ "parent": parent, "child": child_id, "task": task });
    env.emit(parent, EventType::SubagentCallStart, start.to_string(), None);
    let child = env
        .config(child_id)
        .and_then(|config| config.downcast_ref::<AgentConfig>());
    let result = match child {
        Some(child) => {
            let system = env.render(child_id, "systemPrompt", &Value::String(task.clone()));
            match system {
                Ok(system) => run_agent(turn, child_id, child, system, task.clone()).await,
                Err(error) => Err(error),
            }
        }
        None => Err(StepError::new(
            StepErrorKind::Internal,
            format!("`{child_id}` is not an agent"),
        )),
    };
    match result {
        Ok(AgentEnd::Answer(output)) => {
            let output = output_text(&output);
            let end =
                json!({ "parent": parent, "child": child_id, "task": task, "output": output });
            env.emit(parent, EventType::SubagentCallEnd, end.to_string(), None);
            reply(output)
        }
        // The subagent's tool call waits for a person: so does the whole step.
        Ok(AgentEnd::Wait(pause)) => ToolStep::Wait(pause),
        Err(error) => {
            let failed = json!({ "parent": parent, "child": child_id, "task": task, "error": error.message });
            env.emit(parent, EventType::SubagentCallError, failed.to_string(), None);
            reply(format!("error: {}", error.message))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::step::fake::{FakeEnv, step};
    use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, ToolCall as ScriptedCall};

    fn agent(model: &str) -> AgentConfig {
        AgentConfig {
            model: model.into(),
            ..AgentConfig::default()
        }
    }

    #[tokio::test]
    async fn asks_the_model_and_records_its_tokens_and_conversation() {
        let server = ScriptedLlm::start(Script::always(Reply::echo("you said: "))).await.expect("server");
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .template("writer", "systemPrompt", "Be brief.")
            .template("writer", "userPrompt", "");
        let config = AgentConfig {
            keep_history: true,
            ..agent("gpt-test")
        };
        let output = config.run(&step("writer", &Arc::new(json!("hello"))), &env).await.expect("answers");
        assert_eq!(*output.value, json!("you said: hello"), "an empty user prompt sends the input");
        let request = &server.requests()[0];
        assert_eq!(request.model(), Some("gpt-test"));
        assert_eq!(request.conversation()[0], ("system".to_string(), "Be brief.".to_string()));
        assert_eq!(env.contents(EventType::LlmResponse), ["you said: hello"]);
        assert!(!env.contents(EventType::LlmDelta).is_empty(), "tokens stream as deltas");
        assert_eq!(env.usage.lock().expect("usage").iter().filter(|(node, _)| node == "writer").count(), 1);
        assert_eq!(env.history("writer").len(), 2, "the user message and the answer are kept");
    }

    #[tokio::test]
    async fn offers_subagents_as_tools_and_feeds_their_answers_back() {
        let script = Script::default()
            .with_rule(Rule::on(
                Match {
                    has_tools: Some(true),
                    last_role: Some("user".into()),
                    ..Match::default()
                },
                Reply::ToolCalls {
                    calls: vec![ScriptedCall {
                        id: Some("call_1".into()),
                        name: "Fact_finder".into(),
                        arguments: json!({"task": "rivers"}),
                    }],
                    delay_ms: 0,
                },
            ))
            .with_rule(Rule::on(
                Match {
                    has_tools: Some(true),
                    last_role: Some("tool".into()),
                    ..Match::default()
                },
                Reply::text("done with help"),
            ))
            .with_fallback(Reply::echo("facts: "));
        let server = ScriptedLlm::start(script).await.expect("server");
        let lead = AgentConfig {
            tools: AgentTools {
                subagents: true,
                ..AgentTools::default()
            },
            ..agent("m")
        };
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .node("finder", "Fact finder", agent("m"))
            .subagent("lead", "finder")
            .template("lead", "systemPrompt", "")
            .template("lead", "userPrompt", "Write about {{ PREVIOUS_OUTPUT }}")
            .template("finder", "systemPrompt", "Find facts.");
        let output = lead.run(&step("lead", &Arc::new(json!("rivers"))), &env).await.expect("answers");
        assert_eq!(*output.value, json!("done with help"));
        let requests = server.requests();
        assert_eq!(requests[0].body["tools"][0]["function"]["name"], "Fact_finder");
        assert_eq!(requests[1].conversation()[1], ("user".to_string(), "rivers".to_string()));
        let ended = env.contents(EventType::SubagentCallEnd);
        let ended: serde_json::Value = serde_json::from_str(&ended[0]).expect("json");
        assert_eq!(ended["output"], "facts: rivers");
    }

    /// server-everything over stdio (installed by scripts/setup-mcp.sh).
    fn everything() -> weft_mcp::ServerDef {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(script.exists(), "the MCP test servers are not installed: run scripts/setup-mcp.sh");
        serde_json::from_value(json!({"command": "node", "args": [script, "stdio"]})).expect("def")
    }

    #[tokio::test]
    async fn offers_mcp_tools_and_feeds_their_results_back_errors_marked() {
        let calls = |calls: Vec<ScriptedCall>| Reply::ToolCalls { calls, delay_ms: 0 };
        let script = Script::default()
            .with_rule(Rule::on(
                Match {
                    has_tools: Some(true),
                    last_role: Some("user".into()),
                    ..Match::default()
                },
                calls(vec![
                    ScriptedCall {
                        id: Some("c1".into()),
                        name: "everything__echo".into(),
                        arguments: json!({"message": "rivers"}),
                    },
                    ScriptedCall {
                        id: Some("c2".into()),
                        name: "everything__get-sum".into(),
                        arguments: json!("not an object"),
                    },
                ]),
            ))
            .with_fallback(Reply::text("done"));
        let server = ScriptedLlm::start(script).await.expect("server");
        let config = AgentConfig {
            tools: AgentTools {
                mcp: vec!["everything/echo".into(), "everything/get-sum".into()],
                ..AgentTools::default()
            },
            ..agent("m")
        };
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .folder(&std::env::temp_dir())
            .mcp_server("everything", everything())
            .template("a", "systemPrompt", "")
            .template("a", "userPrompt", "Find rivers");
        let output = config.run(&step("a", &Arc::new(json!(""))), &env).await.expect("answers");
        assert_eq!(*output.value, json!("done"));
        let requests = server.requests();
        let offered: Vec<&str> = requests[0].body["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["function"]["name"].as_str())
            .collect();
        assert_eq!(offered, ["everything__echo", "everything__get-sum"]);
        assert_eq!(
            requests[0].body["tools"][0]["function"]["description"],
            "Echoes back the input string"
        );
        let conversation = requests[1].conversation();
        assert!(conversation.contains(&("tool".to_string(), "Echo: rivers".to_string())), "{conversation:?}");
        assert!(
            conversation.iter().any(|(role, text)| role == "tool" && text.starts_with("error: the arguments must be a JSON object")),
            "{conversation:?}"
        );
        let called: Vec<Value> = env
            .contents(EventType::ToolCall)
            .iter()
            .map(|text| serde_json::from_str(text).expect("json"))
            .collect();
        assert_eq!(called[0]["server"], "everything");
        assert_eq!(called[0]["tool"], "echo");
        assert_eq!(called[0]["arguments"], json!({"message": "rivers"}));
        assert_eq!(called[0]["callId"], "c1");
        let result: Value = serde_json::from_str(&env.contents(EventType::ToolResult)[0]).expect("json");
        assert_eq!(result["content"], "Echo: rivers");
        assert_eq!(result["isError"], false);
        assert!(result["durationMs"].is_u64());
        let failed: Value = serde_json::from_str(&env.contents(EventType::ToolError)[0]).expect("json");
        assert_eq!(failed["tool"], "get-sum");
    }

    #[tokio::test]
    async fn an_unknown_mcp_tool_or_server_fails_the_step_naming_it() {
        let server = ScriptedLlm::start(Script::always(Reply::text("unused"))).await.expect("server");
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .folder(&std::env::temp_dir())
            .mcp_server("everything", everything())
            .template("a", "systemPrompt", "")
            .template("a", "userPrompt", "hi");
        for (entry, expected) in [
            ("everything/nope", "MCP server `everything` has no tool `nope` (its tools: "),
            ("tracker", "MCP server `tracker`: is not in the flow's settings.mcpServers"),
        ] {
            let config = AgentConfig {
                tools: AgentTools {
                    mcp: vec![entry.into()],
                    ..AgentTools::default()
                },
                ..agent("m")
            };
            let error = config.run(&step("a", &Arc::new(json!(""))), &env).await.expect_err("fails");
            assert_eq!(error.kind, StepErrorKind::Tool);
            assert!(error.message.contains(expected), "{error}");
        }
        assert!(server.requests().is_empty(), "the model is not asked");
    }

    #[tokio::test]
    async fn a_provider_that_refuses_is_an_llm_error_naming_what_it_said() {
        let server = ScriptedLlm::start(Script::always(Reply::status(
            400,
            json!({"error": {"message": "model not found"}}),
        )))
        .await
        .expect("server");
        let env = FakeEnv::new()
            .model_at(server.base_url())
            .template("a", "systemPrompt", "")
            .template("a", "userPrompt", "hi");
        let error = agent("nope").run(&step("a", &Arc::new(json!(""))), &env).await.expect_err("refused");
        assert_eq!(error.kind, StepErrorKind::Provider);
        assert!(error.message.contains("model not found"), "{error}");
        assert_eq!(env.contents(EventType::LlmError), [error.message]);
    }

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
