//! Anthropic Messages API client (docs/providers.md).
//!
//! One call is `POST {base_url}/v1/messages` with `stream: true`; the answer is read as
//! server-sent events (`message_start`, `content_block_*`, `message_delta`, `message_stop`,
//! `ping`, `error`), or as a plain `message` when the server ignores `stream`. Retries,
//! timeouts, cancellation and the size bound are the shared ones of [`super::http`].
//!
//! Mapping to the provider-neutral types:
//! - system messages become the top-level `system`; tool results become `tool_result` blocks
//!   of a user message; consecutive messages of one role are merged, as the API requires;
//! - `reasoning_effort` becomes extended thinking with a token budget (and no temperature);
//! - `web_search` adds Anthropic's server-side web search tool; its results become sources;
//! - `response_schema` becomes a tool whose input is the answer (the API has no JSON mode):
//!   its input is returned as the content, as JSON text.
//!
//! With thinking on, a tool loop must send the model's thinking blocks back with the tool
//! calls they led to. The neutral messages have no room for them, so the client keeps them,
//! keyed by the id of the first tool call of their answer, and adds them back when that
//! call is sent again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::http::{
    Exchange, Failure, SseEvent, StreamDecoder, WireFormat, excerpt, invalid_json,
    is_retryable_status, malformed, reported_error, secret_header,
};
use super::{
    ChatMessage, ChatRequest, ChatResponse, LazyClient, ProviderError, ProviderSettings, Secret,
    ToolCall, Usage, WebSource, add_source,
};

const PROVIDER: &str = "anthropic";
/// The API version every request names.
pub(crate) const API_VERSION: &str = "2023-06-01";
/// `max_tokens` without thinking, and the room left for the answer above a thinking budget.
const ANSWER_TOKENS: u64 = 4096;
/// Searches one answer may make with the web search tool.
const MAX_WEB_SEARCHES: u64 = 5;
/// The name of the tool that carries a structured answer (made unique among the tools).
const OUTPUT_TOOL: &str = "output";
/// Answers whose thinking blocks are kept for their tool loop.
const KEPT_THINKING: usize = 256;

/// The thinking budget of a reasoning effort (`low`, `medium`, `high`).
fn thinking_budget(effort: &str) -> Option<u64> {
    match effort.trim().to_ascii_lowercase().as_str() {
        "low" => Some(1024),
        "medium" => Some(4096),
        "high" => Some(16384),
        _ => None,
    }
}

/// A client for the Anthropic Messages API. Cheap to clone: the HTTP connection pool and the
/// kept thinking blocks are shared.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    http: LazyClient,
    settings: ProviderSettings,
    thinking: ThinkingStore,
}

impl AnthropicClient {
    /// A client using `http` (which carries the connect and read timeouts) and the retry
    /// policy of `settings`.
    pub fn new(http: LazyClient, settings: ProviderSettings) -> AnthropicClient {
        AnthropicClient {
            http,
            settings,
            thinking: ThinkingStore::default(),
        }
    }

    /// Sends `request` to `{base_url}/v1/messages` (or `{base_url}/messages` when the base
    /// already ends in `/v1`) and reads the streamed answer, passing each text piece to
    /// `on_delta`. `key`, when present, is sent as `x-api-key`.
    pub async fn complete(
        &self,
        base_url: &str,
        key: Option<&Secret>,
        request: &ChatRequest,
        on_delta: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let base_url = base_url.trim_end_matches('/');
        let url = if base_url.ends_with("/v1") {
            format!("{base_url}/messages")
        } else {
            format!("{base_url}/v1/messages")
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(value) = key.and_then(|key| secret_header(key.expose())) {
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        let wire = WireRequest::new(request, &self.thinking);
        let format = AnthropicFormat {
            on_delta,
            output_tool: wire.output_tool.as_deref(),
            thinking: &self.thinking,
        };
        let exchange = Exchange {
            http: self.http.get(),
            requests: self.http.requests(),
            settings: &self.settings,
            provider: PROVIDER,
            base_url,
            url,
            headers,
            body: wire.body,
            cancel,
        };
        exchange.run(&format).await
    }
}

/// Thinking blocks of recent answers that called tools, keyed by their first tool call's id.
#[derive(Clone, Default)]
struct ThinkingStore(Arc<Mutex<KeptThinking>>);

#[derive(Default)]
struct KeptThinking {
    blocks: HashMap<String, Vec<Value>>,
    /// Keys, oldest first, for eviction.
    order: VecDeque<String>,
}

impl std::fmt::Debug for ThinkingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThinkingStore")
    }
}

impl ThinkingStore {
    fn get(&self, call_id: &str) -> Option<Vec<Value>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.blocks.get(call_id).cloned()
    }

    fn keep(&self, call_id: String, blocks: Vec<Value>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.blocks.insert(call_id.clone(), blocks).is_none() {
            kept.order.push_back(call_id);
        }
        while kept.order.len() > KEPT_THINKING {
            if let Some(oldest) = kept.order.pop_front() {
                kept.blocks.remove(&oldest);
            }
        }
    }
}

/// The JSON body of a request, and the name of the structured-output tool when there is one.
struct WireRequest {
    body: Value,
    output_tool: Option<String>,
}

impl WireRequest {
    fn new(request: &ChatRequest, kept: &ThinkingStore) -> WireRequest {
        let mut budget = request
            .reasoning_effort
            .as_deref()
            .and_then(thinking_budget);
        // A tool loop whose last answer's thinking is not at hand (e.g. it was answered without
        // thinking) must go on without thinking: the API wants the same setting all along.
        if budget.is_some()
            && let Some(ChatMessage::Assistant { tool_calls, .. }) = request
                .messages
                .iter()
                .rev()
                .find(|message| matches!(message, ChatMessage::Assistant { .. }))
            && let Some(first) = tool_calls.first()
            && kept.get(&first.id).is_none()
        {
            tracing::debug!("continuing a tool loop without its thinking: thinking is off");
            budget = None;
        }

        let mut body = Map::new();
        body.insert("model".into(), json!(request.model));
        body.insert(
            "max_tokens".into(),
            json!(budget.map_or(ANSWER_TOKENS, |budget| budget + ANSWER_TOKENS)),
        );
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                ChatMessage::System { content } if !content.trim().is_empty() => {
                    Some(content.as_str())
                }
                _ => None,
            })
            .collect();
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        let thinking = budget.is_some().then_some(kept);
        body.insert(
            "messages".into(),
            wire_messages(&request.messages, thinking),
        );

        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        let output_tool = request.response_schema.as_ref().map(|schema| {
            let name = unique_tool_name(request);
            tools.push(json!({
                "name": name,
                "description": "Answer with the structured output",
                "input_schema": schema,
            }));
            name
        });
        if request.web_search {
            tools.push(json!({
                "type": "web_search_20250305",
                "name": "web_search",
                "max_uses": MAX_WEB_SEARCHES,
            }));
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        // Forcing the output tool would keep the model from its other tools and from
        // searching, and the API refuses it with thinking; then the model picks.
        if let Some(name) = &output_tool
            && request.tools.is_empty()
            && !request.web_search
            && budget.is_none()
        {
            body.insert(
                "tool_choice".into(),
                json!({ "type": "tool", "name": name }),
            );
        }
        if let Some(budget) = budget {
            body.insert(
                "thinking".into(),
                json!({ "type": "enabled", "budget_tokens": budget }),
            );
        } else if let Some(temperature) = request.temperature {
            // The API takes 0–1.
            body.insert("temperature".into(), json!(temperature.clamp(0.0, 1.0)));
        }
        body.insert("stream".into(), Value::Bool(true));
        WireRequest {
            body: Value::Object(body),
            output_tool,
        }
    }
}

/// `output`, or `output_2`, `output_3`, … when a tool of the request already has that name.
fn unique_tool_name(request: &ChatRequest) -> String {
    let taken = |name: &str| request.tools.iter().any(|tool| tool.name == name);
    let mut name = OUTPUT_TOOL.to_string();
    let mut n = 1;
    while taken(&name) {
        n += 1;
        name = format!("{OUTPUT_TOOL}_{n}");
    }
    name
}

/// The `messages` array: user and assistant messages of content blocks, tool results as
/// user messages, consecutive messages of one role merged. A message that is a single text
/// is sent as a string. `thinking` (when thinking is on) gives back kept thinking blocks.
fn wire_messages(messages: &[ChatMessage], thinking: Option<&ThinkingStore>) -> Value {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            ChatMessage::System { .. } => continue,
            ChatMessage::User { content } => ("user", text_block(content).into_iter().collect()),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = tool_calls
                    .first()
                    .zip(thinking)
                    .and_then(|(first, kept)| kept.get(&first.id))
                    .unwrap_or_default();
                blocks.extend(text_block(content));
                blocks.extend(tool_calls.iter().map(tool_use_block));
                ("assistant", blocks)
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut block = json!({ "type": "tool_result", "tool_use_id": tool_call_id });
                if !content.is_empty() {
                    block["content"] = json!(content);
                }
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        // The API refuses empty messages.
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, previous)) if *last == role => previous.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    Value::Array(
        turns
            .into_iter()
            .map(|(role, blocks)| {
                let content = match blocks.as_slice() {
                    [only] if only["type"] == "text" => only["text"].clone(),
                    _ => Value::Array(blocks),
                };
                json!({ "role": role, "content": content })
            })
            .collect(),
    )
}

/// A text block, unless the text is empty (the API refuses empty text blocks).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

/// A tool call as a `tool_use` block: its arguments parsed (the API wants an object).
fn tool_use_block(call: &ToolCall) -> Value {
    let input = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": input })
}

/// The HTTP status an error type of the API stands for.
fn error_status(kind: &str) -> Option<u16> {
    match kind {
        "invalid_request_error" => Some(400),
        "authentication_error" => Some(401),
        "billing_error" => Some(402),
        "permission_error" => Some(403),
        "not_found_error" => Some(404),
        "request_too_large" => Some(413),
        "rate_limit_error" => Some(429),
        "api_error" => Some(500),
        "timeout_error" => Some(504),
        "overloaded_error" => Some(529),
        _ => None,
    }
}

/// The error of an `{"type": "error", "error": {…}}` event or body.
fn api_error(value: &Value) -> ProviderError {
    let error = value.get("error").unwrap_or(value);
    let status = error
        .get("type")
        .and_then(Value::as_str)
        .and_then(error_status);
    reported_error(PROVIDER, error, status)
}

/// Reads Messages API answers.
struct AnthropicFormat<'a> {
    on_delta: &'a (dyn Fn(&str) + Send + Sync),
    output_tool: Option<&'a str>,
    thinking: &'a ThinkingStore,
}

impl<'a> WireFormat for AnthropicFormat<'a> {
    type Stream = Assembler<'a>;

    fn stream(&self) -> Assembler<'a> {
        Assembler {
            on_delta: self.on_delta,
            output_tool: self.output_tool,
            thinking: self.thinking,
            blocks: Vec::new(),
            text: String::new(),
            sources: Vec::new(),
            input_tokens: None,
            output_tokens: None,
            stop_reason: None,
            model: None,
            delivered: false,
        }
    }

    /// A plain `message` body: its blocks are taken in as if each had just been streamed.
    fn parse_json(&self, body: &[u8]) -> Result<ChatResponse, ProviderError> {
        let invalid = |detail: String| {
            malformed(
                PROVIDER,
                format!(
                    "the answer is not a valid message ({detail}): {}",
                    excerpt(&String::from_utf8_lossy(body))
                ),
            )
        };
        let message: Value =
            serde_json::from_slice(body).map_err(|error| invalid(error.to_string()))?;
        if message.get("type").and_then(Value::as_str) == Some("error") {
            return Err(api_error(&message));
        }
        let Some(content) = message.get("content").and_then(Value::as_array) else {
            return Err(invalid("no content".into()));
        };
        let mut assembler = self.stream();
        for (index, block) in content.iter().enumerate() {
            assembler.start_block(index as u64, block);
        }
        if let Some(usage) = message.get("usage") {
            assembler.usage(usage);
        }
        assembler.model_from(Some(&message));
        if let Some(reason) = message.get("stop_reason").and_then(Value::as_str) {
            assembler.stop_reason = Some(reason.to_string());
        }
        Ok(assembler.finish())
    }
}

/// A content block of the answer.
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// The input as streamed (`input_json_delta` fragments).
        json: String,
        /// The input given whole (a non-streamed answer), used when nothing was streamed.
        input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: Value,
    },
    /// Server tool calls, search results, and blocks of kinds unknown here.
    Other,
}

/// Builds the answer from its blocks and events.
struct Assembler<'a> {
    on_delta: &'a (dyn Fn(&str) + Send + Sync),
    output_tool: Option<&'a str>,
    thinking: &'a ThinkingStore,
    /// The blocks by their `index`, in the order they started.
    blocks: Vec<(u64, Block)>,
    text: String,
    sources: Vec<WebSource>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    /// The model `message_start` names.
    model: Option<String>,
    /// Whether any piece was passed on (an answer that began is not asked for again).
    delivered: bool,
}

impl Assembler<'_> {
    fn deliver(&mut self, piece: &str) {
        if !piece.is_empty() {
            (self.on_delta)(piece);
            self.delivered = true;
        }
    }

    fn start_block(&mut self, index: u64, block: &Value) {
        let text = |field: &str| {
            block
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let parsed = match kind {
            "text" => {
                let piece = text("text");
                self.deliver(&piece);
                self.text.push_str(&piece);
                for citation in block
                    .get("citations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.citation(citation);
                }
                Block::Text
            }
            "tool_use" => Block::ToolUse {
                id: text("id"),
                name: text("name"),
                json: String::new(),
                input: block.get("input").cloned().unwrap_or(Value::Null),
            },
            "thinking" => Block::Thinking {
                thinking: text("thinking"),
                signature: text("signature"),
            },
            "redacted_thinking" => Block::RedactedThinking {
                data: block.get("data").cloned().unwrap_or(Value::Null),
            },
            "web_search_tool_result" => {
                // An error result has an object here instead of a list.
                for result in block
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.citation(result);
                }
                Block::Other
            }
            _ => Block::Other,
        };
        self.blocks.push((index, parsed));
    }

    /// A search result or a citation of one: its page is a source.
    fn citation(&mut self, citation: &Value) {
        if let Some(url) = citation.get("url").and_then(Value::as_str) {
            add_source(
                &mut self.sources,
                url,
                citation.get("title").and_then(Value::as_str),
            );
        }
    }

    fn block_delta(&mut self, index: u64, delta: &Value) {
        let field = |name: &str| delta.get(name).and_then(Value::as_str).unwrap_or_default();
        match delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "text_delta" => {
                let piece = field("text");
                self.deliver(piece);
                self.text.push_str(piece);
            }
            "citations_delta" => {
                if let Some(citation) = delta.get("citation") {
                    self.citation(citation);
                }
            }
            "input_json_delta" => {
                let piece = field("partial_json");
                let output_tool = self.output_tool;
                let mut is_output = false;
                if let Some(Block::ToolUse { name, json, .. }) = self.block_mut(index) {
                    json.push_str(piece);
                    is_output = output_tool == Some(name.as_str());
                }
                // A structured answer streams as its JSON text, as it does elsewhere.
                if is_output {
                    self.deliver(piece);
                }
            }
            "thinking_delta" => {
                if let Some(Block::Thinking { thinking, .. }) = self.block_mut(index) {
                    thinking.push_str(field("thinking"));
                }
            }
            "signature_delta" => {
                if let Some(Block::Thinking { signature, .. }) = self.block_mut(index) {
                    signature.push_str(field("signature"));
                }
            }
            _ => {}
        }
    }

    fn block_mut(&mut self, index: u64) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, block)| block)
    }

    /// The model a `message` names.
    fn model_from(&mut self, message: Option<&Value>) {
        if let Some(model) = message
            .and_then(|message| message.get("model"))
            .and_then(Value::as_str)
        {
            self.model = Some(model.to_string());
        }
    }

    /// Token counts: input (with cache reads and writes) and output. Later counts replace
    /// earlier ones (the API's counts are cumulative).
    fn usage(&mut self, usage: &Value) {
        let count = |field: &str| usage.get(field).and_then(Value::as_u64);
        let input = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|field| count(field))
        .reduce(|a, b| a + b);
        if let Some(input) = input {
            self.input_tokens = Some(input);
        }
        if let Some(output) = count("output_tokens") {
            self.output_tokens = Some(output);
        }
    }
}

impl StreamDecoder for Assembler<'_> {
    fn event(&mut self, event: &SseEvent, at_end: bool) -> Result<bool, Failure> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|error| invalid_json(PROVIDER, data, &error, at_end))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.name.as_str());
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.usage(usage);
                }
                self.model_from(value.get("message"));
            }
            "content_block_start" => {
                if let Some(block) = value.get("content_block") {
                    self.start_block(index, block);
                }
            }
            "content_block_delta" => {
                if let Some(delta) = value.get("delta") {
                    self.block_delta(index, delta);
                }
            }
            "message_delta" => {
                if let Some(reason) = value
                    .pointer("/delta/stop_reason")
                    .and_then(Value::as_str)
                    .filter(|reason| !reason.is_empty())
                {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = value.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let error = api_error(&value);
                // Overloaded before anything arrived: asking again repeats nothing.
                let retryable = !self.delivered
                    && matches!(&error, ProviderError::Http { status, .. } if is_retryable_status(*status));
                return Err(Failure::retry_if(error, retryable));
            }
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(false)
    }

    fn is_finished(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self) -> ChatResponse {
        let usage = (self.input_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
        });
        let mut structured = None;
        let mut tool_calls = Vec::new();
        let mut thinking = Vec::new();
        for (index, block) in self.blocks {
            match block {
                Block::ToolUse {
                    id,
                    name,
                    json,
                    input,
                } => {
                    let arguments = if !json.trim().is_empty() {
                        json
                    } else if input.is_object() {
                        input.to_string()
                    } else {
                        "{}".to_string()
                    };
                    if self.output_tool == Some(name.as_str()) {
                        structured.get_or_insert(arguments);
                    } else {
                        let id = if id.is_empty() {
                            format!("toolu_{index}")
                        } else {
                            id
                        };
                        tool_calls.push(ToolCall {
                            id,
                            name,
                            arguments,
                        });
                    }
                }
                Block::Thinking {
                    thinking: text,
                    signature,
                } => thinking
                    .push(json!({ "type": "thinking", "thinking": text, "signature": signature })),
                Block::RedactedThinking { data } => {
                    thinking.push(json!({ "type": "redacted_thinking", "data": data }));
                }
                Block::Text | Block::Other => {}
            }
        }
        if let Some(first) = tool_calls.first()
            && !thinking.is_empty()
        {
            self.thinking.keep(first.id.clone(), thinking);
        }
        ChatResponse {
            content: structured.unwrap_or(self.text),
            tool_calls,
            usage,
            sources: self.sources,
            response_model: self.model,
            finish_reason: self.stop_reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest::new("claude-test", messages)
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "add".into(),
            arguments: "{\"a\":1}".into(),
        }
    }

    #[test]
    fn messages_merge_by_role_and_carry_tool_blocks() {
        let messages = vec![
            ChatMessage::System {
                content: "one".into(),
            },
            ChatMessage::User {
                content: "hi".into(),
            },
            ChatMessage::User {
                content: "again".into(),
            },
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![
                    call("t1"),
                    ToolCall {
                        arguments: "not json".into(),
                        ..call("t2")
                    },
                ],
            },
            ChatMessage::Tool {
                tool_call_id: "t1".into(),
                content: "2".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                tool_call_id: "t2".into(),
                content: String::new(),
                is_error: false,
            },
            ChatMessage::System {
                content: "two".into(),
            },
        ];
        let wire = WireRequest::new(&request(messages), &ThinkingStore::default());
        let body = wire.body;
        assert_eq!(body["system"], "one\n\ntwo");
        assert_eq!(
            body["messages"],
            json!([
                { "role": "user", "content": [
                    { "type": "text", "text": "hi" },
                    { "type": "text", "text": "again" },
                ] },
                { "role": "assistant", "content": [
                    { "type": "tool_use", "id": "t1", "name": "add", "input": { "a": 1 } },
                    { "type": "tool_use", "id": "t2", "name": "add", "input": {} },
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "t1", "content": "2" },
                    { "type": "tool_result", "tool_use_id": "t2" },
                ] },
            ])
        );
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["stream"], true);
        assert!(wire.output_tool.is_none());
        for absent in ["tools", "tool_choice", "thinking", "temperature"] {
            assert!(body.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn thinking_is_sent_back_in_its_tool_loop_or_turned_off() {
        let kept = ThinkingStore::default();
        let mut chat = request(vec![
            ChatMessage::User {
                content: "add".into(),
            },
            ChatMessage::Assistant {
                content: "Adding.".into(),
                tool_calls: vec![call("t1")],
            },
            ChatMessage::Tool {
                tool_call_id: "t1".into(),
                content: "2".into(),
                is_error: false,
            },
        ]);
        chat.reasoning_effort = Some("medium".into());
        chat.temperature = Some(0.3);
        let body = WireRequest::new(&chat, &kept).body;
        assert!(
            body.get("thinking").is_none(),
            "nothing kept: thinking is off"
        );
        assert_eq!(body["temperature"], 0.3);

        let block = json!({ "type": "thinking", "thinking": "hmm", "signature": "sig" });
        kept.keep("t1".into(), vec![block.clone()]);
        let body = WireRequest::new(&chat, &kept).body;
        assert_eq!(
            body["thinking"],
            json!({ "type": "enabled", "budget_tokens": 4096 })
        );
        assert_eq!(body["max_tokens"], 8192);
        assert!(body.get("temperature").is_none());
        assert_eq!(body["messages"][1]["content"][0], block);
        assert_eq!(body["messages"][1]["content"][1]["text"], "Adding.");
    }

    #[test]
    fn kept_thinking_is_bounded() {
        let kept = ThinkingStore::default();
        for n in 0..=KEPT_THINKING {
            kept.keep(format!("t{n}"), vec![json!(n)]);
        }
        assert!(kept.get("t0").is_none());
        assert_eq!(
            kept.get(&format!("t{KEPT_THINKING}")),
            Some(vec![json!(KEPT_THINKING)])
        );
    }

    #[test]
    fn the_output_tool_gets_a_free_name_and_is_forced_only_alone() {
        let mut chat = request(vec![ChatMessage::User {
            content: "x".into(),
        }]);
        chat.response_schema = Some(json!({ "type": "object" }));
        let wire = WireRequest::new(&chat, &ThinkingStore::default());
        assert_eq!(wire.output_tool.as_deref(), Some("output"));
        assert_eq!(
            wire.body["tool_choice"],
            json!({ "type": "tool", "name": "output" })
        );

        chat.tools = vec![ToolSpec {
            name: "output".into(),
            description: "a subagent".into(),
            parameters: json!({ "type": "object" }),
        }];
        let wire = WireRequest::new(&chat, &ThinkingStore::default());
        assert_eq!(wire.output_tool.as_deref(), Some("output_2"));
        assert!(wire.body.get("tool_choice").is_none());
        assert_eq!(wire.body["tools"][1]["name"], "output_2");
    }

    #[test]
    fn error_types_map_to_statuses() {
        let error = api_error(&json!({
            "type": "error",
            "error": { "type": "overloaded_error", "message": "Overloaded" },
        }));
        assert_eq!(
            error,
            ProviderError::Http {
                provider: PROVIDER,
                status: 529,
                message: "Overloaded".into(),
            }
        );
        let error = api_error(
            &json!({ "type": "error", "error": { "type": "new_kind", "message": "odd" } }),
        );
        assert!(
            matches!(error, ProviderError::Malformed { .. }),
            "{error:?}"
        );
    }
}
