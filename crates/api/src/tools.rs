//! The MCP servers a flow can use, as every host sees them: the flow's own
//! (`settings.mcpServers`) plus the servers a host adds for every flow (the app's Settings),
//! their tool lists, and the checks of the agents' `tools.mcp` against those lists
//! (`weft validate --connect`, the app's "Test connection").

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use weft_flow::Flow;
use weft_mcp::{Hub, ServerDef, Servers, ToolInfo};
use weft_nodes::{Problem, ProblemCode, Severity};

/// One server's answer to `tools/list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTools {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    pub tools: Vec<ToolInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The flow's servers; definitions that cannot be used are named, one message each.
pub fn servers_of(flow: &Flow) -> Result<Servers, Vec<String>> {
    weft_mcp::parse_servers(flow.settings.get("mcpServers"))
}

/// `flow` with the servers `shared` defines added to its `settings.mcpServers`: a host's
/// servers for every flow. The flow's own definition of a name wins, so a flow file means the
/// same wherever it runs; the run keeps the merged list, so it can be resumed by any host.
pub fn with_shared_servers(mut flow: Flow, shared: &Servers) -> Flow {
    if shared.is_empty() {
        return flow;
    }
    let mut servers = match flow.settings.get("mcpServers") {
        Some(Value::Object(own)) => own.clone(),
        // Absent, or broken (the validator names it): the flow's value is left for it to see.
        None => serde_json::Map::new(),
        Some(_) => return flow,
    };
    for (name, def) in shared {
        if !servers.contains_key(name) {
            let value = serde_json::to_value(def).unwrap_or(Value::Null);
            servers.insert(name.clone(), value);
        }
    }
    flow.settings
        .insert("mcpServers".to_string(), Value::Object(servers));
    flow
}

/// Every server's tools, listed concurrently through `hub`; `flow_path` places the relative
/// `cwd`s.
pub async fn list_tools(
    hub: &Hub,
    servers: &Servers,
    flow_path: Option<&Path>,
) -> Vec<ServerTools> {
    let folder = flow_path.and_then(Path::parent);
    let lists = futures_util::future::join_all(
        servers
            .iter()
            .map(|(name, def)| hub.tools(name, def, folder)),
    )
    .await;
    servers
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
        .collect()
}

fn transport(def: &ServerDef) -> &'static str {
    if def.url.is_some() { "http" } else { "stdio" }
}

/// A problem for each server an agent names that cannot be listed, and for each
/// `server/tool` entry whose server does not list the tool. Only the servers agents use are
/// connected to.
pub async fn connected_problems(hub: &Hub, flow: &Flow, flow_path: Option<&Path>) -> Vec<Problem> {
    let Ok(servers) = servers_of(flow) else {
        // Already an error of the validator.
        return Vec::new();
    };
    let entries: Vec<(&str, &str)> = flow
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
                .map(move |entry| (node.id.as_str(), entry))
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
    let listed = list_tools(hub, &used, flow_path).await;
    entries
        .iter()
        .filter_map(|(node_id, entry)| {
            let message = entry_problem(&listed, entry)?;
            Some(Problem {
                severity: Severity::Error,
                code: ProblemCode::McpTool,
                node_id: Some((*node_id).to_string()),
                edge_id: None,
                message,
            })
        })
        .collect()
}

/// What is wrong with one `tools.mcp` entry given the servers' lists, if anything.
fn entry_problem(listed: &[ServerTools], entry: &str) -> Option<String> {
    let (server, tool) = weft_nodes::mcp_tools::split_entry(entry);
    let found = listed.iter().find(|listed| listed.name == server)?;
    match (&found.error, tool) {
        (Some(error), _) => Some(format!("tools.mcp: `{entry}`: {error}")),
        (None, Some(tool)) if !found.tools.iter().any(|listed| listed.name == tool) => {
            let names: Vec<&str> = found.tools.iter().map(|tool| tool.name.as_str()).collect();
            Some(format!(
                "tools.mcp: MCP server `{server}` has no tool `{tool}` (its tools: {})",
                names.join(", ")
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow_with(settings: Value) -> Flow {
        serde_json::from_value(
            json!({"version": 1, "settings": settings, "nodes": [], "edges": []}),
        )
        .expect("a flow")
    }

    fn shared() -> Servers {
        weft_mcp::parse_servers(Some(&json!({
            "files": {"command": "shared-files"},
            "tracker": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}}
        })))
        .expect("valid servers")
    }

    #[test]
    fn shared_servers_are_added_and_the_flows_own_definition_wins() {
        let flow = flow_with(json!({"mcpServers": {"files": {"command": "own-files"}}}));
        let merged = with_shared_servers(flow, &shared());
        let servers = servers_of(&merged).expect("still valid");
        assert_eq!(servers["files"].command.as_deref(), Some("own-files"));
        assert_eq!(
            servers["tracker"].headers["Authorization"], "Bearer ${TRACKER_TOKEN}",
            "the ${{NAME}} stays a name: the value is read at run time"
        );
        let bare = with_shared_servers(flow_with(json!({})), &shared());
        assert_eq!(servers_of(&bare).expect("valid").len(), 2);
    }

    #[test]
    fn a_broken_mcp_servers_value_is_left_for_the_validator() {
        let flow = flow_with(json!({"mcpServers": ["files"]}));
        let merged = with_shared_servers(flow, &shared());
        assert_eq!(merged.settings["mcpServers"], json!(["files"]));
    }

    #[test]
    fn an_entry_is_checked_against_its_servers_list() {
        let listed = vec![
            ServerTools {
                name: "files".into(),
                transport: "stdio",
                tools: vec![ToolInfo {
                    name: "read_file".into(),
                    title: None,
                    description: String::new(),
                    input_schema: json!({}),
                }],
                error: None,
            },
            ServerTools {
                name: "down".into(),
                transport: "stdio",
                tools: Vec::new(),
                error: Some("MCP server `down` did not start".into()),
            },
        ];
        assert_eq!(entry_problem(&listed, "files/read_file"), None);
        assert_eq!(entry_problem(&listed, "files"), None);
        assert_eq!(
            entry_problem(&listed, "files/write_file").as_deref(),
            Some("tools.mcp: MCP server `files` has no tool `write_file` (its tools: read_file)")
        );
        assert!(
            entry_problem(&listed, "down/x")
                .is_some_and(|message| message.contains("did not start"))
        );
    }
}
