//! Custom operation mixes (the Manos client, seed 003): proportions of point
//! reads, range scans, inserts, updates and deletes over a key distribution,
//! given by `--mix_*` flags or a TOML file (`--workload_file`):
//!
//! ```toml
//! # shares are normalised by their sum
//! point_reads = 0.5
//! range_scans = 0.1
//! scan_length = 100        # entries per range scan
//! inserts = 0.2            # new keys, numbered from --num upwards
//! updates = 0.1            # overwrites of existing keys
//! deletes = 0.1            # deletes of existing keys
//! key_distribution = "zipfian"   # uniform | zipfian | latest | hotspot
//! zipf_theta = 0.99
//! hotspot_fraction = 0.2
//! hotspot_ops_fraction = 0.8
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bail;
use crate::error::{BenchError, Result};
use crate::flags::Flags;

/// One custom mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixSpec {
    /// Share of point reads.
    #[serde(default)]
    pub point_reads: f64,
    /// Share of range scans.
    #[serde(default)]
    pub range_scans: f64,
    /// Entries read per range scan.
    #[serde(default = "default_scan_length")]
    pub scan_length: u64,
    /// Share of inserts of new keys.
    #[serde(default)]
    pub inserts: f64,
    /// Share of overwrites of existing keys.
    #[serde(default)]
    pub updates: f64,
    /// Share of deletes of existing keys.
    #[serde(default)]
    pub deletes: f64,
    /// uniform, zipfian, latest or hotspot.
    #[serde(default = "default_distribution")]
    pub key_distribution: String,
    /// Zipfian skew.
    #[serde(default = "default_theta")]
    pub zipf_theta: f64,
    /// Hot share of the keys (hotspot).
    #[serde(default = "default_hot")]
    pub hotspot_fraction: f64,
    /// Share of operations on hot keys (hotspot).
    #[serde(default = "default_hot_ops")]
    pub hotspot_ops_fraction: f64,
}

fn default_scan_length() -> u64 {
    100
}
fn default_distribution() -> String {
    "uniform".into()
}
fn default_theta() -> f64 {
    0.99
}
fn default_hot() -> f64 {
    0.2
}
fn default_hot_ops() -> f64 {
    0.8
}

/// The operations of a mix, in the order of [`MixSpec::shares`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixOp {
    /// Get.
    PointRead,
    /// Seek and scan.
    RangeScan,
    /// Put of a new key.
    Insert,
    /// Put of an existing key.
    Update,
    /// Delete of an existing key.
    Delete,
}

/// The flags that define a mix on the command line.
pub const MIX_FLAGS: &[&str] = &[
    "mix_point_reads",
    "mix_range_scans",
    "mix_scan_length",
    "mix_inserts",
    "mix_updates",
    "mix_deletes",
    "key_distribution",
    "zipf_theta",
    "hotspot_fraction",
    "hotspot_ops_fraction",
];

impl MixSpec {
    /// Reads the mix from `--workload_file` or the `--mix_*` flags.
    pub fn from_flags(flags: &Flags) -> Result<MixSpec> {
        let file = flags.str("workload_file");
        if !file.is_empty() {
            if let Some(f) = MIX_FLAGS.iter().find(|f| flags.is_set(f)) {
                bail!("--{f} and --workload_file both define the mix; give one or the other");
            }
            return MixSpec::load(Path::new(file));
        }
        let spec = MixSpec {
            point_reads: flags.f64("mix_point_reads"),
            range_scans: flags.f64("mix_range_scans"),
            scan_length: flags.u64("mix_scan_length")?,
            inserts: flags.f64("mix_inserts"),
            updates: flags.f64("mix_updates"),
            deletes: flags.f64("mix_deletes"),
            key_distribution: flags.str("key_distribution").to_string(),
            zipf_theta: flags.f64("zipf_theta"),
            hotspot_fraction: flags.f64("hotspot_fraction"),
            hotspot_ops_fraction: flags.f64("hotspot_ops_fraction"),
        };
        spec.validate("--mix_* flags")?;
        Ok(spec)
    }

    /// Parses a TOML workload file.
    pub fn parse_toml(text: &str, origin: &str) -> Result<MixSpec> {
        let spec: MixSpec =
            toml::from_str(text).map_err(|e| BenchError::new(format!("workload file {origin}: {e}")))?;
        spec.validate(&format!("workload file {origin}"))?;
        Ok(spec)
    }

    /// Reads and parses a TOML workload file.
    pub fn load(path: &Path) -> Result<MixSpec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::new(format!("cannot read workload file {}: {e}", path.display())))?;
        MixSpec::parse_toml(&text, &path.display().to_string())
    }

    /// The shares in the order of [`MixOp`].
    pub fn shares(&self) -> [(MixOp, f64); 5] {
        [
            (MixOp::PointRead, self.point_reads),
            (MixOp::RangeScan, self.range_scans),
            (MixOp::Insert, self.inserts),
            (MixOp::Update, self.updates),
            (MixOp::Delete, self.deletes),
        ]
    }

    fn validate(&self, origin: &str) -> Result<()> {
        let shares = self.shares();
        if let Some((op, v)) = shares.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            bail!("{origin}: share of {op:?} must be a non-negative number, got {v}");
        }
        if shares.iter().map(|(_, v)| v).sum::<f64>() <= 0.0 {
            bail!("{origin}: the mix has no operations (all shares are 0)");
        }
        if !["uniform", "zipfian", "latest", "hotspot"].contains(&self.key_distribution.as_str()) {
            bail!(
                "{origin}: unknown key_distribution {:?} (expected uniform, zipfian, latest or hotspot)",
                self.key_distribution
            );
        }
        Ok(())
    }

    /// Picks an operation from `u` in `[0, 1)`.
    pub fn pick(&self, u: f64) -> MixOp {
        let shares = self.shares();
        let total: f64 = shares.iter().map(|(_, v)| v).sum();
        let mut acc = 0.0;
        for (op, share) in shares {
            acc += share / total;
            if u < acc {
                return op;
            }
        }
        shares.iter().rev().find(|(_, v)| *v > 0.0).map_or(MixOp::PointRead, |(op, _)| *op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_round_trip_and_defaults() {
        let spec = MixSpec::parse_toml(
            "point_reads = 0.5\nrange_scans = 0.1\nscan_length = 20\ninserts = 0.4\nkey_distribution = \"zipfian\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(spec.scan_length, 20);
        assert_eq!(spec.zipf_theta, 0.99);
        let text = toml::to_string(&spec).unwrap();
        assert_eq!(MixSpec::parse_toml(&text, "again").unwrap(), spec);
    }

    #[test]
    fn bad_toml_names_the_problem() {
        let e = MixSpec::parse_toml("point_read = 1\n", "w.toml").unwrap_err().to_string();
        assert!(e.contains("w.toml") && e.contains("point_read"), "{e}");
        let e = MixSpec::parse_toml("updates = 0\n", "w.toml").unwrap_err().to_string();
        assert!(e.contains("no operations"), "{e}");
        let e = MixSpec::parse_toml("updates = 1\nkey_distribution = \"gauss\"\n", "w.toml").unwrap_err().to_string();
        assert!(e.contains("gauss"), "{e}");
    }

    #[test]
    fn pick_follows_shares() {
        let spec = MixSpec::parse_toml("point_reads = 3\ndeletes = 1\n", "w").unwrap();
        assert_eq!(spec.pick(0.0), MixOp::PointRead);
        assert_eq!(spec.pick(0.74), MixOp::PointRead);
        assert_eq!(spec.pick(0.76), MixOp::Delete);
        assert_eq!(spec.pick(0.999_999), MixOp::Delete);
    }
}
