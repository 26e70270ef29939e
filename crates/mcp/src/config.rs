//! The MCP servers a flow names in `settings.mcpServers`: how each is reached (a program
//! started over stdio, or a streamable HTTP URL), read from the flow file, and resolved for a
//! run: `${NAME}` in `env` and `headers` values read from the environment (or the app's
//! settings) at that moment, never written back anywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long one tool call may take when the server's definition does not say.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One server as the flow file defines it (`${NAME}` not yet read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerDef {
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its working folder, relative to the flow file's (the flow's folder when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables set for it; values may name others as `${NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent to it; values may name variables as `${NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long one tool call may take (60 s when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
}

/// The servers of a flow, by name, in name order.
pub type Servers = BTreeMap<String, ServerDef>;

/// The keys a server definition may have (for messages).
const KEYS: &str = "command, args, cwd, env, url, headers, timeoutSeconds";

/// Reads `settings.mcpServers` (absent: no servers). Every problem is named by its path
/// (`settings.mcpServers.files.command`).
pub fn parse_servers(value: Option<&Value>) -> Result<Servers, Vec<String>> {
    let Some(value) = value else {
        return Ok(Servers::new());
    };
    let Some(map) = value.as_object() else {
        return Err(vec![format!(
            "settings.mcpServers must be an object of server names and definitions, found {}",
            kind_of(value)
        )]);
    };
    let mut servers = Servers::new();
    let mut problems = Vec::new();
    for (name, definition) in map {
        match parse_server(name, definition) {
            Ok(def) => {
                servers.insert(name.clone(), def);
            }
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(servers)
    } else {
        Err(problems)
    }
}

fn parse_server(name: &str, value: &Value) -> Result<ServerDef, String> {
    let at = format!("settings.mcpServers.{name}");
    if !valid_server_name(name) {
        return Err(format!(
            "{at}: a server name is letters, digits, `-` and `_` (it starts the tool names the model sees)"
        ));
    }
    let def: ServerDef = serde_json::from_value(value.clone())
        .map_err(|error| format!("{at}: {error} (a server has: {KEYS})"))?;
    match (&def.command, &def.url) {
        (Some(_), Some(_)) => Err(format!(
            "{at}: give `command` (a program started over stdio) or `url` (a streamable HTTP server), not both"
        )),
        (None, None) => Err(format!(
            "{at}: needs `command` (a program started over stdio) or `url` (a streamable HTTP server)"
        )),
        (Some(command), None) if command.trim().is_empty() => Err(format!("{at}.command is empty")),
        (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => Err(
            format!("{at}.url must start with http:// or https://, found `{url}`"),
        ),
        (None, Some(_))
            if def.command.is_none()
                && (!def.args.is_empty() || !def.env.is_empty() || def.cwd.is_some()) =>
        {
            Err(format!(
                "{at}: `args`, `cwd` and `env` are for a stdio server (`command`); an HTTP server takes `headers`"
            ))
        }
        (Some(_), None) if !def.headers.is_empty() => Err(format!(
            "{at}: `headers` are for an HTTP server (`url`); a stdio server takes `env`"
        )),
        _ => match def.timeout_seconds {
            Some(seconds) if !(seconds > 0.0 && seconds <= 86_400.0) => Err(format!(
                "{at}.timeoutSeconds must be more than 0 and at most 86400, found {seconds}"
            )),
            _ => Ok(def),
        },
    }
}

/// Letters, digits, `-` and `_`: what a provider accepts in a function name.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("__")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A server definition with its `${NAME}`s read: what is started or connected to. Kept in
/// memory only (it may hold secrets); its `Debug` names no value of `env` or `headers`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Resolved {
    pub transport: Transport,
    pub call_timeout: Duration,
    /// The values `${NAME}`s were replaced by, cut from anything shown (a server's stderr).
    pub secrets: Vec<String>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: PathBuf,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                write!(f, "stdio `{command}` {args:?}")
            }
            Transport::Http { url, .. } => write!(f, "HTTP {url}"),
        }
    }
}

/// Where `${NAME}`s are read: the environment, then (in the app) its settings.
pub type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The environment's value of `name`.
pub fn from_environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ServerDef {
    /// This definition for a run of the flow in `flow_dir`, with `${NAME}`s read by `lookup`.
    /// An unset name is an error naming it and where it is used.
    pub fn resolve(
        &self,
        server: &str,
        flow_dir: Option<&Path>,
        lookup: &Lookup,
    ) -> Result<Resolved, String> {
        let mut secrets = Vec::new();
        let mut expand_all = |what: &str, pairs: &BTreeMap<String, String>| {
            pairs
                .iter()
                .map(|(key, value)| {
                    expand(value, lookup, &mut secrets)
                        .map(|value| (key.clone(), value))
                        .map_err(|name| {
                            format!(
                                "MCP server `{server}`: ${{{name}}} in {what}.{key} is not set (set it in the environment or the app's Settings)"
                            )
                        })
                })
                .collect::<Result<Vec<_>, String>>()
        };
        let transport = match (&self.command, &self.url) {
            (Some(command), _) => {
                let env = expand_all("env", &self.env)?;
                let base = flow_dir.map(Path::to_path_buf).unwrap_or_default();
                let cwd = match &self.cwd {
                    Some(cwd) => base.join(cwd),
                    None => base,
                };
                let cwd = if cwd.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    cwd
                };
                Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    cwd,
                    env,
                }
            }
            (None, Some(url)) => Transport::Http {
                url: url.clone(),
                headers: expand_all("headers", &self.headers)?,
            },
            (None, None) => {
                return Err(format!(
                    "MCP server `{server}` has neither `command` nor `url`"
                ));
            }
        };
        let call_timeout = self
            .timeout_seconds
            .filter(|seconds| *seconds > 0.0 && *seconds <= 86_400.0)
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs_f64);
        secrets.retain(|secret| !secret.is_empty());
        Ok(Resolved {
            transport,
            call_timeout,
            secrets,
        })
    }
}

/// `text` with each `${NAME}` replaced by its value (kept in `secrets`); `Err(NAME)` for the
/// first unset one. `$${` writes a literal `${`.
fn expand(text: &str, lookup: &Lookup, secrets: &mut Vec<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body.find('}') else {
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        let name = &body[..end];
        let value = lookup(name).ok_or_else(|| name.to_string())?;
        out.push_str(&value);
        secrets.push(value);
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` with every secret replaced by `***`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| secret.len() >= 3)
        .fold(text.to_string(), |text, secret| {
            text.replace(secret.as_str(), "***")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lookup(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret-token".to_string())
    }

    #[test]
    fn reads_stdio_and_http_servers_and_names_each_problem_by_its_path() {
        let servers = parse_servers(Some(&json!({
            "files": {"command": "npx", "args": ["-y", "server", "."]},
            "tracker": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        })))
        .expect("valid");
        assert_eq!(servers["files"].args, ["-y", "server", "."]);
        let problems = parse_servers(Some(&json!({
            "both": {"command": "x", "url": "http://h/mcp"},
            "none": {"args": []},
            "typo": {"comand": "x"},
            "bad name": {"command": "x"},
            "ftp": {"url": "ftp://h"},
            "slow": {"command": "x", "timeoutSeconds": 0}
        })))
        .expect_err("invalid");
        let text = problems.join("\n");
        for expected in [
            "settings.mcpServers.both: give `command`",
            "settings.mcpServers.none: needs `command`",
            "settings.mcpServers.typo: unknown field `comand`",
            "settings.mcpServers.bad name: a server name",
            "settings.mcpServers.ftp.url must start with http",
            "settings.mcpServers.slow.timeoutSeconds",
        ] {
            assert!(text.contains(expected), "{expected} in:\n{text}");
        }
        assert!(parse_servers(Some(&json!([]))).is_err());
    }

    #[test]
    fn names_are_read_at_run_time_and_an_unset_one_is_named() {
        let def: ServerDef = serde_json::from_value(json!({
            "url": "http://127.0.0.1:1/mcp",
            "headers": {"Authorization": "Bearer ${TOKEN}", "X-Price": "$5 and $${literal}"}
        }))
        .expect("def");
        let resolved = def.resolve("tracker", None, &lookup).expect("resolves");
        let Transport::Http { headers, .. } = &resolved.transport else {
            panic!("http")
        };
        assert_eq!(
            headers[0],
            ("Authorization".into(), "Bearer s3cret-token".into())
        );
        assert_eq!(headers[1].1, "$5 and ${literal}");
        assert!(
            !format!("{resolved:?}").contains("s3cret"),
            "Debug shows no secret"
        );
        assert_eq!(
            redact("got s3cret-token here", &resolved.secrets),
            "got *** here"
        );

        let missing: ServerDef =
            serde_json::from_value(json!({"command": "x", "env": {"KEY": "${NOT_SET_ANYWHERE}"}}))
                .expect("def");
        let error = missing.resolve("files", None, &lookup).expect_err("unset");
        assert!(
            error.contains("${NOT_SET_ANYWHERE} in env.KEY is not set")
                && error.contains("`files`"),
            "{error}"
        );
    }

    #[test]
    fn a_stdio_servers_folder_is_relative_to_the_flow() {
        let def: ServerDef =
            serde_json::from_value(json!({"command": "srv", "cwd": "data"})).expect("def");
        let resolved = def
            .resolve("files", Some(Path::new("/flows")), &lookup)
            .expect("resolves");
        let Transport::Stdio { cwd, .. } = resolved.transport else {
            panic!("stdio")
        };
        assert_eq!(cwd, PathBuf::from("/flows/data"));
    }
}
