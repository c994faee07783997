//! Idle detection for idle-time compaction scheduling (UW paper, seed 002:
//! §5 "New scheduler design" and §6.3.2 "Heuristic-based scheduling").
//!
//! The paper's monitor thread "continuously monitors the client write
//! throughput" and schedules compaction "whenever the write throughput is
//! below a certain threshold, or after the last write of a write burst". Two
//! policies, as in the paper:
//!
//! - [`IdlePolicy::Throughput`]: client write throughput is sampled every
//!   `probe_interval_us` (paper: 500 ms); the detector is idle while the last
//!   sample is below the threshold (paper: 0.5 MB/s). The state changes only at
//!   a probe, so a burst is noticed at most one probe interval late; the paper
//!   warns that a too-short interval sees gaps inside a burst, and a too-high
//!   threshold lets compaction creep into bursts (Fig. 23).
//! - [`IdlePolicy::SinceLastWrite`]: idle once `quiet_us` (paper: 500 ms) have
//!   passed since the last client write. The paper probes "very frequently" to
//!   catch the last write; Ebb asks the write path for the time of the last
//!   write instead (stamped from the coarse clock, to a few milliseconds),
//!   so the check holds at every call. Without that timestamp, the
//!   detector infers the last write from the byte counter, to the precision
//!   of the probe interval.
//!
//! Pure logic: fed with cumulative client bytes and the clock's time by its
//! caller. Not thread-safe on its own (`&mut self`); one tuner owns it.

/// When the client is considered idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Idle while client write throughput, sampled every probe interval, is below the threshold.
    Throughput {
        /// Bytes per second below which the client is idle. Paper: 0.5 MB/s,
        /// in LevelDB db_bench's MB (2^20 bytes): 524,288.
        threshold_bytes_per_sec: u64,
    },
    /// Idle once this long has passed since the last client write.
    SinceLastWrite {
        /// Quiet time after the last write, microseconds. Paper: 500 ms.
        quiet_us: u64,
    },
}

/// Configuration of an [`IdleDetector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleConfig {
    /// Which condition means idle.
    pub policy: IdlePolicy,
    /// How often client throughput is sampled, microseconds. Paper: 500 ms.
    pub probe_interval_us: u64,
}

impl IdleConfig {
    /// Paper's first heuristic: under 0.5 MB/s, probed every 500 ms.
    pub fn throughput() -> IdleConfig {
        IdleConfig {
            policy: IdlePolicy::Throughput { threshold_bytes_per_sec: 512 * 1024 },
            probe_interval_us: 500_000,
        }
    }

    /// Paper's second heuristic: 500 ms after the last write.
    #[cfg(test)]
    pub fn since_last_write() -> IdleConfig {
        IdleConfig { policy: IdlePolicy::SinceLastWrite { quiet_us: 500_000 }, probe_interval_us: 500_000 }
    }
}

impl Default for IdleConfig {
    /// [`IdleConfig::throughput`].
    fn default() -> IdleConfig {
        IdleConfig::throughput()
    }
}

/// Decides from client write activity whether the database is idle.
#[derive(Debug, Clone)]
pub struct IdleDetector {
    config: IdleConfig,
    /// Time and cumulative client bytes of the last probe.
    last_probe: Option<(u64, u64)>,
    /// Time of the first call: quiet time counts from it until a write is seen.
    first_seen_us: Option<u64>,
    /// Time of the last write seen through the byte counter (inference).
    inferred_last_write_us: Option<u64>,
    /// Throughput measured by the last probe, bytes per second.
    last_throughput: u64,
    idle: bool,
}

impl IdleDetector {
    /// A detector that has seen nothing yet, and so is not idle.
    pub fn new(config: IdleConfig) -> IdleDetector {
        IdleDetector {
            config,
            last_probe: None,
            first_seen_us: None,
            inferred_last_write_us: None,
            last_throughput: 0,
            idle: false,
        }
    }

    /// Feeds the time, the cumulative client bytes written, and, when the
    /// write path records it, the time of the last client write. Returns
    /// whether the client is idle now. May be called at any rate: throughput
    /// is sampled only once per probe interval.
    pub fn observe(&mut self, now_us: u64, client_bytes: u64, last_write_us: Option<u64>) -> bool {
        let first_seen = *self.first_seen_us.get_or_insert(now_us);
        let probe_due = match self.last_probe {
            None => true,
            Some((t, _)) => now_us.saturating_sub(t) >= self.config.probe_interval_us.max(1),
        };
        if probe_due {
            self.probe(now_us, client_bytes);
        }
        if let IdlePolicy::SinceLastWrite { quiet_us } = self.config.policy {
            // Before any write is seen, quiet time counts from the first call.
            let since = last_write_us.or(self.inferred_last_write_us).unwrap_or(first_seen);
            self.idle = now_us.saturating_sub(since) >= quiet_us;
        }
        self.idle
    }

    fn probe(&mut self, now_us: u64, client_bytes: u64) {
        let Some((t, bytes)) = self.last_probe else {
            self.last_probe = Some((now_us, client_bytes));
            return;
        };
        let written = client_bytes.saturating_sub(bytes);
        let elapsed = now_us.saturating_sub(t).max(1);
        self.last_throughput = u64::try_from(u128::from(written) * 1_000_000 / u128::from(elapsed)).unwrap_or(u64::MAX);
        if written > 0 {
            self.inferred_last_write_us = Some(now_us);
        }
        self.last_probe = Some((now_us, client_bytes));
        if let IdlePolicy::Throughput { threshold_bytes_per_sec } = self.config.policy {
            self.idle = self.last_throughput < threshold_bytes_per_sec;
        }
    }

    /// The answer of the last [`IdleDetector::observe`].
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    /// Client write throughput measured by the last probe, bytes per second.
    #[cfg(test)]
    pub fn last_throughput(&self) -> u64 {
        self.last_throughput
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000;

    /// Drives a detector with a client writing `rate(t)` bytes per second,
    /// observing every `step` microseconds; returns (time, idle) pairs.
    fn drive(
        detector: &mut IdleDetector,
        until: u64,
        step: u64,
        rate: impl Fn(u64) -> u64,
        stamp_writes: bool,
    ) -> Vec<(u64, bool)> {
        let mut bytes = 0u64;
        let mut last_write = None;
        let mut out = Vec::new();
        let mut t = 0;
        while t <= until {
            let written = rate(t) * step / 1_000_000;
            if written > 0 && t > 0 {
                bytes += written;
                last_write = Some(t);
            }
            let idle = detector.observe(t, bytes, if stamp_writes { last_write } else { None });
            out.push((t, idle));
            t += step;
        }
        out
    }

    fn idle_at(trace: &[(u64, bool)], t: u64) -> bool {
        trace.iter().find(|(at, _)| *at == t).map(|(_, idle)| *idle).unwrap()
    }

    #[test]
    fn throughput_policy_is_idle_only_below_the_threshold() {
        let mut d = IdleDetector::new(IdleConfig::throughput());
        // 10 MB/s for 2 s, then 0.4 MB/s for 2 s, then 0.6 MB/s for 2 s.
        let rate = |t: u64| match t {
            0..=2_000_000 => 10_000_000,
            2_000_001..=4_000_000 => 400_000,
            _ => 600_000,
        };
        let trace = drive(&mut d, 6_000_000, 100 * MS, rate, false);
        assert!(!idle_at(&trace, 0), "nothing seen yet: not idle");
        assert!(!idle_at(&trace, 1_500_000));
        // The probe at 2.5 s sees 0.4 MB/s since the probe at 2.0 s.
        assert!(!idle_at(&trace, 2_400_000), "state changes only at a probe");
        assert!(idle_at(&trace, 2_500_000));
        assert!(idle_at(&trace, 3_900_000));
        assert!(!idle_at(&trace, 4_500_000), "0.6 MB/s is above 0.5 MB/s");
        assert_eq!(d.last_throughput(), 600_000);
    }

    #[test]
    fn throughput_policy_releases_only_at_probe_boundaries() {
        let config = IdleConfig { probe_interval_us: 1_000_000, ..IdleConfig::throughput() };
        let mut d = IdleDetector::new(config);
        assert!(!d.observe(0, 0, None));
        // Writing stops right after the start; the next probe is at 1 s.
        assert!(!d.observe(10 * MS, 5_000_000, None));
        assert!(!d.observe(999 * MS, 5_000_000, None));
        assert!(!d.observe(1_000 * MS, 5_000_000, None), "5 MB in the first second is not idle");
        assert!(d.observe(2_000 * MS, 5_000_000, None));
        assert!(d.is_idle());
    }

    #[test]
    fn since_last_write_policy_waits_for_the_quiet_time() {
        let mut d = IdleDetector::new(IdleConfig::since_last_write());
        // Burst from 0 to 3 s, then nothing.
        let rate = |t: u64| if t <= 3_000_000 { 20_000_000 } else { 0 };
        let trace = drive(&mut d, 5_000_000, 50 * MS, rate, true);
        assert!(!idle_at(&trace, 1_000_000));
        assert!(!idle_at(&trace, 3_000_000));
        assert!(!idle_at(&trace, 3_450_000), "only 450 ms after the last write");
        assert!(idle_at(&trace, 3_500_000), "500 ms after the last write");
        assert!(idle_at(&trace, 5_000_000));
        // A trickle just above zero still counts as writes: never idle.
        let mut d = IdleDetector::new(IdleConfig::since_last_write());
        let trace = drive(&mut d, 3_000_000, 100 * MS, |_| 100_000, true);
        assert!(trace.iter().skip(1).all(|(_, idle)| !idle), "{trace:?}");
    }

    #[test]
    fn since_last_write_policy_infers_the_last_write_without_a_timestamp() {
        let mut d = IdleDetector::new(IdleConfig::since_last_write());
        let rate = |t: u64| if t <= 3_000_000 { 20_000_000 } else { 0 };
        let trace = drive(&mut d, 5_000_000, 50 * MS, rate, false);
        // The probe at 3.0 s sees the burst's last bytes; idle 500 ms later.
        assert!(!idle_at(&trace, 3_450_000));
        assert!(idle_at(&trace, 3_500_000));
        // Never written: idle once the quiet time has passed since the first look.
        let mut d = IdleDetector::new(IdleConfig::since_last_write());
        assert!(!d.observe(1_000 * MS, 0, None));
        assert!(!d.observe(1_400 * MS, 0, None));
        assert!(d.observe(1_500 * MS, 0, None));
    }
}
