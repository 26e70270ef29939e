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

/// How long the inbox waits for a server's approvals: a slow server delays it this much at most.
pub const INBOX_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a decision sent to a server may take.
const DECIDE_TIMEOUT: Duration = Duration::from_secs(30);

fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|error| format!("no HTTP client: {error}"))
}

/// The approvals waiting on `server` for its token's name, each marked with the server's name;
/// else what is wrong, naming the server.
pub async fn approvals(
    server: &ServerEntry,
    timeout: Duration,
) -> Result<Vec<weft_api::views::PendingApproval>, String> {
    let url = &server.url;
    let name = &server.name;
    let answer = client(timeout)?
        .get(format!("{url}/v1/approvals"))
        .bearer_auth(&server.token)
        .send()
        .await
        .map_err(|error| format!("server `{name}`: {}", unreachable(url, &error, timeout)))?;
    match answer.status().as_u16() {
        200 => {}
        401 => return Err(format!("server `{name}` refuses the token (401)")),
        status => {
            return Err(format!(
                "server `{name}` answered {status} for its approvals"
            ));
        }
    }
    let mut approvals: Vec<weft_api::views::PendingApproval> = answer
        .json()
        .await
        .map_err(|error| format!("server `{name}`: its approvals could not be read ({error})"))?;
    for approval in &mut approvals {
        approval.server = Some(name.clone());
    }
    Ok(approvals)
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
    let url = &server.url;
    let name = &server.name;
    let failed = |message: String| AppError::new(ErrorCode::Conflict, message);
    let answer = client(DECIDE_TIMEOUT)
        .map_err(failed)?
        .post(format!("{url}/v1/runs/{run_id}/decision"))
        .bearer_auth(&server.token)
        .json(decision)
        .send()
        .await
        .map_err(|error| {
            failed(format!(
                "server `{name}`: {}; nothing was decided",
                unreachable(url, &error, DECIDE_TIMEOUT)
            ))
        })?;
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    if (200..300).contains(&status) {
        return Ok(Decided {
            run_id: body["runId"].as_str().unwrap_or(run_id).to_string(),
            approval: serde_json::from_value(body["approval"].clone()).ok(),
        });
    }
    let code = match status {
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        409 => ErrorCode::Conflict,
        401 => ErrorCode::Settings,
        _ => ErrorCode::BadRequest,
    };
    let message = body["message"].as_str().unwrap_or("no message");
    Err(AppError::new(
        code,
        format!("server `{name}` refused the decision ({status}): {message}"),
    ))
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
}
