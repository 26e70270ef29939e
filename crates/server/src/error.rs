//! What the API answers when it refuses: a status and `{code, message}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use weft_engine::{RunError, StoreError};

/// A refused request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "code": self.code, "message": self.message }));
        (self.status, body).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match &error {
            StoreError::NoSuchRun(_) => ApiError::not_found(error.to_string()),
            StoreError::Ambiguous(_) | StoreError::Refused { .. } => {
                ApiError::bad_request(error.to_string())
            }
            StoreError::Finished { .. }
            | StoreError::NotPaused { .. }
            | StoreError::NotInterrupted { .. }
            | StoreError::NotWaiting { .. } => ApiError::conflict(error.to_string()),
            _ => {
                tracing::error!("the run store failed: {error}");
                ApiError::internal(error.to_string())
            }
        }
    }
}

impl From<RunError> for ApiError {
    fn from(error: RunError) -> ApiError {
        match error {
            RunError::Store(error) => error.into(),
            RunError::Invalid { .. }
            | RunError::NoSuchEntry(_)
            | RunError::NoEarlierOutput { .. }
            | RunError::Decide(_)
            | RunError::Debugging { .. } => ApiError::bad_request(error.to_string()),
            RunError::Lost(_) => ApiError::internal(error.to_string()),
        }
    }
}
