//! "Test connection": one cheap authenticated request per provider (its model list), so a
//! person can check an address and key before running a flow. No tokens are spent.

use serde::Serialize;
use serde_json::Value;

use super::{LlmClients, ProviderError, ProviderKind, Secret};

/// What a successful connection check found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ConnectionReport {
    /// The address asked.
    pub url: String,
    /// Model names the provider listed (at most 20).
    pub models: Vec<String>,
}

/// Most model names kept in a report.
const MAX_MODELS: usize = 20;

impl LlmClients {
    /// Asks `provider` for its models with the configured address and key. A missing key is
    /// reported as [`ProviderError::NotConfigured`] without a request; an HTTP error carries the
    /// provider's message with the key redacted.
    pub async fn check_connection(
        &self,
        provider: ProviderKind,
    ) -> Result<ConnectionReport, ProviderError> {
        let settings = &self.settings;
        let name = provider.as_str();
        let (url, request) = match provider {
            ProviderKind::OpenAi => {
                settings.check_configured(provider)?;
                let url = format!("{}/models", settings.openai_base_url);
                let key = settings.openai_api_key.as_ref().map(Secret::expose);
                let request = self.http.get().get(&url);
                let request = match key {
                    Some(key) => request.bearer_auth(key),
                    None => request,
                };
                (url, request)
            }
            ProviderKind::Anthropic => {
                settings.check_configured(provider)?;
                let url = format!("{}/v1/models", settings.anthropic_base_url);
                let mut request = self
                    .http
                    .get()
                    .get(&url)
                    .header("anthropic-version", super::anthropic::API_VERSION);
                if let Some(key) = &settings.anthropic_api_key {
                    request = request.header("x-api-key", key.expose());
                }
                (url, request)
            }
            ProviderKind::Ollama => {
                let url = format!("{}/api/tags", settings.ollama_host);
                (url.clone(), self.http.get().get(&url))
            }
        };
        let redact = |text: String| settings.redact(&text);
        let response = request.send().await.map_err(|error| {
            if error.is_timeout() {
                ProviderError::Timeout {
                    provider: name,
                    seconds: settings.read_timeout.as_secs(),
                }
            } else {
                ProviderError::Connect {
                    provider: name,
                    url: url.clone(),
                    message: redact(error.to_string()),
                }
            }
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| ProviderError::Connect {
                provider: name,
                url: url.clone(),
                message: redact(error.to_string()),
            })?;
        if !status.is_success() {
            return Err(ProviderError::Http {
                provider: name,
                status: status.as_u16(),
                message: redact(super::http::error_message(status, &body)),
            });
        }
        let listed: Value =
            serde_json::from_slice(&body).map_err(|error| ProviderError::Malformed {
                provider: name,
                message: format!("the model list is not JSON: {error}"),
            })?;
        Ok(ConnectionReport {
            url,
            models: model_names(provider, &listed),
        })
    }
}

/// Model names from a model list: `data[].id` (OpenAI, Anthropic) or `models[].name` (Ollama).
fn model_names(provider: ProviderKind, listed: &Value) -> Vec<String> {
    let (array, key) = match provider {
        ProviderKind::OpenAi | ProviderKind::Anthropic => ("data", "id"),
        ProviderKind::Ollama => ("models", "name"),
    };
    listed
        .get(array)
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|model| model.get(key).and_then(Value::as_str))
                .take(MAX_MODELS)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_names_read_each_list_shape() {
        let openai = json!({"data": [{"id": "gpt-a"}, {"id": "gpt-b"}]});
        assert_eq!(
            model_names(ProviderKind::OpenAi, &openai),
            ["gpt-a", "gpt-b"]
        );
        let ollama = json!({"models": [{"name": "llama3:8b"}]});
        assert_eq!(model_names(ProviderKind::Ollama, &ollama), ["llama3:8b"]);
        assert!(model_names(ProviderKind::Ollama, &openai).is_empty());
    }
}
