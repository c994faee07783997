//! Self-tuning background work: the building blocks, as pure, deterministic
//! logic behind an injectable [`Clock`]. The engine wires them into its flush,
//! compaction and write paths; nothing here knows an engine type.
//!
//! - [`clock`]: the time source ([`SystemClock`], and [`ManualClock`] for tests).
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
pub mod clock;
pub mod idle;
pub mod rate_limiter;

pub use clock::{Clock, ManualClock, SystemClock};

use crate::error::{Error, Result};

/// Which tuner steers background work; the value of the `background_tuning` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundTuning {
    /// No tuner: RocksDB's behaviour.
    #[default]
    Off,
    /// The thesis's compaction toggle from rate-limiter drains ([`auto_tuner`]).
    Thesis,
    /// Ebb's pacing, deferral under flush pressure, catch-up and bounds
    /// ([`adaptive::AdaptiveConfig::adaptive`]).
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
