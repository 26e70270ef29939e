//! `weft restate`: a Restate service endpoint (SPEC §13) on which each run of a flow of
//! `--flows` is a durable workflow, until SIGTERM or Ctrl-C. Workers share the run store
//! (`--db postgres://…`), so any of them takes over a run whose worker died.

use std::time::Duration;

use weft_restate::{WeftRun, endpoint, endpoint_url, register, serve};

use super::run::engine;
use crate::output::{self, Style};
use crate::{Exit, RestateArgs, usage_error};

pub(crate) async fn restate(args: RestateArgs) -> anyhow::Result<Exit> {
    if !args.flows.is_dir() {
        return Err(usage_error(format!(
            "--flows {}: not a folder",
            args.flows.display()
        )));
    }
    let db = super::db_path(&args.store)?;
    let location = db.to_string_lossy().into_owned();
    let style = Style::stderr();
    if !weft_engine::is_postgres_url(&location) {
        output::err(&format!(
            "{}\n",
            style.dim(
                "note: the run store is a file on this machine; workers on other machines need a shared one (--db postgres://…)"
            )
        ));
    }
    let store = super::open_store(&db)?;
    // No settling of approval timeouts here: this worker's engine would continue such a run
    // itself, behind its workflow's back. A workflow waits on a durable timer for its
    // approval's timeout (and the other hosts of the store send the timeout to it).
    let engine = engine(store);
    let workflow = WeftRun::new(engine, &args.flows, &args.ingress)
        .map_err(|error| usage_error(format!("--flows {}: {error}", args.flows.display())))?;
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|error| usage_error(format!("cannot listen on {}: {error}", args.addr)))?;
    let address = listener.local_addr()?;
    let url = args
        .endpoint_url
        .clone()
        .unwrap_or_else(|| endpoint_url(address));
    let endpoint = endpoint(workflow, Duration::from_millis(args.retry_after_ms));
    let served = tokio::spawn(serve(endpoint, listener));
    if let Some(admin) = &args.register {
        register(admin, &url).await?;
        output::err(&format!(
            "{}\n",
            style.dim(&format!("registered {url} with {admin}"))
        ));
    }
    output::err(&format!(
        "{}\n",
        style.dim(&format!(
            "serving the flows of {} as Restate workflow {} (store {}); SIGTERM or Ctrl-C stops",
            args.flows.display(),
            weft_restate::SERVICE,
            weft_engine::shown_location(&location)
        ))
    ));
    // The address first on stdout, so a script (or a test on port 0) can read it.
    output::out(&format!("{url}\n"))?;
    tokio::select! {
        _ = served => {}
        _ = super::serve::stop_signal() => {}
    }
    output::err(&format!("{}\n", style.dim("stopped")));
    Ok(Exit::Success)
}
