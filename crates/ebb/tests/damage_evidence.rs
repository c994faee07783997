//! Damage an open accepts leaves evidence, and nothing is deleted on the
//! strength of it (docs/reliability.md, "Damage and what it leads to"): the
//! recovery report reaches listeners, unknown tables go to `lost/`, file
//! numbers are never reused, and `best_efforts_recovery` opens what it can
//! of a damaged MANIFEST and says what it left out.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{files_of, log_records, manual_options, scan, Model, SYNCED};
use ebb::fs::{FileSystem, MemFs};
use ebb::{Db, EventListener, ReadOptions, RecoveryReport, WalRecoveryMode, LOST_DIR};

const DB: &str = "/db";

fn put_all(db: &Db, model: &mut Model, prefix: &str, n: usize) {
    for i in 0..n {
        let (k, v) = (format!("{prefix}{i:03}").into_bytes(), format!("{prefix} {i}").into_bytes());
        db.put_opt(&k, &v, &SYNCED).unwrap();
        model.insert(k, v);
    }
}

fn lost_names(fs: &MemFs) -> Vec<String> {
    let lost = Path::new(DB).join(LOST_DIR);
    if fs.exists(&lost) {
        fs.list_dir(&lost).unwrap()
    } else {
        Vec::new()
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<RecoveryReport>>);

impl EventListener for Recorder {
    fn on_recovery_damage(&self, report: &RecoveryReport) {
        self.0.lock().unwrap().push(report.clone());
    }
}

#[test]
fn listeners_hear_of_damage_recovery_accepted_and_of_nothing_else() {
    let fs = MemFs::new();
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    let mut model = Model::new();
    put_all(&db, &mut model, "k", 30);
    db.close().unwrap();
    let recorder = Arc::new(Recorder::default());
    let mut o = manual_options(&fs);
    o.listeners.push(recorder.clone());
    Db::open(DB, o.clone()).unwrap().close().unwrap();
    assert!(recorder.0.lock().unwrap().is_empty(), "a clean open reported damage");

    // Damage the last record of the WAL: point-in-time recovery drops it.
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    put_all(&db, &mut model, "m", 5);
    db.close().unwrap();
    let wal = files_of(&fs, DB).into_iter().find(|(n, _)| n.ends_with(".log")).unwrap();
    let (last, _) = *log_records(&wal.1).last().unwrap();
    let mut bytes = wal.1.clone();
    bytes[last + 9] ^= 0x10;
    fs.set_file_bytes(&Path::new(DB).join(&wal.0), &bytes).unwrap();
    o.wal_recovery_mode = WalRecoveryMode::PointInTime;
    let db = Db::open(DB, o).unwrap();
    let heard = recorder.0.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].wal_damage.len(), 1);
    assert_eq!(heard[0].wal_damage[0].damage.offset, last as u64);
    assert!(heard[0].wal_damage[0].damage.file.ends_with(&wal.0));
    model.remove(b"m004".as_slice());
    assert_eq!(scan(&db, ReadOptions::default()), model);
    assert_eq!(db.recovery_report().wal_damage, heard[0].wal_damage);
    assert!(lost_names(&fs).contains(&wal.0), "the damaged WAL was not kept");
}

#[test]
fn unknown_tables_go_to_lost_and_their_numbers_are_never_reused() {
    let fs = MemFs::new();
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    let mut model = Model::new();
    put_all(&db, &mut model, "k", 30);
    db.flush(true).unwrap();
    db.close().unwrap();
    // A table the MANIFEST does not list, numbered far above everything: the
    // output of a flush whose edit was never written, say.
    let (name, bytes) = files_of(&fs, DB).into_iter().find(|(n, _)| n.ends_with(".sst")).unwrap();
    fs.set_file_bytes(&Path::new(DB).join("000999.sst"), &bytes).unwrap();
    // lost/ already holds a file of that name, from an earlier incident.
    fs.create_dir_all(&Path::new(DB).join(LOST_DIR)).unwrap();
    fs.set_file_bytes(&Path::new(DB).join(LOST_DIR).join("000999.sst"), b"earlier").unwrap();
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
    let report = db.recovery_report();
    assert!(report.set_aside.iter().any(|s| s.to.ends_with("000999.sst.1")), "{report}");
    let lost = Path::new(DB).join(LOST_DIR);
    assert_eq!(fs.file_bytes(&lost.join("000999.sst")).unwrap(), b"earlier", "lost/ was overwritten");
    assert_eq!(fs.file_bytes(&lost.join("000999.sst.1")).unwrap(), bytes);
    assert!(fs.exists(&Path::new(DB).join(&name)), "the listed table must stay");
    // Every file made from now on is numbered above it.
    put_all(&db, &mut model, "n", 30);
    db.flush(true).unwrap();
    for (n, _) in files_of(&fs, DB) {
        if let Some(number) = n.strip_suffix(".sst").or_else(|| n.strip_suffix(".log")) {
            let number: u64 = number.parse().unwrap();
            assert!(number == name.trim_end_matches(".sst").parse::<u64>().unwrap() || number > 999, "{n}");
        }
    }
    db.close().unwrap();
}

/// Three flushes (`a`, `b`, `c`), then writes left in the WAL (`w`); the
/// MANIFEST holds an edit per flush.
fn three_flushes(fs: &MemFs) -> Model {
    let db = Db::open(DB, manual_options(fs)).unwrap();
    let mut model = Model::new();
    for prefix in ["a", "b", "c"] {
        put_all(&db, &mut model, prefix, 20);
        db.flush(true).unwrap();
    }
    put_all(&db, &mut model, "w", 5);
    db.close().unwrap();
    model
}

fn manifest(fs: &MemFs) -> (String, Vec<u8>) {
    files_of(fs, DB).into_iter().find(|(n, _)| n.starts_with("MANIFEST-")).unwrap()
}

#[test]
fn best_efforts_recovery_opens_what_it_can_and_reports_what_it_left_out() {
    let fs = MemFs::new();
    let model = three_flushes(&fs);
    let (name, clean) = manifest(&fs);
    let records = log_records(&clean);
    // Damage the edit of the last flush (`c`): the default refuses to open.
    let (last, _) = *records.last().unwrap();
    let mut bytes = clean.clone();
    bytes[last + 10] ^= 0x04;
    fs.set_file_bytes(&Path::new(DB).join(&name), &bytes).unwrap();
    let e = Db::open(DB, manual_options(&fs)).err().expect("a damaged MANIFEST must not open by default");
    assert!(e.is_corruption() && e.to_string().contains(&name), "{e}");
    let tables_before: Vec<String> =
        files_of(&fs, DB).into_iter().map(|(n, _)| n).filter(|n| n.ends_with(".sst")).collect();

    let mut o = manual_options(&fs);
    o.best_efforts_recovery = true;
    let db = Db::open(DB, o).unwrap();
    let report = db.recovery_report();
    let stopped = report.manifest.stopped_at.as_ref().expect("the report names where replay stopped");
    assert_eq!(stopped.offset, last as u64, "{report}");
    // What the lost edit listed is not visible, and not deleted either.
    let got = scan(&db, ReadOptions::default());
    let without_c: Model =
        model.iter().filter(|(k, _)| !k.starts_with(b"c")).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, without_c, "best efforts: everything but the lost flush");
    for t in &tables_before {
        assert!(fs.exists(&Path::new(DB).join(t)) || lost_names(&fs).contains(t), "{t} was deleted");
    }
    assert!(!report.set_aside.is_empty(), "{report}");
    let text = db.get_property("ebb.recovery-report").unwrap();
    assert!(text.contains("best-efforts recovery stopped"), "{text}");
}

#[test]
fn best_efforts_recovery_backs_up_to_the_last_state_whose_tables_exist() {
    let fs = MemFs::new();
    three_flushes(&fs);
    // The table of the last flush is gone.
    let newest = files_of(&fs, DB).into_iter().map(|(n, _)| n).filter(|n| n.ends_with(".sst")).max().unwrap();
    fs.remove_file(&Path::new(DB).join(&newest)).unwrap();
    assert!(Db::open(DB, manual_options(&fs)).is_err(), "a missing table must fail the default open");
    let mut o = manual_options(&fs);
    o.best_efforts_recovery = true;
    let db = Db::open(DB, o).unwrap();
    let report = db.recovery_report();
    assert!(report.manifest.edits_left_out > 0, "{report}");
    let number: u64 = newest.trim_end_matches(".sst").parse().unwrap();
    assert_eq!(report.manifest.missing_tables, [number], "{report}");
    let got = scan(&db, ReadOptions::default());
    assert!(got.keys().any(|k| k.starts_with(b"a")) && got.keys().any(|k| k.starts_with(b"b")), "{report}");
}
