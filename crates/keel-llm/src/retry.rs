//! Retry policy: exponential backoff with jitter, honouring the provider's `retry-after`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::LlmError;

/// The pause before the second (and last) attempt at an address where nothing listens.
pub const UNREACHABLE_DELAY: Duration = Duration::from_millis(300);

/// How often and how patiently to retry a failed model request.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retries).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Upper bound for one computed delay (a longer `retry-after` is still honoured, up to
    /// `max_retry_after`).
    pub max_delay: Duration,
    /// The longest `retry-after` Keel will wait; longer requests fail at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// How many attempts in all (the first one included) `error` gets: two for an address
    /// where nothing listens, `max_retries + 1` otherwise.
    pub fn attempts_for(&self, error: &LlmError) -> u32 {
        let all = self.max_retries.saturating_add(1);
        if matches!(error, LlmError::Unreachable { .. }) {
            all.min(2)
        } else {
            all
        }
    }

    /// The delay before retry number `attempt` (1-based) after `error`, or `None` when the
    /// error is not retryable or the budget is spent.
    pub fn delay_for(&self, attempt: u32, error: &LlmError) -> Option<Duration> {
        if !error.is_retryable() || attempt + 1 > self.attempts_for(error) {
            return None;
        }
        if matches!(error, LlmError::Unreachable { .. }) {
            // A server that is not running will not start during a backoff: one quick
            // second look (it may have been restarting), then the error.
            return Some(UNREACHABLE_DELAY);
        }
        if let Some(after) = error.retry_after() {
            return (after <= self.max_retry_after).then_some(after);
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let capped = exp.min(self.max_delay);
        // Full jitter on the upper half: spreads retries of many clients without ever
        // waiting less than half the nominal delay.
        let half = capped / 2;
        let jitter_ms = if half.as_millis() == 0 {
            0
        } else {
            pseudo_random() % (half.as_millis() as u64 + 1)
        };
        Some(half + Duration::from_millis(jitter_ms))
    }
}

fn pseudo_random() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    // xorshift64* over the clock: enough spread for jitter, no dependency.
    let mut x = nanos | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_retry_after_and_budget() {
        let p = RetryPolicy::default();
        let e = LlmError::RateLimited {
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(p.delay_for(1, &e), Some(Duration::from_secs(3)));
        assert_eq!(p.delay_for(5, &e), None);
        let bad = LlmError::BadRequest {
            status: 400,
            message: "no".into(),
        };
        assert_eq!(p.delay_for(1, &bad), None);
    }

    #[test]
    fn an_unreachable_server_gets_one_quick_second_attempt() {
        let p = RetryPolicy::default();
        let e = LlmError::Unreachable {
            url: "http://127.0.0.1:9/v1".into(),
            detail: "connection refused".into(),
        };
        assert_eq!(p.attempts_for(&e), 2);
        assert_eq!(p.delay_for(1, &e), Some(UNREACHABLE_DELAY));
        assert_eq!(p.delay_for(2, &e), None);
        assert_eq!(RetryPolicy::none().delay_for(1, &e), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(1),
        };
        let e = LlmError::Server {
            status: 503,
            message: "x".into(),
            retry_after: None,
        };
        let d1 = p.delay_for(1, &e).unwrap_or_default();
        let d4 = p.delay_for(4, &e).unwrap_or_default();
        let d9 = p.delay_for(9, &e).unwrap_or_default();
        assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
        assert!(d4 >= Duration::from_millis(400) && d4 <= Duration::from_millis(800));
        assert!(d9 <= Duration::from_millis(1000));
    }
}
