//! The OTLP exporter, and what a person is told when the collector cannot be reached.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// opentelemetry-otlp's HTTP/protobuf exporter (which reads the endpoint, headers and timeout
/// from the `OTEL_EXPORTER_OTLP_*` variables itself), warning once when spans are lost.
/// `url`, when given, is the full URL spans are posted to (else the variables say).
pub(crate) fn exporter(endpoint: &str, url: Option<&str>) -> Result<WarnOnce, String> {
    use opentelemetry_otlp::WithExportConfig;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(url) = url {
        builder = builder.with_endpoint(url);
    }
    let inner = builder
        .build()
        .map_err(|error| format!("the OTLP exporter for {endpoint} could not be made: {error}"))?;
    Ok(WarnOnce {
        inner,
        endpoint: endpoint.to_string(),
        warned: AtomicBool::new(false),
    })
}

/// Passes batches on; the first one that fails is told once (a collector that is down would
/// otherwise be a warning per batch). The SDK does not retry: a failed batch is dropped.
pub(crate) struct WarnOnce {
    inner: opentelemetry_otlp::SpanExporter,
    endpoint: String,
    warned: AtomicBool,
}

impl fmt::Debug for WarnOnce {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("WarnOnce")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl SpanExporter for WarnOnce {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(error) = &result
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                "traces: {count} spans could not be sent to {} and were dropped ({error}); \
                 runs go on, and later spans are dropped the same way without another warning \
                 while it cannot be reached",
                self.endpoint
            );
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
