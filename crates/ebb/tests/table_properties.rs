//! User table property collectors (RocksDB's `TablePropertiesCollector`):
//! what they collect is stored in each table and read back with
//! `get_properties_of_all_tables`; one that panics or names the engine's
//! own properties changes nothing else.

mod common;

use std::sync::Arc;

use common::manual_options;
use ebb::fs::MemFs;
use ebb::{CollectorContext, Db, EntryType, SstFileWriter, TablePropertiesCollector, TablePropertiesCollectorFactory};

/// Counts puts and deletions and keeps the first key; tries to overwrite
/// an engine property too.
struct Counting {
    puts: u64,
    deletes: u64,
    first: Option<Vec<u8>>,
    cf: u32,
}

impl TablePropertiesCollector for Counting {
    fn add_user_key(&mut self, key: &[u8], _value: &[u8], t: EntryType, _seq: u64, _size: u64) {
        match t {
            EntryType::Put => self.puts += 1,
            EntryType::Delete | EntryType::SingleDelete => self.deletes += 1,
            _ => {}
        }
        self.first.get_or_insert_with(|| key.to_vec());
    }
    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        vec![
            ("count.puts".into(), self.puts.to_string().into_bytes()),
            ("count.deletes".into(), self.deletes.to_string().into_bytes()),
            ("first.key".into(), self.first.clone().unwrap_or_default()),
            ("cf".into(), self.cf.to_string().into_bytes()),
            ("ebb.num.entries".into(), b"999999".to_vec()),
        ]
    }
    fn name(&self) -> &str {
        "counting"
    }
}

struct CountingFactory;
impl TablePropertiesCollectorFactory for CountingFactory {
    fn create(&self, context: CollectorContext) -> Box<dyn TablePropertiesCollector> {
        Box::new(Counting { puts: 0, deletes: 0, first: None, cf: context.column_family_id })
    }
    fn name(&self) -> &str {
        "counting"
    }
}

/// Panics on the tenth entry of every table.
struct Panicking(u32);
impl TablePropertiesCollector for Panicking {
    fn add_user_key(&mut self, _: &[u8], _: &[u8], _: EntryType, _: u64, _: u64) {
        self.0 += 1;
        assert!(self.0 < 10, "a collector's bug");
    }
    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        vec![("panicking.seen".into(), b"yes".to_vec())]
    }
    fn name(&self) -> &str {
        "panicking"
    }
}
struct PanickingFactory;
impl TablePropertiesCollectorFactory for PanickingFactory {
    fn create(&self, _: CollectorContext) -> Box<dyn TablePropertiesCollector> {
        Box::new(Panicking(0))
    }
    fn name(&self) -> &str {
        "panicking"
    }
}

fn number(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

#[test]
fn collected_properties_are_stored_per_table_and_survive_a_reopen() {
    let fs = MemFs::new();
    let mut o = manual_options(&fs);
    o.table_properties_collector_factories = vec![Arc::new(PanickingFactory), Arc::new(CountingFactory)];
    let db = Db::open("/db", o.clone()).unwrap();
    for round in 0..3u32 {
        for i in 0..200u32 {
            let k = format!("key{:05}", i * 3 + round);
            if i % 7 == 0 {
                db.delete(k.as_bytes()).unwrap();
            } else {
                db.put(k.as_bytes(), b"value").unwrap();
            }
        }
        db.flush(true).unwrap();
    }
    let check = |db: &Db| {
        let cf = db.cf_handle("default").unwrap();
        let all = db.get_properties_of_all_tables(&cf).unwrap();
        assert!(!all.is_empty());
        for (path, p) in &all {
            let u = &p.user_collected_properties;
            let (puts, deletes) = (number(&u["count.puts"]), number(&u["count.deletes"]));
            assert_eq!(puts + deletes, p.num_entries, "{path}");
            assert_eq!(deletes, p.num_deletions, "{path}");
            assert_eq!(u["cf"], b"0", "{path}");
            let smallest = &p.smallest_key[..p.smallest_key.len() - 8];
            assert_eq!(u["first.key"], smallest, "{path}");
            // The engine's own property is not overwritten, and the
            // collector that panicked left nothing.
            assert!(!u.contains_key("ebb.num.entries") && !u.contains_key("panicking.seen"), "{path}: {u:?}");
        }
        all.len()
    };
    assert!(check(&db) >= 3);
    db.compact_range(None, None).unwrap();
    let after = check(&db);
    drop(db);
    let db = Db::open("/db", o.clone()).unwrap();
    assert_eq!(check(&db), after);
    assert_eq!(db.get(b"key00004").unwrap(), Some(b"value".to_vec()));

    // SstFileWriter runs them too.
    let mut w = SstFileWriter::create(&o);
    w.open("/ext.sst").unwrap();
    w.put(b"x1", b"1").unwrap();
    w.delete(b"x2").unwrap();
    w.finish().unwrap();
    db.ingest_external_file(&["/ext.sst"], &Default::default()).unwrap();
    let cf = db.cf_handle("default").unwrap();
    let all = db.get_properties_of_all_tables(&cf).unwrap();
    let ingested =
        all.values().find(|p| p.user_collected_properties.get("first.key").map(Vec::as_slice) == Some(b"x1"));
    let u = &ingested.expect("the ingested table's properties").user_collected_properties;
    assert_eq!((number(&u["count.puts"]), number(&u["count.deletes"])), (1, 1));
}
