//! The flows' schedules on `weft restate` workers: every worker looks at them, the one that
//! claims an occurrence in the shared store hands the run to Restate's ingress, and Restate runs
//! it as a durable workflow on whichever worker it picks (the same as a run started by anyone).

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use weft_api::schedules::{ScheduledRun, StartScheduled};

use crate::SERVICE;
use crate::worker::StartRequest;

/// How long Restate's ingress may take to accept a run.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts scheduled runs as workflows through the ingress at `ingress`.
pub struct StartThroughIngress {
    ingress: String,
    client: reqwest::Client,
}

impl StartThroughIngress {
    pub fn new(ingress: &str) -> StartThroughIngress {
        StartThroughIngress {
            ingress: ingress.trim_end_matches('/').to_string(),
            client: reqwest::Client::new(),
        }
    }
}

impl StartScheduled for StartThroughIngress {
    fn start(&self, run: ScheduledRun) -> BoxFuture<'_, Result<String, String>> {
        async move {
            // The workflow's key is the run's id; Restate starts a key once, so a send that is
            // retried cannot start the run twice.
            let run_id = uuid::Uuid::new_v4().to_string();
            let request = StartRequest {
                flow: run.flow,
                input: run.input.map(serde_json::Value::String),
                breakpoints: Vec::new(),
                trigger: Some(run.trigger),
            };
            let url = format!("{}/{SERVICE}/{run_id}/run/send", self.ingress);
            let sent = self
                .client
                .post(&url)
                .timeout(SEND_TIMEOUT)
                .json(&request)
                .send()
                .await
                .map_err(|error| {
                    format!(
                        "Restate's ingress did not answer at {}: {error}",
                        self.ingress
                    )
                })?;
            let status = sent.status();
            if status.is_success() {
                return Ok(run_id);
            }
            let body = sent.text().await.unwrap_or_default();
            Err(format!(
                "Restate's ingress refused the run ({}): {body}",
                status.as_u16()
            ))
        }
        .boxed()
    }
}
