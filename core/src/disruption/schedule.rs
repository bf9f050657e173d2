//! Cron schedules for disruption budgets: the five standard fields (minute, hour, day of month,
//! month, day of week) and the macros `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//! `@midnight`, `@hourly`, evaluated in UTC on the cluster's clock (Unix milliseconds), as
//! Karpenter evaluates `budgets[].schedule`.
//!
//! A small matcher lives here rather than a cron crate: the core must stay free of clocks and
//! time-zone databases, and a budget only needs "did the schedule fire within the last
//! `duration`".

use std::fmt;

/// A parsed schedule: which minutes, hours, days, months and weekdays it fires on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Day of month / day of week were `*` (they combine with AND then, else with OR).
    dom_any: bool,
    dow_any: bool,
}

/// Why a schedule does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    /// The schedule as written.
    pub schedule: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "schedule {:?} is not a cron expression: {} (write five fields, minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\", or @daily, @weekly, @hourly)",
            self.schedule, self.problem
        )
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn parse_value(raw: &str, names: &[&str], offset: u32) -> Option<u32> {
    if let Ok(n) = raw.parse::<u32>() {
        return Some(n);
    }
    let lower = raw.to_ascii_lowercase();
    names
        .iter()
        .position(|n| *n == lower)
        .map(|i| i as u32 + offset)
}

/// Parses one field into a bit set over `min..=max`.
fn parse_field(
    raw: &str,
    min: u32,
    max: u32,
    names: &[&str],
    name_offset: u32,
) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let any = raw == "*" || raw == "?";
    for part in raw.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("step {s:?} is not a number"))?;
                if step == 0 {
                    return Err("a step of 0".to_string());
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let a = parse_value(a, names, name_offset)
                .ok_or_else(|| format!("{a:?} is not a value"))?;
            let b = parse_value(b, names, name_offset)
                .ok_or_else(|| format!("{b:?} is not a value"))?;
            (a, b)
        } else {
            let v = parse_value(range, names, name_offset)
                .ok_or_else(|| format!("{range:?} is not a value"))?;
            // `5/15` means from 5 to the end, every 15.
            if step > 1 { (v, max) } else { (v, v) }
        };
        if lo < min || hi > max || lo > hi {
            return Err(format!("{part:?} is outside {min}-{max}"));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, any))
}

impl CronSchedule {
    /// Reads a five-field cron schedule (or a macro such as `@daily`), in UTC.
    pub fn parse(schedule: &str) -> Result<CronSchedule, CronError> {
        let err = |problem: String| CronError {
            schedule: schedule.to_string(),
            problem,
        };
        let expr = match schedule.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!("{} fields", fields.len())));
        }
        let (minutes, _) = parse_field(fields[0], 0, 59, &[], 0).map_err(&err)?;
        let (hours, _) = parse_field(fields[1], 0, 23, &[], 0).map_err(&err)?;
        let (dom, dom_any) = parse_field(fields[2], 1, 31, &[], 0).map_err(&err)?;
        let (months, _) = parse_field(fields[3], 1, 12, &MONTHS, 1).map_err(&err)?;
        let (mut dow, dow_any) = parse_field(fields[4], 0, 7, &DAYS, 0).map_err(&err)?;
        if dow & (1 << 7) != 0 {
            // 7 is Sunday too.
            dow = (dow | 1) & 0x7f;
        }
        Ok(CronSchedule {
            minutes,
            hours: hours as u32,
            days_of_month: dom as u32,
            months: months as u16,
            days_of_week: dow as u8,
            dom_any,
            dow_any,
        })
    }

    /// Whether the schedule fires at this minute (minutes since the Unix epoch, UTC).
    pub fn fires_at_minute(&self, minute: i64) -> bool {
        let m = minute.rem_euclid(60) as u32;
        let h = (minute.div_euclid(60)).rem_euclid(24) as u32;
        if self.minutes & (1 << m) == 0 || self.hours & (1 << h) == 0 {
            return false;
        }
        let days = minute.div_euclid(24 * 60);
        let (_, month, day) = civil_from_days(days);
        if self.months & (1 << month) == 0 {
            return false;
        }
        let weekday = (days + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday.
        let dom_ok = self.days_of_month & (1 << day) != 0;
        let dow_ok = self.days_of_week & (1 << weekday) != 0;
        match (self.dom_any, self.dow_any) {
            (false, false) => dom_ok || dow_ok,
            _ => dom_ok && dow_ok,
        }
    }

    /// Whether a window of `duration_ms` opened by this schedule contains `now_ms`: the schedule
    /// fired at some minute in `(now − duration, now]`.
    pub fn active_at(&self, now_ms: u64, duration_ms: u64) -> bool {
        let now_minute = (now_ms / 60_000) as i64;
        let earliest = (now_ms.saturating_sub(duration_ms) / 60_000) as i64;
        let mut minute = now_minute;
        while minute >= earliest {
            // A fire at `minute` opens [minute, minute + duration).
            if self.fires_at_minute(minute) && (minute as u64) * 60_000 + duration_ms > now_ms {
                return true;
            }
            minute -= 1;
        }
        false
    }
}

/// (year, month 1..12, day 1..31) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a UTC date and time.
    fn at(y: i64, mo: u32, d: u32, h: u64, mi: u64) -> u64 {
        // days from civil (inverse of civil_from_days), for tests only
        let y = if mo <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (mo as i64 + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d as i64 - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        (days as u64 * 86_400 + h * 3600 + mi * 60) * 1000
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(at(2026, 1, 5, 0, 0) / 86_400_000, 20_458);
    }

    #[test]
    fn business_hours_window() {
        // Weekdays from 09:00 for 8 hours.
        let s = CronSchedule::parse("0 9 * * mon-fri").expect("parses");
        let hour = 3_600_000;
        // Monday 2026-01-05
        assert!(!s.active_at(at(2026, 1, 5, 8, 59), 8 * hour));
        assert!(s.active_at(at(2026, 1, 5, 9, 0), 8 * hour));
        assert!(s.active_at(at(2026, 1, 5, 16, 59), 8 * hour));
        assert!(!s.active_at(at(2026, 1, 5, 17, 0), 8 * hour));
        // Saturday 2026-01-10
        assert!(!s.active_at(at(2026, 1, 10, 10, 0), 8 * hour));
    }

    #[test]
    fn macros_steps_lists_and_names() {
        let daily = CronSchedule::parse("@daily").expect("parses");
        assert!(daily.fires_at_minute((at(2026, 3, 1, 0, 0) / 60_000) as i64));
        assert!(!daily.fires_at_minute((at(2026, 3, 1, 0, 1) / 60_000) as i64));
        let every_15 = CronSchedule::parse("*/15 * * * *").expect("parses");
        assert!(every_15.fires_at_minute(45));
        assert!(!every_15.fires_at_minute(46));
        let list = CronSchedule::parse("0 0 1,15 jan-mar *").expect("parses");
        assert!(list.fires_at_minute((at(2026, 2, 15, 0, 0) / 60_000) as i64));
        assert!(!list.fires_at_minute((at(2026, 4, 15, 0, 0) / 60_000) as i64));
        let sunday = CronSchedule::parse("0 0 * * 7").expect("parses");
        // 2026-01-04 is a Sunday.
        assert!(sunday.fires_at_minute((at(2026, 1, 4, 0, 0) / 60_000) as i64));
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_are_set() {
        // The 13th, or any Friday.
        let s = CronSchedule::parse("0 0 13 * fri").expect("parses");
        assert!(s.fires_at_minute((at(2026, 1, 13, 0, 0) / 60_000) as i64)); // a Tuesday
        assert!(s.fires_at_minute((at(2026, 1, 9, 0, 0) / 60_000) as i64)); // a Friday
        assert!(!s.fires_at_minute((at(2026, 1, 8, 0, 0) / 60_000) as i64));
    }

    #[test]
    fn bad_schedules_are_refused() {
        for bad in [
            "",
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "*/0 * * * *",
            "0 9 * * funday",
            "5-1 * * * *",
        ] {
            assert!(CronSchedule::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
