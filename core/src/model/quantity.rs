//! Kubernetes resource quantities ("500m", "1", "1.5", "512Mi", "2G", "1e3") as exact integers.
//!
//! CPU is kept in milli-cores, everything else in whole units (bytes, pods, devices). A quantity
//! that is not a whole number of the target unit is rounded up, as the kubelet does for requests.

use thiserror::Error;

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("quantity {0:?} is empty")]
    /// Nothing to read.
    Empty(String),
    #[error(
        "quantity {0:?} is not a number with an optional suffix (examples: 500m, 2, 1.5, 512Mi, 4Gi, 1G)"
    )]
    /// Not a number with a known suffix.
    Malformed(String),
    #[error("quantity {0:?} is negative; requests, limits and capacities must be zero or more")]
    /// Below zero.
    Negative(String),
    #[error("quantity {0:?} is too large")]
    /// Too large for the integer it is kept in.
    Overflow(String),
}

/// A parsed quantity as an exact rational `numerator / 10^scale` is overkill here: we keep the
/// value in units of 10^-3 (milli) as i128 with an exactness flag, which covers every suffix.
fn parse_milli(raw: &str) -> Result<i128, QuantityError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty(raw.to_string()));
    }
    if s.starts_with('-') {
        return Err(QuantityError::Negative(raw.to_string()));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(QuantityError::Malformed(raw.to_string()));
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    // value = digits / 10^frac_len, then times the suffix multiplier, in milli units.
    let digits: String = format!("{int_part}{frac_part}");
    let digits: i128 = if digits.is_empty() {
        0
    } else {
        digits
            .parse::<i128>()
            .map_err(|_| QuantityError::Overflow(raw.to_string()))?
    };
    if frac_part.len() > 18 {
        return Err(QuantityError::Malformed(raw.to_string()));
    }
    let frac_len = frac_part.len() as u32;
    // multiplier expressed as (numerator in milli units, extra power of ten divisor)
    let (mul_milli, exp10): (i128, i32) = match suffix {
        "" => (1000, 0),
        "m" => (1, 0),
        "k" => (1000, 3),
        "M" => (1000, 6),
        "G" => (1000, 9),
        "T" => (1000, 12),
        "P" => (1000, 15),
        "E" => (1000, 18),
        "Ki" => (1000 * (1 << 10), 0),
        "Mi" => (1000 * (1 << 20), 0),
        "Gi" => (1000 * (1 << 30), 0),
        "Ti" => (1000 * (1i128 << 40), 0),
        "Pi" => (1000 * (1i128 << 50), 0),
        "Ei" => (1000 * (1i128 << 60), 0),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..]
                .parse()
                .map_err(|_| QuantityError::Malformed(raw.to_string()))?;
            if !(-3..=18).contains(&exp) {
                return Err(QuantityError::Overflow(raw.to_string()));
            }
            (1000, exp)
        }
        _ => return Err(QuantityError::Malformed(raw.to_string())),
    };
    let net_exp = exp10 - frac_len as i32;
    let value = digits
        .checked_mul(mul_milli)
        .ok_or_else(|| QuantityError::Overflow(raw.to_string()))?;
    let value = if net_exp >= 0 {
        value
            .checked_mul(10i128.pow(net_exp as u32))
            .ok_or_else(|| QuantityError::Overflow(raw.to_string()))?
    } else {
        // round up to the next milli unit
        let div = 10i128.pow((-net_exp) as u32);
        (value + div - 1) / div
    };
    if value > i64::MAX as i128 * 1000 {
        return Err(QuantityError::Overflow(raw.to_string()));
    }
    Ok(value)
}

/// Parses a CPU quantity into milli-cores ("250m" → 250, "1" → 1000, "1.5" → 1500).
pub fn parse_milli_cpu(raw: &str) -> Result<i64, QuantityError> {
    let milli = parse_milli(raw)?;
    i64::try_from(milli).map_err(|_| QuantityError::Overflow(raw.to_string()))
}

/// Parses a quantity into whole units, rounding up ("512Mi" → 536870912, "1.5" → 2).
pub fn parse_units(raw: &str) -> Result<i64, QuantityError> {
    let milli = parse_milli(raw)?;
    let units = (milli + 999) / 1000;
    i64::try_from(units).map_err(|_| QuantityError::Overflow(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_milli_cpu("500m"), Ok(500));
        assert_eq!(parse_milli_cpu("1"), Ok(1000));
        assert_eq!(parse_milli_cpu("1.5"), Ok(1500));
        assert_eq!(parse_milli_cpu("0.1"), Ok(100));
        assert_eq!(parse_milli_cpu("2k"), Ok(2_000_000));
        assert_eq!(parse_milli_cpu("1e3"), Ok(1_000_000));
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(parse_units("512Mi"), Ok(512 << 20));
        assert_eq!(parse_units("1Gi"), Ok(1 << 30));
        assert_eq!(parse_units("1G"), Ok(1_000_000_000));
        assert_eq!(parse_units("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_units("100"), Ok(100));
        assert_eq!(parse_units("1500m"), Ok(2));
    }

    #[test]
    fn bad_quantities_are_refused() {
        assert!(matches!(parse_units(""), Err(QuantityError::Empty(_))));
        assert!(matches!(parse_units("-1"), Err(QuantityError::Negative(_))));
        assert!(matches!(
            parse_units("12x"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            parse_units("1.2.3"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            parse_units("Gi"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            parse_units("99999999999999999999999999Ei"),
            Err(QuantityError::Overflow(_))
        ));
    }
}
