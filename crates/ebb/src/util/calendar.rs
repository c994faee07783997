//! Calendar dates in UTC from Unix time, without a date library (Howard
//! Hinnant's `civil_from_days`). The info log stamps its lines with it, and
//! ebb-bench its header and stats lines.

/// A moment in UTC, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// The year (proleptic Gregorian).
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59.
    pub second: u32,
    /// 0 (Sunday) to 6.
    pub weekday: u32,
}

/// The UTC date and time `unix_secs` seconds after the Unix epoch (before
/// it when negative).
pub fn civil_from_unix(unix_secs: i64) -> Civil {
    let days = unix_secs.div_euclid(86_400);
    let rem = unix_secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    Civil {
        year: yoe + era * 400 + i64::from(month <= 2),
        month,
        day,
        hour: (rem / 3600) as u32,
        minute: (rem % 3600 / 60) as u32,
        second: (rem % 60) as u32,
        // 1970-01-01 was a Thursday.
        weekday: (days + 4).rem_euclid(7) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        let c = civil_from_unix(0);
        assert_eq!((c.year, c.month, c.day, c.hour, c.minute, c.second, c.weekday), (1970, 1, 1, 0, 0, 0, 4));
        // 2000-02-29, a leap day of a century leap year, a Tuesday.
        let c = civil_from_unix(951_827_696);
        assert_eq!((c.year, c.month, c.day, c.hour, c.minute, c.second, c.weekday), (2000, 2, 29, 12, 34, 56, 2));
        let c = civil_from_unix(-1);
        assert_eq!((c.year, c.month, c.day, c.hour, c.minute, c.second), (1969, 12, 31, 23, 59, 59));
    }
}
