//! `weft tools FLOW [--json]`: connects to each MCP server of a flow's `settings.mcpServers`
//! and lists its tools with their input schemas; `weft validate --connect` checks the agents'
//! `tools.mcp` against those lists.

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};
use weft_flow::Flow;
use weft_mcp::{Hub, ServerDef, Servers, ToolInfo};
use weft_nodes::{Problem, ProblemCode, Severity};

use crate::output::{self, Style};
use crate::{Exit, ToolsArgs, usage_error};

/// One server's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerTools {
    name: String,
    /// `stdio` or `http`.
    transport: &'static str,
    tools: Vec<ToolInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub(crate) async fn tools(args: ToolsArgs) -> anyhow::Result<Exit> {
    let flow = super::load_flow(&args.flow)?;
    let servers = servers_of(&flow)?;
    if servers.is_empty() {
        return Err(usage_error(format!(
            "{} defines no MCP servers (settings.mcpServers)",
            args.flow.display()
        )));
    }
    let listed = list_all(&servers, &args.flow).await;
    let failed = listed.iter().any(|server| server.error.is_some());
    if args.json {
        let text = serde_json::to_string_pretty(&json!({ "servers": listed }))?;
        output::out(&format!("{text}\n"))?;
    } else {
        output::out(&describe(&listed, &servers, Style::stdout()))?;
    }
    Ok(if failed { Exit::Failure } else { Exit::Success })
}

/// The flow's servers; definitions that cannot be used are a usage error naming them.
fn servers_of(flow: &Flow) -> anyhow::Result<Servers> {
    weft_mcp::parse_servers(flow.settings.get("mcpServers"))
        .map_err(|problems| usage_error(problems.join("; ")))
}

/// Every server's tools, listed concurrently.
async fn list_all(servers: &Servers, flow_path: &Path) -> Vec<ServerTools> {
    let hub = Hub::default();
    let folder = flow_path.parent();
    let lists = futures_util::future::join_all(
        servers
            .iter()
            .map(|(name, def)| hub.tools(name, def, folder)),
    )
    .await;
    let listed = servers
        .iter()
        .zip(lists)
        .map(|((name, def), list)| {
            let (tools, error) = match list {
                Ok(tools) => (tools, None),
                Err(error) => (Vec::new(), Some(error.to_string())),
            };
            ServerTools {
                name: name.clone(),
                transport: transport(def),
                tools,
                error,
            }
        })
        .collect();
    hub.stop();
    listed
}

fn transport(def: &ServerDef) -> &'static str {
    if def.url.is_some() { "http" } else { "stdio" }
}

/// Each server, how it is reached, and its tools: name, description, arguments.
fn describe(listed: &[ServerTools], servers: &Servers, style: Style) -> String {
    let mut text = String::new();
    for server in listed {
        let def = &servers[&server.name];
        let reached = match (&def.command, &def.url) {
            (Some(command), _) => {
                let words: Vec<String> = std::iter::once(command.as_str())
                    .chain(def.args.iter().map(String::as_str))
                    .map(output::shell_word)
                    .collect();
                format!("stdio: {}", words.join(" "))
            }
            (None, Some(url)) => format!("http: {url}"),
            (None, None) => String::new(),
        };
        text.push_str(&format!(
            "{}  {}\n",
            style.bold(&server.name),
            style.dim(&reached)
        ));
        if let Some(error) = &server.error {
            text.push_str(&format!("  {} {error}\n", style.red("error:")));
            continue;
        }
        for tool in &server.tools {
            text.push_str(&format!(
                "  {}  {}\n",
                style.cyan(&format!("{}/{}", server.name, tool.name)),
                output::one_line(&tool.description, 100)
            ));
            let arguments = arguments_of(&tool.input_schema);
            if !arguments.is_empty() {
                text.push_str(&format!("    {}\n", style.dim(&arguments)));
            }
        }
    }
    text
}

/// `path (string, required), head (number)` from an input schema.
fn arguments_of(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let kind = property["type"].as_str().unwrap_or("any");
                    if required.contains(&name.as_str()) {
                        format!("{name} ({kind}, required)")
                    } else {
                        format!("{name} ({kind})")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `weft validate --connect`: a problem for each server an agent names that cannot be listed,
/// and for each `server/tool` entry whose server does not list the tool.
pub(crate) async fn connected_problems(flow: &Flow, flow_path: &Path) -> Vec<Problem> {
    let Ok(servers) = weft_mcp::parse_servers(flow.settings.get("mcpServers")) else {
        // Already an error of the validator.
        return Vec::new();
    };
    let entries: Vec<(&str, String)> = flow
        .nodes
        .iter()
        .filter(|node| node.kind == "agent")
        .flat_map(|node| {
            node.data
                .get("tools")
                .and_then(|tools| tools.get("mcp"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(move |entry| (node.id.as_str(), entry.to_string()))
        })
        .collect();
    let used: Servers = servers
        .into_iter()
        .filter(|(name, _)| {
            entries
                .iter()
                .any(|(_, entry)| weft_nodes::mcp_tools::split_entry(entry).0 == name)
        })
        .collect();
    let listed = list_all(&used, flow_path).await;
    let mut problems = Vec::new();
    for (node_id, entry) in &entries {
        let (server, tool) = weft_nodes::mcp_tools::split_entry(entry);
        let Some(found) = listed.iter().find(|listed| listed.name == server) else {
            continue;
        };
        let message = match (&found.error, tool) {
            (Some(error), _) => format!("tools.mcp: `{entry}`: {error}"),
            (None, Some(tool)) if !found.tools.iter().any(|listed| listed.name == tool) => {
                let names: Vec<&str> = found.tools.iter().map(|tool| tool.name.as_str()).collect();
                format!(
                    "tools.mcp: MCP server `{server}` has no tool `{tool}` (its tools: {})",
                    names.join(", ")
                )
            }
            _ => continue,
        };
        problems.push(Problem {
            severity: Severity::Error,
            code: ProblemCode::McpTool,
            node_id: Some((*node_id).to_string()),
            edge_id: None,
            message,
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_listed_with_their_types_required_ones_said() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
            "required": ["path"]
        });
        assert_eq!(
            arguments_of(&schema),
            "head (number), path (string, required)"
        );
        assert_eq!(arguments_of(&json!({})), "");
    }
}
