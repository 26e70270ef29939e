//! The server's connections: accepted from the listener (backing off while the process has no
//! file descriptor to spare, never giving up), each served as HTTP/1 with a deadline for every
//! request head, and on shutdown given a bounded time to finish before they are closed.
//!
//! The deadline covers reading a request's line and headers only, from the moment the
//! connection opens or its last answer was written: a client that sends a request slowly or
//! never (a "slowloris") cannot hold a connection, and the file descriptor behind it, for long.
//! Answers are not limited: an event stream lasts as long as its run.

use std::pin::pin;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long accepting waits before trying again after it failed for want of resources (file
/// descriptors, memory). Connections that close free them; those waiting to be accepted stay
/// queued by the system meanwhile.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How often running out of them is told, at most: under a flood it happens again and again.
const STARVED_TOLD_EVERY: Duration = Duration::from_secs(60);

/// The connections being served.
pub(crate) struct Connections {
    router: Router,
    header_timeout: Duration,
    tracker: TaskTracker,
    /// Set when the server stops: each connection finishes the request it is answering, then
    /// closes (an idle one closes at once).
    finishing: CancellationToken,
    /// Set once the connections have had their time to finish: those still open are closed.
    closing: CancellationToken,
}

impl Connections {
    pub(crate) fn new(router: Router, header_timeout: Duration) -> Connections {
        Connections {
            router,
            header_timeout,
            tracker: TaskTracker::new(),
            finishing: CancellationToken::new(),
            closing: CancellationToken::new(),
        }
    }

    /// Accepts connections on `listener`, serving each, until `shutdown` completes.
    pub(crate) async fn accept(&self, listener: &TcpListener, shutdown: impl Future<Output = ()>) {
        let mut shutdown = pin!(shutdown);
        // When accepting last failed for want of resources and that was told.
        let mut told: Option<Instant> = None;
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => self.serve(stream),
                // That one connection is gone (its client gave up): the next one is fine.
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::ConnectionAborted
                            | std::io::ErrorKind::ConnectionReset
                            | std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                // Out of file descriptors (or memory): retrying at once would spin, giving up
                // would stop serving; wait for connections to close instead.
                Err(error) => {
                    if told.is_none_or(|told| told.elapsed() >= STARVED_TOLD_EVERY) {
                        tracing::warn!(
                            "cannot accept connections ({error}); trying again as others close"
                        );
                        told = Some(Instant::now());
                    }
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    }
                }
            }
        }
    }

    fn serve(&self, stream: TcpStream) {
        // Each event of a stream is sent as it comes, not held back to fill a packet.
        let _ = stream.set_nodelay(true);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        let service = TowerToHyperService::new(self.router.clone());
        let (finishing, closing) = (self.finishing.clone(), self.closing.clone());
        self.tracker.spawn(async move {
            let mut connection = pin!(http.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                served = connection.as_mut() => return ended(served),
                () = finishing.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            tokio::select! {
                served = connection.as_mut() => ended(served),
                () = closing.cancelled() => {}
            }
        });
    }

    /// Stops serving: each connection finishes the request it is answering within `drain`;
    /// those still open then (a request still arriving, a handler still going) are closed.
    pub(crate) async fn stop(&self, drain: Duration) {
        self.tracker.close();
        self.finishing.cancel();
        if tokio::time::timeout(drain, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::debug!("closing the connections that did not finish in time");
            self.closing.cancel();
            self.tracker.wait().await;
        }
    }
}

/// A connection's end: a client that went away or was too slow is no error of the server's.
fn ended(served: Result<(), hyper::Error>) {
    if let Err(error) = served {
        tracing::debug!("a connection ended: {error}");
    }
}
