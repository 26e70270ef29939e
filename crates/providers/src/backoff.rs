//! One backoff policy for everything that retries: a model request after a 429 or 5xx, and a
//! node whose `retry` setting gives it more attempts.

use std::time::Duration;

/// Waits that double from `initial` up to `max`, with ±25 % jitter when `jitter` is set (so
/// many clients retrying at once spread out).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub jitter: bool,
}

impl Backoff {
    /// The wait before retry number `retry` (1 is the first retry, after the first attempt).
    pub fn delay(&self, retry: u32) -> Duration {
        let doublings = i32::try_from(retry.saturating_sub(1).min(30)).unwrap_or(30);
        let mut seconds = self.initial.as_secs_f64() * 2f64.powi(doublings);
        if self.jitter {
            seconds *= 0.75 + 0.5 * rand::random::<f64>();
        }
        Duration::try_from_secs_f64(seconds)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_and_stop_at_the_cap() {
        let plain = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter: false,
        };
        let waits: Vec<u128> = (1..=6)
            .map(|retry| plain.delay(retry).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(plain.delay(u32::MAX), Duration::from_secs(1));
        let jittered = Backoff {
            jitter: true,
            ..plain
        };
        for _ in 0..100 {
            let wait = jittered.delay(2).as_millis();
            assert!((150..=250).contains(&wait), "{wait}");
        }
    }
}
