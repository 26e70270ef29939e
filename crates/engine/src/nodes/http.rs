//! `http`: one HTTP request, with templated method, URL, headers and body.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    FieldDescription, FieldError, FieldType, HandleDescription, KindDescription, NodeKind,
};
use crate::run::{Step, StepError, StepOutput};

// Each help text once: a doc comment below (`#[doc = help!(..)]`) and a help in `describe()`.
// Why a macro: see `common_help!` in nodes/mod.rs.
macro_rules! help {
    (kind) => {
        "Sends one HTTP request. `url`, header values and `body` are templates. The output is \
         `{ \"status\", \"headers\", \"body\" }`, the body parsed when the response is JSON. A \
         status outside 200–299 fails the node (so `error` edges and retries apply) unless \
         `allowErrorStatus` is set."
    };
    (method) => {
        "`GET`, `POST`, `PUT`, `PATCH`, `DELETE` or `HEAD`."
    };
    (url) => {
        "The address (a template)."
    };
    (headers) => {
        "Request headers; values are templates."
    };
    (body) => {
        "The request body (a template); sent as JSON when it parses as JSON."
    };
    (allowErrorStatus) => {
        "Treat any status as success and pass it on."
    };
}

#[doc = help!(kind)]
///
/// Templates: SPEC §3.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpConfig {
    #[doc = help!(method)]
    #[serde(default = "default_method")]
    pub method: String,
    #[doc = help!(url)]
    #[serde(default)]
    pub url: String,
    #[doc = help!(headers)]
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[doc = help!(body)]
    #[serde(default)]
    pub body: Option<String>,
    #[doc = help!(allowErrorStatus)]
    #[serde(default)]
    pub allow_error_status: bool,
}

fn default_method() -> String {
    "GET".into()
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            method: default_method(),
            url: String::new(),
            headers: BTreeMap::new(),
            body: None,
            allow_error_status: false,
        }
    }
}

/// Largest response body kept (bytes); a larger one fails the step.
const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

impl HttpConfig {
    pub(super) fn check_ranges(&self) -> Result<(), FieldError> {
        if !METHODS.contains(&self.method.to_ascii_uppercase().as_str()) {
            return Err(FieldError::new(
                "method",
                format!("must be one of {}", METHODS.join(", ")),
            ));
        }
        if self.url.trim().is_empty() {
            return Err(FieldError::new("url", "is empty"));
        }
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

    pub(super) fn templates(&self) -> Vec<(String, &str)> {
        let mut fields = vec![("url".to_string(), self.url.as_str())];
        fields.extend(
            self.headers
                .iter()
                .map(|(name, value)| (format!("headers.{name}"), value.as_str())),
        );
        if let Some(body) = &self.body {
            fields.push(("body".to_string(), body.as_str()));
        }
        fields
    }
}

pub(super) async fn run(config: &HttpConfig, step: &Step<'_>) -> Result<StepOutput, StepError> {
    let url = step.render("url")?;
    let method = reqwest::Method::from_bytes(config.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| {
            StepError::new("http", format!("`{}` is not an HTTP method", config.method))
        })?;
    let mut request = step.ctx.http.request(method.clone(), url.trim());
    let mut has_content_type = false;
    for name in config.headers.keys() {
        let value = step.render(&format!("headers.{name}"))?;
        has_content_type |= name.eq_ignore_ascii_case("content-type");
        request = request.header(name.as_str(), value);
    }
    if config.body.is_some() {
        let body = step.render("body")?;
        if !has_content_type && serde_json::from_str::<Value>(&body).is_ok() {
            request = request.header("content-type", "application/json");
        }
        request = request.body(body);
    }
    let failed = |error: reqwest::Error| {
        StepError::new("http", format!("{method} {url}: {}", failure_text(&error)))
    };
    let response = tokio::select! {
        () = step.ctx.cancel.cancelled() => return Err(StepError::new("cancelled", "the run was cancelled")),
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
            () = step.ctx.cancel.cancelled() => return Err(StepError::new("cancelled", "the run was cancelled")),
            chunk = response.chunk() => chunk.map_err(failed)?,
        };
        let Some(chunk) = chunk else { break };
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(StepError::new(
                "http",
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
            "http",
            format!(
                "{method} {url} answered {}: {}",
                status.as_u16(),
                excerpt.trim()
            ),
        ));
    }
    let output = serde_json::json!({ "status": status.as_u16(), "headers": headers, "body": body });
    Ok(StepOutput::new(output, "output"))
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

pub(super) fn describe() -> KindDescription {
    KindDescription {
        handles: vec![
            HandleDescription::execution("output", "Output"),
            HandleDescription::error(),
        ],
        fields: vec![
            FieldDescription::new(
                "method",
                "Method",
                help!(method),
                FieldType::Choice {
                    options: METHODS.to_vec(),
                },
            )
            .default(default_method()),
            FieldDescription::new("url", "URL", help!(url), FieldType::Template)
                .default("")
                .required(),
            FieldDescription::new("headers", "Headers", help!(headers), FieldType::StringMap)
                .default(serde_json::json!({})),
            FieldDescription::new("body", "Body", help!(body), FieldType::Template),
            FieldDescription::new(
                "allowErrorStatus",
                "Allow error status",
                help!(allowErrorStatus),
                FieldType::Boolean,
            )
            .default(false),
        ],
        ..KindDescription::new(NodeKind::Http, "HTTP request", help!(kind))
    }
}
