//! When to retry a request and how long to wait first, as the official SDKs decide
//! (openai-python and anthropic-sdk-python, `_should_retry` and
//! `_calculate_retry_timeout`). No I/O, no clock, no randomness of its own: the caller
//! passes the current time and a random number.
//!
//! - Retried: `x-should-retry: true` whatever the status; otherwise 408, 409, 429 and
//!   every 5xx (529, Anthropic's "overloaded", included), and connection failures and
//!   timeouts. Never retried: `x-should-retry: false`, and any other status (400, 401,
//!   403, 404, 422, ...).
//! - The wait: `retry-after-ms` (milliseconds, may be fractional), else `retry-after`
//!   (seconds, may be fractional, or an HTTP date, RFC 9110 §10.2.3), when it gives more
//!   than 0 and at most 60 s; otherwise exponential backoff, 0.5 s × 2^retries capped at
//!   8 s, less a random jitter of up to 25 %.

use std::time::{Duration, SystemTime};

/// Retries after the first attempt when the caller sets none (as both SDKs).
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The first backoff delay.
pub const INITIAL_RETRY_DELAY: Duration = Duration::from_millis(500);
/// The largest backoff delay.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(8);
/// The longest server-asked wait honoured; a longer one falls back to backoff.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Whether a response with `status` is retried, given its `x-should-retry` field value
/// (`true`/`false`) when present.
#[must_use]
pub fn should_retry_status(status: u16, x_should_retry: Option<&[u8]>) -> bool {
    match x_should_retry.map(<[u8]>::trim_ascii) {
        Some(b"true") => true,
        Some(b"false") => false,
        _ => matches!(status, 408 | 409 | 429) || status >= 500,
    }
}

/// The wait a server asked for: `retry-after-ms` (milliseconds), else `retry-after`
/// (seconds, or an HTTP date compared with `now`), kept only when it is more than 0 and
/// at most [`MAX_RETRY_AFTER`]. `None` when neither field gives such a wait.
#[must_use]
pub fn server_retry_after(
    retry_after_ms: Option<&[u8]>,
    retry_after: Option<&[u8]>,
    now: SystemTime,
) -> Option<Duration> {
    let text = |v: &[u8]| {
        std::str::from_utf8(v)
            .ok()
            .map(str::trim)
            .map(str::to_owned)
    };
    let secs = |s: f64| {
        (s.is_finite() && s > 0.0 && s <= MAX_RETRY_AFTER.as_secs_f64())
            .then(|| Duration::from_secs_f64(s))
    };
    if let Some(ms) = retry_after_ms.and_then(text) {
        if let Ok(ms) = ms.parse::<f64>() {
            return secs(ms / 1000.0);
        }
    }
    let value = retry_after.and_then(text)?;
    if let Ok(s) = value.parse::<f64>() {
        return secs(s);
    }
    let at = httpdate::parse_http_date(&value).ok()?;
    let wait = at.duration_since(now).ok()?;
    secs(wait.as_secs_f64())
}

/// The backoff before retry number `retries_done + 1`: 0.5 s × 2^`retries_done`, at
/// most 8 s, times `1 - 0.25 × random` (`random` in `[0, 1)`; clamped).
#[must_use]
pub fn backoff(retries_done: u32, random: f64) -> Duration {
    let base = INITIAL_RETRY_DELAY.as_secs_f64() * 2f64.powi(retries_done.min(16) as i32);
    let base = base.min(MAX_RETRY_DELAY.as_secs_f64());
    let jitter = 1.0 - 0.25 * random.clamp(0.0, 1.0);
    Duration::from_secs_f64(base * jitter)
}

/// The wait before the next attempt: the server's (see [`server_retry_after`]) when it
/// gave one, else [`backoff`].
#[must_use]
pub fn delay(retries_done: u32, server: Option<Duration>, random: f64) -> Duration {
    server.unwrap_or_else(|| backoff(retries_done, random))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(should_retry_status(s, None), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!should_retry_status(s, None), "{s}");
        }
        assert!(!should_retry_status(529, Some(b"false")));
        assert!(should_retry_status(400, Some(b" true")));
        assert!(should_retry_status(503, Some(b"maybe")));
    }

    #[test]
    fn server_waits() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ms = Duration::from_millis;
        assert_eq!(
            server_retry_after(Some(b"250"), Some(b"9"), now),
            Some(ms(250))
        );
        assert_eq!(
            server_retry_after(Some(b"1.5"), None, now),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(server_retry_after(None, Some(b"2"), now), Some(ms(2000)));
        assert_eq!(server_retry_after(None, Some(b"0.5"), now), Some(ms(500)));
        assert_eq!(server_retry_after(None, Some(b"0"), now), None);
        assert_eq!(server_retry_after(None, Some(b"61"), now), None);
        assert_eq!(server_retry_after(None, Some(b"60"), now), Some(ms(60_000)));
        assert_eq!(server_retry_after(None, Some(b"soon"), now), None);
        // An unparseable retry-after-ms does not hide retry-after.
        assert_eq!(
            server_retry_after(Some(b"x"), Some(b"3"), now),
            Some(ms(3000))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            server_retry_after(None, Some(date.as_bytes()), now),
            Some(ms(30_000))
        );
        let late = httpdate::fmt_http_date(now + Duration::from_secs(120));
        assert_eq!(server_retry_after(None, Some(late.as_bytes()), now), None);
        let past = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(server_retry_after(None, Some(past.as_bytes()), now), None);
    }

    #[test]
    fn backoff_grows_and_caps() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(0, 0.0), ms(500));
        assert_eq!(backoff(1, 0.0), ms(1000));
        assert_eq!(backoff(3, 0.0), ms(4000));
        assert_eq!(backoff(4, 0.0), ms(8000));
        assert_eq!(backoff(40, 0.0), ms(8000));
        assert_eq!(backoff(0, 1.0), ms(375));
        assert_eq!(delay(0, Some(ms(20)), 0.5), ms(20));
    }
}
