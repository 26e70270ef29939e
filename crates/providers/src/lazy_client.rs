//! An HTTP client built on first use. Building a `reqwest::Client` loads the TLS root
//! certificates, which costs a few milliseconds and about a MiB; a flow without agent, gate or
//! `http` nodes never needs one, and `weft validate`, `runs` and `show` never do.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Semaphore;

/// Model requests in flight at once when nobody says otherwise ([`LazyClient::limited`]).
pub const DEFAULT_MAX_REQUESTS: usize = 1_000;

/// A `reqwest::Client` with these timeouts, made the first time it is asked for and then
/// shared by every clone (one connection pool).
#[derive(Clone)]
pub struct LazyClient {
    client: Arc<OnceLock<reqwest::Client>>,
    /// Turns for model requests, shared like the pool: a wide fan-out queues here instead of
    /// opening a connection per branch at once (with a socket each, a wide fan-out took
    /// hundreds of MiB, and under the usual limit of 1,024 open files most requests failed and
    /// retried).
    /// The default keeps a 1,000-branch fan-out all in flight.
    requests: Arc<Semaphore>,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
}

impl LazyClient {
    pub fn new(connect_timeout: Duration, read_timeout: Option<Duration>) -> LazyClient {
        LazyClient {
            client: Arc::default(),
            requests: Arc::new(Semaphore::new(DEFAULT_MAX_REQUESTS)),
            connect_timeout,
            read_timeout,
        }
    }

    /// At most `max` model requests in flight at once through this client and its clones.
    pub fn limited(mut self, max: usize) -> LazyClient {
        self.requests = Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS)));
        self
    }

    /// The turns model requests take ([`LazyClient::limited`]).
    pub fn requests(&self) -> &Semaphore {
        &self.requests
    }

    pub fn get(&self) -> &reqwest::Client {
        self.client.get_or_init(|| {
            let mut builder = reqwest::Client::builder().connect_timeout(self.connect_timeout);
            if let Some(read_timeout) = self.read_timeout {
                builder = builder.read_timeout(read_timeout);
            }
            builder
                .build()
                // Only fails when the TLS backend cannot initialize, which is a broken install.
                .unwrap_or_else(|_| reqwest::Client::new())
        })
    }

    /// Whether the client has been built (for tests of what a run initialises).
    pub fn is_built(&self) -> bool {
        self.client.get().is_some()
    }
}

impl std::fmt::Debug for LazyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyClient")
            .field("built", &self.is_built())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_built_once_on_first_use_and_shared_by_clones() {
        let lazy = LazyClient::new(Duration::from_secs(1), None);
        let clone = lazy.clone();
        assert!(!lazy.is_built());
        let first: *const reqwest::Client = lazy.get();
        assert!(clone.is_built(), "a clone sees the built client");
        assert!(std::ptr::eq(first, clone.get()));
    }
}
