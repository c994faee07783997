//! Leaf helpers shared by every layer: integer coding, checksums,
//! compression and calendar dates.

pub mod calendar;
pub mod checksum;
pub mod coding;
pub mod compression;
