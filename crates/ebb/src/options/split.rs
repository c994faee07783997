//! The options split as RocksDB splits them: [`DbOptions`] (RocksDB's
//! `DBOptions`: one per database), [`ColumnFamilyOptions`] (RocksDB's
//! `ColumnFamilyOptions`: one per column family, its table options
//! included) and [`TableOptions`] (RocksDB's `BlockBasedTableOptions`),
//! beside [`Options`], all of them together, as RocksDB's `Options` inherits
//! both `DBOptions` and `ColumnFamilyOptions`: what a database with one
//! family is opened with.
//!
//! Every option is declared once, in its section, with its documentation
//! and default (`define_options!` in options/mod.rs); the macro here makes
//! the four structs and the conversions between them from that one list.
//! The text form (options/text.rs) writes the same three sections.
//!
//! [`DbOptions`]: super::DbOptions
//! [`ColumnFamilyOptions`]: super::ColumnFamilyOptions
//! [`TableOptions`]: super::TableOptions
//! [`Options`]: super::Options

/// Makes [`super::Options`], [`super::DbOptions`],
/// [`super::ColumnFamilyOptions`] and [`super::TableOptions`] from one list
/// of options by section: `name: type = default`, each with its doc comment.
macro_rules! define_options {
    (
        db { $( $(#[$dm:meta])* $dn:ident : $dt:ty = $dd:expr, )* }
        cf { $( $(#[$cm:meta])* $cn:ident : $ct:ty = $cd:expr, )* }
        table { $( $(#[$tm:meta])* $tn:ident : $tt:ty = $td:expr, )* }
    ) => {
        /// Options for one database and its default column family: every
        /// option of [`DbOptions`], [`ColumnFamilyOptions`] and
        /// [`TableOptions`] (RocksDB's `Options`, which inherits `DBOptions`
        /// and `ColumnFamilyOptions`). Build with `Options::default()` and
        /// the setters, or parse from text with [`Options::from_text`];
        /// split with [`Options::db_options`] and [`Options::cf_options`].
        #[derive(Clone)]
        pub struct Options {
            $( $(#[$dm])* pub $dn: $dt, )*
            $( $(#[$cm])* pub $cn: $ct, )*
            $( $(#[$tm])* pub $tn: $tt, )*
        }

        impl Default for Options {
            fn default() -> Self {
                Options { $( $dn: $dd, )* $( $cn: $cd, )* $( $tn: $td, )* }
            }
        }

        /// The options of a database as a whole (RocksDB's `DBOptions`):
        /// files, threads, WAL, recovery, statistics, rate limiting and the
        /// background tuner.
        #[derive(Clone)]
        pub struct DbOptions {
            $( $(#[$dm])* pub $dn: $dt, )*
        }

        impl Default for DbOptions {
            fn default() -> Self {
                DbOptions { $( $dn: $dd, )* }
            }
        }

        /// The options of one column family (RocksDB's
        /// `ColumnFamilyOptions`): memtables, compaction, compression, blob
        /// files, and its table options.
        #[derive(Clone)]
        pub struct ColumnFamilyOptions {
            $( $(#[$cm])* pub $cn: $ct, )*
            $( $(#[$tm])* pub $tn: $tt, )*
        }

        impl Default for ColumnFamilyOptions {
            fn default() -> Self {
                ColumnFamilyOptions { $( $cn: $cd, )* $( $tn: $td, )* }
            }
        }

        /// The options of the tables a column family writes and reads
        /// (RocksDB's `BlockBasedTableOptions`): blocks, filters, index,
        /// checksums, the block cache and readahead. The database's block
        /// cache is built from the default family's; other families share it.
        #[derive(Clone)]
        pub struct TableOptions {
            $( $(#[$tm])* pub $tn: $tt, )*
        }

        impl Default for TableOptions {
            fn default() -> Self {
                TableOptions { $( $tn: $td, )* }
            }
        }

        impl Options {
            /// The database-wide options.
            pub fn db_options(&self) -> DbOptions {
                DbOptions { $( $dn: self.$dn.clone(), )* }
            }

            /// The default column family's options (table options included).
            pub fn cf_options(&self) -> ColumnFamilyOptions {
                ColumnFamilyOptions { $( $cn: self.$cn.clone(), )* $( $tn: self.$tn.clone(), )* }
            }

            /// The default column family's table options.
            pub fn table_options(&self) -> TableOptions {
                TableOptions { $( $tn: self.$tn.clone(), )* }
            }

            /// The options of a database opened with `db` whose default
            /// family has `cf`.
            pub fn from_parts(db: DbOptions, cf: ColumnFamilyOptions) -> Options {
                Options { $( $dn: db.$dn, )* $( $cn: cf.$cn, )* $( $tn: cf.$tn, )* }
            }

            /// These options with the column-family and table options of `cf`.
            pub fn with_cf_options(self, cf: ColumnFamilyOptions) -> Options {
                Options::from_parts(self.db_options(), cf)
            }
        }

        impl ColumnFamilyOptions {
            /// The family's table options.
            pub fn table_options(&self) -> TableOptions {
                TableOptions { $( $tn: self.$tn.clone(), )* }
            }

            /// These options with the table options `table`.
            pub fn with_table_options(mut self, table: TableOptions) -> ColumnFamilyOptions {
                $( self.$tn = table.$tn; )*
                self
            }
        }

        /// The field names of each section, in declaration order.
        #[cfg(test)]
        mod split_fields {
            pub(super) const DB: &[&str] = &[$( stringify!($dn), )*];
            pub(super) const CF: &[&str] = &[$( stringify!($cn), )*];
            pub(super) const TABLE: &[&str] = &[$( stringify!($tn), )*];
        }
    };
}
