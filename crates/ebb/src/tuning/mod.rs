//! Self-tuning background work: the building blocks, as pure, deterministic
//! logic that reads time through the database's [`Clock`](crate::clock::Clock)
//! (a [`ManualClock`](crate::clock::ManualClock) in tests). The engine wires
//! them into its flush, compaction and write paths; nothing here knows an
//! engine type.
//!
//! - [`command`]: the typed commands the tuners hand the engine, each naming
//!   the column family it changes or none (database-wide).
//! - [`rate_limiter`]: RocksDB's token-bucket `GenericRateLimiter` (thesis
//!   §3.3.4-3.3.5) with per-priority drain counts (§3.3.6).
//! - [`auto_tuner`]: the thesis's compaction toggle (§3.3.7, §3.5.6), the
//!   `thesis` mode.
//! - [`idle`]: idle detection (UW paper §5, §6.3.2).
//! - [`adaptive`]: Ebb's `adaptive` and `idle` modes: pacing, deferral, yield,
//!   catch-up and bounds.
//!
//! docs/tuning.md describes the modes, their sources and their options.
//!
//! Thread safety: [`rate_limiter::RateLimiter`] is shared by every writer
//! thread; the tuners are plain `&mut self` state owned by one tuning thread.

pub mod adaptive;
pub mod auto_tuner;
pub mod command;
pub mod idle;
pub mod rate_limiter;

use crate::error::{Error, Result};

/// Which tuner steers background work; the value of the `background_tuning` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundTuning {
    /// No tuner: RocksDB's behaviour.
    Off,
    /// The thesis's compaction toggle from rate-limiter drains ([`auto_tuner`]).
    Thesis,
    /// Ebb's pacing, deferral under flush pressure, catch-up and bounds
    /// ([`adaptive::AdaptiveConfig::adaptive`]). The default: on loads
    /// compaction keeps up with it does what `Off` does (docs/tuning.md).
    #[default]
    Adaptive,
    /// Compaction only while the client is idle, with catch-up and bounds
    /// ([`adaptive::AdaptiveConfig::idle`]).
    Idle,
}

impl BackgroundTuning {
    /// Every mode.
    pub const ALL: [BackgroundTuning; 4] =
        [BackgroundTuning::Off, BackgroundTuning::Thesis, BackgroundTuning::Adaptive, BackgroundTuning::Idle];

    /// The option's text value.
    pub fn name(self) -> &'static str {
        match self {
            BackgroundTuning::Off => "off",
            BackgroundTuning::Thesis => "thesis",
            BackgroundTuning::Adaptive => "adaptive",
            BackgroundTuning::Idle => "idle",
        }
    }

    /// Parses the option's text value.
    pub fn parse(text: &str) -> Result<BackgroundTuning> {
        BackgroundTuning::ALL.into_iter().find(|m| m.name() == text.trim()).ok_or_else(|| {
            Error::invalid(format!("option background_tuning: {text:?} is not one of off, thesis, adaptive, idle"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_text() {
        for mode in BackgroundTuning::ALL {
            assert_eq!(BackgroundTuning::parse(mode.name()).unwrap(), mode);
        }
        assert_eq!(BackgroundTuning::parse(" adaptive ").unwrap(), BackgroundTuning::Adaptive);
        assert!(BackgroundTuning::parse("auto").is_err());
    }
}

/// Bits per key for the filter of an L0 table written while the adaptive
/// tuner lets L0 grow past its trigger (a deferral), so that a point read's
/// expected false-positive block reads over all L0 runs stay near what
/// `trigger` runs at `base` bits give (the observation of Monkey, Dayan et
/// al., SIGMOD 2017: a run's filter is worth bits in proportion to how many
/// runs a lookup probes). A bloom filter's false-positive rate falls by
/// about 0.6185 per bit, so `l0_files` runs need `ln(l0_files / trigger) /
/// ln(1 / 0.6185) = 2.08 ln(l0_files / trigger)` more bits each; at most
/// `base` more (twice the configured bits). `base` 0 (no filters) stays 0,
/// and so does anything at or under the trigger.
pub fn l0_filter_bits(base: u32, l0_files: usize, trigger: i32) -> u32 {
    let trigger = trigger.max(1) as usize;
    if base == 0 || l0_files <= trigger {
        return base;
    }
    let extra = (2.08 * (l0_files as f64 / trigger as f64).ln()).ceil() as u32;
    (base + extra.min(base)).min(64)
}

#[cfg(test)]
mod filter_bits_tests {
    use super::l0_filter_bits;

    #[test]
    fn l0_filter_bits_grow_with_the_log_of_the_runs_past_the_trigger() {
        assert_eq!(l0_filter_bits(10, 4, 4), 10, "at the trigger: the configured bits");
        assert_eq!(l0_filter_bits(0, 400, 4), 0, "no filters stay none");
        // 2.08 x ln(8 / 4) = 1.44 -> 2 more; ln(40 / 4) -> 4.79 -> 5; ln(400 / 4) -> 9.58 -> 10.
        assert_eq!(l0_filter_bits(10, 8, 4), 12);
        assert_eq!(l0_filter_bits(10, 40, 4), 15);
        assert_eq!(l0_filter_bits(10, 400, 4), 20);
        assert_eq!(l0_filter_bits(10, 40_000, 4), 20, "at most twice the configured bits");
        assert_eq!(l0_filter_bits(50, 40_000, 4), 64, "never past the options' limit");
    }
}
