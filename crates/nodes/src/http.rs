//! `http`: one HTTP request, with templated URL, headers and body.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{FieldError, Handle, Kind, Scheduling};
use crate::step::{Step, StepEnv, StepError, StepErrorKind, StepOutput};

/// Sends one HTTP request. `url`, header values and `body` are templates. The output is
/// `{ "status", "headers", "body" }`, the body parsed when the response is JSON. A status outside
/// 200–299 fails the node (so `error` edges and retries apply) unless `allowErrorStatus` is set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpConfig {
    /// The request method.
    #[serde(default)]
    pub method: HttpMethod,
    /// The address (a template).
    #[serde(default)]
    #[schemars(title = "URL", extend("x-weft" = "template"), length(min = 1))]
    pub url: String,
    /// Request headers; values are templates.
    #[serde(default)]
    #[schemars(extend("x-weft" = "templateMap"))]
    pub headers: BTreeMap<String, String>,
    /// The request body (a template); sent as JSON when it parses as JSON.
    #[serde(default)]
    #[schemars(extend("x-weft" = "template"))]
    pub body: Option<String>,
    /// Treat any status as success and pass it on.
    #[serde(default)]
    pub allow_error_status: bool,
}

/// An HTTP method, read in any case (`post` is `POST`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    JsonSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "UPPERCASE")]
#[strum(serialize_all = "UPPERCASE", ascii_case_insensitive)]
pub enum HttpMethod {
    #[default]
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
}

impl<'de> Deserialize<'de> for HttpMethod {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<HttpMethod, D::Error> {
        use strum::VariantNames as _;
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|_| {
            serde::de::Error::custom(format!(
                "`{text}` is not a method: use one of {}",
                HttpMethod::VARIANTS.join(", ")
            ))
        })
    }
}

/// Largest response body kept (bytes); a larger one fails the step.
const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;

impl Kind for HttpConfig {
    const ID: &'static str = "http";
    const TITLE: &'static str = "HTTP request";
    const SCHEDULING: Scheduling = Scheduling::Task;
    const HANDLES: &'static [Handle] = &[Handle::OUTPUT, Handle::ERROR];

    fn template(&self, field: &str) -> Option<&str> {
        match field {
            "url" => Some(&self.url),
            "body" => self.body.as_deref(),
            _ => self
                .headers
                .get(field.strip_prefix("headers.")?)
                .map(String::as_str),
        }
    }

    fn check(&self) -> Result<(), FieldError> {
        for name in self.headers.keys() {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(FieldError::new(
                    format!("headers.{name}"),
                    "is not a valid header name",
                ));
            }
        }
        Ok(())
    }

    async fn run(&self, step: &Step<'_>, env: &dyn StepEnv) -> Result<StepOutput, StepError> {
        request(self, step, env).await
    }
}

async fn request(
    config: &HttpConfig,
    step: &Step<'_>,
    env: &dyn StepEnv,
) -> Result<StepOutput, StepError> {
    let url = env.render(step.node_id, "url", step.input)?;
    let method: &'static str = config.method.into();
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| {
        StepError::new(StepErrorKind::Internal, format!("`{method}` is not an HTTP method"))
    })?;
    let mut request = env.http().request(method.clone(), url.trim());
    let mut has_content_type = false;
    for name in config.headers.keys() {
        let value = env.render(step.node_id, &format!("headers.{name}"), step.input)?;
        has_content_type |= name.eq_ignore_ascii_case("content-type");
        request = request.header(name.as_str(), value);
    }
    if config.body.is_some() {
        let body = env.render(step.node_id, "body", step.input)?;
        if !has_content_type && serde_json::from_str::<Value>(&body).is_ok() {
            request = request.header("content-type", "application/json");
        }
        request = request.body(body);
    }
    let failed = |error: reqwest::Error| {
        StepError::new(StepErrorKind::Http, format!("{method} {url}: {}", failure_text(&error)))
    };
    let response = tokio::select! {
        () = env.cancel().cancelled() => return Err(StepError::cancelled()),
        response = request.send() => response.map_err(failed)?,
    };
    let status = response.status();
    let mut headers = Map::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_string(), Value::String(value));
            }
        }
    }
    let is_json = headers
        .get("content-type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.contains("json"));
    let mut response = response;
    let mut bytes = Vec::new();
    loop {
        let chunk = tokio::select! {
            () = env.cancel().cancelled() => return Err(StepError::cancelled()),
            chunk = response.chunk() => chunk.map_err(failed)?,
        };
        let Some(chunk) = chunk else { break };
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(StepError::new(
                StepErrorKind::Http,
                format!(
                    "{method} {url}: the response is larger than {} MiB",
                    MAX_BODY_BYTES / 1024 / 1024
                ),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = if is_json {
        serde_json::from_str(&text).unwrap_or(Value::String(text.clone()))
    } else {
        Value::String(text.clone())
    };
    if !status.is_success() && !config.allow_error_status {
        let excerpt: String = text.chars().take(300).collect();
        return Err(StepError::new(
            StepErrorKind::Http,
            format!(
                "{method} {url} answered {}: {}",
                status.as_u16(),
                excerpt.trim()
            ),
        ));
    }
    let output = serde_json::json!({ "status": status.as_u16(), "headers": headers, "body": body });
    Ok(StepOutput::new(output, Handle::OUTPUT.id))
}

fn failure_text(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".into()
    } else if error.is_connect() {
        format!("could not connect ({error})")
    } else {
        error.to_string()
    }
}


#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::step::fake::{FakeEnv, step};

    /// A server on loopback that answers one request with `status` and a JSON body, and hands
    /// back the request it received.
    async fn answer_once(status: u16) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            // Read the head, then as many body bytes as it announces.
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            loop {
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|line| line.to_lowercase().strip_prefix("content-length:").map(|n| n.trim().parse().unwrap_or(0)))
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
                let read = socket.read(&mut buffer).await.expect("read");
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
            }
            let body = r#"{"ok":true}"#;
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(reply.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&request).into_owned()
        });
        (format!("http://{address}"), served)
    }

    #[tokio::test]
    async fn sends_the_templated_request_and_parses_a_json_answer() {
        let (base, served) = answer_once(200).await;
        let env = FakeEnv::new()
            .template("call", "url", &format!("{base}/items/{{{{ id }}}}"))
            .template("call", "headers.X-Id", "{{ id }}")
            .template("call", "body", r#"{"id": {{ id }}}"#);
        let config = HttpConfig {
            method: HttpMethod::Post,
            headers: [("X-Id".to_string(), String::new())].into(),
            body: Some(String::new()),
            ..HttpConfig::default()
        };
        let output = config.run(&step("call", &Arc::new(json!({"id": 9}))), &env).await.expect("sent");
        assert_eq!(output.value["status"], 200);
        assert_eq!(output.value["body"], json!({"ok": true}));
        let request = served.await.expect("served");
        assert!(request.starts_with("POST /items/9 HTTP/1.1"), "{request}");
        assert!(request.to_lowercase().contains("x-id: 9"), "{request}");
        assert!(request.contains("content-type: application/json"), "{request}");
        assert!(request.ends_with(r#"{"id": 9}"#), "{request}");
    }

    #[tokio::test]
    async fn an_error_status_fails_the_step_unless_allowed() {
        let (base, _served) = answer_once(503).await;
        let env = FakeEnv::new().template("call", "url", &base);
        let error = HttpConfig::default()
            .run(&step("call", &Arc::new(json!({}))), &env)
            .await
            .expect_err("503");
        assert_eq!(error.kind, StepErrorKind::Http);
        assert!(error.message.contains("answered 503"), "{error}");
        let (base, _served) = answer_once(503).await;
        let env = FakeEnv::new().template("call", "url", &base);
        let allowed = HttpConfig {
            allow_error_status: true,
            ..HttpConfig::default()
        };
        let output = allowed.run(&step("call", &Arc::new(json!({}))), &env).await.expect("allowed");
        assert_eq!(output.value["status"], 503);
    }
}
