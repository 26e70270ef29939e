//! Answers for runs that are Restate workflows, given anywhere but their workflow (`weft
//! resume`, `weft serve`, the app): sent to the workflow's handlers through Restate's ingress,
//! whose URL the run's host name carries (`restate http://…:8080`). The workflow checks the
//! answer and goes on with it; the sender follows the run in the shared store.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use weft_api::{Error, HostedAction, RunHost};
use weft_engine::PauseAnswer;

use crate::{HOST_PREFIX, SERVICE};

/// How long sending an answer to the ingress may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Hands answers to Restate workflows through their ingress.
#[derive(Debug, Clone, Default)]
pub struct RestateIngress {
    /// Built at the first answer sent: building a client loads the TLS root certificates, which
    /// took a few milliseconds of every `weft` command, most of which never send one.
    client: Arc<OnceLock<reqwest::Client>>,
}

impl RestateIngress {
    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(reqwest::Client::new)
    }
}

impl RunHost for RestateIngress {
    fn drives(&self, host: &str) -> bool {
        host.starts_with(HOST_PREFIX)
    }

    fn answer<'a>(
        &'a self,
        host: &'a str,
        run_id: &'a str,
        answer: &'a PauseAnswer,
    ) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            let ingress = host.strip_prefix(HOST_PREFIX).unwrap_or(host);
            let (handler, body) = match answer {
                PauseAnswer::Decision(decision) => ("decide", serde_json::to_value(decision)),
                PauseAnswer::Continue(how) => ("proceed", serde_json::to_value(how)),
            };
            let body =
                body.map_err(|error| Error::failed(format!("cannot send the answer: {error}")))?;
            let url = format!(
                "{}/{SERVICE}/{run_id}/{handler}",
                ingress.trim_end_matches('/')
            );
            let sent = self
                .client()
                .post(&url)
                .timeout(SEND_TIMEOUT)
                .json(&body)
                .send()
                .await
                .map_err(|error| {
                    Error::failed(format!(
                        "run {run_id} is a Restate workflow; its answer goes through Restate's \
                         ingress, which did not answer at {ingress}: {error}"
                    ))
                })?;
            let status = sent.status();
            if status.is_success() {
                return Ok(());
            }
            let body = sent.text().await.unwrap_or_default();
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|answer| answer["message"].as_str().map(str::to_string))
                .unwrap_or(body);
            Err(Error::invalid(format!(
                "Restate's ingress refused the answer for run {run_id} ({}): {message}",
                status.as_u16()
            )))
        }
        .boxed()
    }

    fn refusal(&self, action: HostedAction) -> String {
        match action {
            HostedAction::Retry => {
                "Restate continues it on another worker when its worker stops, not this process"
                    .to_string()
            }
            HostedAction::Cancel => "its workflow waits for the answer; cancel the workflow \
                                     through Restate (its admin API or `restate invocations cancel`)"
                .to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_http_client_is_built_until_an_answer_is_sent() {
        let ingress = RestateIngress::default();
        assert!(ingress.drives("restate http://127.0.0.1:8080"));
        assert!(
            ingress.client.get().is_none(),
            "a command that sends no answer pays for no TLS set-up"
        );
    }
}
