//! Internal items for Ebb's own integration tests, tools (`ebb-tool`,
//! `ebb-bench`), fuzz targets and benchmarks, with the feature `internals`.
//!
//! Not a stable API: these are the engine's formats and structures as the
//! engine uses them, and they change with it. The public surface is the crate
//! root's re-exports and its public modules (docs/architecture.md, "The
//! public surface").
//!
//! The list is curated: exactly what those users import, grouped by the
//! module it lives in (`internals::sst::format::FOOTER_LEN` is
//! `crate::sst::format::FOOTER_LEN`). Everything else stays `pub(crate)`, so
//! the compiler still finds dead code in the rest.

/// Blob files (values kept apart from the tables).
pub mod blob {
    pub use crate::blob::BlobFileReader;

    /// The blob file format.
    pub mod format {
        pub use crate::blob::format::{BlobIndex, FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN};
    }
}

/// Picking and running compactions.
pub mod compaction {
    pub use crate::compaction::PARTITION_ONE_FILE_PAST_TARGETS;
}

/// The internal iterator and the merging heap.
pub mod iter {
    pub use crate::iter::{InternalIterator, MergingIterator, VecIterator};
}

/// Internal keys and sequence numbers.
pub mod key {
    pub use crate::key::{
        compare_bytewise_internal_keys, make_internal_key, parse_internal_key, InternalKey, ValueKind, KIND_FOR_SEEK,
        MAX_SEQUENCE,
    };
}

/// The memtable.
pub mod memtable {
    pub use crate::memtable::MemTable;

    /// The memtable's skip list: its `compile_fail` examples show that a
    /// cursor cannot outlive its list or read another.
    pub mod skiplist {
        pub use crate::memtable::skiplist::SkipList;
    }
}

/// Block-based tables.
pub mod sst {
    pub use crate::sst::block::{Block, BlockIterator, KeyOrder};
    pub use crate::sst::block_builder::BlockBuilder;
    pub use crate::sst::filter::{BloomFilter, BloomFilterBuilder};
    pub use crate::sst::format::{BlockHandle, Footer};
    pub use crate::sst::{ReadSettings, Readahead, Table, TableBuilder, TableBuilderOptions};

    /// Filters.
    pub mod filter {
        pub use crate::sst::filter::filter_hash;
    }

    /// The table format: block trailers and the footer.
    pub mod format {
        pub use crate::sst::format::{unwrap_block, BLOCK_TRAILER_LEN, FOOTER_LEN};
    }

    /// The table reader.
    pub mod table_reader {
        pub use crate::sst::table_reader::TableCachePolicy;
    }
}

/// Small helpers.
pub mod util {
    /// Civil dates from Unix time.
    pub mod calendar {
        pub use crate::util::calendar::civil_from_unix;
    }
}

/// Versions, version edits, the MANIFEST and file names.
pub mod version {
    pub use crate::version::{Version, VersionEdit};

    /// The names of a database's files.
    pub mod filename {
        pub use crate::version::filename::{current_file, parse_file_name, FileType};
    }
}

/// The write-ahead log.
pub mod wal {
    pub use crate::wal::{replay, LogReader, LogRecord, LogWriter};
}
