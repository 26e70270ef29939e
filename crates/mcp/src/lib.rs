//! MCP servers a flow's agents call as tools (docs/tools.md).
//!
//! A flow defines its servers in `settings.mcpServers` ([`config`]). A process keeps one
//! [`Hub`]: it starts (or connects to) each server the first time a run needs it, once per
//! process for one definition, and keeps it for the next runs; [`stop_all_servers`] stops the
//! stdio servers with their process groups when the process ends.

pub mod config;
mod connection;
mod http_retry;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use config::{Lookup, Resolved, ServerDef, Servers, from_environment, parse_servers};
pub use connection::{INIT_TIMEOUT, MAX_RESULT_BYTES, ToolInfo, ToolOutcome, stop_all_servers};
pub use rmcp::model::JsonObject;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use connection::Connection;

/// What went wrong with a server or a call to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpErrorKind {
    /// Its definition cannot be used (an unset `${NAME}`, a bad header).
    Config,
    /// It could not be started or did not initialize.
    Start,
    /// It did not answer in time.
    Timeout,
    /// It stopped, or its connection closed.
    Stopped,
    /// It answered something other than a result (a JSON-RPC error, garbage).
    Protocol,
    /// The tool is not one it lists.
    UnknownTool,
    /// The result is over [`MAX_RESULT_BYTES`].
    TooLarge,
    /// A flow test offline or a replay has no result recorded for the call.
    NotRecorded,
    Cancelled,
}

/// An error naming the server (and, in its message, the tool).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    pub server: String,
    pub kind: McpErrorKind,
    pub message: String,
}

impl McpError {
    pub fn new(server: &str, kind: McpErrorKind, message: String) -> McpError {
        McpError {
            server: server.to_string(),
            kind,
            message,
        }
    }
}

type Slot = Arc<OnceCell<Arc<Connection>>>;

/// The MCP servers of one process, connected on first use.
pub struct Hub {
    lookup: Arc<Lookup>,
    connections: Mutex<HashMap<Resolved, Slot>>,
}

impl Default for Hub {
    fn default() -> Hub {
        Hub::new(Arc::new(from_environment))
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub reading `${NAME}`s with `lookup`.
    pub fn new(lookup: Arc<Lookup>) -> Hub {
        Hub {
            lookup,
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// The connection to `server` (defined by `def`, for a flow in `flow_dir`): the one this
    /// process has, else a new one. One that broke is replaced once.
    async fn connection(
        &self,
        server: &str,
        def: &ServerDef,
        flow_dir: Option<&Path>,
    ) -> Result<Arc<Connection>, McpError> {
        let resolved = def
            .resolve(server, flow_dir, &*self.lookup)
            .map_err(|message| McpError {
                server: server.to_string(),
                kind: McpErrorKind::Config,
                // `resolve` names the server itself.
                message: message
                    .strip_prefix(&format!("MCP server `{server}`: "))
                    .unwrap_or(&message)
                    .to_string(),
            })?;
        let slot = self.slot(&resolved, None);
        let connection = slot
            .get_or_try_init(|| async { Connection::open(server, &resolved).await.map(Arc::new) })
            .await?
            .clone();
        if !connection.is_closed() {
            return Ok(connection);
        }
        let fresh = self.slot(&resolved, Some(&slot));
        Ok(fresh
            .get_or_try_init(|| async { Connection::open(server, &resolved).await.map(Arc::new) })
            .await?
            .clone())
    }

    /// The slot of `resolved`; a new one in place of `stale` when that is still the one kept.
    fn slot(&self, resolved: &Resolved, stale: Option<&Slot>) -> Slot {
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let kept = connections.entry(resolved.clone()).or_default();
        if stale.is_some_and(|stale| Arc::ptr_eq(stale, kept)) {
            *kept = Slot::default();
        }
        kept.clone()
    }

    /// The tools `server` lists (connecting to it when needed).
    pub async fn tools(
        &self,
        server: &str,
        def: &ServerDef,
        flow_dir: Option<&Path>,
    ) -> Result<Vec<ToolInfo>, McpError> {
        Ok(self
            .connection(server, def, flow_dir)
            .await?
            .tools()
            .to_vec())
    }

    /// Calls `tool` of `server` with `arguments`. A tool the server does not list is an
    /// [`McpErrorKind::UnknownTool`] error naming the ones it has.
    pub async fn call(
        &self,
        server: &str,
        def: &ServerDef,
        flow_dir: Option<&Path>,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<ToolOutcome, McpError> {
        let connection = self.connection(server, def, flow_dir).await?;
        if !connection.tools().iter().any(|listed| listed.name == tool) {
            let names: Vec<&str> = connection
                .tools()
                .iter()
                .map(|listed| listed.name.as_str())
                .collect();
            return Err(McpError::new(
                server,
                McpErrorKind::UnknownTool,
                format!("has no tool `{tool}` (its tools: {})", names.join(", ")),
            ));
        }
        connection.call(server, tool, arguments, cancel).await
    }

    /// Stops every server this hub connected to (stdio ones with their process groups).
    pub fn stop(&self) {
        self.connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}
