//! A running `weft serve` for the end-to-end tests (`serve.rs`, and `restate.rs`, whose runs it
//! decides): started on a free port over the sandbox's store and `flows` folder, with two named
//! tokens, and called over real HTTP.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use weft_scripted_llm::ScriptedLlm;

use super::Sandbox;

pub const TOKEN: &str = "ada-token-0123456789abcdef";
pub const OTHER: &str = "ci-token-fedcba9876543210";

/// A running `weft serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub http: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(sandbox: &Sandbox, extra: &[&str], llm: Option<&ScriptedLlm>) -> Server {
        Server::start_with(sandbox, extra, llm, None)
    }

    /// With `open_files`, the server may have at most that many file descriptors open
    /// (`ulimit -n`): sockets, its store's files, everything.
    pub fn start_with(
        sandbox: &Sandbox,
        extra: &[&str],
        llm: Option<&ScriptedLlm>,
        open_files: Option<u32>,
    ) -> Server {
        Server::spawn(sandbox, extra, llm, open_files, &[])
    }

    /// With these environment variables set (the sandbox's command clears the others').
    pub fn start_with_env(
        sandbox: &Sandbox,
        extra: &[&str],
        llm: Option<&ScriptedLlm>,
        env: &[(&str, &str)],
    ) -> Server {
        Server::spawn(sandbox, extra, llm, None, env)
    }

    fn spawn(
        sandbox: &Sandbox,
        extra: &[&str],
        llm: Option<&ScriptedLlm>,
        open_files: Option<u32>,
        env: &[(&str, &str)],
    ) -> Server {
        let flows = sandbox.dir.path().join("flows");
        std::fs::create_dir_all(&flows).expect("flows");
        std::fs::write(
            sandbox.dir.path().join("tokens.txt"),
            format!("# who may call\nada:{TOKEN}\nci:{OTHER}\n"),
        )
        .expect("tokens");
        let mut args = vec![
            "serve".to_string(),
            "--flows".into(),
            flows.display().to_string(),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--tokens".into(),
            "tokens.txt".into(),
            "--db".into(),
            sandbox.db_arg(),
        ];
        args.extend(extra.iter().map(|arg| arg.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut command = sandbox.command(&args, llm);
        command.envs(env.iter().copied());
        if let Some(limit) = open_files {
            command = limited(&command, limit);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("weft serve");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("the address");
        let url = first.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Server {
            child,
            url,
            http: reqwest::Client::new(),
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, Some(TOKEN), None)
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            path,
            Some(TOKEN),
            Some(body.to_string()),
        )
        .await
    }

    /// Waits until run `id` has `status`.
    pub async fn wait_for(&self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, run) = self.get(&format!("/v1/runs/{id}")).await;
            if run["run"]["summary"]["status"] == status {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} never got {status}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `command` run by a shell that first lowers the number of files it may open to `limit`.
fn limited(command: &Command, limit: u32) -> Command {
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(command.get_program())
        .args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(name, value),
            None => shell.env_remove(name),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        shell.current_dir(dir);
    }
    shell
}
