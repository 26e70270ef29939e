//! What the API answers when it refuses: a status and `{code, message}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use weft_api::ErrorKind;
use weft_store::StoreError;

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

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
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

impl From<weft_api::Error> for ApiError {
    fn from(error: weft_api::Error) -> ApiError {
        match error.kind {
            ErrorKind::Invalid => ApiError::bad_request(error.message),
            ErrorKind::NotFound => ApiError::not_found(error.message),
            ErrorKind::Conflict => ApiError::conflict(error.message),
            ErrorKind::Forbidden => ApiError::forbidden(error.message),
            ErrorKind::Failed => {
                tracing::error!("{}", error.message);
                ApiError::internal(error.message)
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        weft_api::Error::from(error).into()
    }
}
