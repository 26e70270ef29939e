//! Settings → Servers' connection check (SPEC §18) against a real `weft serve` on loopback, and
//! against what a person may have typed instead: a wrong token, nothing listening, TLS to a
//! plain HTTP server, a server that never answers, one that is not Weft, and an older Weft
//! without the routes the app uses. Each says what is wrong. And the app over a team's server:
//! its approvals listed and decided there; its runs in History, opened, compared with a local
//! run and followed live, through a proxy that breaks the first event stream off.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_app::servers::{CHECK_TIMEOUT, ServerEntry, check};
use weft_app::{AppPaths, AppState};
use weft_nodes::Decision;
use weft_scripted_llm::{Reply, Script, ScriptedLlm};

use crate::common::serve::{Server, TOKEN};
use crate::common::{Sandbox, approval_flow, node};

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
            .starts_with("server `team` answered 409 for the decision"),
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

/// The desktop app over its own store in `desk`, with `url` as the server `team`.
pub(crate) fn desktop_app(desk: &Sandbox, url: &str) -> AppState {
    let config = desk.dir.path().join("config");
    std::fs::create_dir_all(&config).expect("config");
    std::fs::write(
        config.join("settings.json"),
        serde_json::json!({ "servers": [{ "name": "team", "url": url, "token": TOKEN }] })
            .to_string(),
    )
    .expect("settings");
    AppState::open(
        AppPaths {
            config_dir: config,
            store: weft_api::StoreLocation::from(desk.db()),
        },
        None,
    )
    .expect("the app opens")
}

/// A loopback proxy in front of a `weft serve`, as a load balancer would stand: it breaks off
/// the first event stream asked of it once it has passed its first event on, keeps what each
/// event stream request asked as `Last-Event-ID`, and can be pointed at a server started again.
struct Proxy {
    url: String,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    upstream: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Proxy {
    fn point_at(&self, url: &str) {
        *self.upstream.lock().expect("lock") = url.trim_start_matches("http://").to_string();
    }
}

async fn breaking_proxy(upstream: String) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let upstream = std::sync::Arc::new(std::sync::Mutex::new(
        upstream.trim_start_matches("http://").to_string(),
    ));
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (streams, target) = (
        std::sync::Arc::clone(&asked),
        std::sync::Arc::clone(&upstream),
    );
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let upstream = target.lock().expect("lock").clone();
            let streams = std::sync::Arc::clone(&streams);
            tokio::spawn(async move {
                let mut request = vec![0_u8; 16 * 1024];
                let read = client.read(&mut request).await.unwrap_or(0);
                let request = &request[..read];
                let text = String::from_utf8_lossy(request).to_string();
                let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                if server.write_all(request).await.is_err() {
                    return;
                }
                let first_stream = text.contains("/events ") && {
                    let mut streams = streams.lock().expect("lock");
                    let last = text
                        .lines()
                        .find_map(|line| line.strip_prefix("last-event-id: "))
                        .or_else(|| {
                            text.lines()
                                .find_map(|line| line.strip_prefix("Last-Event-ID: "))
                        })
                        .unwrap_or("")
                        .to_string();
                    streams.push(last);
                    streams.len() == 1
                };
                if !first_stream {
                    let (mut from_server, mut to_server) = server.into_split();
                    let (mut from_client, mut to_client) = client.into_split();
                    let _ = tokio::join!(
                        tokio::io::copy(&mut from_server, &mut to_client),
                        tokio::io::copy(&mut from_client, &mut to_server)
                    );
                    return;
                }
                // The first event stream: its head and first event, then the connection drops
                // in the middle of the stream.
                let mut passed = Vec::new();
                let mut buffer = [0_u8; 4096];
                loop {
                    let Ok(read) = server.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 || client.write_all(&buffer[..read]).await.is_err() {
                        return;
                    }
                    passed.extend_from_slice(&buffer[..read]);
                    let body = String::from_utf8_lossy(&passed);
                    if body.contains("event: run_start") && body.matches("\n\n").count() >= 2 {
                        return;
                    }
                }
            });
        }
    });
    Proxy {
        url: format!("http://{address}"),
        asked,
        upstream,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_apps_history_opens_compares_and_follows_a_team_servers_runs() {
    let llm = ScriptedLlm::start(Script::always(Reply::Slow {
        delay_ms: 600,
        content: "said".into(),
    }))
    .await
    .expect("scripted LLM");
    let team = Sandbox::new();
    let server = Server::start(&team, &[], Some(&llm));
    team.flow("flows/review.json", &approval_flow());
    let agent = |id: &str| {
        node(
            id,
            "agent",
            serde_json::json!({"model": "gpt-4o-mini", "userPrompt": "{{ PREVIOUS_OUTPUT }}"}),
        )
    };
    team.flow(
        "flows/three.json",
        &serde_json::json!({"version": 1, "name": "Three", "nodes": [
            node("start", "start", serde_json::json!({"initialInput": "go"})),
            agent("a1"), agent("a2"), agent("a3")],
            "edges": [{"id": "e1", "source": "start", "target": "a1"},
                      {"id": "e2", "source": "a1", "target": "a2"},
                      {"id": "e3", "source": "a2", "target": "a3"}]}),
    );

    // A run of the desk's own store, then one of the server: the same flow, another answer.
    let desk = Sandbox::new();
    let proxy = breaking_proxy(server.url.clone()).await;
    let app = desktop_app(&desk, &proxy.url);
    let flow = weft_flow::Flow::parse(&approval_flow().to_string(), "review.json").expect("flow");
    let local = app
        .weft()
        .start(flow, weft_api::StartRequest::default())
        .await
        .expect("starts")
        .outcome()
        .await
        .expect("an outcome")
        .run_id;
    app.decide(
        &local,
        Decision::parse("approve", "at my desk").expect("decision"),
        None,
    )
    .await
    .expect("decided here");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app
        .weft()
        .run(&local)
        .await
        .expect("run")
        .run
        .summary
        .status
        != weft_event::RunStatus::Completed
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the local run did not complete"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, started) = server
        .post("/v1/runs", serde_json::json!({ "flow": "review" }))
        .await;
    let remote = started["runId"].as_str().expect("id").to_string();
    server.wait_for(&remote, "paused").await;
    let (status, _) = server
        .post(
            &format!("/v1/runs/{remote}/decision"),
            serde_json::json!({ "decision": "approve", "note": "on the server" }),
        )
        .await;
    assert_eq!(status, 200);
    server.wait_for(&remote, "completed").await;

    // History lists both, the server's marked, newest first.
    let history = app.history(20).await.expect("history");
    assert!(history.problems.is_empty(), "{:?}", history.problems);
    let listed: Vec<(&str, Option<&str>)> = history
        .runs
        .iter()
        .map(|run| (run.summary.id.as_str(), run.server.as_deref()))
        .collect();
    assert_eq!(
        listed,
        [(remote.as_str(), Some("team")), (local.as_str(), None)]
    );

    // Opened: the server's run as the server keeps it.
    let opened = app.run_detail(&remote, Some("team")).await.expect("opened");
    assert_eq!(
        opened.run.result,
        Some(serde_json::json!(
            "APPROVED Draft: the plan (on the server)"
        ))
    );
    assert!(!opened.events.is_empty() && !opened.visits.is_empty());
    let missing = app
        .run_detail("no-such-run", Some("team"))
        .await
        .expect_err("no such run");
    assert_eq!(
        missing.code,
        weft_app::ErrorCode::NotFound,
        "{}",
        missing.message
    );
    assert!(
        missing.message.starts_with("server `team` answered 404"),
        "{}",
        missing.message
    );

    // Compared with the local run: the approval's note made the outputs differ.
    let compared = app
        .compare(
            &weft_app::RunRef {
                id: local.clone(),
                server: None,
            },
            &weft_app::RunRef {
                id: remote.clone(),
                server: Some("team".into()),
            },
        )
        .await
        .expect("compared");
    assert!(!compared.equal);
    assert_eq!(compared.a.id, local);
    assert_eq!(compared.b.id, remote);
    let yes = compared
        .nodes
        .iter()
        .find(|node| node.node == "yes")
        .expect("yes compared");
    assert_eq!(
        (yes.a.output.clone(), yes.b.output.clone()),
        (
            Some(serde_json::json!("APPROVED Draft: the plan (at my desk)")),
            Some(serde_json::json!(
                "APPROVED Draft: the plan (on the server)"
            ))
        )
    );
    assert!(
        compared
            .nodes
            .iter()
            .filter(|node| node.node != "yes" && node.node != "out")
            .all(|node| node.same_output)
    );

    // Followed live while it runs; the proxy breaks the first stream off after the run's
    // start, and following goes on from the last event received.
    let (_, started) = server
        .post("/v1/runs", serde_json::json!({ "flow": "three" }))
        .await;
    let going = started["runId"].as_str().expect("id").to_string();
    let mut received = Vec::new();
    let ended = app
        .follow_server_run("team", &going, 0, |event| received.push(event))
        .await
        .expect("followed")
        .expect("not stopped");
    assert_eq!(ended.run.summary.status, weft_event::RunStatus::Completed);
    let seqs: Vec<u64> = received.iter().map(|event| event.seq).collect();
    let stored: Vec<u64> = ended.events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, stored, "every event once, in order");
    let asked = proxy.asked.lock().expect("lock").clone();
    assert!(asked.len() >= 2, "the stream was opened again: {asked:?}");
    assert_eq!(asked[0], "0");
    assert!(asked[1].parse::<u64>().expect("a number") > 0, "{asked:?}");

    // Paused from the app while its first agent answers: it stops before the next step; Step
    // runs one step and stops again; Continue runs it to the end. All on the server.
    let (_, started) = server
        .post("/v1/runs", serde_json::json!({ "flow": "three" }))
        .await;
    let stepped = started["runId"].as_str().expect("id").to_string();
    app.act_on_server("team", &stepped, &weft_app::servers::ServerAction::Pause)
        .await
        .expect("paused");
    let mut last = 0;
    let mut stops = Vec::new();
    for how in [
        Some(weft_engine::Continue {
            step: true,
            set: None,
        }),
        Some(weft_engine::Continue::default()),
        None,
    ] {
        let stopped = app
            .follow_server_run("team", &stepped, last, |event| last = event.seq)
            .await
            .expect("followed")
            .expect("not stopped");
        stops.push((
            stopped.run.summary.status,
            stopped.waiting.map(|waiting| waiting.node_id),
        ));
        if let Some(how) = how {
            app.act_on_server(
                "team",
                &stepped,
                &weft_app::servers::ServerAction::Continue(how),
            )
            .await
            .expect("went on");
        }
    }
    use weft_event::RunStatus::{Completed, Paused};
    assert_eq!(
        stops,
        [
            (Paused, Some("a2".to_string())),
            (Paused, Some("a3".to_string())),
            (Completed, None)
        ]
    );

    // The server stops with a run waiting: History and the inbox name it, a decision sent
    // meanwhile says it was not sent; started again (behind the same address), it answers
    // again, its run is decided once, and a second decision is told who decided.
    let (_, started) = server
        .post("/v1/runs", serde_json::json!({ "flow": "review" }))
        .await;
    let waiting = started["runId"].as_str().expect("id").to_string();
    server.wait_for(&waiting, "paused").await;
    drop(server);
    let history = app.history(20).await.expect("history");
    assert!(
        history.runs.iter().all(|run| run.server.is_none()),
        "only the local run"
    );
    assert_eq!(history.problems.len(), 1, "{:?}", history.problems);
    assert!(
        history.problems[0].starts_with("server `team`:"),
        "{:?}",
        history.problems
    );
    let inbox = app.inbox().await.expect("inbox");
    assert_eq!(inbox.problems.len(), 1, "{:?}", inbox.problems);
    let decision = Decision::parse("approve", "back again").expect("decision");
    let unsent = app
        .decide_on_server("team", &waiting, decision.clone())
        .await
        .expect_err("nobody there");
    assert_eq!(
        unsent.code,
        weft_app::ErrorCode::Server,
        "{}",
        unsent.message
    );
    assert!(
        unsent.message.ends_with("the decision was not sent"),
        "{}",
        unsent.message
    );

    let server = Server::start(&team, &[], Some(&llm));
    proxy.point_at(&server.url);
    let inbox = app.inbox().await.expect("inbox");
    assert!(inbox.problems.is_empty(), "{:?}", inbox.problems);
    assert_eq!(inbox.approvals.len(), 1, "{:?}", inbox.approvals);
    assert_eq!(inbox.approvals[0].run_id, waiting);
    app.decide_on_server("team", &waiting, decision.clone())
        .await
        .expect("decided");
    let run = server.wait_for(&waiting, "completed").await;
    assert_eq!(
        run["run"]["result"],
        "APPROVED Draft: the plan (back again)"
    );
    let twice = app
        .decide_on_server("team", &waiting, decision)
        .await
        .expect_err("decided already");
    assert!(
        twice.message.contains("ada decided `review` already"),
        "{}",
        twice.message
    );
    let decisions = run["decisions"].as_array().map_or(0, Vec::len);
    assert_eq!(decisions, 1, "decided once: {run}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_app_runs_a_servers_flow_there_with_a_pin_and_a_breakpoint_and_goes_on() {
    let team = Sandbox::new();
    let server = Server::start(&team, &[], None);
    team.flow(
        "flows/polish.json",
        &serde_json::json!({"version": 1, "name": "Polish", "nodes": [
            node("start", "start", serde_json::json!({"initialInput": "the notes"})),
            node("draft", "template", serde_json::json!({"template": "Draft of {{ PREVIOUS_OUTPUT }}"})),
            node("polish", "template", serde_json::json!({"template": "Polished {{ PREVIOUS_OUTPUT }}"})),
            node("out", "output", serde_json::json!({}))],
            "edges": [{"id": "e1", "source": "start", "target": "draft"},
                      {"id": "e2", "source": "draft", "target": "polish"},
                      {"id": "e3", "source": "polish", "target": "out"}]}),
    );
    std::fs::write(team.dir.path().join("flows/broken.json"), "{ not json").expect("broken");
    let desk = Sandbox::new();
    let app = desktop_app(&desk, &server.url);

    // Its flows are listed (one that does not load says why), and one opens on the canvas.
    let listed = app.server_flows().await;
    assert!(listed.problems.is_empty(), "{:?}", listed.problems);
    let names: Vec<(&str, &str, bool)> = listed
        .flows
        .iter()
        .map(|flow| {
            (
                flow.server.as_str(),
                flow.flow.name.as_str(),
                flow.flow.error.is_some(),
            )
        })
        .collect();
    assert_eq!(names, [("team", "broken", true), ("team", "polish", false)]);
    let opened = app
        .open_server_flow("team", "polish")
        .await
        .expect("opened");
    assert_eq!(opened.flow.name, "Polish");
    assert_eq!(
        Some(opened.version.clone()),
        listed.flows[1].flow.version,
        "the version listed is the one opened"
    );
    let missing = app
        .open_server_flow("team", "nothing")
        .await
        .expect_err("no such flow");
    assert_eq!(
        missing.code,
        weft_app::ErrorCode::NotFound,
        "{}",
        missing.message
    );

    // Run there with `draft` pinned and a breakpoint before `polish`: it stops with the pinned
    // value, started under the token's name.
    let run_id = app
        .run_on_server(
            "team",
            &weft_app::servers::ServerRunRequest {
                flow: "polish".into(),
                input: Some("  ".into()),
                breakpoints: vec![
                    weft_engine::breakpoints::Breakpoint::parse("polish").expect("a breakpoint"),
                ],
                pins: [("draft".to_string(), serde_json::json!("pinned draft"))]
                    .into_iter()
                    .collect(),
            },
        )
        .await
        .expect("started on the server");
    let mut seen = Vec::new();
    let stopped = app
        .follow_server_run("team", &run_id, 0, |event| seen.push(event.seq))
        .await
        .expect("followed")
        .expect("not stopped");
    assert_eq!(stopped.run.summary.status, weft_event::RunStatus::Paused);
    let waiting = stopped.waiting.as_ref().expect("waits");
    assert_eq!(waiting.node_id, "polish");
    assert!(waiting.breakpoint.is_some(), "{waiting:?}");
    assert_eq!(waiting.input, serde_json::json!("pinned draft"));
    let trigger = stopped.run.summary.trigger.as_ref().expect("a trigger");
    assert_eq!(trigger.by.as_deref(), Some("ada"));

    // Going on with another value: the run completes on the server with it.
    app.act_on_server(
        "team",
        &run_id,
        &weft_app::servers::ServerAction::Continue(weft_engine::Continue {
            step: false,
            set: Some(serde_json::json!("replaced")),
        }),
    )
    .await
    .expect("went on");
    let after = *seen.last().expect("events");
    let ended = app
        .follow_server_run("team", &run_id, after, |event| seen.push(event.seq))
        .await
        .expect("followed")
        .expect("not stopped");
    assert_eq!(ended.run.summary.status, weft_event::RunStatus::Completed);
    assert_eq!(
        ended.run.result,
        Some(serde_json::json!("Polished replaced"))
    );
    let stored: Vec<u64> = ended.events.iter().map(|event| event.seq).collect();
    assert_eq!(seen, stored, "every event once, across the pause");

    // Going on again is refused by the server, naming it.
    let refused = app
        .act_on_server(
            "team",
            &run_id,
            &weft_app::servers::ServerAction::Continue(weft_engine::Continue::default()),
        )
        .await
        .expect_err("not paused");
    assert!(
        refused
            .message
            .starts_with("server `team` answered 409 for going on"),
        "{}",
        refused.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_delays_history_a_few_seconds_and_is_named() {
    let silent = canned(None).await;
    let desk = Sandbox::new();
    let app = desktop_app(&desk, &silent);
    let asked = std::time::Instant::now();
    let (history, flows) = tokio::join!(app.history(20), app.server_flows());
    let history = history.expect("history");
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "{:?}",
        asked.elapsed()
    );
    assert!(history.runs.is_empty());
    assert_eq!(
        history.problems,
        [format!("server `team`: {silent} did not answer within 5 s")]
    );
    assert_eq!(
        flows.problems,
        [format!("server `team`: {silent} did not answer within 5 s")]
    );
}
