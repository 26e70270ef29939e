//! `weft` with MCP servers: `weft tools`, `weft validate --connect`, and runs whose agents call
//! tools of real servers (server-everything, tests/mcp/misbehaving.mjs): their servers end with
//! the process (after Ctrl-C too), and a `${NAME}`'s value is written nowhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_scripted_llm::{Match, Reply, Rule, Script, ScriptedLlm, ToolCall};

use crate::common::{Ran, Sandbox, edge, node};

const LIMIT: Duration = Duration::from_secs(60);

fn servers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/.bin/mcp-server-everything").exists(),
        "the MCP test servers are not installed: run scripts/setup-mcp.sh"
    );
    dir
}

/// server-everything over stdio, marked in its environment with `marker`.
fn everything(marker: &str) -> Value {
    json!({
        "command": "node",
        "args": [servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"],
        "env": {"WEFT_MCP_TEST": marker},
    })
}

/// The processes whose environment holds `WEFT_MCP_TEST=marker` (zombies aside).
fn processes_marked(marker: &str) -> usize {
    let needle = format!("WEFT_MCP_TEST={marker}");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter(|entry| {
            entry.file_name().to_string_lossy().parse::<u32>().is_ok()
                && !std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                    stat.rsplit(')')
                        .next()
                        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
                })
                && std::fs::read(entry.path().join("environ")).is_ok_and(|environ| {
                    environ
                        .split(|byte| *byte == 0)
                        .any(|pair| pair == needle.as_bytes())
                })
        })
        .count()
}

fn marker(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

/// start → agent (with `tools.mcp`) → end, and `servers` as settings.mcpServers.
fn agent_flow(servers: Value, tools: Value) -> Value {
    json!({
        "version": 1,
        "name": "tools",
        "settings": {"mcpServers": servers},
        "nodes": [
            node("start", "start", json!({"initialInput": "rivers"})),
            node("agent", "agent", json!({"model": "gpt-4o-mini", "userPrompt": "about {{ PREVIOUS_OUTPUT }}", "tools": {"mcp": tools}})),
            node("end", "output", json!({}))
        ],
        "edges": [edge("a", "start", "agent", None), edge("b", "agent", "end", None)]
    })
}

/// A model that calls `name` with `arguments`, then says `answer`.
async fn model_calling(name: &str, arguments: Value, answer: &str) -> ScriptedLlm {
    ScriptedLlm::start(
        Script::default()
            .with_rule(Rule::on(
                Match {
                    last_role: Some("user".into()),
                    ..Match::default()
                },
                Reply::ToolCalls {
                    calls: vec![ToolCall {
                        id: Some("call_1".into()),
                        name: name.into(),
                        arguments,
                    }],
                    delay_ms: 0,
                },
            ))
            .with_fallback(Reply::text(answer)),
    )
    .await
    .expect("server")
}

#[test]
fn weft_tools_lists_each_servers_tools_and_names_one_that_cannot_start() {
    let sandbox = Sandbox::new();
    let marker = marker("tools");
    let flow = sandbox.flow(
        "tools.json",
        &agent_flow(
            json!({"everything": everything(&marker), "broken": {"command": "weft-no-such-mcp-server"}}),
            json!(["everything/echo"]),
        ),
    );
    let ran = sandbox.run_within(&["tools", &flow], None, LIMIT);
    assert_eq!(ran.code, Some(1), "a server could not be listed: {ran:?}");
    assert!(
        ran.stdout
            .contains("everything/echo  Echoes back the input string"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("message (string, required)"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("error: MCP server `broken`: could not start `weft-no-such-mcp-server`"),
        "{}",
        ran.stdout
    );

    let ran = sandbox.run_within(&["tools", &flow, "--json"], None, LIMIT);
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let servers = listed["servers"].as_array().expect("servers");
    let everything = servers
        .iter()
        .find(|server| server["name"] == "everything")
        .expect("listed");
    assert_eq!(everything["transport"], "stdio");
    let echo = everything["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|tool| tool["name"] == "echo")
        .expect("echo");
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"],
        "string"
    );
    assert_eq!(
        processes_marked(&marker),
        0,
        "the servers ended with `weft tools`"
    );

    let none = sandbox.flow("none.json", &agent_flow(json!({}), json!([])));
    let ran = sandbox.run_within(&["tools", &none], None, LIMIT);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("defines no MCP servers"), "{ran:?}");
}

#[test]
fn validate_connect_checks_each_entry_against_the_listed_tools() {
    let sandbox = Sandbox::new();
    let flow = sandbox.flow(
        "typo.json",
        &agent_flow(
            json!({"everything": everything(&marker("validate"))}),
            json!(["everything/ecko"]),
        ),
    );
    let ran = sandbox.run_within(&["validate", &flow], None, LIMIT);
    assert_eq!(
        ran.code,
        Some(0),
        "without --connect the tool is not known: {ran:?}"
    );
    let ran = sandbox.run_within(&["validate", &flow, "--connect"], None, LIMIT);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stdout.contains(
            "node agent: error: tools.mcp: MCP server `everything` has no tool `ecko` (its tools: "
        ),
        "{ran:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_a_tool_and_its_server_ends_with_the_process_a_secret_nowhere() {
    let llm = model_calling("everything__echo", json!({"message": "rivers"}), "done").await;
    let sandbox = Sandbox::new();
    let marker = marker("run");
    let mut server = everything(&marker);
    server["env"]["API_TOKEN"] = json!("${WEFT_TEST_MCP_SECRET}");
    let flow = sandbox.flow(
        "echo.json",
        &agent_flow(json!({"everything": server}), json!(["everything"])),
    );
    let db = sandbox.db_arg();
    let secret = "mcp-secret-value-4711";
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    command.env("WEFT_TEST_MCP_SECRET", secret);
    let ran: Ran = tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
        .await
        .expect("join")
        .into();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains("⚒ agent → everything/echo"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("Echo: rivers"), "{}", ran.stderr);
    assert_eq!(
        processes_marked(&marker),
        0,
        "the server ended with `weft run`"
    );

    let runs = sandbox.runs_within(LIMIT);
    let id = runs[0]["id"].as_str().expect("id");
    let shown = sandbox.run_within(&["show", id, "--db", &db], None, LIMIT);
    assert!(shown.stdout.contains("tool calls"), "{}", shown.stdout);
    assert!(shown.stdout.contains("everything/echo"), "{}", shown.stdout);
    let everything_said = [ran.stdout, ran.stderr, shown.stdout, shown.stderr].concat();
    assert!(!everything_said.contains(secret));
    let bytes = sandbox.db_bytes();
    assert!(
        !bytes
            .windows(secret.len())
            .any(|window| window == secret.as_bytes()),
        "the secret is not in the store"
    );

    // Unset, the name is said, and the run fails before the model is asked.
    let asked = llm.request_count();
    let ran = sandbox.run_within(&["run", &flow, "--db", &db], Some(&llm), LIMIT);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .contains("${WEFT_TEST_MCP_SECRET} in env.API_TOKEN is not set"),
        "{ran:?}"
    );
    assert_eq!(llm.request_count(), asked);
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_tool_call_cancels_the_run_and_stops_the_server() {
    let llm = model_calling("slow__work", json!({}), "unused").await;
    let sandbox = Sandbox::new();
    let marker = marker("ctrl-c");
    let slow = json!({
        "command": "node",
        "args": [servers_dir().join("misbehaving.mjs"), "children"],
        "env": {"WEFT_MCP_TEST": marker},
    });
    let flow = sandbox.flow(
        "slow.json",
        &agent_flow(json!({"slow": slow}), json!(["slow"])),
    );
    let db = sandbox.db_arg();
    let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().expect("spawn weft");
    // The server and the process it started run, and the call is in flight.
    let deadline = Instant::now() + LIMIT;
    while processes_marked(&marker) < 2 || llm.request_count() == 0 {
        assert!(Instant::now() < deadline, "the tool was never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let ran: Ran = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join")
        .into();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancelled promptly"
    );
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stderr.contains("cancelled"), "{ran:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_marked(&marker) > 0 {
        assert!(
            Instant::now() < deadline,
            "an orphan MCP server process is left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
