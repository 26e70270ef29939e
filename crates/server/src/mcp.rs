//! Flows as MCP tools (docs/tools.md#flows-as-tools): each flow of a folder is a tool an MCP
//! client can call (`weft mcp` over stdio). The tool's name is the file's stem, its description
//! the flow's `description`, its input the start node's `inputSchema` or `{input: string}`. A
//! call runs the flow to its end, telling the client each finished step as progress, and
//! returns the result (structured when JSON). A run that pauses for a person (an approval, an
//! agent's tool approval) is asked of the client through MCP elicitation, with the approval's
//! message and form, when the client can answer; otherwise the call returns "paused: run ID
//! waits at NODE" and the run waits in the inbox like any other.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, JsonObject, ListToolsResult, PaginatedRequestParams, PingRequest,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use weft_api::{StartRequest, Weft, check_start};
use weft_event::{EventType, RunEvent, RunStatus};
use weft_flow::{Flow, flow_in_dir};
use weft_nodes::check_for_run;
use weft_nodes::decision::{Decision, FormFieldKind};

/// The flows of one folder, served as MCP tools.
#[derive(Clone)]
pub struct FlowTools {
    weft: Weft,
    flows_dir: PathBuf,
}

impl FlowTools {
    pub fn new(weft: Weft, flows_dir: PathBuf) -> FlowTools {
        FlowTools { weft, flows_dir }
    }

    /// Every flow of the folder that loads, as a tool, in name order.
    pub fn tools(&self) -> Vec<Tool> {
        weft_flow::flow_files(&self.flows_dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|(name, _)| valid_tool_name(name))
            .filter_map(|(name, path)| Some(tool_of(&name, &Flow::load(&path).ok()?)))
            .collect()
    }

    /// Runs flow `name` with `arguments`, sending progress to `context` as steps end.
    async fn run(
        &self,
        name: &str,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = flow_in_dir(&self.flows_dir, name).map_err(|error| {
            ErrorData::invalid_params(format!("no flow `{name}`: {error}"), None)
        })?;
        if !path.is_file() {
            return Err(ErrorData::invalid_params(
                format!("no flow `{name}` in the flows folder"),
                None,
            ));
        }
        let flow = Flow::load(&path).map_err(|error| failed(error.to_string()))?;
        let input = match input_of(&flow, arguments) {
            Ok(input) => input,
            Err(problem) => return Ok(error_result(problem)),
        };
        let checked = match check_for_run(flow, Some(&path), self.weft.engine().llm().settings()) {
            Ok(checked) => checked,
            Err(problems) => return Ok(error_result(crate::invalid_flow(name, &problems))),
        };
        let (on_event, progress) = progress_of(context).unzip();
        let request = StartRequest {
            input: Some(input),
            flow_path: Some(path),
            on_event,
            cancel: context.ct.clone(),
            trigger: Some(weft_store::Trigger::of(weft_store::TriggerKind::Mcp)),
            ..StartRequest::default()
        };
        check_start(checked.flow(), &request).map_err(|error| failed(error.to_string()))?;
        let handle = self
            .weft
            .start(checked, request)
            .await
            .map_err(|error| failed(error.to_string()))?;
        let run_id = handle.run_id.clone();
        let mut outcome = handle
            .outcome()
            .await
            .map_err(|error| failed(error.to_string()))?;
        // The last progress goes before the result (a client forgets a call's progress token
        // once it has the result).
        if let Some(progress) = progress {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), progress).await;
        }
        // A pause for a person: asked of the client through elicitation when it can answer;
        // its answer decides, and the run goes on (it may pause again).
        while outcome.status == RunStatus::Paused
            && let Some(waiting) = outcome.waiting.clone()
            && waiting.breakpoint.is_none()
        {
            let Some(decision) = elicit_decision(context, &waiting).await else {
                break;
            };
            let by = context
                .peer
                .peer_info()
                .map(|info| format!("mcp:{}", info.client_info.name));
            let request = weft_api::ResumeOptions {
                cancel: context.ct.clone(),
                ..weft_api::ResumeOptions::default()
            };
            let decided = self
                .weft
                .decide(&run_id, decision, by, weft_api::Channel::Mcp, request)
                .await
                .map_err(|error| failed(error.to_string()))?;
            match decided {
                weft_api::Decided::GoingOn(handle) => {
                    outcome = handle
                        .outcome()
                        .await
                        .map_err(|error| failed(error.to_string()))?;
                }
                // Kept; the approval waits for the other people it needs.
                weft_api::Decided::Counted { .. } => break,
            }
        }
        Ok(match outcome.status {
            RunStatus::Completed => {
                let result = outcome.result.map_or(Value::Null, Arc::unwrap_or_clone);
                let text = match &result {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut answer = CallToolResult::success(vec![ContentBlock::text(text)]);
                if result.is_object() {
                    answer.structured_content = Some(result);
                }
                answer
            }
            RunStatus::Paused => {
                let at = outcome
                    .waiting
                    .map(|waiting| waiting.node_id)
                    .unwrap_or_default();
                CallToolResult::success(vec![ContentBlock::text(format!(
                    "paused: run {run_id} waits at {at}"
                ))])
            }
            status => error_result(format!(
                "run {run_id} {status}: {}",
                outcome.error.unwrap_or_default()
            )),
        })
    }
}

impl ServerHandler for FlowTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.clone();
        let tools = tokio::task::spawn_blocking(move || tools.tools())
            .await
            .map_err(|error| failed(error.to_string()))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        Ok(self.run(&request.name, arguments, &context).await?.into())
    }
}

/// Asks the client for the decision `waiting` needs, through elicitation: approve or reject, a
/// note, and the approval's form. `None` when the client cannot be asked (no elicitation),
/// cancels, or the answer cannot be read: the run then waits in the inbox.
async fn elicit_decision(
    context: &RequestContext<RoleServer>,
    waiting: &weft_api::Waiting,
) -> Option<Decision> {
    let can_elicit = context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some());
    if !can_elicit {
        return None;
    }
    let mut properties = serde_json::Map::new();
    properties.insert(
        "decision".into(),
        json!({"type": "string", "title": "Decision", "enum": ["approve", "reject"]}),
    );
    properties.insert(
        "note".into(),
        json!({"type": "string", "title": "Note", "description": "Why (kept with the decision)"}),
    );
    for field in &waiting.fields {
        let title = if field.label.is_empty() {
            &field.name
        } else {
            &field.label
        };
        let schema = match field.kind {
            FormFieldKind::Number => json!({"type": "number", "title": title}),
            FormFieldKind::Choice => {
                json!({"type": "string", "title": title, "enum": field.options})
            }
            FormFieldKind::Text | FormFieldKind::Draft => json!({"type": "string", "title": title}),
        };
        properties.insert(field.name.clone(), schema);
    }
    let schema = serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": ["decision"],
    }))
    .ok()?;
    let asked = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: waiting.message.clone(),
        requested_schema: schema,
    };
    let answer = context.peer.create_elicitation(asked).await.ok()?;
    let mut content = match (answer.action, answer.content) {
        (ElicitationAction::Accept, Some(Value::Object(content))) => content,
        (ElicitationAction::Decline, _) => {
            return Decision::parse("reject", "declined in the MCP client").ok();
        }
        _ => return None,
    };
    let choice = content.remove("decision")?;
    let note = content
        .remove("note")
        .and_then(|note| note.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut decision = Decision::parse(choice.as_str()?, note).ok()?;
    decision.fields = content
        .into_iter()
        .filter(|(name, _)| waiting.fields.iter().any(|field| &field.name == name))
        .collect();
    Some(decision)
}

/// `/mcp` of `weft serve`: the flows of `flows_dir` over streamable HTTP (each client a session
/// of its own), ended when `stopping` is.
pub fn http_service(
    weft: &Weft,
    flows_dir: &std::path::Path,
    stopping: &tokio_util::sync::CancellationToken,
) -> StreamableHttpService<FlowTools, LocalSessionManager> {
    let tools = FlowTools::new(weft.clone(), flows_dir.to_path_buf());
    // Any `Host`: the server's bearer tokens, not the caller's address, decide who may call (a
    // team's server is reached by its name), and a page rebinding a name has no token.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(stopping.child_token());
    StreamableHttpService::new(move || Ok(tools.clone()), Arc::default(), config)
}

/// Names MCP clients accept: letters, digits, `_`, `-` and `.`, at most 128.
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The default input: one text.
fn text_input() -> Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The run's input."}},
        "required": ["input"],
    })
}

/// The start node's `inputSchema` (an object schema), else `{input: string}`.
fn input_schema(flow: &Flow) -> Value {
    flow.nodes
        .iter()
        .find(|node| node.kind == "start")
        .and_then(|start| start.data.get("inputSchema"))
        .filter(|schema| schema.get("type").and_then(Value::as_str) == Some("object"))
        .cloned()
        .unwrap_or_else(text_input)
}

fn tool_of(name: &str, flow: &Flow) -> Tool {
    let description = flow
        .extra
        .get("description")
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map_or_else(
            || format!("Runs the Weft flow `{}`.", flow.name),
            str::to_string,
        );
    let schema = match input_schema(flow) {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    Tool::new(name.to_string(), description, Arc::new(schema))
}

/// The run's input from a call's arguments: the `input` text for the default schema, else the
/// arguments as JSON, checked against the start node's schema.
fn input_of(flow: &Flow, arguments: JsonObject) -> Result<String, String> {
    let schema = input_schema(flow);
    if schema == text_input() {
        return match arguments.get("input") {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Ok(other.to_string()),
            None => Err("the argument `input` is missing".to_string()),
        };
    }
    let value = Value::Object(arguments);
    let problems = weft_flow::output_schema::OutputSchema::compile(&schema)
        .map(|compiled| compiled.problems(&value))
        .unwrap_or_else(|problem| {
            vec![format!("the flow's inputSchema cannot be used: {problem}")]
        });
    if problems.is_empty() {
        Ok(value.to_string())
    } else {
        Err(format!(
            "the arguments do not match the flow's inputSchema: {}",
            problems.join("; ")
        ))
    }
}

/// Progress to the client as the run's steps end, when it asked for progress: the listener for
/// the run's events, and the task that sends them in order. Events reach the listener as they
/// are stored, which may be after the run's outcome is known: the task ends at the run's last
/// event (`run_end`, or `wait_input` for a pause).
fn progress_of(
    context: &RequestContext<RoleServer>,
) -> Option<(weft_event::EventListener, tokio::task::JoinHandle<()>)> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    // A finished step's node, or `None` for the run's last event.
    let (send, mut steps) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
    let forward = tokio::spawn(async move {
        let mut done = 0_u32;
        while let Some(Some(node)) = steps.recv().await {
            done += 1;
            let progress = ProgressNotificationParam::new(token.clone(), f64::from(done))
                .with_message(format!("{node} done"));
            let _ = peer.notify_progress(progress).await;
        }
        // The SDK may write the call's result before notifications still on their way; a
        // ping goes out behind them, and its answer means the client has read them.
        if done > 0 {
            let ping = ServerRequest::PingRequest(PingRequest::default());
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(2), peer.send_request(ping))
                    .await;
        }
    });
    let listener: weft_event::EventListener = Arc::new(move |event: &RunEvent| {
        if event.scope.is_some() {
            return;
        }
        let _ = match event.kind {
            EventType::StepEnd => send.send(Some(
                event.node_id.as_deref().unwrap_or_default().to_string(),
            )),
            EventType::RunEnd | EventType::WaitInput => send.send(None),
            _ => Ok(()),
        };
    });
    Some((listener, forward))
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn failed(message: String) -> ErrorData {
    ErrorData::internal_error(message, None)
}
