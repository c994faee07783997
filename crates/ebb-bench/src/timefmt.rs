//! Calendar formatting in UTC (the engine's `util::calendar`), for the
//! header and the stats lines.

use std::time::{SystemTime, UNIX_EPOCH};

use ebb::internals::util::calendar::civil_from_unix;

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// `2018/05/20-12:00:00` (db_bench's `TimeToString`, in UTC).
pub fn stats_time(unix_secs: f64) -> String {
    let c = civil_from_unix(unix_secs as i64);
    format!("{:04}/{:02}/{:02}-{:02}:{:02}:{:02}", c.year, c.month, c.day, c.hour, c.minute, c.second)
}

/// `Sun May 20 12:00:00 2018` (ctime layout, in UTC).
pub fn ctime(unix_secs: f64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let c = civil_from_unix(unix_secs as i64);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS[c.weekday as usize],
        MONTHS[(c.month - 1) as usize],
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.year
    )
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
