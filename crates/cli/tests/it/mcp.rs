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

/// [`processes_marked`] once they had up to 5 s to end: a process killed on a loaded machine
/// takes a moment to go (freeing a large heap), and a leftover one stays past that.
fn processes_left(marker: &str) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = processes_marked(marker);
        if left == 0 || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
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
        processes_left(&marker),
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
        processes_left(&marker),
        0,
        "the server ended with `weft run`"
    );

    let runs = sandbox.runs_within(LIMIT);
    let id = runs[0]["id"].as_str().expect("id");
    let shown = sandbox.run_within(&["show", id, "--db", &db], None, LIMIT);
    assert!(shown.stdout.contains("tool calls"), "{}", shown.stdout);
    assert!(shown.stdout.contains("everything/echo"), "{}", shown.stdout);
    let visits = sandbox.run_within(&["show", id, "--db", &db, "--node", "agent"], None, LIMIT);
    assert!(
        visits
            .stdout
            .contains("tool    everything/echo {\"message\":\"rivers\"}")
            && visits.stdout.contains("Echo: rivers"),
        "the visit shows its tool call: {}",
        visits.stdout
    );
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

/// Runs the TypeScript SDK's client (tests/mcp/client.mjs) against `target`, making `calls`.
fn mcp_client(target: &[&str], calls: &Value) -> Value {
    mcp_client_answering(target, calls, None)
}

/// [`mcp_client`], a client that answers elicitation requests with `elicit`.
fn mcp_client_answering(target: &[&str], calls: &Value, elicit: Option<&Value>) -> Value {
    let mut command = Command::new("node");
    if let Some(answer) = elicit {
        command.env("WEFT_MCP_ELICIT", answer.to_string());
    }
    let output = command
        .arg(servers_dir().join("client.mjs"))
        .args(target)
        .env("WEFT_MCP_CALLS", calls.to_string())
        .env_remove("OPENAI_API_KEY")
        .env_remove("WEFT_DB")
        .stderr(Stdio::inherit())
        .output()
        .expect("node runs");
    assert!(output.status.success(), "the client failed: {output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Flows to serve, in the sandbox's `flows` folder (returned): a greeting (text input), an
/// order (an input schema), one that pauses at an approval, and one that is not valid; a tests
/// file beside them is no tool.
fn served_flows(sandbox: &Sandbox) -> String {
    let folder = sandbox.dir.path().join("flows");
    std::fs::create_dir_all(&folder).expect("flows folder");
    let write = |name: &str, flow: &Value| {
        std::fs::write(
            folder.join(name),
            serde_json::to_string_pretty(flow).expect("JSON"),
        )
        .expect("write flow");
    };
    let chain = |name: &str, start: Value, middle: Value| {
        json!({
            "version": 1, "name": name, "description": format!("The {name} flow."),
            "nodes": [node("start", "start", start), middle, node("end", "output", json!({}))],
            "edges": [edge("a", "start", "middle", None), edge("b", "middle", "end", None)]
        })
    };
    write(
        "greet.json",
        &chain(
            "greet",
            json!({}),
            node(
                "middle",
                "template",
                json!({"template": "Hello, {{ PREVIOUS_OUTPUT }}!"}),
            ),
        ),
    );
    write(
        "order.json",
        &chain(
            "order",
            json!({"inputSchema": {"type": "object", "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["item", "qty"]}}),
            node(
                "middle",
                "template",
                json!({"template": "{\"line\": \"{{ qty }} x {{ item }}\"}", "parseJson": true}),
            ),
        ),
    );
    let mut review = chain(
        "review",
        json!({}),
        node(
            "middle",
            "approval",
            json!({"message": "Send {{ PREVIOUS_OUTPUT }}?"}),
        ),
    );
    review["edges"][1]["sourceHandle"] = json!("approve");
    review["nodes"]
        .as_array_mut()
        .expect("nodes")
        .push(node("no", "output", json!({})));
    review["edges"]
        .as_array_mut()
        .expect("edges")
        .push(edge("c", "middle", "no", Some("reject")));
    write("review.json", &review);
    write(
        "broken.json",
        &json!({"version": 1, "name": "broken", "nodes": [], "edges": []}),
    );
    write("greet.tests.json", &json!({"cases": []}));
    folder.display().to_string()
}

#[test]
fn weft_mcp_serves_each_flow_as_a_tool_to_a_real_client() {
    let sandbox = Sandbox::new();
    let folder = served_flows(&sandbox);
    let db = sandbox.db_arg();
    let calls = json!([
        {"name": "greet", "arguments": {"input": "Ada"}},
        {"name": "order", "arguments": {"item": "tea", "qty": 2}},
        {"name": "order", "arguments": {"item": "tea"}},
        {"name": "review", "arguments": {"input": "the letter"}},
        {"name": "broken", "arguments": {"input": "x"}},
        {"name": "missing", "arguments": {}}
    ]);
    let answer = mcp_client(
        &[
            "stdio",
            env!("CARGO_BIN_EXE_weft"),
            "mcp",
            "--flows",
            &folder,
            "--db",
            &db,
        ],
        &calls,
    );
    let names: Vec<&str> = answer["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["broken", "greet", "order", "review"], "{answer}");
    let greet = &answer["tools"][1];
    assert_eq!(greet["description"], "The greet flow.");
    assert_eq!(greet["inputSchema"]["required"], json!(["input"]));
    assert_eq!(
        answer["tools"][2]["inputSchema"]["required"],
        json!(["item", "qty"])
    );

    assert_eq!(
        answer["late"],
        json!([]),
        "no progress after its call's result: {answer}"
    );
    let call = |index: usize| &answer["calls"][index];
    assert_eq!(
        call(0)["result"]["content"][0]["text"],
        "Hello, Ada!",
        "{answer}"
    );
    assert_eq!(
        call(0)["progress"].as_array().map(Vec::len),
        Some(3),
        "one progress notification per step: {answer}"
    );
    assert_eq!(
        call(1)["result"]["structuredContent"],
        json!({"line": "2 x tea"}),
        "{answer}"
    );
    assert_eq!(call(2)["result"]["isError"], true, "{answer}");
    assert!(
        call(2)["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("do not match the flow's inputSchema")),
        "{answer}"
    );
    let paused = call(3)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        paused.starts_with("paused: run ") && paused.ends_with(" waits at middle"),
        "{answer}"
    );
    assert_eq!(call(4)["result"]["isError"], true, "{answer}");
    assert!(
        call(4)["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("the flow `broken` is not valid")),
        "{answer}"
    );
    assert!(
        call(5)["error"]
            .as_str()
            .is_some_and(|error| error.contains("no flow `missing`")),
        "{answer}"
    );

    // The paused run waits in the store like any other, and is decided as ever.
    let run_id = paused
        .trim_start_matches("paused: run ")
        .trim_end_matches(" waits at middle")
        .to_string();
    let ran = sandbox.run_within(
        &["resume", &run_id, "--decision", "approve", "--db", &db],
        None,
        LIMIT,
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "the letter");
}

#[tokio::test(flavor = "multi_thread")]
async fn weft_serve_serves_the_flows_as_tools_at_mcp_behind_its_tokens() {
    let sandbox = Sandbox::new();
    served_flows(&sandbox);
    let server = crate::common::serve::Server::start(&sandbox, &[], None);
    let url = format!("{}/mcp", server.url);
    let calls = json!([{"name": "greet", "arguments": {"input": "Grace"}}]);
    let (with_token, without, wrong) = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            (
                mcp_client(&["http", &url, crate::common::serve::TOKEN], &calls),
                mcp_client(&["http", &url], &calls),
                mcp_client(&["http", &url, "not-a-token"], &calls),
            )
        })
        .await
        .expect("join")
    };
    assert_eq!(
        with_token["tools"].as_array().map(Vec::len),
        Some(4),
        "{with_token}"
    );
    assert_eq!(
        with_token["calls"][0]["result"]["content"][0]["text"], "Hello, Grace!",
        "{with_token}"
    );
    for refused in [without, wrong] {
        let error = refused["connectError"].as_str().unwrap_or_default();
        assert!(
            error.contains("401") || error.contains("nauthorized"),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn weft_resume_approves_a_tool_call_with_an_edited_argument() {
    let llm = model_calling("counter__work", json!({"task": "wipe the disk"}), "done").await;
    let sandbox = Sandbox::new();
    let count_file = sandbox.dir.path().join("calls.txt");
    let counter = json!({
        "command": "node",
        "args": [servers_dir().join("misbehaving.mjs"), "count"],
        "env": {"WEFT_MCP_COUNT_FILE": count_file},
    });
    let mut flow = agent_flow(json!({"counter": counter}), json!(["counter"]));
    flow["nodes"][1]["data"]["approveTools"] = json!(["counter/work"]);
    let flow = sandbox.flow("approve.json", &flow);
    let db = sandbox.db_arg();
    let ran = {
        let mut command = sandbox.command(&["run", &flow, "--db", &db], Some(&llm));
        tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
            .await
            .expect("join")
    };
    let ran: Ran = ran.into();
    let run_id = crate::common::paused_run_id(&ran);
    assert!(ran.stderr.contains("counter/work"), "{ran:?}");
    assert!(!count_file.exists(), "not called before it is approved");

    let mut command = sandbox.command(
        &[
            "resume",
            &run_id,
            "--decision",
            "approve",
            "--field",
            "task=tidy the desk",
            "--db",
            &db,
        ],
        Some(&llm),
    );
    let ran: Ran = tokio::task::spawn_blocking(move || command.output().expect("weft runs"))
        .await
        .expect("join")
        .into();
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), "done");
    let made = std::fs::read_to_string(&count_file).expect("called");
    assert_eq!(made.trim(), r#"{"task":"tidy the desk"}"#);

    // The visit lists the call once (its step ran again after the approval), as it was made.
    let visits = sandbox.run_within(
        &["show", &run_id, "--db", &db, "--node", "agent", "--json"],
        None,
        LIMIT,
    );
    let visits: Value = serde_json::from_str(&visits.stdout).expect("JSON");
    assert_eq!(
        visits[0]["toolCalls"].as_array().map(Vec::len),
        Some(1),
        "{visits}"
    );
    assert_eq!(visits[0]["toolCalls"][0]["tool"], "work");
    assert_eq!(visits[0]["toolCalls"][0]["result"], "done 1", "{visits}");
}

#[test]
fn an_approval_reached_in_a_call_is_asked_of_the_client_through_elicitation() {
    let sandbox = Sandbox::new();
    let folder = served_flows(&sandbox);
    let db = sandbox.db_arg();
    let target = [
        "stdio",
        env!("CARGO_BIN_EXE_weft"),
        "mcp",
        "--flows",
        &folder,
        "--db",
        &db,
    ];
    let calls = json!([{"name": "review", "arguments": {"input": "the letter"}}]);

    let approve = json!({"action": "accept", "content": {"decision": "approve", "note": "fine"}});
    let answer = mcp_client_answering(&target, &calls, Some(&approve));
    let asked = &answer["elicited"][0];
    assert_eq!(asked["message"], "Send the letter?", "{answer}");
    assert_eq!(
        asked["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["approve", "reject"])
    );
    assert_eq!(
        answer["calls"][0]["result"]["content"][0]["text"], "the letter",
        "{answer}"
    );

    let reject = json!({"action": "decline"});
    let answer = mcp_client_answering(&target, &calls, Some(&reject));
    assert_eq!(answer["calls"][0]["result"]["isError"], false, "{answer}");
    let runs = sandbox.runs_within(LIMIT);
    let id = runs[0]["id"].as_str().expect("id");
    let shown = sandbox.run_within(&["show", id, "--db", &db, "--json"], None, LIMIT);
    let detail: Value = serde_json::from_str(&shown.stdout).expect("JSON");
    assert_eq!(detail["run"]["summary"]["status"], "completed", "{detail}");
    let decided = detail["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|event| event["type"] == "input_received")
        .expect("decided");
    assert!(
        decided["content"]
            .as_str()
            .is_some_and(|text| text.contains("reject") && text.contains("mcp:weft-tests")),
        "{decided}"
    );
}
