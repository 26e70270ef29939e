//! The API's OpenAPI 3.1 document, made from the routes themselves: the router is built from
//! [`crate::routes`], and each route's request and answer types give their JSON Schemas
//! (schemars, the same types the handlers serialize), so a route cannot be served without
//! being described, nor described with a shape it does not answer. `docs/openapi.json` is a
//! copy for readers, which a test keeps equal to this.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// How one route is described.
pub struct Operation {
    pub summary: &'static str,
    /// Needs `Authorization: Bearer TOKEN` (every route but the document itself).
    pub authorized: bool,
    pub body: Option<Body>,
    /// Query parameters: name, description, JSON type.
    pub query: &'static [(&'static str, &'static str, &'static str)],
    pub responses: Vec<Answer>,
}

/// What a route takes.
pub enum Body {
    /// JSON of this schema.
    Json(fn(&mut SchemaGenerator) -> Schema),
    /// Anything: JSON, else text (a webhook's).
    Anything,
}

/// One status a route answers with.
pub struct Answer {
    pub status: u16,
    pub description: &'static str,
    pub content: Content,
    /// Headers it may carry: name, description (a text each).
    pub headers: &'static [(&'static str, &'static str)],
}

/// What an answer's body is.
pub enum Content {
    /// JSON of this schema.
    Json(fn(&mut SchemaGenerator) -> Schema),
    /// Server-sent events, each message's `data` JSON of this schema.
    Events(fn(&mut SchemaGenerator) -> Schema),
    /// `{code, message}`.
    Error,
    /// An OpenAPI document.
    Document,
}

/// The schema of `T` (a reference into the document's components).
pub fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

impl Answer {
    pub fn json<T: JsonSchema>(status: u16, description: &'static str) -> Answer {
        Answer {
            status,
            description,
            content: Content::Json(schema::<T>),
            headers: &[],
        }
    }

    /// The same answer, carrying `headers` (name, description).
    pub fn with_headers(mut self, headers: &'static [(&'static str, &'static str)]) -> Answer {
        self.headers = headers;
        self
    }

    pub fn error(status: u16, description: &'static str) -> Answer {
        Answer {
            status,
            description,
            content: Content::Error,
            headers: &[],
        }
    }
}

/// A refused request's body.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // a schema only: the error body is written by `ApiError`
struct Error {
    /// A stable code: `bad_request`, `invalid_flow`, `unauthorized`, `not_found`, `timeout`,
    /// `conflict`, `too_large`, `method_not_allowed`, `internal`.
    code: String,
    /// What is wrong, for a person.
    message: String,
}

/// The document for `operations` (path, method, description).
pub fn document(operations: &[(&str, &str, &Operation)]) -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.definitions_path = "#/components/schemas/".into())
        .into_generator();
    let error = generator.subschema_for::<Error>();
    let mut paths = Map::new();
    for (path, method, operation) in operations {
        let mut described = Map::new();
        described.insert("summary".into(), json!(operation.summary));
        described.insert("operationId".into(), json!(operation_id(method, path)));
        if !operation.authorized {
            described.insert("security".into(), json!([]));
        }
        let mut parameters: Vec<Value> = path
            .split('/')
            .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } })
            })
            .collect();
        parameters.extend(operation.query.iter().map(|(name, description, kind)| {
            json!({ "name": name, "in": "query", "required": false, "description": description, "schema": { "type": kind } })
        }));
        if !parameters.is_empty() {
            described.insert("parameters".into(), Value::Array(parameters));
        }
        match &operation.body {
            Some(Body::Json(schema)) => {
                described.insert(
                    "requestBody".into(),
                    json!({ "required": true, "content": { "application/json": { "schema": schema(&mut generator) } } }),
                );
            }
            Some(Body::Anything) => {
                described.insert(
                    "requestBody".into(),
                    json!({ "required": false, "content": {
                        "application/json": { "schema": {} },
                        "text/plain": { "schema": { "type": "string" } }
                    } }),
                );
            }
            None => {}
        }
        let mut responses = Map::new();
        for answer in &operation.responses {
            let content = match &answer.content {
                Content::Json(schema) => {
                    json!({ "application/json": { "schema": schema(&mut generator) } })
                }
                Content::Events(schema) => json!({ "text/event-stream": {
                    "schema": { "type": "string" },
                    "itemSchema": schema(&mut generator)
                } }),
                Content::Error => json!({ "application/json": { "schema": error.clone() } }),
                Content::Document => {
                    json!({ "application/json": { "schema": { "type": "object" } } })
                }
            };
            let mut response = json!({ "description": answer.description, "content": content });
            if !answer.headers.is_empty() {
                let headers: Map<String, Value> = answer
                    .headers
                    .iter()
                    .map(|(name, description)| {
                        (
                            name.to_string(),
                            json!({ "description": description, "schema": { "type": "string" } }),
                        )
                    })
                    .collect();
                response["headers"] = Value::Object(headers);
            }
            responses.insert(answer.status.to_string(), response);
        }
        described.insert("responses".into(), Value::Object(responses));
        let entry = paths
            .entry(path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(methods) = entry {
            methods.insert(method.to_string(), Value::Object(described));
        }
    }
    let schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Weft",
            "version": "1",
            "description": "Runs, events, approvals and webhooks over the Weft engine (`weft serve`). Every route but this document needs `Authorization: Bearer TOKEN`; the token's name is recorded as the decider of the approvals it answers. Errors are `{code, message}`."
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } }
        }
    })
}

/// `POST /v1/runs/{id}/decision` → `post_runs_id_decision`.
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for part in path
        .split('/')
        .filter(|part| !part.is_empty() && *part != "v1")
    {
        id.push('_');
        id.extend(
            part.chars()
                .filter(|character| character.is_alphanumeric())
                .map(|character| character.to_ascii_lowercase()),
        );
    }
    id
}
