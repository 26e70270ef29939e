//! `weft mcp --flows DIR`: the flows of a folder as MCP tools, over standard input and output
//! (docs/tools.md#flows-as-tools), for an MCP client such as an IDE assistant that starts it.
//! Nothing but MCP goes to stdout; what Weft says goes to stderr.

use weft_api::Lifetime;
use weft_server::mcp::FlowTools;

use crate::{Exit, McpArgs, usage_error};

pub(crate) async fn mcp(args: McpArgs) -> anyhow::Result<Exit> {
    use rmcp::ServiceExt as _;
    if !args.flows.is_dir() {
        return Err(usage_error(format!(
            "--flows {}: not a folder",
            args.flows.display()
        )));
    }
    let location = super::location(&args.store)?;
    let weft = super::open_as(location, Lifetime::Service)?.with_prices(super::prices()?);
    let tools = FlowTools::new(weft, args.flows);
    let service = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("the MCP client did not initialize: {error}"))?;
    // Until the client closes its end (or the process is stopped).
    service
        .waiting()
        .await
        .map_err(|error| anyhow::anyhow!("the MCP server stopped: {error}"))?;
    Ok(Exit::Success)
}
