//! Settings → Servers' connection check (SPEC §18) against a real `weft serve` on loopback, and
//! against what a person may have typed instead: a wrong token, nothing listening, TLS to a
//! plain HTTP server, a server that never answers, one that is not Weft, and an older Weft
//! without the routes the app uses. Each says what is wrong. And the app's inbox over a team's
//! server: its approvals listed and decided there.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_app::servers::{CHECK_TIMEOUT, ServerEntry, check};
use weft_app::{AppPaths, AppState};
use weft_nodes::Decision;

use crate::common::serve::{Server, TOKEN};
use crate::common::{Sandbox, approval_flow};

fn entry(url: &str, token: &str) -> ServerEntry {
    ServerEntry {
        name: "team".into(),
        url: url.into(),
        token: token.into(),
    }
}

/// A loopback HTTP server answering every request with `answer` (or never, when `None`).
async fn canned(answer: Option<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut request = [0_u8; 4096];
                let _ = socket.read(&mut request).await;
                match answer {
                    Some(answer) => {
                        let _ = socket.write_all(answer.as_bytes()).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    format!("http://{address}")
}

fn json_answer(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_check_says_what_is_wrong_or_that_all_is_well() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &[], None);

    let found = check(&entry(&server.url, TOKEN), CHECK_TIMEOUT).await;
    assert!(found.ok, "{found:?}");
    assert!(found.message.contains("connected"), "{found:?}");

    let wrong = |url: &str, token: &str, timeout: Duration| {
        let entry = entry(url, token);
        async move {
            let found = check(&entry, timeout).await;
            assert!(!found.ok, "{found:?}");
            found.message
        }
    };
    let said = wrong(&server.url, "not-a-token-0123456789", CHECK_TIMEOUT).await;
    assert!(said.contains("refuses the token (401)"), "{said}");

    let nothing = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        format!("http://{address}")
    };
    let said = wrong(&nothing, TOKEN, CHECK_TIMEOUT).await;
    assert!(
        said.starts_with(&format!("cannot reach {nothing}")),
        "{said}"
    );

    let over_tls = server.url.replace("http://", "https://");
    let said = wrong(&over_tls, TOKEN, CHECK_TIMEOUT).await;
    assert!(said.starts_with("TLS with"), "{said}");

    let silent = canned(None).await;
    let said = wrong(&silent, TOKEN, Duration::from_secs(1)).await;
    assert!(said.contains("did not answer within 1 s"), "{said}");

    let other = canned(Some(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into(),
    ))
    .await;
    let said = wrong(&other, TOKEN, CHECK_TIMEOUT).await;
    assert!(said.contains("is not a Weft server"), "{said}");

    // A Weft from before flows and breakpoints could be reached over the API.
    let older = canned(Some(json_answer(
        r#"{"openapi":"3.1.0","info":{"title":"Weft","version":"1"},"paths":{"/v1/runs":{},"/v1/runs/{id}/events":{},"/v1/approvals":{}}}"#,
    )))
    .await;
    let said = wrong(&older, TOKEN, CHECK_TIMEOUT).await;
    assert!(
        said.contains("is an older Weft server: it lacks /v1/flows, /v1/runs/{id}/continue, /v1/runs/{id}/pause"),
        "{said}"
    );
}

/// The app's inbox lists what waits on a team's server (marked with it) beside its own, decides
/// it there under the server's token, and names a server that stopped without losing the rest.
#[tokio::test(flavor = "multi_thread")]
async fn the_apps_inbox_lists_and_decides_a_team_servers_approvals() {
    let team = Sandbox::new();
    let server = Server::start(&team, &[], None);
    team.flow("flows/review.json", &approval_flow());
    let (status, started) = server
        .post("/v1/runs", serde_json::json!({ "flow": "review" }))
        .await;
    assert_eq!(status, 201, "{started}");
    let id = started["runId"].as_str().expect("id").to_string();
    server.wait_for(&id, "paused").await;

    // The app: its own store, the server in its settings.
    let desk = Sandbox::new();
    let config = desk.dir.path().join("config");
    std::fs::create_dir_all(&config).expect("config");
    std::fs::write(
        config.join("settings.json"),
        serde_json::json!({ "servers": [{ "name": "team", "url": server.url, "token": TOKEN }] })
            .to_string(),
    )
    .expect("settings");
    let app = AppState::open(
        AppPaths {
            config_dir: config,
            store: weft_api::StoreLocation::from(desk.db()),
        },
        None,
    )
    .expect("the app opens");

    let inbox = app.inbox().await.expect("inbox");
    assert!(inbox.problems.is_empty(), "{:?}", inbox.problems);
    assert_eq!(inbox.approvals.len(), 1, "{:?}", inbox.approvals);
    let waiting = &inbox.approvals[0];
    assert_eq!(
        (
            waiting.run_id.as_str(),
            waiting.server.as_deref(),
            waiting.message.as_str()
        ),
        (id.as_str(), Some("team"), "Ship Draft: the plan?")
    );

    let decision = Decision::parse("approve", "from the desk").expect("decision");
    let answer = app
        .decide_on_server("team", &id, decision.clone())
        .await
        .expect("decided");
    assert_eq!(answer.approval, None);
    let run = server.wait_for(&id, "completed").await;
    assert_eq!(
        run["run"]["result"],
        "APPROVED Draft: the plan (from the desk)"
    );
    let refused = app
        .decide_on_server("team", &id, decision)
        .await
        .expect_err("decided already");
    assert!(
        refused
            .message
            .starts_with("server `team` refused the decision (409)"),
        "{}",
        refused.message
    );
    // The one refused sees who won: the token's name, through the API.
    assert!(
        refused
            .message
            .contains("ada decided `review` already (approve at "),
        "{}",
        refused.message
    );
    assert!(
        refused.message.ends_with(", through api)"),
        "{}",
        refused.message
    );

    // The server stops: the inbox names it, and still answers.
    drop(server);
    let inbox = app.inbox().await.expect("inbox");
    assert!(inbox.approvals.is_empty());
    assert_eq!(inbox.problems.len(), 1, "{:?}", inbox.problems);
    assert!(
        inbox.problems[0].starts_with("server `team`: cannot reach"),
        "{:?}",
        inbox.problems
    );
}
