//! The `Date` field value, formatted once and reused
//! ([RFC 9110 §5.6.7](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.7),
//! [§6.6.1](https://www.rfc-editor.org/rfc/rfc9110#section-6.6.1)).

use core::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate in bytes, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
const IMF_FIXDATE_LEN: usize = 29;

/// Seconds from the Unix epoch to 9999-12-31T23:59:59Z, the last instant an
/// IMF-fixdate (four-digit year) can show.
const LAST_FOUR_DIGIT_YEAR_SECS: u64 = 253_402_300_799;

/// An HTTP-date in the preferred IMF-fixdate format, 29 ASCII bytes such as
/// `Sun, 06 Nov 1994 08:49:37 GMT`
/// ([RFC 9110 §5.6.7](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.7)).
///
/// The crate never reads the clock: the driver calls
/// [`HttpDate::from_system_time`] (at most once per second) and copies
/// [`HttpDate::as_bytes`] into every response's `Date` field line.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use keel_http::HttpDate;
///
/// let date = HttpDate::from_system_time(UNIX_EPOCH + Duration::from_secs(784_111_777));
/// assert_eq!(date.as_str(), "Sun, 06 Nov 1994 08:49:37 GMT");
///
/// let mut out = Vec::new();
/// keel_http::write_field_line(&mut out, b"date", date.as_bytes());
/// assert_eq!(out, b"date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HttpDate {
    /// Always 29 ASCII bytes written by `httpdate`.
    bytes: [u8; IMF_FIXDATE_LEN],
}

impl HttpDate {
    /// Formats the wall-clock time `t` (whole seconds; the sub-second part is
    /// dropped) as an IMF-fixdate in GMT. Times before 1970 are shown as the
    /// Unix epoch and times after year 9999 as `Fri, 31 Dec 9999 23:59:59 GMT`,
    /// the range an IMF-fixdate can show.
    #[must_use]
    pub fn from_system_time(t: SystemTime) -> Self {
        let secs = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .min(LAST_FOUR_DIGIT_YEAR_SECS);
        let date = httpdate::HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs));
        let mut writer = FixedWriter {
            bytes: [b' '; IMF_FIXDATE_LEN],
            len: 0,
        };
        // Writing to a `FixedWriter` fails only if the text is longer than 29
        // bytes, and httpdate writes exactly 29 ASCII bytes for years
        // 1970..=9999, which the clamp above ensures.
        let written = fmt::write(&mut writer, format_args!("{date}"));
        debug_assert!(written.is_ok() && writer.len == IMF_FIXDATE_LEN);
        Self {
            bytes: writer.bytes,
        }
    }

    /// The 29 bytes of the IMF-fixdate, ready to be a `Date` field value.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; IMF_FIXDATE_LEN] {
        &self.bytes
    }

    /// The IMF-fixdate as a string slice (29 ASCII characters).
    #[must_use]
    pub fn as_str(&self) -> &str {
        // The bytes are ASCII (see `from_system_time`), so this never fails.
        core::str::from_utf8(&self.bytes).unwrap_or("")
    }
}

impl fmt::Debug for HttpDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HttpDate").field(&self.as_str()).finish()
    }
}

impl fmt::Display for HttpDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `fmt::Write` into a fixed array; fails instead of overflowing.
struct FixedWriter {
    bytes: [u8; IMF_FIXDATE_LEN],
    len: usize,
}

impl fmt::Write for FixedWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn formats_rfc_9110_example() {
        let date = HttpDate::from_system_time(at(784_111_777));
        assert_eq!(date.as_bytes(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(date.to_string(), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    /// `{:?}` shows the IMF-fixdate itself, so logs and assertion messages
    /// show which `Date` a response carried.
    #[test]
    fn debug_shows_the_imf_fixdate() {
        let date = HttpDate::from_system_time(at(784_111_777));
        assert_eq!(
            format!("{date:?}"),
            "HttpDate(\"Sun, 06 Nov 1994 08:49:37 GMT\")"
        );
    }

    #[test]
    fn drops_sub_second_part() {
        let date = HttpDate::from_system_time(at(784_111_777) + Duration::from_millis(999));
        assert_eq!(date.as_str(), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn clamps_out_of_range_times() {
        assert_eq!(
            HttpDate::from_system_time(UNIX_EPOCH - Duration::from_secs(1)).as_str(),
            "Thu, 01 Jan 1970 00:00:00 GMT"
        );
        assert_eq!(
            HttpDate::from_system_time(at(LAST_FOUR_DIGIT_YEAR_SECS + 100)).as_str(),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
    }
}
