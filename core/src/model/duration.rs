//! Durations in Kubernetes / Go syntax ("90s", "5m", "1h30m", "720h", "Never") as milliseconds.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "duration {0:?} is not a Go duration: write a number and a unit, e.g. 500ms, 90s, 5m, 1h30m, 720h"
)]
pub struct DurationError(pub String);

/// A duration that may be `Never` (Karpenter's `expireAfter: Never`, `consolidateAfter: Never`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MaybeNever {
    /// `Never`.
    Never,
    /// This many milliseconds.
    After(u64),
}

impl MaybeNever {
    /// Milliseconds, or `None` for never.
    pub fn as_ms(self) -> Option<u64> {
        match self {
            MaybeNever::Never => None,
            MaybeNever::After(ms) => Some(ms),
        }
    }
}

/// Parses "Never" or a Go duration.
pub fn parse_maybe_never(raw: &str) -> Result<MaybeNever, DurationError> {
    if raw.trim() == "Never" {
        return Ok(MaybeNever::Never);
    }
    parse_duration_ms(raw).map(MaybeNever::After)
}

/// Parses a Go duration ("1h30m", "90s", "250ms", "0") into milliseconds. Fractions of a
/// millisecond are rounded up.
pub fn parse_duration_ms(raw: &str) -> Result<u64, DurationError> {
    let err = || DurationError(raw.to_string());
    let s = raw.trim();
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(err());
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total_ns: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_len == 0 {
            return Err(err());
        }
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after_unit) = after.split_at(unit_len);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(err()),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err());
        }
        let int_value: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err())?
        };
        total_ns = total_ns
            .checked_add(int_value.checked_mul(unit_ns).ok_or_else(err)?)
            .ok_or_else(err)?;
        if !frac_part.is_empty() {
            let frac_digits = frac_part.len().min(18) as u32;
            let frac: u128 = frac_part[..frac_digits as usize]
                .parse()
                .map_err(|_| err())?;
            total_ns += frac * unit_ns / 10u128.pow(frac_digits);
        }
        rest = after_unit;
    }
    let ms = total_ns.div_ceil(1_000_000);
    u64::try_from(ms).map_err(|_| err())
}

/// Formats milliseconds the way Go prints durations ("1h30m0s", "1m0s", "500ms").
pub fn format_duration_ms(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let h = ms / 3_600_000;
    let m = (ms / 60_000) % 60;
    let s = (ms / 1000) % 60;
    let rem_ms = ms % 1000;
    let secs = if rem_ms == 0 {
        format!("{s}s")
    } else {
        let frac = format!("{rem_ms:03}");
        format!("{s}.{}s", frac.trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration_ms("90s"), Ok(90_000));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("720h"), Ok(2_592_000_000));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert_eq!(parse_maybe_never("Never"), Ok(MaybeNever::Never));
    }

    #[test]
    fn bad_durations() {
        for bad in ["", "5", "5x", "-1s", "h", "1h-3m", "never"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_duration_ms(5_400_000), "1h30m0s");
        assert_eq!(format_duration_ms(60_000), "1m0s");
        assert_eq!(format_duration_ms(1_500), "1.5s");
        assert_eq!(format_duration_ms(20), "20ms");
    }
}
