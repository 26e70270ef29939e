//! `weft restate`: a Restate service endpoint (docs/team-servers.md) on which each run of a flow of
//! `--flows` is a durable workflow, until SIGTERM or Ctrl-C. Workers share the run store
//! (`--db postgres://…`), so any of them takes over a run whose worker died, and start the
//! flows' schedules (each occurrence once).

use std::sync::Arc;
use std::time::Duration;

use weft_api::schedules::Schedules;
use weft_restate::{StartThroughIngress, WeftRun, endpoint, endpoint_url, register, serve};

use crate::output::{self, Style};
use crate::{Exit, RestateArgs, usage_error};
use weft_api::Lifetime;

pub(crate) async fn restate(args: RestateArgs) -> anyhow::Result<Exit> {
    if !args.flows.is_dir() {
        return Err(usage_error(format!(
            "--flows {}: not a folder",
            args.flows.display()
        )));
    }
    let location = super::location(&args.store)?;
    let style = Style::stderr();
    if !weft_store::is_postgres_url(location.as_str()) {
        output::err(&format!(
            "{}\n",
            style.dim(
                "note: the run store is a file on this machine; workers on other machines need a shared one (--db postgres://…)"
            )
        ));
    }
    // No settling of approval timeouts here: this worker's engine would continue such a run
    // itself, behind its workflow's back. A workflow waits on a durable timer for its
    // approval's timeout (and the other hosts of the store send the timeout to it).
    let people =
        weft_api::People::from_file_or_env(args.people.as_deref()).map_err(super::api_error)?;
    let weft = super::open_as(location.clone(), Lifetime::Service)?.with_people(people);
    let engine = weft.engine().clone();
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
            location
        ))
    ));
    // The flows' schedules: each worker looks, the one that claims an occurrence in the store
    // hands its run to the ingress.
    // Approvals' reminders and escalations (their timeouts are the workflows' durable timers).
    let follow_ups = weft.keep_following_up();
    let schedules = Schedules::started_by(
        weft,
        args.flows.clone(),
        Arc::new(StartThroughIngress::new(&args.ingress)),
    )
    .spawn();
    // The address first on stdout, so a script (or a test on port 0) can read it.
    output::out(&format!("{url}\n"))?;
    tokio::select! {
        _ = served => {}
        _ = super::serve::stop_signal() => {}
    }
    schedules.stop().await;
    follow_ups.stop().await;
    output::err(&format!("{}\n", style.dim("stopped")));
    Ok(Exit::Success)
}
