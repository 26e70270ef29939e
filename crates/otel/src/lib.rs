//! OpenTelemetry traces of runs (docs/traces.md). Every host calls [`init`] once at start and
//! [`shutdown`] before it exits; with the standard `OTEL_EXPORTER_OTLP_*` variables set, the
//! engines it makes (through `weft-api`) get a [`RunTracer`], which turns what the engine
//! reports ([`weft_engine::trace`]) into spans following the GenAI semantic conventions.
//! Without the variables nothing is set up and the engine has no tracer at all.
//!
//! Spans leave through the SDK's batch processor, on its own thread with a bounded queue: a
//! run never waits on the exporter, and a collector that is down or slow costs the spans it
//! would have received (with one warning), never a step's time.

mod export;
mod spans;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use weft_history::cost::Prices;

pub use spans::RunTracer;

/// Message content goes into spans only when this is `true` (the GenAI conventions' switch).
pub const CAPTURE_CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// How long [`shutdown`] waits for the last spans to leave: a command's exit is never held
/// longer by a slow collector.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

/// The exporter this process set up from its environment.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    capture_content: bool,
}

static INSTALLED: OnceLock<Option<Telemetry>> = OnceLock::new();

/// Sets up the exporter when the environment asks for traces (`OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, unless `OTEL_SDK_DISABLED=true` or
/// `OTEL_TRACES_EXPORTER=none`); `service` names the process (`weft`, `weft-app`) unless
/// `OTEL_SERVICE_NAME` does. Once per process: later calls return what the first set up.
pub fn init(service: &str) -> Option<&'static Telemetry> {
    INSTALLED
        .get_or_init(|| from_env(service, &|name| std::env::var(name).ok()))
        .as_ref()
}

/// The exporter [`init`] set up, if any.
pub fn installed() -> Option<&'static Telemetry> {
    INSTALLED.get().and_then(Option::as_ref)
}

/// Sends the spans still queued, waiting a few seconds at most. Call it before the process
/// exits; spans of runs still going then are lost.
pub fn shutdown() {
    if let Some(telemetry) = installed() {
        telemetry.shutdown();
    }
}

fn from_env(service: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<Telemetry> {
    let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
        return None;
    }
    if set("OTEL_TRACES_EXPORTER").is_some_and(|value| value.trim().eq_ignore_ascii_case("none")) {
        return None;
    }
    let endpoint =
        set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
    let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".to_string());
    if protocol.trim() != "http/protobuf" {
        tracing::warn!(
            "no traces are exported: OTEL_EXPORTER_OTLP_PROTOCOL is `{protocol}`, and Weft \
             exports OTLP over HTTP only (set it to `http/protobuf`, and the endpoint to the \
             collector's HTTP port, usually 4318)"
        );
        return None;
    }
    let capture_content =
        set(CAPTURE_CONTENT_ENV).is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    let service = set("OTEL_SERVICE_NAME").is_none().then_some(service);
    match Telemetry::build(&endpoint, None, service, capture_content) {
        Ok(telemetry) => Some(telemetry),
        Err(message) => {
            tracing::warn!("no traces are exported: {message}");
            None
        }
    }
}

impl Telemetry {
    /// An exporter posting spans to `url` (the whole URL, `…/v1/traces`), whatever the
    /// environment says: for benchmarks and tests that start their own collector.
    pub fn to_url(url: &str, capture_content: bool) -> Result<Telemetry, String> {
        Telemetry::build(url, Some(url), Some("weft"), capture_content)
    }

    fn build(
        endpoint: &str,
        url: Option<&str>,
        service: Option<&str>,
        capture_content: bool,
    ) -> Result<Telemetry, String> {
        let exporter = export::exporter(endpoint, url)?;
        let mut resource = Resource::builder();
        if let Some(service) = service {
            resource = resource.with_service_name(service.to_string());
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("weft");
        Ok(Telemetry {
            provider,
            tracer,
            capture_content,
        })
    }

    /// Sends what is queued and stops, waiting a few seconds at most.
    pub fn shutdown(&self) {
        // An error here is the collector being down or slow, already warned about once.
        let _ = self.provider.shutdown_with_timeout(SHUTDOWN_WAIT);
    }

    /// The tracer an engine's runs report to, costing LLM calls at `prices`.
    pub fn tracer(&self, prices: &Prices) -> Arc<RunTracer> {
        Arc::new(RunTracer::new(
            self.tracer.clone(),
            prices.clone(),
            self.capture_content,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn nothing_is_set_up_without_an_endpoint_or_when_switched_off() {
        assert!(from_env("weft", &env(&[])).is_none());
        assert!(from_env("weft", &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])).is_none());
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
        assert!(from_env("weft", &env(&[endpoint, ("OTEL_SDK_DISABLED", "true")])).is_none());
        assert!(from_env("weft", &env(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])).is_none());
        assert!(
            from_env(
                "weft",
                &env(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])
            )
            .is_none()
        );
    }
}
