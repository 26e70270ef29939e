//! What the tests against real MCP servers share: where the servers are, and finding the
//! processes a server started by a mark in their environment.
// Each test binary uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use weft_mcp::{JsonObject, ServerDef};

pub fn servers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/.bin/mcp-server-everything").exists(),
        "the MCP test servers are not installed: run scripts/setup-mcp.sh"
    );
    dir
}

/// A unique mark in a server's environment, to find its processes (and what they started).
pub fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// The processes whose environment holds `WEFT_MCP_TEST=marker`.
pub fn processes_marked(marker: &str) -> Vec<u32> {
    let needle = format!("WEFT_MCP_TEST={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let is_zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        });
        if !is_zombie
            && environ
                .split(|byte| *byte == 0)
                .any(|pair| pair == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

pub async fn gone(marker: &str) -> bool {
    for _ in 0..50 {
        if processes_marked(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

pub fn def(value: Value) -> ServerDef {
    serde_json::from_value(value).expect("a server definition")
}

pub fn everything_stdio(marker: &str) -> ServerDef {
    let dir = servers_dir();
    def(json!({
        "command": "node",
        "args": [dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"],
        "env": {"WEFT_MCP_TEST": marker},
    }))
}

pub fn misbehaving(mode: &str, marker: &str, timeout: f64) -> ServerDef {
    def(json!({
        "command": "node",
        "args": [servers_dir().join("misbehaving.mjs"), mode],
        "env": {"WEFT_MCP_TEST": marker},
        "timeoutSeconds": timeout,
    }))
}

pub fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("an object")
}

/// Waits until `count` processes carry `marker`.
pub async fn running(marker: &str, count: usize) -> bool {
    for _ in 0..50 {
        if processes_marked(marker).len() >= count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// server-everything over streamable HTTP on a free loopback port: the process (killed when
/// dropped) and its endpoint.
pub async fn everything_http() -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("address")
        .port();
    let server = tokio::process::Command::new("node")
        .arg(
            servers_dir()
                .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        )
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server-everything starts");
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the HTTP server did not listen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// tests/mcp/flaky-proxy.mjs in front of `upstream`, failing POSTs as `plans` say
/// (`METHOD:STATUS:COUNT`): the process (killed when dropped), its endpoint, and the file its
/// log of POSTs goes to.
pub async fn flaky_proxy(
    upstream: &str,
    plans: &[&str],
    log: &Path,
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut proxy = tokio::process::Command::new("node")
        .arg(servers_dir().join("flaky-proxy.mjs"))
        .arg(upstream)
        .args(plans)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(log).expect("the proxy's log"))
        .kill_on_drop(true)
        .spawn()
        .expect("the proxy starts");
    let stdout = proxy.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::io::BufReader::new(stdout)
        .read_line(&mut line)
        .await
        .expect("the proxy's address");
    let url = serde_json::from_str::<Value>(&line).expect("JSON")["url"]
        .as_str()
        .expect("a url")
        .to_string();
    (proxy, url)
}
