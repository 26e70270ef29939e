//! OpenAI Chat Completions client (docs/providers.md), also used for Ollama and any other server
//! that
//! speaks the same wire format.
//!
//! One call is `POST {base_url}/chat/completions` with `stream: true`. The answer is read as
//! server-sent events (or as a plain `chat.completion` when the server ignores `stream`), with
//! text pieces passed on as they arrive. Retries, timeouts, cancellation and the size bound
//! are the shared ones of [`super::http`].

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::http::{
    Exchange, Failure, SseEvent, StreamDecoder, WireFormat, excerpt, invalid_json, malformed,
    reported_error, secret_header,
};
use super::{
    ChatMessage, ChatRequest, ChatResponse, LazyClient, ProviderError, ProviderSettings, Secret,
    ToolCall, Usage, WebSource, add_source,
};

/// A client for the OpenAI Chat Completions wire format. Cheap to clone: the HTTP connection
/// pool is shared.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: LazyClient,
    settings: ProviderSettings,
}

impl OpenAiClient {
    /// A client using `http` (which carries the connect and read timeouts) and the retry
    /// policy of `settings`.
    pub fn new(http: LazyClient, settings: ProviderSettings) -> OpenAiClient {
        OpenAiClient { http, settings }
    }

    /// Sends `request` to `{base_url}/chat/completions` and reads the streamed answer, passing
    /// each text piece to `on_delta`. `provider` names the provider in errors; `key`, when
    /// present, is sent as a bearer token.
    pub async fn complete(
        &self,
        provider: &'static str,
        base_url: &str,
        key: Option<&Secret>,
        request: &ChatRequest,
        on_delta: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let base_url = base_url.trim_end_matches('/');
        let mut headers = HeaderMap::new();
        if let Some(value) = key.and_then(|key| secret_header(&format!("Bearer {}", key.expose())))
        {
            headers.insert(AUTHORIZATION, value);
        }
        let exchange = Exchange {
            http: self.http.get(),
            requests: self.http.requests(),
            settings: &self.settings,
            provider,
            base_url,
            url: format!("{base_url}/chat/completions"),
            headers,
            body: request_body(request),
            cancel,
        };
        exchange.run(&OpenAiFormat { provider, on_delta }).await
    }
}

/// Reads Chat Completions answers.
struct OpenAiFormat<'a> {
    provider: &'static str,
    on_delta: &'a (dyn Fn(&str) + Send + Sync),
}

impl<'a> WireFormat for OpenAiFormat<'a> {
    type Stream = StreamState<'a>;

    fn stream(&self) -> StreamState<'a> {
        StreamState {
            provider: self.provider,
            on_delta: self.on_delta,
            content: String::new(),
            calls: Vec::new(),
            usage: None,
            sources: Vec::new(),
            finish_reason: None,
            model: None,
        }
    }

    /// A plain `chat.completion` body.
    fn parse_json(&self, body: &[u8]) -> Result<ChatResponse, ProviderError> {
        let completion: Completion = serde_json::from_slice(body).map_err(|error| {
            malformed(
                self.provider,
                format!(
                    "the answer is not a valid chat completion ({error}): {}",
                    excerpt(&String::from_utf8_lossy(body))
                ),
            )
        })?;
        if let Some(error) = completion.error.filter(|error| !error.is_null()) {
            return Err(reported_error(self.provider, &error, None));
        }
        let usage = completion.usage.map(WireUsage::into_usage);
        let Some(choice) = completion.choices.into_iter().next() else {
            return Err(malformed(self.provider, "the answer has no choices"));
        };
        let finish_reason = choice.finish_reason;
        let message = choice.message.unwrap_or_default();
        let content = message
            .content
            .as_ref()
            .map(content_text)
            .unwrap_or_default();
        if !content.is_empty() {
            (self.on_delta)(&content);
        }
        let tool_calls = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(index, call)| {
                let function = call.function.unwrap_or_default();
                let mut arguments = String::new();
                if let Some(value) = &function.arguments {
                    push_arguments(&mut arguments, value);
                }
                finish_call(index, call.id, function.name, arguments)
            })
            .collect();
        let mut sources = Vec::new();
        collect_citations(&mut sources, message.annotations.as_deref());
        Ok(ChatResponse {
            content,
            tool_calls,
            usage,
            sources,
            response_model: completion.model,
            finish_reason,
        })
    }
}

/// Adds the pages of `url_citation` annotations to `sources`.
fn collect_citations(sources: &mut Vec<WebSource>, annotations: Option<&[Value]>) {
    for annotation in annotations.unwrap_or_default() {
        // The citation's fields are nested under `url_citation`; some servers put them flat.
        let citation = annotation.get("url_citation").unwrap_or(annotation);
        if let Some(url) = citation.get("url").and_then(Value::as_str) {
            add_source(sources, url, citation.get("title").and_then(Value::as_str));
        }
    }
}

/// The JSON body of a streamed chat completion request.
fn request_body(request: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(wire_message).collect()),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(effort) = &request.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if request.web_search {
        body.insert("web_search_options".into(), json!({}));
    }
    if let Some(schema) = &request.response_schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": { "name": "output", "schema": schema, "strict": false },
            }),
        );
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    Value::Object(body)
}

fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({ "role": "system", "content": content }),
        ChatMessage::User { content } => json!({ "role": "user", "content": content }),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } if !tool_calls.is_empty() => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            // A message that only calls tools has no content, as the API itself answers it.
            let content = if content.is_empty() {
                Value::Null
            } else {
                json!(content)
            };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        ChatMessage::Assistant { content, .. } => {
            json!({ "role": "assistant", "content": content })
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
            ..
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

/// A message's content: a string, or the concatenated text of content parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

/// Appends tool-call arguments as sent: a JSON string fragment, or (some servers) an object.
fn push_arguments(arguments: &mut String, value: &Value) {
    match value {
        Value::String(fragment) => arguments.push_str(fragment),
        Value::Null => {}
        other => *arguments = other.to_string(),
    }
}

/// A tool call as returned: calls without an id get one, calls without arguments get `{}`.
fn finish_call(
    index: usize,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
) -> ToolCall {
    ToolCall {
        id: id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("call_{index}")),
        name: name.unwrap_or_default(),
        arguments: if arguments.trim().is_empty() {
            "{}".into()
        } else {
            arguments
        },
    }
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
        }
    }
}

/// A non-streamed `chat.completion`.
#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<CompletionChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    #[serde(default)]
    message: Option<CompletionMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct CompletionMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    annotations: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// One `chat.completion.chunk` of a stream.
#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<StreamChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Option<StreamDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct StreamDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    annotations: Option<Vec<Value>>,
}

/// A tool call being assembled from stream fragments.
struct PartialCall {
    index: usize,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// What a stream has said so far.
struct StreamState<'a> {
    provider: &'static str,
    on_delta: &'a (dyn Fn(&str) + Send + Sync),
    content: String,
    calls: Vec<PartialCall>,
    usage: Option<Usage>,
    sources: Vec<WebSource>,
    finish_reason: Option<String>,
    /// The model the chunks name.
    model: Option<String>,
}

impl StreamDecoder for StreamState<'_> {
    /// Takes in one event's data; true once the stream says `[DONE]`.
    fn event(&mut self, event: &SseEvent, at_end: bool) -> Result<bool, Failure> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: StreamChunk = serde_json::from_str(data)
            .map_err(|error| invalid_json(self.provider, data, &error, at_end))?;
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            return Err(reported_error(self.provider, &error, None).into());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into_usage());
        }
        if self.model.is_none() {
            self.model = chunk.model.filter(|model| !model.is_empty());
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(false);
        };
        if let Some(delta) = choice.delta {
            if let Some(piece) = delta.content.filter(|piece| !piece.is_empty()) {
                (self.on_delta)(&piece);
                self.content.push_str(&piece);
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                self.tool_call_fragment(fragment);
            }
            collect_citations(&mut self.sources, delta.annotations.as_deref());
        }
        if let Some(reason) = choice.finish_reason.filter(|reason| !reason.is_empty()) {
            self.finish_reason = Some(reason);
        }
        Ok(false)
    }

    /// A finish reason makes the answer complete even without its usage or `[DONE]`.
    fn is_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    fn finish(mut self) -> ChatResponse {
        self.calls.sort_by_key(|call| call.index);
        ChatResponse {
            content: self.content,
            tool_calls: self
                .calls
                .into_iter()
                .map(|call| finish_call(call.index, call.id, call.name, call.arguments))
                .collect(),
            usage: self.usage,
            sources: self.sources,
            response_model: self.model,
            finish_reason: self.finish_reason,
        }
    }
}

impl StreamState<'_> {
    /// Adds a fragment to the call with the same `index` (a fragment without an index starts
    /// a new call when it has an id, else continues the last one).
    fn tool_call_fragment(&mut self, fragment: WireToolCall) {
        let index = fragment.index.unwrap_or_else(|| match self.calls.last() {
            Some(last) if fragment.id.is_none() => last.index,
            Some(_) => self.calls.iter().map(|c| c.index).max().unwrap_or(0) + 1,
            None => 0,
        });
        let position = match self.calls.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: None,
                    name: None,
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let Some(call) = self.calls.get_mut(position) else {
            return;
        };
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = Some(id);
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                match &mut call.name {
                    // Some servers stream the name in pieces too.
                    Some(existing) if existing != &name => existing.push_str(&name),
                    Some(_) => {}
                    None => call.name = Some(name),
                }
            }
            if let Some(arguments) = &function.arguments {
                push_arguments(&mut call.arguments, arguments);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_body_has_the_wire_shape() {
        let request = ChatRequest {
            model: "gpt-x".into(),
            messages: vec![
                ChatMessage::System {
                    content: "be brief".into(),
                },
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "add".into(),
                        arguments: "{\"a\":1}".into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "c1".into(),
                    content: "2".into(),
                    is_error: false,
                },
            ],
            tools: Vec::new(),
            reasoning_effort: None,
            temperature: Some(0.5),
            web_search: false,
            response_schema: None,
        };
        let body = request_body(&request);
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_calls"][0]["type"], "function");
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["stream_options"]["include_usage"], true);
        for absent in [
            "tools",
            "reasoning_effort",
            "web_search_options",
            "response_format",
        ] {
            assert!(body.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn citations_are_collected_once_per_url() {
        let mut sources = Vec::new();
        let annotations = vec![
            json!({ "type": "url_citation", "url_citation": { "url": "https://a.example", "title": "A", "start_index": 0, "end_index": 3 } }),
            json!({ "type": "url_citation", "url_citation": { "url": "https://a.example", "start_index": 4, "end_index": 5 } }),
            json!({ "type": "url_citation", "url": "https://b.example" }),
            json!({ "type": "file_citation" }),
        ];
        collect_citations(&mut sources, Some(&annotations));
        assert_eq!(
            sources,
            vec![
                WebSource {
                    url: "https://a.example".into(),
                    title: Some("A".into()),
                },
                WebSource {
                    url: "https://b.example".into(),
                    title: None,
                },
            ]
        );
    }
}
