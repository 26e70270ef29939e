//! The one error type every command returns: a stable `code` the canvas can branch on and a
//! message a person can read. The canvas never matches message text.

use serde::Serialize;

/// What kind of failure a command met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    /// A flow file could not be read, parsed or written.
    FlowFile,
    /// The flow has validation errors; the message lists them.
    InvalidFlow,
    /// The run store refused (no such run, a run that is not paused, a broken database).
    Store,
    /// The settings file could not be read or written.
    Settings,
    /// A provider could not be reached or refused (test connection).
    Provider,
    /// The request itself was wrong (an unknown node, a bad argument, an answer that does not
    /// fit the approval's form).
    BadRequest,
    /// No run of that id.
    NotFound,
    /// The run is not in a state that allows it (decided already, finished, going elsewhere).
    Conflict,
    /// The person may not do it (not an approver of the approval, or its run's starter).
    Forbidden,
    /// A team's server (Settings → Servers) could not be reached, did not answer in time or
    /// refused the token; the message names it.
    Server,
    /// Weft itself went wrong (a bug); the message says where.
    Internal,
}

/// A failed command, as the canvas receives it: `{ code, message }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, specta::Type, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub code: ErrorCode,
    pub message: String,
}

impl AppError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> AppError {
        AppError {
            code,
            message: message.into(),
        }
    }
}

impl From<weft_testing::TestFileError> for AppError {
    fn from(error: weft_testing::TestFileError) -> AppError {
        AppError::new(ErrorCode::BadRequest, error.to_string())
    }
}

impl From<weft_api::Error> for AppError {
    fn from(error: weft_api::Error) -> AppError {
        let code = match error.kind {
            weft_api::ErrorKind::Invalid => ErrorCode::BadRequest,
            weft_api::ErrorKind::NotFound => ErrorCode::NotFound,
            weft_api::ErrorKind::Conflict => ErrorCode::Conflict,
            weft_api::ErrorKind::Forbidden => ErrorCode::Forbidden,
            weft_api::ErrorKind::Failed => ErrorCode::Store,
        };
        AppError::new(code, error.message)
    }
}

impl From<weft_engine::RunError> for AppError {
    fn from(error: weft_engine::RunError) -> AppError {
        let code = match &error {
            weft_engine::RunError::Invalid { .. } => ErrorCode::InvalidFlow,
            _ => return weft_api::Error::from(error).into(),
        };
        AppError::new(code, error.to_string())
    }
}

impl From<weft_store::StoreError> for AppError {
    fn from(error: weft_store::StoreError) -> AppError {
        weft_api::Error::from(error).into()
    }
}

impl From<weft_flow::LoadError> for AppError {
    fn from(error: weft_flow::LoadError) -> AppError {
        AppError::new(ErrorCode::FlowFile, error.to_string())
    }
}
