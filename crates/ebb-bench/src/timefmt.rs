//! Calendar formatting in UTC without a date library (Howard Hinnant's
//! civil-from-days algorithm), for the header and the stats lines.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let weekday = ((days + 4).rem_euclid(7)) as u32; // 1970-01-01 was a Thursday
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32, weekday)
}

/// `2018/05/20-12:00:00` (db_bench's `TimeToString`, in UTC).
pub fn stats_time(unix_secs: f64) -> String {
    let (y, mo, d, h, mi, s, _) = civil(unix_secs as i64);
    format!("{y:04}/{mo:02}/{d:02}-{h:02}:{mi:02}:{s:02}")
}

/// `Sun May 20 12:00:00 2018` (ctime layout, in UTC).
pub fn ctime(unix_secs: f64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (y, mo, d, h, mi, s, wd) = civil(unix_secs as i64);
    format!("{} {} {d:>2} {h:02}:{mi:02}:{s:02} {y}", DAYS[wd as usize], MONTHS[(mo - 1) as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(stats_time(0.0), "1970/01/01-00:00:00");
        assert_eq!(stats_time(1_526_817_600.0), "2018/05/20-12:00:00");
        assert_eq!(ctime(1_526_817_600.0), "Sun May 20 12:00:00 2018");
        assert_eq!(stats_time(951_782_400.0), "2000/02/29-00:00:00");
    }
}
