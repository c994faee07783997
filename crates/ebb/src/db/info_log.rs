//! The info log, `LOG` in the database directory: what the database did and
//! what it found, for a person reading it (RocksDB's info log).
//!
//! Opened at every open, before recovery, so that what recovery skipped or
//! set aside is written down. The previous `LOG` is kept as
//! `LOG.old.<microseconds since the epoch>`; the oldest are deleted past
//! `keep_log_file_num` (RocksDB's option of that name).
//!
//! Writing is best effort: the log is a diagnostic, not data, so a failed
//! write is not an error of the operation that logged (RocksDB does the same).
//! Thread-safe: lines from several threads are appended whole, under a mutex.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::error::Result;
use crate::fs::{FileSystem, WritableFile};
use crate::version::filename;

/// How serious a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// The open info log of a database (or none, for a database that keeps none).
pub(crate) struct InfoLog {
    file: Mutex<Option<Box<dyn WritableFile>>>,
}

impl InfoLog {
    /// Starts a new `LOG` in `dir`, keeping the previous one as
    /// `LOG.old.<micros>` and at most `keep` old logs. Failing to create the
    /// log fails the open, as in RocksDB; failing to rename or prune old logs
    /// does not.
    pub(crate) fn open(fs: &dyn FileSystem, dir: &Path, keep: usize) -> Result<InfoLog> {
        let path = filename::info_log_file(dir);
        if fs.exists(&path) {
            let _ = fs.rename(&path, &dir.join(format!("LOG.old.{}", micros_since_epoch())));
        }
        if let Ok(names) = fs.list_dir(dir) {
            let mut old: Vec<(u64, String)> = names
                .into_iter()
                .filter_map(|n| n.strip_prefix("LOG.old.").and_then(|t| t.parse().ok()).map(|t| (t, n.clone())))
                .collect();
            old.sort_unstable();
            let excess = old.len().saturating_sub(keep);
            for (_, name) in old.into_iter().take(excess) {
                let _ = fs.remove_file(&dir.join(name));
            }
        }
        let file = fs.new_writable(&path)?;
        let log = InfoLog { file: Mutex::new(Some(file)) };
        log.log(Level::Info, &format!("Ebb {} opening {}", env!("CARGO_PKG_VERSION"), dir.display()));
        Ok(log)
    }

    /// A log that writes nothing (a read-only open writes no file).
    pub(crate) fn disabled() -> InfoLog {
        InfoLog { file: Mutex::new(None) }
    }

    /// Appends one line (or several, for a multi-line message), prefixed with
    /// the time and the level, and flushes it to the file.
    pub(crate) fn log(&self, level: Level, message: &str) {
        let mut guard = self.file.lock();
        let Some(file) = guard.as_mut() else { return };
        let line = format!("{} [{}] {}\n", timestamp(SystemTime::now()), level.name(), message.trim_end());
        let _ = file.append(line.as_bytes()).and_then(|()| file.flush());
    }

    /// Stops logging (at close): the file handle is released.
    pub(crate) fn close(&self) {
        if let Some(mut file) = self.file.lock().take() {
            let _ = file.flush();
        }
    }
}

fn micros_since_epoch() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

/// `2026/11/23-17:37:05.123456`, in UTC (RocksDB's LOG time format).
fn timestamp(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let c = crate::util::calendar::civil_from_unix(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    format!(
        "{:04}/{:02}/{:02}-{:02}:{:02}:{:02}.{:06}",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        since.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fs::MemFs;

    #[test]
    fn timestamps_are_civil_utc_dates() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970/01/01-00:00:00.000000");
        // 2000-02-29 (a leap day of a century leap year), 12:34:56.000789.
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696) + Duration::from_micros(789);
        assert_eq!(timestamp(t), "2000/02/29-12:34:56.000789");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_456_625);
        assert_eq!(timestamp(t), "2026/11/23-17:57:05.000000");
    }

    #[test]
    fn reopening_keeps_the_previous_logs_up_to_the_limit() {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        for i in 0..5 {
            let log = InfoLog::open(&fs, dir, 2).unwrap();
            log.log(Level::Warn, &format!("run {i}"));
            // The old logs are named by the microsecond they were set
            // aside: the next open comes once the clock has ticked.
            let set_aside = micros_since_epoch();
            while micros_since_epoch() == set_aside {
                std::thread::yield_now();
            }
        }
        let text = String::from_utf8(fs.file_bytes(&dir.join("LOG")).unwrap()).unwrap();
        assert!(text.contains("[WARN] run 4"), "{text}");
        let old: Vec<String> = fs.list_dir(dir).unwrap().into_iter().filter(|n| n.starts_with("LOG.old.")).collect();
        assert_eq!(old.len(), 2, "{old:?}");
        let newest_old = String::from_utf8(fs.file_bytes(&dir.join(old.iter().max().unwrap())).unwrap()).unwrap();
        assert!(newest_old.contains("run 3"), "{newest_old}");
    }
}
