//! Settings → Servers (SPEC §18): the `weft serve`s this app connects to, each a name, an address
//! and a token. The token is kept in the settings file like a provider key (readable by its owner
//! only, never in flows, never sent to the canvas). A connection check says what is wrong in the
//! words a person can act on: the server cannot be reached, TLS failed, it is not a Weft server,
//! it is an older one without the routes the app needs, or the token is refused.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{AppError, ErrorCode};

/// How long a connection check waits for each answer.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The routes the app uses on a server: one without them is older than the app.
const NEEDED_ROUTES: [&str; 6] = [
    "/v1/runs",
    "/v1/runs/{id}/events",
    "/v1/approvals",
    "/v1/flows",
    "/v1/runs/{id}/continue",
    "/v1/runs/{id}/pause",
];

/// A server as the settings file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEntry {
    /// What the app calls it (runs of it are marked with it).
    pub name: String,
    /// Its address, `http://` or `https://`, without a trailing `/`.
    pub url: String,
    /// The bearer token, one of the server's tokens file.
    #[serde(default)]
    pub token: String,
}

/// A server as the canvas sees it: whether its token is set, never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    pub name: String,
    pub url: String,
    pub token_set: bool,
}

/// A server added, changed or removed in Settings.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerChange {
    pub name: String,
    /// Its address (ignored when removing).
    #[serde(default)]
    pub url: String,
    /// Its token; empty keeps the one kept for a server of that name.
    #[serde(default)]
    pub token: String,
    /// Removes the server of that name instead.
    #[serde(default)]
    pub remove: bool,
}

/// What a connection check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerCheck {
    /// The server answered as a Weft server with every route the app needs, and took the token.
    pub ok: bool,
    /// What was found, or what is wrong.
    pub message: String,
}

impl ServerCheck {
    fn wrong(message: impl Into<String>) -> ServerCheck {
        ServerCheck {
            ok: false,
            message: message.into(),
        }
    }
}

/// `servers` with `change` made, refused naming what is wrong with it.
pub fn changed(
    servers: &[ServerEntry],
    change: &ServerChange,
) -> Result<Vec<ServerEntry>, AppError> {
    let refused = |message: String| AppError::new(ErrorCode::BadRequest, message);
    let name = change.name.trim();
    let mut servers = servers.to_vec();
    let existing = servers.iter().position(|server| server.name == name);
    if change.remove {
        return match existing {
            Some(index) => {
                servers.remove(index);
                Ok(servers)
            }
            None => Err(refused(format!("there is no server `{name}` to remove"))),
        };
    }
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(refused(format!(
            "a server's name is a word without spaces (`team`, `prod-eu`), not `{name}`"
        )));
    }
    let url = change.url.trim().trim_end_matches('/');
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(refused(format!(
            "`{url}`: a server's address starts with http:// or https:// (what `weft serve` printed, e.g. http://127.0.0.1:8420)"
        )));
    }
    let token = match (change.token.trim(), existing) {
        ("", Some(index)) => servers[index].token.clone(),
        ("", None) => {
            return Err(refused(format!(
                "server `{name}` needs a token: one of the names and tokens in its tokens file (--tokens)"
            )));
        }
        (token, _) => token.to_string(),
    };
    let entry = ServerEntry {
        name: name.to_string(),
        url: url.to_string(),
        token,
    };
    match existing {
        Some(index) => servers[index] = entry,
        None => servers.push(entry),
    }
    Ok(servers)
}

/// What the canvas is told of `servers`.
pub fn views(servers: &[ServerEntry]) -> Vec<ServerView> {
    servers
        .iter()
        .map(|server| ServerView {
            name: server.name.clone(),
            url: server.url.clone(),
            token_set: !server.token.is_empty(),
        })
        .collect()
}

/// Checks `server`: reached (and TLS), a Weft server with the routes the app needs, the token
/// taken. Waits at most `timeout` for each answer.
pub async fn check(server: &ServerEntry, timeout: Duration) -> ServerCheck {
    let client = match client(timeout) {
        Ok(client) => client,
        Err(error) => return ServerCheck::wrong(error),
    };
    let url = &server.url;
    let document = match client.get(format!("{url}/openapi.json")).send().await {
        Ok(answer) => answer,
        Err(error) => return ServerCheck::wrong(unreachable(url, &error, timeout)),
    };
    if !document.status().is_success() {
        return ServerCheck::wrong(format!(
            "{url} is not a Weft server: GET /openapi.json answered {}",
            document.status()
        ));
    }
    let document: serde_json::Value = match document.json().await {
        Ok(document) => document,
        Err(_) => {
            return ServerCheck::wrong(format!(
                "{url} is not a Weft server: /openapi.json is not its API document"
            ));
        }
    };
    if document["info"]["title"] != "Weft" {
        return ServerCheck::wrong(format!(
            "{url} is not a Weft server: its API document is {}'s",
            document["info"]["title"]
                .as_str()
                .unwrap_or("another program")
        ));
    }
    let missing: Vec<&str> = NEEDED_ROUTES
        .into_iter()
        .filter(|route| document["paths"].get(route).is_none())
        .collect();
    if !missing.is_empty() {
        return ServerCheck::wrong(format!(
            "{url} is an older Weft server: it lacks {}, which this app uses; update its `weft`",
            missing.join(", ")
        ));
    }
    let answer = match client
        .get(format!("{url}/v1/runs?limit=1"))
        .bearer_auth(&server.token)
        .send()
        .await
    {
        Ok(answer) => answer,
        Err(error) => return ServerCheck::wrong(unreachable(url, &error, timeout)),
    };
    match answer.status().as_u16() {
        200 => ServerCheck {
            ok: true,
            message: format!("connected to {url}: the token is taken"),
        },
        401 => ServerCheck::wrong(format!(
            "{url} refuses the token (401): it must be one of the server's tokens file"
        )),
        status => {
            let body: serde_json::Value = answer.json().await.unwrap_or_default();
            ServerCheck::wrong(format!(
                "{url} answered {status} for the runs: {}",
                body["message"].as_str().unwrap_or("no message")
            ))
        }
    }
}

/// How long the inbox and History wait for a server: a slow server delays them this much at most.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// How long opening a server's run may take (a long run's events are many).
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a decision (or another action) sent to a server may take.
const DECIDE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a followed run's stream may stay silent: the server sends a keep-alive every 15 s,
/// so a longer silence is a server gone.
const STREAM_SILENCE: Duration = Duration::from_secs(45);

/// How long following a run keeps trying to reach a server that stopped answering.
const FOLLOW_PATIENCE: Duration = Duration::from_secs(120);

fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|error| format!("no HTTP client: {error}"))
}

/// `GET {path}` on `server` under its token, read as `T`; refused naming the server and `what`
/// was asked, in the words of its error.
async fn read<T: serde::de::DeserializeOwned>(
    server: &ServerEntry,
    path: &str,
    timeout: Duration,
    what: &str,
) -> Result<T, AppError> {
    let (url, name) = (&server.url, &server.name);
    let answer = client(timeout)
        .map_err(|message| AppError::new(ErrorCode::Server, message))?
        .get(format!("{url}{path}"))
        .bearer_auth(&server.token)
        .send()
        .await
        .map_err(|error| {
            AppError::new(
                ErrorCode::Server,
                format!("server `{name}`: {}", unreachable(url, &error, timeout)),
            )
        })?;
    let status = answer.status().as_u16();
    if status == 200 {
        return answer.json().await.map_err(|error| {
            AppError::new(
                ErrorCode::Server,
                format!("server `{name}`: {what} could not be read ({error})"),
            )
        });
    }
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    Err(refused_by(name, status, &body, what))
}

/// A server's refusal, with the error code the canvas acts on.
fn refused_by(name: &str, status: u16, body: &serde_json::Value, what: &str) -> AppError {
    let code = match status {
        401 => {
            return AppError::new(
                ErrorCode::Server,
                format!(
                    "server `{name}` refuses the token (401): set another in Settings → Servers"
                ),
            );
        }
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        409 => ErrorCode::Conflict,
        _ => ErrorCode::BadRequest,
    };
    let message = body["message"].as_str().unwrap_or("no message");
    AppError::new(
        code,
        format!("server `{name}` answered {status} for {what}: {message}"),
    )
}

/// The approvals waiting on `server` for its token's name, each marked with the server's name;
/// else what is wrong, naming the server.
pub async fn approvals(
    server: &ServerEntry,
    timeout: Duration,
) -> Result<Vec<weft_api::views::PendingApproval>, String> {
    let mut approvals: Vec<weft_api::views::PendingApproval> =
        read(server, "/v1/approvals", timeout, "its approvals")
            .await
            .map_err(|error| error.message)?;
    for approval in &mut approvals {
        approval.server = Some(server.name.clone());
    }
    Ok(approvals)
}

/// The newest `limit` runs of `server`, each marked with the server's name; else what is
/// wrong, naming the server.
pub async fn runs(
    server: &ServerEntry,
    limit: usize,
    timeout: Duration,
) -> Result<Vec<weft_api::views::RunListing>, String> {
    let mut runs: Vec<weft_api::views::RunListing> = read(
        server,
        &format!("/v1/runs?limit={limit}"),
        timeout,
        "its runs",
    )
    .await
    .map_err(|error| error.message)?;
    for run in &mut runs {
        run.server = Some(server.name.clone());
    }
    Ok(runs)
}

/// Everything `server` keeps of its run `run_id`, as `weft show --json` prints it there.
pub async fn run(
    server: &ServerEntry,
    run_id: &str,
) -> Result<weft_api::views::RunDetail, AppError> {
    read(
        server,
        &format!("/v1/runs/{run_id}"),
        OPEN_TIMEOUT,
        &format!("run {run_id}"),
    )
    .await
}

/// The flows of `server`'s flows folder; else what is wrong, naming the server.
pub async fn flows(
    server: &ServerEntry,
    timeout: Duration,
) -> Result<Vec<weft_api::views::FlowListing>, String> {
    read(server, "/v1/flows", timeout, "its flows")
        .await
        .map_err(|error| error.message)
}

/// One flow of `server`'s flows folder, as its file is now.
pub async fn flow(
    server: &ServerEntry,
    name: &str,
) -> Result<weft_api::views::FlowDetail, AppError> {
    read(
        server,
        &format!("/v1/flows/{name}"),
        OPEN_TIMEOUT,
        &format!("the flow `{name}`"),
    )
    .await
}

/// A run of a server's flow, as the app starts it there (`POST /v1/runs`).
#[derive(Debug, Clone, Serialize, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerRunRequest {
    /// The flow of the server's folder, by name.
    pub flow: String,
    /// The run's input; absent or empty: the start node's `initialInput`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Where the run stops for the person.
    #[serde(default)]
    pub breakpoints: Vec<weft_engine::breakpoints::Breakpoint>,
    /// Outputs that stand for their nodes, which then do not run.
    #[serde(default)]
    pub pins: weft_engine::pins::Pins,
}

/// Starts `request` on `server` under its token; the run's id.
pub async fn start(server: &ServerEntry, request: &ServerRunRequest) -> Result<String, AppError> {
    let mut body = serde_json::to_value(request)
        .map_err(|error| AppError::new(ErrorCode::Internal, error.to_string()))?;
    if request
        .input
        .as_deref()
        .is_some_and(|input| input.trim().is_empty())
    {
        body.as_object_mut().map(|body| body.remove("input"));
    }
    let answer = post(server, "/v1/runs", &body, "the run").await?;
    answer["runId"].as_str().map(str::to_string).ok_or_else(|| {
        AppError::new(
            ErrorCode::Server,
            format!("server `{}` started a run but named no runId", server.name),
        )
    })
}

/// Follows run `run_id` of `server` live: each event after event `after` goes to `on_event`,
/// in order and once, until the run ends or pauses (or `stop` is cancelled: `None`); then the
/// run as the server keeps it. A stream the server closes while the run goes on, or a server
/// that stops answering for a while, is asked again from the last event received
/// (`Last-Event-ID`), so nothing is missed or seen twice; after [`FOLLOW_PATIENCE`] without an
/// answer, the error names the server.
pub async fn follow(
    server: &ServerEntry,
    run_id: &str,
    after: u64,
    stop: &tokio_util::sync::CancellationToken,
    mut on_event: impl FnMut(weft_event::RunEvent),
) -> Result<Option<weft_api::views::RunDetail>, AppError> {
    let mut last = after;
    let mut unanswered_since: Option<std::time::Instant> = None;
    let mut wait = Duration::from_millis(250);
    loop {
        let streamed = tokio::select! {
            () = stop.cancelled() => return Ok(None),
            streamed = stream_events(server, run_id, &mut last, &mut on_event) => streamed,
        };
        // The stream ended: where does the run stand?
        let read = match streamed {
            Ok(()) => tokio::select! {
                () = stop.cancelled() => return Ok(None),
                detail = run(server, run_id) => detail,
            },
            Err(error) => Err(error),
        };
        match read {
            Ok(detail) if detail.run.summary.status != weft_event::RunStatus::Running => {
                // A stream broken off as the run ended left its last events out: they are in
                // what the server keeps.
                for event in &detail.events {
                    if event.seq > last {
                        last = event.seq;
                        on_event(event.clone());
                    }
                }
                return Ok(Some(detail));
            }
            Ok(_) => {
                unanswered_since = None;
                wait = Duration::from_millis(250);
            }
            // The server refused (the run is gone, the token changed): following is over.
            Err(error) if error.code != ErrorCode::Server => return Err(error),
            Err(error) => {
                let since = *unanswered_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= FOLLOW_PATIENCE {
                    return Err(AppError::new(
                        ErrorCode::Server,
                        format!(
                            "{}; stopped following run {run_id} after {} s (open it again from History when the server is back)",
                            error.message,
                            FOLLOW_PATIENCE.as_secs()
                        ),
                    ));
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(None),
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// One event stream of run `run_id` from after event `last`, to its end; `last` follows the
/// events received.
async fn stream_events(
    server: &ServerEntry,
    run_id: &str,
    last: &mut u64,
    on_event: &mut impl FnMut(weft_event::RunEvent),
) -> Result<(), AppError> {
    let (url, name) = (&server.url, &server.name);
    let lost = |message: String| AppError::new(ErrorCode::Server, message);
    let client = reqwest::Client::builder()
        .connect_timeout(CHECK_TIMEOUT)
        .read_timeout(STREAM_SILENCE)
        .build()
        .map_err(|error| lost(format!("no HTTP client: {error}")))?;
    let mut answer = client
        .get(format!("{url}/v1/runs/{run_id}/events"))
        .bearer_auth(&server.token)
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .map_err(|error| {
            lost(format!(
                "server `{name}`: {}",
                unreachable(url, &error, STREAM_SILENCE)
            ))
        })?;
    let status = answer.status().as_u16();
    if status != 200 {
        let body: serde_json::Value = answer.json().await.unwrap_or_default();
        return Err(refused_by(
            name,
            status,
            &body,
            &format!("the events of run {run_id}"),
        ));
    }
    let mut stream = EventStream::default();
    loop {
        let chunk = answer.chunk().await.map_err(|error| {
            lost(format!(
                "server `{name}`: the events of run {run_id} broke off: {}",
                unreachable(url, &error, STREAM_SILENCE)
            ))
        })?;
        let Some(chunk) = chunk else {
            return Ok(());
        };
        for event in stream.feed(&chunk) {
            // Events come in order; one at or before the last received was seen already.
            if event.seq > *last {
                *last = event.seq;
                on_event(event);
            }
        }
    }
}

/// Server-sent events read from the bytes of a stream as they come: each message's `data:`,
/// read as a run event (comments, which keep the connection alive, and messages that are not
/// run events are passed over).
#[derive(Default)]
struct EventStream {
    pending: Vec<u8>,
}

impl EventStream {
    fn feed(&mut self, bytes: &[u8]) -> Vec<weft_event::RunEvent> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = message_end(&self.pending) {
            let message: Vec<u8> = self.pending.drain(..end.0).collect();
            self.pending.drain(..end.1 - end.0);
            let text = String::from_utf8_lossy(&message);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            if data.is_empty() {
                continue;
            }
            if let Ok(event) = serde_json::from_str(&data.join("\n")) {
                events.push(event);
            }
        }
        events
    }
}

/// Where the first complete message of `bytes` ends, and where the next begins (a blank line
/// ends a message, `\n\n` or `\r\n\r\n`).
fn message_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes.windows(2).position(|pair| pair == b"\n\n");
    let crlf = bytes.windows(4).position(|four| four == b"\r\n\r\n");
    match (lf, crlf) {
        (Some(lf), Some(crlf)) if crlf < lf => Some((crlf, crlf + 4)),
        (Some(lf), _) => Some((lf, lf + 2)),
        (None, Some(crlf)) => Some((crlf, crlf + 4)),
        (None, None) => None,
    }
}

/// What a server said of a decision: the run goes on, or (`approval`) it was counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub run_id: String,
    pub approval: Option<weft_api::ApprovalProgress>,
}

/// Decides the approval run `run_id` of `server` waits at, under the server's token (its name
/// is the decider there); refused as the server refuses it, naming the server.
pub async fn decide(
    server: &ServerEntry,
    run_id: &str,
    decision: &weft_nodes::Decision,
) -> Result<Decided, AppError> {
    let body = serde_json::to_value(decision)
        .map_err(|error| AppError::new(ErrorCode::Internal, error.to_string()))?;
    let answer = post(
        server,
        &format!("/v1/runs/{run_id}/decision"),
        &body,
        "the decision",
    )
    .await?;
    Ok(Decided {
        run_id: answer["runId"].as_str().unwrap_or(run_id).to_string(),
        approval: serde_json::from_value(answer["approval"].clone()).ok(),
    })
}

/// What the canvas asks of a server's run it shows (under the server's token).
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ServerAction {
    /// Go on from the breakpoint it stopped at (`POST /v1/runs/{id}/continue`).
    Continue(weft_engine::Continue),
    /// Pause it before its next step (`POST /v1/runs/{id}/pause`).
    Pause,
    /// Cancel it (`POST /v1/runs/{id}/cancel`).
    Cancel,
}

/// Does `action` to run `run_id` of `server`; refused as the server refuses it.
pub async fn act(
    server: &ServerEntry,
    run_id: &str,
    action: &ServerAction,
) -> Result<(), AppError> {
    let (route, body, what) = match action {
        ServerAction::Continue(how) => (
            "continue",
            serde_json::to_value(how)
                .map_err(|error| AppError::new(ErrorCode::Internal, error.to_string()))?,
            "going on",
        ),
        ServerAction::Pause => ("pause", serde_json::json!({}), "the pause"),
        ServerAction::Cancel => ("cancel", serde_json::json!({}), "the cancel"),
    };
    post(server, &format!("/v1/runs/{run_id}/{route}"), &body, what).await?;
    Ok(())
}

/// `POST {path}` with `body` on `server` under its token; its answer, or refused naming the
/// server and `what` was asked. Nothing was done when the server could not be reached.
async fn post(
    server: &ServerEntry,
    path: &str,
    body: &serde_json::Value,
    what: &str,
) -> Result<serde_json::Value, AppError> {
    let (url, name) = (&server.url, &server.name);
    let failed = |message: String| AppError::new(ErrorCode::Server, message);
    let answer = client(DECIDE_TIMEOUT)
        .map_err(failed)?
        .post(format!("{url}{path}"))
        .bearer_auth(&server.token)
        .json(body)
        .send()
        .await
        .map_err(|error| {
            failed(format!(
                "server `{name}`: {}; {what} was not sent",
                unreachable(url, &error, DECIDE_TIMEOUT)
            ))
        })?;
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    if (200..300).contains(&status) {
        return Ok(body);
    }
    Err(refused_by(name, status, &body, what))
}

/// Why a request to `url` got no answer: not reached, TLS, or too slow.
fn unreachable(url: &str, error: &reqwest::Error, timeout: Duration) -> String {
    let mut causes = vec![error.to_string()];
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let said = causes.join(": ");
    let lowered = said.to_lowercase();
    if error.is_timeout() {
        format!("{url} did not answer within {} s", timeout.as_secs())
    } else if [
        "certificate",
        "tls",
        "handshake",
        "corrupt message",
        "alert",
    ]
    .iter()
    .any(|word| lowered.contains(word))
    {
        format!("TLS with {url} failed: {said}")
    } else {
        format!("cannot reach {url}: {said}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, url: &str, token: &str) -> ServerChange {
        ServerChange {
            name: name.into(),
            url: url.into(),
            token: token.into(),
            remove: false,
        }
    }

    #[test]
    fn servers_are_added_changed_and_removed_keeping_a_token_not_given_again() {
        let servers = changed(&[], &change("team", "http://127.0.0.1:8420/", "t-1")).expect("add");
        assert_eq!(
            servers,
            [ServerEntry {
                name: "team".into(),
                url: "http://127.0.0.1:8420".into(),
                token: "t-1".into()
            }]
        );
        let servers =
            changed(&servers, &change("team", "https://weft.example.com", "")).expect("change");
        assert_eq!(servers[0].url, "https://weft.example.com");
        assert_eq!(servers[0].token, "t-1", "the kept token stays");
        assert_eq!(
            views(&servers),
            [ServerView {
                name: "team".into(),
                url: "https://weft.example.com".into(),
                token_set: true
            }]
        );
        let removed = changed(
            &servers,
            &ServerChange {
                remove: true,
                ..change("team", "", "")
            },
        )
        .expect("remove");
        assert!(removed.is_empty());
    }

    #[test]
    fn a_server_without_a_name_address_or_token_is_refused_saying_which() {
        for (given, says) in [
            (change("", "http://x", "t"), "a word without spaces"),
            (change("my team", "http://x", "t"), "a word without spaces"),
            (change("team", "x:8420", "t"), "starts with http://"),
            (change("team", "http://", "t"), "starts with http://"),
            (change("team", "http://x", ""), "needs a token"),
        ] {
            let refused = changed(&[], &given).expect_err("refused");
            assert!(
                refused.message.contains(says),
                "{given:?}: {}",
                refused.message
            );
        }
        let refused = changed(
            &[],
            &ServerChange {
                remove: true,
                ..change("team", "", "")
            },
        )
        .expect_err("nothing to remove");
        assert!(refused.message.contains("no server `team`"));
    }

    #[test]
    fn server_sent_events_are_read_across_chunks_past_comments_and_either_line_end() {
        let event = |seq: u64| {
            serde_json::json!({"seq": seq, "runId": "r", "ts": "2026-11-28T14:00:00.000Z",
                "type": "step_start", "nodeId": "a", "content": ""})
            .to_string()
        };
        let text = format!(
            ": keep-alive\n\nevent: run_start\nid: 1\ndata: {}\n\nid: 2\r\ndata: {}\r\n\r\ndata: not an event\n\ndata: {}",
            event(1),
            event(2),
            event(3)
        );
        let mut stream = EventStream::default();
        let mut read = Vec::new();
        // Three bytes at a time: messages and lines are cut anywhere.
        for chunk in text.as_bytes().chunks(3) {
            read.extend(stream.feed(chunk).into_iter().map(|event| event.seq));
        }
        assert_eq!(read, [1, 2], "the third is not complete yet");
        read.extend(stream.feed(b"\n\n").into_iter().map(|event| event.seq));
        assert_eq!(read, [1, 2, 3]);
    }
}
