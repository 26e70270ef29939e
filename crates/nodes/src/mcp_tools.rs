//! An agent's MCP tools (`tools.mcp`): the specs its model sees (`server__tool`, with the
//! tool's own description and input schema), and each call the model asks for, with its
//! `tool_call` / `tool_result` / `tool_error` events. A tool's error result and a failed call
//! both go back to the model as an error result; only a server that cannot be reached when the
//! step starts fails the step.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Value, json};
use weft_event::EventType;
use weft_mcp::{JsonObject, McpErrorKind};
use weft_providers::{ToolCall, ToolSpec};

use crate::decision::{Decision, DecisionChoice, FormField, FormFieldKind};
use crate::step::{ChildPause, ChildResume, StepEnv, StepError, StepErrorKind, ToolCallRequest};

/// How much of a tool's result an event carries (the store keeps it whole).
pub const EVENT_CONTENT_LIMIT: usize = 64 * 1024;
/// The longest function name providers accept.
const MAX_TOOL_NAME: usize = 64;

/// One MCP tool the model may call.
#[derive(Debug, Clone)]
pub(crate) struct McpTool {
    pub spec: ToolSpec,
    pub server: String,
    pub tool: String,
    /// A person approves each call first (`approveTools`).
    pub approve: bool,
}

/// Whether `server/tool` matches an `approveTools` pattern: `server/tool`, `server/*`,
/// `server` or `*`.
pub fn approval_matches(pattern: &str, server: &str, tool: &str) -> bool {
    match split_entry(pattern) {
        ("*", None) => true,
        (name, None) | (name, Some("*")) => name == server,
        (name, Some(only)) => name == server && only == tool,
    }
}

/// What a person answered at the tool calls one agent step stopped at: decisions (tool
/// approvals) and continues (tool breakpoints), by call, kept across the pauses the step made.
/// A step that waits for a person is run again when the person answers, its LLM calls and tool
/// results given back from the run's record.
#[derive(Debug, Default)]
pub(crate) struct ToolApprovals {
    /// The answers so far, by call key (`stop:` before a breakpoint's).
    answered: Mutex<BTreeMap<String, Value>>,
    /// The step's node, when a tool breakpoint is on it (a subagent's calls do not stop).
    stops_before_tools_of: Option<String>,
}

impl ToolApprovals {
    /// The answers a step resumed with `resume` has: those of its earlier pauses and the one
    /// just given for the call it waited at.
    pub fn resumed(
        resume: Option<&ChildResume>,
        stops_before_tools_of: Option<&str>,
    ) -> ToolApprovals {
        let mut answered: BTreeMap<String, Value> = BTreeMap::new();
        if let Some(resume) = resume {
            if let Some(earlier) = resume.pause.state.get("answered") {
                answered = serde_json::from_value(earlier.clone()).unwrap_or_default();
            }
            if let Some(pending) = resume.pause.state.get("pending").and_then(Value::as_str) {
                answered.insert(pending.to_string(), resume.answer.clone());
            }
        }
        ToolApprovals {
            answered: Mutex::new(answered),
            stops_before_tools_of: stops_before_tools_of.map(str::to_string),
        }
    }

    fn answer(&self, key: &str) -> Option<Value> {
        self.answered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(key)
            .cloned()
    }

    pub(crate) fn decision(&self, key: &str) -> Option<Decision> {
        serde_json::from_value(self.answer(key)?).ok()
    }

    /// The state a pause at call `key` keeps: every answer so far, and the call waited at.
    pub(crate) fn state(&self, key: &str) -> Value {
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        json!({ "answered": answered, "pending": key })
    }
}

/// The form a person edits a tool call's arguments in: one field per property of its input
/// schema (a choice for an `enum`, a number for numbers, else text); left empty, an argument
/// keeps the model's value.
pub fn tool_form(schema: &Value) -> Vec<FormField> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let options: Vec<String> = property
                .get("enum")
                .and_then(Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let kind = match property.get("type").and_then(Value::as_str) {
                _ if !options.is_empty() => FormFieldKind::Choice,
                Some("number" | "integer") => FormFieldKind::Number,
                _ => FormFieldKind::Text,
            };
            let label = property
                .get("description")
                .and_then(Value::as_str)
                .map(|description| format!("{name}: {description}"))
                .unwrap_or_default();
            FormField {
                name: name.clone(),
                label,
                kind,
                options,
                required: false,
            }
        })
        .collect()
}

/// `arguments` with a person's non-empty answers in place of the model's values (text read as
/// JSON where the schema wants another type than a string).
fn edited(mut arguments: JsonObject, decision: &Decision, schema: &Value) -> JsonObject {
    for (name, answer) in &decision.fields {
        let wants_text = schema["properties"][name]["type"].as_str() == Some("string");
        let value = match answer {
            Value::String(text) if text.is_empty() => continue,
            Value::String(text) if !wants_text => {
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
            }
            other => other.clone(),
        };
        arguments.insert(name.clone(), value);
    }
    arguments
}

/// What one tool call of the model came to: a result for the model, or a wait for a person.
pub(crate) enum ToolStep {
    Reply(ToolReply),
    Wait(ChildPause),
}

/// `server__tool` as a function name: `[A-Za-z0-9_-]`, at most 64 characters.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let mut name: String = format!("{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() > MAX_TOOL_NAME {
        name.truncate(MAX_TOOL_NAME);
    }
    name
}

/// An entry of `tools.mcp`: `server` or `server/tool`.
pub fn split_entry(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('/') {
        Some((server, tool)) => (server, Some(tool)),
        None => (entry, None),
    }
}

/// The tools `entries` name, listed from their servers. A server that cannot be reached, a
/// tool it does not list, or two tools with one exposed name fail the step, naming them.
pub(crate) async fn mcp_tools(
    env: &dyn StepEnv,
    node_id: &str,
    visit: u64,
    entries: &[String],
    approve: &[String],
    taken: &[String],
) -> Result<Vec<McpTool>, StepError> {
    let mut tools: Vec<McpTool> = Vec::new();
    let mut listed: HashMap<&str, Vec<weft_mcp::ToolInfo>> = HashMap::new();
    for entry in entries {
        let (server, only) = split_entry(entry);
        if !listed.contains_key(server) {
            let infos = env
                .mcp_tools(node_id, visit, server)
                .await
                .map_err(|error| {
                    if error.kind == McpErrorKind::Cancelled {
                        return StepError::cancelled();
                    }
                    let failed = json!({ "server": server, "error": error.to_string() });
                    env.emit(node_id, EventType::ToolError, failed.to_string(), None);
                    StepError::new(StepErrorKind::Tool, format!("tools.mcp: {error}"))
                })?;
            listed.insert(server, infos);
        }
        let infos = &listed[server];
        let chosen: Vec<&weft_mcp::ToolInfo> = match only {
            None => infos.iter().collect(),
            Some(tool) => {
                let info = infos.iter().find(|info| info.name == tool).ok_or_else(|| {
                    let names: Vec<&str> = infos.iter().map(|info| info.name.as_str()).collect();
                    StepError::new(
                        StepErrorKind::Tool,
                        format!(
                            "tools.mcp: MCP server `{server}` has no tool `{tool}` (its tools: {})",
                            names.join(", ")
                        ),
                    )
                })?;
                vec![info]
            }
        };
        for info in chosen {
            if tools
                .iter()
                .any(|known| known.server == server && known.tool == info.name)
            {
                continue;
            }
            let name = exposed_name(server, &info.name);
            if let Some(other) = tools.iter().find(|known| known.spec.name == name) {
                return Err(StepError::new(
                    StepErrorKind::Tool,
                    format!(
                        "tools.mcp: `{server}/{}` and `{}/{}` are both offered to the model as `{name}`; name only one of them",
                        info.name, other.server, other.tool
                    ),
                ));
            }
            if taken.contains(&name) {
                return Err(StepError::new(
                    StepErrorKind::Tool,
                    format!(
                        "tools.mcp: `{server}/{}` is offered as `{name}`, the name of a subagent too",
                        info.name
                    ),
                ));
            }
            let description = if info.description.trim().is_empty() {
                info.title.clone().unwrap_or_else(|| {
                    format!("The tool `{}` of MCP server `{server}`.", info.name)
                })
            } else {
                info.description.clone()
            };
            tools.push(McpTool {
                spec: ToolSpec {
                    name,
                    description,
                    parameters: info.input_schema.clone(),
                },
                server: server.to_string(),
                tool: info.name.clone(),
                approve: approve
                    .iter()
                    .any(|pattern| approval_matches(pattern, server, &info.name)),
            });
        }
    }
    Ok(tools)
}

/// What a tool call gives the model: its text and whether it is an error.
pub(crate) struct ToolReply {
    pub content: String,
    pub is_error: bool,
}

/// Calls the MCP tool `call` names, logging it; any failure becomes an error result for the
/// model, except a cancelled run and a call a flow test's recording lacks, which end the step.
#[allow(clippy::too_many_arguments)] // where the call is in its step, and the step's approvals
pub(crate) async fn call_mcp_tool(
    env: &dyn StepEnv,
    node_id: &str,
    visit: u64,
    round: usize,
    tool: &McpTool,
    call: &ToolCall,
    approvals: &ToolApprovals,
) -> Result<ToolStep, StepError> {
    let parsed: Result<Value, _> = if call.arguments.trim().is_empty() {
        Ok(Value::Object(JsonObject::new()))
    } else {
        serde_json::from_str(&call.arguments)
    };
    let announced = |arguments: &Value| {
        json!({
            "server": tool.server,
            "tool": tool.tool,
            "arguments": arguments,
            "callId": call.id,
        })
    };
    let arguments = match parsed {
        Ok(Value::Object(arguments)) => arguments,
        Ok(other) => {
            return Ok(ToolStep::Reply(refused(
                env,
                node_id,
                tool,
                call,
                &announced(&other),
                "the arguments must be a JSON object",
            )));
        }
        Err(error) => {
            let given = Value::String(call.arguments.clone());
            return Ok(ToolStep::Reply(refused(
                env,
                node_id,
                tool,
                call,
                &announced(&given),
                &format!("the arguments are not JSON ({error})"),
            )));
        }
    };
    let mut arguments = arguments;
    // The same key on every run of the step: the model's answers (and their call ids) come back
    // from the record.
    let key = format!("{node_id}/{visit}/{}/{}", round + 1, call.id);
    let named = format!("{}/{}", tool.server, tool.tool);
    if approvals.stops_before_tools_of.as_deref() == Some(node_id) {
        let stop = format!("stop:{key}");
        match approvals.answer(&stop) {
            None => {
                let message = format!(
                    "breakpoint before the tool call `{named}` of `{node_id}`: its arguments are {}",
                    Value::Object(arguments.clone())
                );
                return Ok(ToolStep::Wait(ChildPause {
                    path: named,
                    message,
                    fields: Vec::new(),
                    quorum: Box::default(),
                    since: None,
                    breakpoint: true,
                    deadline: None,
                    input: Value::Object(arguments),
                    state: approvals.state(&stop),
                }));
            }
            Some(answer) => {
                if let Some(Value::Object(set)) = answer.get("set") {
                    env.emit(
                        node_id,
                        EventType::LogicCheck,
                        format!(
                            "the arguments of `{named}` replaced at the breakpoint by the person: {}",
                            Value::Object(set.clone())
                        ),
                        None,
                    );
                    arguments = set.clone();
                }
            }
        }
    }
    if tool.approve {
        match approvals.decision(&key) {
            None => {
                // The run announces the wait (`wait_input`) once the pause is stored.
                let message = format!("Allow `{named}` with {}?", Value::Object(arguments.clone()));
                return Ok(ToolStep::Wait(ChildPause {
                    path: named,
                    message,
                    fields: tool_form(&tool.spec.parameters),
                    quorum: Box::default(),
                    since: None,
                    breakpoint: false,
                    deadline: None,
                    input: Value::Object(arguments),
                    state: approvals.state(&key),
                }));
            }
            Some(decision) => {
                env.emit(
                    node_id,
                    EventType::InputReceived,
                    decision.event_content().to_string(),
                    None,
                );
                if decision.decision != DecisionChoice::Approve {
                    let by = decision
                        .by
                        .as_deref()
                        .map(|by| format!(" by {by}"))
                        .unwrap_or_default();
                    let note = if decision.note.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", decision.note.trim())
                    };
                    let why = format!("a person refused this call{by}{note}");
                    return Ok(ToolStep::Reply(refused(
                        env,
                        node_id,
                        tool,
                        call,
                        &announced(&Value::Object(arguments)),
                        &why,
                    )));
                }
                arguments = edited(arguments, &decision, &tool.spec.parameters);
            }
        }
    }
    env.emit(
        node_id,
        EventType::ToolCall,
        announced(&Value::Object(arguments.clone())).to_string(),
        None,
    );
    let started = Instant::now();
    let outcome = env
        .call_tool(ToolCallRequest {
            node_id,
            visit,
            server: &tool.server,
            tool: &tool.tool,
            arguments: &arguments,
        })
        .await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Ok(outcome) => {
            let content = outcome.text();
            let result = json!({
                "callId": call.id,
                "content": cut(&content, EVENT_CONTENT_LIMIT),
                "isError": outcome.is_error,
                "durationMs": duration_ms,
            });
            env.emit(node_id, EventType::ToolResult, result.to_string(), None);
            Ok(ToolStep::Reply(ToolReply {
                content,
                is_error: outcome.is_error,
            }))
        }
        Err(error) if error.kind == McpErrorKind::Cancelled => Err(StepError::cancelled()),
        // A flow test offline (or a replay) without this call's result: the case must be
        // recorded again, which the model cannot help with.
        Err(error) if error.kind == McpErrorKind::NotRecorded => {
            Err(StepError::new(StepErrorKind::Tool, error.to_string()))
        }
        Err(error) => {
            let failed = json!({
                "server": tool.server,
                "tool": tool.tool,
                "callId": call.id,
                "error": error.to_string(),
                "durationMs": duration_ms,
            });
            env.emit(node_id, EventType::ToolError, failed.to_string(), None);
            Ok(ToolStep::Reply(ToolReply {
                content: format!("error: {error}"),
                is_error: true,
            }))
        }
    }
}

/// A call refused before it reached the server (arguments that are not an object).
fn refused(
    env: &dyn StepEnv,
    node_id: &str,
    tool: &McpTool,
    call: &ToolCall,
    announced: &Value,
    why: &str,
) -> ToolReply {
    env.emit(node_id, EventType::ToolCall, announced.to_string(), None);
    let failed = json!({
        "server": tool.server,
        "tool": tool.tool,
        "callId": call.id,
        "error": format!("`{}/{}`: {why}", tool.server, tool.tool),
        "durationMs": 0,
    });
    env.emit(node_id, EventType::ToolError, failed.to_string(), None);
    ToolReply {
        content: format!("error: {why}"),
        is_error: true,
    }
}

/// `text` cut to at most `limit` bytes (on a character boundary), marked when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_function_names_providers_accept() {
        assert_eq!(
            exposed_name("files", "read_text_file"),
            "files__read_text_file"
        );
        assert_eq!(exposed_name("t", "create.issue v2"), "t__create_issue_v2");
        assert_eq!(exposed_name("s", &"x".repeat(100)).len(), 64);
        assert_eq!(split_entry("files/read"), ("files", Some("read")));
        assert_eq!(split_entry("files"), ("files", None));
    }

    #[test]
    fn event_content_is_cut_on_a_character_boundary() {
        let text = "é".repeat(10);
        let shown = cut(&text, 5);
        assert!(shown.starts_with("éé…"), "{shown}");
        assert!(shown.ends_with("(20 bytes in all)"));
        assert_eq!(cut("short", 64), "short");
    }
}
