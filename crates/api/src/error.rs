//! Why an action was refused or failed: one message, the same on every host, and a kind that
//! each host turns into its own answer (an HTTP status, an exit code, the app's error code).

use weft_engine::RunError;
use weft_store::StoreError;

/// What kind of refusal or failure an [`Error`] is.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// What was asked cannot be done as given: an answer that does not fit the form, a flow
    /// with errors, an unknown node, a bad argument. (HTTP 400, exit 2.)
    Invalid,
    /// No run, flow or node of that name. (HTTP 404, exit 2.)
    NotFound,
    /// The run is not in a state that allows it: decided already, finished, going in another
    /// process, stopped at a breakpoint rather than an approval. (HTTP 409, exit 2.)
    Conflict,
    /// The person asking may not do it: not among an approval's approvers, or the one who
    /// started a run that does not let its starter decide. (HTTP 403, exit 2.)
    Forbidden,
    /// Weft or the store failed; the message says where. (HTTP 500, exit 1.)
    Failed,
}

/// A refused or failed action, with the message a person reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Conflict, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Forbidden, message)
    }

    pub fn failed(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Failed, message)
    }

    /// Whether the caller can fix it (everything but a failure of Weft or its store).
    pub fn is_refusal(&self) -> bool {
        self.kind != ErrorKind::Failed
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Error {
        let kind = match &error {
            StoreError::NoSuchRun(_) | StoreError::NoSuchVersion(_) => ErrorKind::NotFound,
            StoreError::Ambiguous(_)
            | StoreError::AmbiguousVersion(_)
            | StoreError::Refused { .. } => ErrorKind::Invalid,
            StoreError::Finished { .. }
            | StoreError::NotPaused { .. }
            | StoreError::NotInterrupted { .. }
            | StoreError::NotWaiting { .. } => ErrorKind::Conflict,
            _ => ErrorKind::Failed,
        };
        let message = match &error {
            StoreError::NoSuchRun(id) if id.is_empty() => "no run id given".to_string(),
            _ => error.to_string(),
        };
        Error::new(kind, message)
    }
}

impl From<RunError> for Error {
    fn from(error: RunError) -> Error {
        match error {
            RunError::Store(error) => error.into(),
            RunError::Invalid { .. }
            | RunError::NoSuchEntry(_)
            | RunError::NoEarlierOutput { .. }
            | RunError::Decide(_)
            | RunError::Debugging { .. } => Error::invalid(error.to_string()),
            RunError::Lost(_) => Error::failed(error.to_string()),
        }
    }
}
