//! `weft serve`: the HTTP API (docs/serving.md) over this machine's run store, until SIGTERM or
//! Ctrl-C,
//! when runs going here are stored as cancelled and paused runs keep their pause.

use std::time::Duration;

use weft_api::Lifetime;
use weft_server::{DEFAULT_MAX_BODY, ServeConfig, Tokens};

use crate::output::{self, Style};
use crate::{Exit, ServeArgs, usage_error};

/// How long the runs going here get to be stored as cancelled when the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<Exit> {
    let prices = super::prices()?;
    let Some(tokens_file) = args.tokens.clone() else {
        return Err(usage_error(
            "give --tokens FILE (or WEFT_TOKENS_FILE): one `name:token` a line; the server refuses to start without a token",
        ));
    };
    let tokens = Tokens::load(&tokens_file).map_err(|error| usage_error(error.to_string()))?;
    if !args.flows.is_dir() {
        return Err(usage_error(format!(
            "--flows {}: not a folder",
            args.flows.display()
        )));
    }
    let link_key = weft_server::links::LinkKey::from_env().map_err(usage_error)?;
    let mailer = match (&args.smtp, &args.public_url, &link_key) {
        (None, _, _) => None,
        (Some(_), None, _) => {
            return Err(usage_error(
                "--smtp needs --public-url: the address approvers' browsers reach this server at, for the links in the emails",
            ));
        }
        (Some(_), Some(_), None) => {
            return Err(usage_error(format!(
                "--smtp needs {}: a secret of at least 32 characters the links are signed with (the same for every server answering them; e.g. `openssl rand -hex 32`)",
                weft_server::links::LINK_KEY_ENV
            )));
        }
        (Some(smtp), Some(public_url), Some(key)) => Some(
            weft_server::mail::Mailer::new(
                smtp,
                public_url,
                args.mail_from.as_deref(),
                key.clone(),
            )
            .map_err(usage_error)?,
        ),
    };
    let location = super::location(&args.store)?;
    let people =
        weft_api::People::from_file_or_env(args.people.as_deref()).map_err(super::api_error)?;
    let weft = super::open_as(location.clone(), Lifetime::Service)?
        .with_prices(prices)
        .with_people(people);
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|error| usage_error(format!("cannot listen on {}: {error}", args.addr)))?;
    let address = listener.local_addr()?;
    let style = Style::stderr();
    output::err(&format!(
        "{}\n",
        style.dim(&format!(
            "serving the flows of {} for {} (store {}); SIGTERM or Ctrl-C stops",
            args.flows.display(),
            tokens.names().join(", "),
            location
        ))
    ));
    // The address first on stdout, so a script (or a test on port 0) can read it.
    output::out(&format!("http://{address}\n"))?;
    let config = ServeConfig {
        max_body: args.max_body.unwrap_or(DEFAULT_MAX_BODY),
        header_timeout: Duration::from_secs(args.header_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        link_key,
        mailer,
        ..ServeConfig::new(args.flows.clone(), tokens)
    };
    weft_server::serve(listener, weft, config, stop_signal(), SHUTDOWN_GRACE)
        .await
        .map_err(|error| anyhow::anyhow!("the server stopped: {error}"))?;
    output::err(&format!("{}\n", style.dim("stopped")));
    Ok(Exit::Success)
}

/// The first SIGTERM or Ctrl-C.
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
