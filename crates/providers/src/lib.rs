//! LLM providers (docs/providers.md): model routing, provider settings and one client per wire
//! format.
//!
//! Agent nodes build a [`ChatRequest`] and call [`LlmClients::complete`]; the provider is
//! chosen from the model name (`openai/…`, `anthropic/…`, `ollama/…`, or a bare name).
//! [`OpenAiClient`] speaks the Chat Completions wire format (OpenAI, Ollama and compatible
//! servers), [`AnthropicClient`] the Messages API; both share the retry, timeout,
//! cancellation and streaming machinery of the private `http` module.
//! Keys live in [`Secret`]s, which never print, and every error message that leaves this
//! module has the key redacted.

mod anthropic;
pub mod backoff;
mod connection;
mod http;
mod lazy_client;
mod openai;

pub use lazy_client::LazyClient;

pub use connection::ConnectionReport;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use anthropic::AnthropicClient;
pub use openai::OpenAiClient;

/// An API key. Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key; empty or blank keys are treated as absent by callers.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The key itself, for building the request header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Where providers live and how to reach them. Built by the host (CLI from the environment,
/// the app from its settings); nodes never read the environment themselves.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub openai_api_key: Option<Secret>,
    /// Base URL of an OpenAI-compatible server, up to and including `/v1`.
    pub openai_base_url: String,
    pub anthropic_api_key: Option<Secret>,
    pub anthropic_base_url: String,
    /// Ollama's address (without `/v1`).
    pub ollama_host: String,
    /// Model for agents whose `model` is empty (`WEFT_DEFAULT_MODEL` headless).
    pub default_model: Option<String>,
    pub connect_timeout: Duration,
    /// Longest silence while reading a response (also the wait for the first byte).
    pub read_timeout: Duration,
    /// Attempts per request, including the first, for 429 and 5xx answers and connection errors.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each time, with jitter, capped at `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Model requests one engine has in flight at most; steps beyond it wait for a turn (their
    /// `timeoutSeconds` runs meanwhile).
    pub max_requests: usize,
}

pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_OLLAMA_HOST: &str = "http://127.0.0.1:11434";

impl Default for ProviderSettings {
    fn default() -> Self {
        ProviderSettings {
            openai_api_key: None,
            openai_base_url: DEFAULT_OPENAI_BASE_URL.into(),
            anthropic_api_key: None,
            anthropic_base_url: DEFAULT_ANTHROPIC_BASE_URL.into(),
            ollama_host: DEFAULT_OLLAMA_HOST.into(),
            default_model: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_requests: lazy_client::DEFAULT_MAX_REQUESTS,
        }
    }
}

impl ProviderSettings {
    /// How long to wait between attempts: doubling from `initial_backoff`, with jitter,
    /// capped at `max_backoff`.
    pub fn backoff(&self) -> crate::backoff::Backoff {
        crate::backoff::Backoff {
            initial: self.initial_backoff,
            max: self.max_backoff,
            jitter: true,
        }
    }

    /// Settings from environment variables (docs/providers.md): `OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`,
    /// `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `OLLAMA_HOST`, `WEFT_DEFAULT_MODEL`.
    /// `lookup` is the environment (a function so tests and hosts can supply their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> ProviderSettings {
        let present = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let openai_base_url = present("OPENAI_BASE_URL")
            .map_or(DEFAULT_OPENAI_BASE_URL.to_string(), |url| {
                url.trim_end_matches('/').to_string()
            });
        let anthropic_base_url = present("ANTHROPIC_BASE_URL")
            .map_or(DEFAULT_ANTHROPIC_BASE_URL.to_string(), |url| {
                url.trim_end_matches('/').to_string()
            });
        let ollama_host = present("OLLAMA_HOST").map_or(DEFAULT_OLLAMA_HOST.to_string(), |host| {
            let host = host.trim_end_matches('/');
            if host.contains("://") {
                host.to_string()
            } else {
                format!("http://{host}")
            }
        });
        ProviderSettings {
            openai_api_key: present("OPENAI_API_KEY").map(Secret::new),
            openai_base_url,
            anthropic_api_key: present("ANTHROPIC_API_KEY").map(Secret::new),
            anthropic_base_url,
            ollama_host,
            default_model: present("WEFT_DEFAULT_MODEL"),
            ..ProviderSettings::default()
        }
    }

    pub fn from_env() -> ProviderSettings {
        ProviderSettings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Whether `provider` can be called: its official endpoint needs a key (a self-hosted
    /// base URL may not). The error names the variable to set.
    pub fn check_configured(&self, provider: ProviderKind) -> Result<(), ProviderError> {
        let missing = match provider {
            ProviderKind::OpenAi => {
                self.openai_api_key.is_none() && self.openai_base_url == DEFAULT_OPENAI_BASE_URL
            }
            ProviderKind::Anthropic => {
                self.anthropic_api_key.is_none()
                    && self.anthropic_base_url == DEFAULT_ANTHROPIC_BASE_URL
            }
            ProviderKind::Ollama => false,
        };
        if !missing {
            return Ok(());
        }
        Err(ProviderError::NotConfigured {
            provider: provider.as_str(),
            variable: match provider {
                ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
                ProviderKind::OpenAi | ProviderKind::Ollama => "OPENAI_API_KEY",
            },
        })
    }

    /// Every key this configuration holds, for redacting text that might echo one.
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        self.openai_api_key
            .iter()
            .chain(self.anthropic_api_key.iter())
    }

    /// `text` with every configured key removed.
    pub fn redact(&self, text: &str) -> String {
        self.secrets()
            .fold(text.to_string(), |text, secret| secret.redact(&text))
    }
}

/// The provider a model name routes to.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
    Ollama,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Whether `provider` can search the web itself (`ChatRequest::web_search`). Checked before a
/// run starts, so an agent asking for web search on a provider without it fails early.
pub fn supports_web_search(provider: ProviderKind) -> bool {
    match provider {
        ProviderKind::OpenAi | ProviderKind::Anthropic => true,
        ProviderKind::Ollama => false,
    }
}

/// A model name resolved to its provider and the name that provider knows it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelRoute {
    pub provider: ProviderKind,
    pub model: String,
}

/// Routes `openai/x`, `anthropic/x`, `ollama/x` and bare names (`claude…` is anthropic,
/// anything else openai). An empty name uses the default model; without one, the error names
/// the setting to set.
pub fn route_model(model: &str, settings: &ProviderSettings) -> Result<ModelRoute, ProviderError> {
    let model = model.trim();
    let model = if model.is_empty() {
        settings
            .default_model
            .as_deref()
            .ok_or(ProviderError::NoModel)?
            .trim()
    } else {
        model
    };
    if let Some((prefix, rest)) = model.split_once('/')
        && let Ok(provider) = prefix.to_ascii_lowercase().parse::<ProviderKind>()
    {
        return Ok(ModelRoute {
            provider,
            model: rest.to_string(),
        });
    }
    let provider = if model.to_ascii_lowercase().starts_with("claude") {
        ProviderKind::Anthropic
    } else {
        ProviderKind::OpenAi
    };
    Ok(ModelRoute {
        provider,
        model: model.to_string(),
    })
}

/// One message of a chat conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
        /// The tool failed (Anthropic's `is_error`); absent when false, so requests recorded
        /// before it existed hash the same.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A tool the model may call: a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (a JSON object in text).
    pub arguments: String,
}

/// What an agent asks of a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// `low`, `medium` or `high`.
    pub reasoning_effort: Option<String>,
    pub temperature: Option<f64>,
    /// Use the provider's own server-side web search.
    pub web_search: bool,
    /// Ask for JSON matching this JSON Schema, in the provider's native structured-output mode
    /// (Anthropic: a tool the answer is given to). Either way the answer's `content` is the
    /// JSON as text, for the caller to parse and check.
    pub response_schema: Option<Value>,
}

impl ChatRequest {
    /// A request with only a model and messages.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            messages,
            tools: Vec::new(),
            reasoning_effort: None,
            temperature: None,
            web_search: false,
            response_schema: None,
        }
    }
}

/// A web page a provider's web search used for an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebSource {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Adds a page to `sources` unless its URL is already there (a later title fills in a
/// missing one).
fn add_source(sources: &mut Vec<WebSource>, url: &str, title: Option<&str>) {
    let url = url.trim();
    if url.is_empty() {
        return;
    }
    let title = title.map(str::trim).filter(|title| !title.is_empty());
    match sources.iter_mut().find(|source| source.url == url) {
        Some(source) => {
            if source.title.is_none() {
                source.title = title.map(str::to_string);
            }
        }
        None => sources.push(WebSource {
            url: url.to_string(),
            title: title.map(str::to_string),
        }),
    }
}

/// Tokens used by one call, as the provider reported them.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    /// Pages the provider's web search used (empty without web search).
    pub sources: Vec<WebSource>,
    /// The model the provider says answered (often a dated snapshot of the one asked for), for
    /// traces. Not kept in recordings: a replayed answer has no provider.
    #[serde(skip)]
    pub response_model: Option<String>,
    /// Why the model stopped, in the provider's words (`stop`, `tool_calls`, `end_turn`), for
    /// traces. Not kept in recordings either.
    #[serde(skip)]
    pub finish_reason: Option<String>,
}

/// Why a model call failed. Messages carry what the provider said, with keys redacted.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ProviderError {
    #[error(
        "no model is set for this agent and no default model is configured (set WEFT_DEFAULT_MODEL)"
    )]
    NoModel,
    #[error("{provider} is not configured: set {variable}")]
    NotConfigured {
        provider: &'static str,
        variable: &'static str,
    },
    #[error("{provider} answered HTTP {status}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("could not reach {provider} at {url}: {message}")]
    Connect {
        provider: &'static str,
        url: String,
        message: String,
    },
    #[error("{provider} did not answer within {seconds} s")]
    Timeout {
        provider: &'static str,
        seconds: u64,
    },
    #[error("{provider} sent a malformed answer: {message}")]
    Malformed {
        provider: &'static str,
        message: String,
    },
    #[error("the request was cancelled")]
    Cancelled,
    /// A flow test offline: the recording it was given has no answer for this request.
    #[error("{0}")]
    NotRecorded(String),
    /// The run had spent its budget before this call, which was not made.
    #[error("{0}")]
    OverBudget(String),
}

impl ProviderError {
    /// Whether the call failed for good after its retries for a reason another model may not
    /// share (a rate limit, a server error, a timeout, a refused connection): what makes an
    /// agent try its `fallbackModels`. A request the provider refused as wrong is not.
    pub fn fails_for_good(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => *status == 429 || (500..=599).contains(status),
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// The clients of every provider, sharing one HTTP connection pool.
#[derive(Debug, Clone)]
pub struct LlmClients {
    settings: ProviderSettings,
    /// The pool the provider clients share; also used for connection checks.
    http: LazyClient,
    openai: OpenAiClient,
    anthropic: AnthropicClient,
}

impl LlmClients {
    pub fn new(settings: ProviderSettings) -> LlmClients {
        let http = LazyClient::new(settings.connect_timeout, Some(settings.read_timeout))
            .limited(settings.max_requests);
        LlmClients {
            openai: OpenAiClient::new(http.clone(), settings.clone()),
            anthropic: AnthropicClient::new(http.clone(), settings.clone()),
            http,
            settings,
        }
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Sends `request` to the provider `route` names. Streamed text pieces are passed to
    /// `on_delta` as they arrive. `cancel` drops the request at once.
    pub async fn complete(
        &self,
        route: &ModelRoute,
        request: &ChatRequest,
        on_delta: &(dyn Fn(&str) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let result = match route.provider {
            ProviderKind::OpenAi => {
                self.settings.check_configured(route.provider)?;
                let key = self.settings.openai_api_key.as_ref();
                let base = self.settings.openai_base_url.as_str();
                self.openai
                    .complete("openai", base, key, request, on_delta, cancel)
                    .await
            }
            ProviderKind::Ollama => {
                let base = format!("{}/v1", self.settings.ollama_host);
                self.openai
                    .complete("ollama", &base, None, request, on_delta, cancel)
                    .await
            }
            ProviderKind::Anthropic => {
                self.settings.check_configured(route.provider)?;
                let key = self.settings.anthropic_api_key.as_ref();
                let base = self.settings.anthropic_base_url.as_str();
                self.anthropic
                    .complete(base, key, request, on_delta, cancel)
                    .await
            }
        };
        result.map_err(|error| self.redact_error(error))
    }

    fn redact_error(&self, error: ProviderError) -> ProviderError {
        match error {
            ProviderError::Http {
                provider,
                status,
                message,
            } => ProviderError::Http {
                provider,
                status,
                message: self.settings.redact(&message),
            },
            ProviderError::Malformed { provider, message } => ProviderError::Malformed {
                provider,
                message: self.settings.redact(&message),
            },
            ProviderError::Connect {
                provider,
                url,
                message,
            } => ProviderError::Connect {
                provider,
                url,
                message: self.settings.redact(&message),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_route_by_prefix_and_bare_name() {
        let settings = ProviderSettings::default();
        let route = |name: &str| route_model(name, &settings).expect("routes");
        assert_eq!(route("gpt-4o-mini").provider, ProviderKind::OpenAi);
        assert_eq!(route("claude-3-5-haiku").provider, ProviderKind::Anthropic);
        assert_eq!(route("ollama/llama3.2").model, "llama3.2");
        assert_eq!(route("openai/gpt-4o").model, "gpt-4o");
        assert_eq!(route("meta/llama").model, "meta/llama");
        assert_eq!(route_model("  ", &settings), Err(ProviderError::NoModel));
        let with_default = ProviderSettings {
            default_model: Some("anthropic/claude-x".into()),
            ..ProviderSettings::default()
        };
        assert_eq!(
            route_model("", &with_default).expect("default"),
            ModelRoute {
                provider: ProviderKind::Anthropic,
                model: "claude-x".into()
            }
        );
    }

    #[test]
    fn web_search_support_by_provider() {
        assert!(supports_web_search(ProviderKind::OpenAi));
        assert!(supports_web_search(ProviderKind::Anthropic));
        assert!(!supports_web_search(ProviderKind::Ollama));
    }

    #[test]
    fn sources_are_deduplicated_by_url() {
        let mut sources = Vec::new();
        add_source(&mut sources, "https://a.example", None);
        add_source(&mut sources, " https://a.example ", Some("A"));
        add_source(&mut sources, "https://a.example", Some("Other"));
        add_source(&mut sources, "", Some("nothing"));
        assert_eq!(
            sources,
            vec![WebSource {
                url: "https://a.example".into(),
                title: Some("A".into()),
            }]
        );
    }

    #[test]
    fn keys_never_print() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        assert_eq!(
            secret.redact("bad key sk-very-secret!"),
            "bad key [redacted]!"
        );
    }
}
