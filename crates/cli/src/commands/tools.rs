//! `weft tools FLOW [--json]`: connects to each MCP server of a flow's `settings.mcpServers`
//! and lists its tools with their input schemas; `weft validate --connect` checks the agents'
//! `tools.mcp` against those lists.

use std::path::Path;

use serde_json::{Value, json};
use weft_api::tools::ServerTools;
use weft_flow::Flow;
use weft_mcp::{Hub, Servers};
use weft_nodes::Problem;

use crate::output::{self, Style};
use crate::{Exit, ToolsArgs, usage_error};

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
    weft_api::tools::servers_of(flow).map_err(|problems| usage_error(problems.join("; ")))
}

/// Every server's tools, through a hub of this command's own (stopped once listed).
async fn list_all(servers: &Servers, flow_path: &Path) -> Vec<ServerTools> {
    let hub = Hub::default();
    let listed = weft_api::tools::list_tools(&hub, servers, Some(flow_path)).await;
    hub.stop();
    listed
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
    let hub = Hub::default();
    let problems = weft_api::tools::connected_problems(&hub, flow, Some(flow_path)).await;
    hub.stop();
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
