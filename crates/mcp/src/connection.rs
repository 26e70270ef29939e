//! One connected MCP server: a program started over stdio (in a process group of its own, so
//! that what it starts in turn is stopped with it) or a streamable HTTP endpoint; its tools,
//! listed once when it connects, and calls to them.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio_util::sync::CancellationToken;

use crate::config::{Resolved, Transport, redact};
use crate::{McpError, McpErrorKind};

/// How long a server has to answer `initialize` (and then `tools/list`).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest message read from a stdio server; a longer one is dropped by the SDK, and the
/// call it answered then ends at its timeout.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// The largest tool result given to an agent (its JSON); a larger one is an error.
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;
/// Lines of a stdio server's stderr kept to explain why it stopped.
const STDERR_LINES: usize = 20;

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
}

/// What a tool call gave back.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutcome {
    /// The result's content blocks, as the server sent them.
    pub content: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The tool itself reported an error.
    #[serde(default)]
    pub is_error: bool,
}

impl ToolOutcome {
    /// The result as the model is given it: its text blocks, other blocks as JSON, or the
    /// structured result when there is no content.
    pub fn text(&self) -> String {
        if self.content.is_empty() {
            return self
                .structured
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default();
        }
        self.content
            .iter()
            .map(|block| match block.get("text").and_then(Value::as_str) {
                Some(text) if block.get("type").and_then(Value::as_str) == Some("text") => {
                    text.to_string()
                }
                _ => block.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn from_result(result: CallToolResult) -> Result<ToolOutcome, String> {
        let content = result
            .content
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("its result could not be read ({error})"))?;
        Ok(ToolOutcome {
            content,
            structured: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
        })
    }
}

/// A connected server.
pub struct Connection {
    service: RunningService<RoleClient, ()>,
    tools: Vec<ToolInfo>,
    /// A stdio server's process group (stopped when the connection is dropped).
    child: Option<ChildGroup>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    call_timeout: Duration,
    secrets: Vec<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Connection {
    /// Starts or connects to the server `resolved` describes, initializes it and lists its
    /// tools, within [`INIT_TIMEOUT`] for each.
    pub async fn open(server: &str, resolved: &Resolved) -> Result<Connection, McpError> {
        let error = |kind, message: String| McpError::new(server, kind, message);
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let (service, child) = match &resolved.transport {
            Transport::Stdio {
                command,
                args,
                cwd,
                env,
            } => {
                if !cwd.is_dir() {
                    return Err(error(
                        McpErrorKind::Start,
                        format!(
                            "its folder {} does not exist (`cwd` is relative to the flow's file)",
                            cwd.display()
                        ),
                    ));
                }
                let mut spawned = Command::new(command)
                    .args(args)
                    .current_dir(cwd)
                    .envs(env.iter().map(|(key, value)| (key, value)))
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    // Its own group: a signal to it reaches what it started (`npx` starts
                    // `node`), and a Ctrl-C in the terminal reaches Weft alone, which then
                    // stops it.
                    .process_group(0)
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|io| {
                        error(
                            McpErrorKind::Start,
                            format!("could not start `{command}` in {}: {io}", cwd.display()),
                        )
                    })?;
                let group = ChildGroup::register(&spawned);
                if let Some(pipe) = spawned.stderr.take() {
                    keep_stderr(pipe, stderr.clone(), resolved.secrets.clone());
                }
                let (Some(stdout), Some(stdin)) = (spawned.stdout.take(), spawned.stdin.take())
                else {
                    return Err(error(
                        McpErrorKind::Start,
                        "its standard input and output could not be opened".into(),
                    ));
                };
                *lock(&group.child) = Some(spawned);
                let transport = AsyncRwTransport::new_client(stdout, stdin)
                    .with_max_line_length(MAX_MESSAGE_BYTES);
                let service =
                    initialize(server, ().serve(transport), &stderr, Some(&group)).await?;
                (service, Some(group))
            }
            Transport::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let header = HeaderName::try_from(name.as_str()).map_err(|_| {
                        error(
                            McpErrorKind::Config,
                            format!("`{name}` is not a header name"),
                        )
                    })?;
                    let value = HeaderValue::try_from(value.as_str()).map_err(|_| {
                        error(
                            McpErrorKind::Config,
                            format!("the value of header `{name}` is not a valid header value"),
                        )
                    })?;
                    custom.insert(header, value);
                }
                let client = reqwest::Client::builder()
                    .connect_timeout(INIT_TIMEOUT)
                    .build()
                    .map_err(|reason| {
                        error(McpErrorKind::Start, format!("no HTTP client: {reason}"))
                    })?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                config.custom_headers = custom;
                let transport = StreamableHttpClientTransport::with_client(
                    crate::http_retry::RetryingClient::new(client, stderr.clone()),
                    config,
                );
                let service = initialize(server, ().serve(transport), &stderr, None).await?;
                (service, None)
            }
        };
        let listed = tokio::time::timeout(INIT_TIMEOUT, service.list_all_tools())
            .await
            .map_err(|_| {
                error(
                    McpErrorKind::Timeout,
                    format!("did not list its tools within {} s", INIT_TIMEOUT.as_secs()),
                )
            })?
            .map_err(|reason| {
                error(
                    McpErrorKind::Protocol,
                    format!("could not list its tools: {reason}"),
                )
            })?;
        let tools = listed
            .into_iter()
            .map(|tool| ToolInfo {
                name: tool.name.to_string(),
                title: tool.title.clone(),
                description: tool.description.as_deref().unwrap_or_default().to_string(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            })
            .collect();
        Ok(Connection {
            service,
            tools,
            child,
            stderr,
            call_timeout: resolved.call_timeout,
            secrets: resolved.secrets.clone(),
        })
    }

    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// Whether the server stopped or the connection broke (a later use reconnects).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Calls `tool` with `arguments`, within the server's call timeout; cancelling `cancel`
    /// abandons the call (the server is told it was cancelled).
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<ToolOutcome, McpError> {
        let error = |kind, message: String| McpError::new(server, kind, message);
        if self.is_closed() {
            return Err(error(McpErrorKind::Stopped, self.why_stopped()));
        }
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let call = tokio::time::timeout(self.call_timeout, self.service.call_tool(params));
        let result = tokio::select! {
            result = call => result,
            () = cancel.cancelled() => {
                return Err(error(McpErrorKind::Cancelled, "the run was cancelled".into()));
            }
        };
        let result = match result {
            Err(_) => {
                return Err(error(
                    McpErrorKind::Timeout,
                    format!(
                        "`{tool}` did not answer within {} s (timeoutSeconds)",
                        self.call_timeout.as_secs_f64()
                    ),
                ));
            }
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                // Give the pipe a moment to tell its end (an exit status) before naming it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(error(McpErrorKind::Stopped, self.why_stopped()));
            }
            Ok(Err(ServiceError::McpError(data))) => {
                return Err(error(
                    McpErrorKind::Protocol,
                    format!("`{tool}` failed: {}", data.message),
                ));
            }
            Ok(Err(other)) => {
                return Err(error(
                    McpErrorKind::Protocol,
                    format!("`{tool}` failed: {other}"),
                ));
            }
            Ok(Ok(result)) => result,
        };
        let outcome = ToolOutcome::from_result(result)
            .map_err(|message| error(McpErrorKind::Protocol, format!("`{tool}`: {message}")))?;
        let size = serde_json::to_vec(&outcome).map_or(0, |bytes| bytes.len());
        if size > MAX_RESULT_BYTES {
            return Err(error(
                McpErrorKind::TooLarge,
                format!(
                    "the result of `{tool}` is {:.1} MB, over the {} MiB limit",
                    size as f64 / 1e6,
                    MAX_RESULT_BYTES / (1024 * 1024)
                ),
            ));
        }
        Ok(outcome)
    }

    /// "stopped (exit status 1): its last words" for a stdio server, else "the connection
    /// closed".
    fn why_stopped(&self) -> String {
        let status = self
            .child
            .as_ref()
            .and_then(|group| group.exit_status())
            .map(|status| format!(" ({status})"))
            .unwrap_or_default();
        let last = last_words(&self.stderr, &self.secrets, self.child.is_none());
        match &self.child {
            Some(_) => format!("the server stopped{status}{last}"),
            None => format!("the connection closed{last}"),
        }
    }
}

/// `serve` within [`INIT_TIMEOUT`], its failure named with what the server wrote to stderr.
async fn initialize<F, E>(
    server: &str,
    serve: F,
    stderr: &Mutex<VecDeque<String>>,
    group: Option<&ChildGroup>,
) -> Result<RunningService<RoleClient, ()>, McpError>
where
    F: Future<Output = Result<RunningService<RoleClient, ()>, E>>,
    E: std::fmt::Display,
{
    let started = Instant::now();
    let outcome = tokio::time::timeout(INIT_TIMEOUT, serve).await;
    let status = group
        .and_then(|group| group.exit_status())
        .map(|status| format!(" ({status})"))
        .unwrap_or_default();
    match outcome {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(reason)) => {
            // A server that exited at once: its stderr may still be on its way.
            if started.elapsed() < Duration::from_millis(200) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(McpError::new(
                server,
                McpErrorKind::Start,
                format!(
                    "did not initialize{status}: {reason}{}",
                    last_words(stderr, &[], group.is_none())
                ),
            ))
        }
        Err(_) => Err(McpError::new(
            server,
            McpErrorKind::Timeout,
            format!(
                "did not answer `initialize` within {} s{}",
                INIT_TIMEOUT.as_secs(),
                last_words(stderr, &[], group.is_none())
            ),
        )),
    }
}

/// What the server said last: a stdio server's last stderr line, or the last error status an
/// HTTP server answered with (kept by the HTTP client in the same place).
fn last_words(stderr: &Mutex<VecDeque<String>>, secrets: &[String], http: bool) -> String {
    let lines = lock(stderr);
    match lines.back() {
        Some(line) if http => format!("; {line}"),
        Some(line) => format!("; its last words: {}", redact(line, secrets)),
        None => String::new(),
    }
}

/// Reads a server's stderr as it comes: each line to the log (at debug), the last few kept.
fn keep_stderr(pipe: ChildStderr, kept: Arc<Mutex<VecDeque<String>>>, secrets: Vec<String>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line = redact(&line, &secrets);
            tracing::debug!(target: "weft_mcp::stderr", "{line}");
            let mut kept = lock(&kept);
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            let mut line = line;
            if line.len() > 500 {
                let mut end = 500;
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                line.truncate(end);
            }
            kept.push_back(line);
        }
    });
}

/// Process groups of the stdio servers this process started and has not stopped yet.
fn live_groups() -> &'static Mutex<HashSet<i32>> {
    static GROUPS: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    GROUPS.get_or_init(Default::default)
}

/// Stops every stdio server this process started (their whole process groups). Hosts call it
/// before they exit, since `std::process::exit` runs no destructors.
pub fn stop_all_servers() {
    let groups: Vec<i32> = lock(live_groups()).drain().collect();
    for group in groups {
        kill_group(group);
    }
}

fn kill_group(group: i32) {
    // SIGKILL: a tool server keeps nothing that a graceful stop would save, and it must be
    // gone before this process exits.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(group),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// A stdio server's process and its group, stopped together when dropped.
struct ChildGroup {
    group: Option<i32>,
    child: Mutex<Option<Child>>,
}

impl ChildGroup {
    fn register(child: &Child) -> ChildGroup {
        let group = child.id().and_then(|id| i32::try_from(id).ok());
        if let Some(group) = group {
            lock(live_groups()).insert(group);
        }
        ChildGroup {
            group,
            child: Mutex::new(None),
        }
    }

    fn exit_status(&self) -> Option<std::process::ExitStatus> {
        lock(&self.child).as_mut()?.try_wait().ok().flatten()
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if let Some(group) = self.group
            && lock(live_groups()).remove(&group)
        {
            kill_group(group);
        }
    }
}
