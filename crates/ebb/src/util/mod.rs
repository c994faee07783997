//! Leaf helpers shared by every layer: integer coding and checksums.

pub mod checksum;
pub mod coding;
pub mod compression;
