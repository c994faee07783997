//! Background tuning wired into the engine: options, deferral during bursts,
//! catch-up afterwards, and correctness under every mode. The tests that
//! need time to pass run the database on a manual clock (`Options::clock`)
//! and move it; they wait for the tuner's events, never for time.

mod common;

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::sync::{Watched, STUCK};
use common::{scan, tiny_options};
use ebb::fs::MemFs;
use ebb::{
    BackgroundTuning, ColumnFamilyHandle, ColumnFamilyOptions, Db, EventListener, IdlePolicyKind, Options, ReadOptions,
    TuningEvent,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The tuner's actions, as its listeners are told them.
#[derive(Default)]
struct Events(Watched<Vec<String>>);

impl Events {
    /// Waits until an event matching each of `wanted` was seen, and panics
    /// naming `what` and the events seen otherwise. A tuner acts (options,
    /// flags) before it tells the listeners, so an event may trail the
    /// state a test waited for by a moment.
    fn wait_for(&self, what: &str, wanted: &[&dyn Fn(&str) -> bool]) {
        let seen_all = |seen: &Vec<String>| wanted.iter().all(|w| seen.iter().any(|e| w(e)));
        if !self.0.wait_for(STUCK, seen_all) {
            panic!("wanted {what}, saw {:?}", self.0.with(Vec::clone));
        }
    }
}

impl EventListener for Events {
    fn on_background_tuning(&self, event: &TuningEvent) {
        self.0.update(|seen| seen.push(event.action.clone()));
    }
}

/// A manual clock for a database: its time moves when the test says.
fn manual_clock() -> Arc<ebb::ManualClock> {
    Arc::new(ebb::ManualClock::new(Duration::from_secs(1_700_000_000)))
}

#[test]
fn thesis_tuner_needs_a_rate_limiter_and_prepares_the_options() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.auto_tuned_compactions = true;
    let e = Db::open("/db", o.clone()).err().expect("must refuse");
    assert!(e.to_string().contains("rate_limiter_bytes_per_sec"), "{e}");
    o.rate_limiter_bytes_per_sec = 64 << 20;
    let db = Db::open("/db", o).unwrap();
    // PrepareAutoTunedCompactions (thesis §3.5.6): stalls lifted at open.
    let now = db.options();
    assert!(now.level0_slowdown_writes_trigger >= 1 << 30, "{}", now.level0_slowdown_writes_trigger);
    assert!(now.level0_stop_writes_trigger >= 1 << 30);
    assert_eq!(now.soft_pending_compaction_bytes_limit, 0);
    assert_eq!(db.metrics().tuning.mode, "thesis");
    db.put(b"k", b"v").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// PrepareAutoTunedCompactions lifts the stall triggers of every family:
/// one created under the tuner, and one listed when the database opens.
#[test]
fn the_thesis_tuner_prepares_every_family() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.auto_tuned_compactions = true;
    o.rate_limiter_bytes_per_sec = 64 << 20;
    let lifted = |o: &ColumnFamilyOptions| {
        (o.level0_slowdown_writes_trigger, o.level0_stop_writes_trigger, o.soft_pending_compaction_bytes_limit)
    };
    let db = Db::open("/db", o.clone()).unwrap();
    let logs = db.create_column_family("logs", ColumnFamilyOptions::from(&o)).unwrap();
    assert_eq!(lifted(&db.cf_options(&logs)), (1 << 30, 1 << 30, 0));
    db.close().unwrap();
    let db = Db::open_cf("/db", o.clone(), &[("logs", ColumnFamilyOptions::from(&o))]).unwrap();
    let logs = db.cf_handle("logs").unwrap();
    assert_eq!(lifted(&db.cf_options(&logs)), (1 << 30, 1 << 30, 0));
    assert_eq!(lifted(&db.options().cf_options()), (1 << 30, 1 << 30, 0));
}

#[test]
fn adaptive_mode_puts_a_stall_backstop_above_its_l0_bound() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.background_tuning = BackgroundTuning::Adaptive;
    o.tuning_max_l0_files = 40;
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.options().level0_slowdown_writes_trigger, 60);
    assert_eq!(db.options().level0_stop_writes_trigger, 80);
    assert_eq!(db.metrics().tuning.mode, "adaptive");
    // Adaptive is the default, and its backstop only raises: a trigger set
    // above it stays (W2's "disabled" sets 10000), one below is raised.
    let mut o = tiny_options(Some(MemFs::new()));
    assert_eq!(o.background_tuning, BackgroundTuning::default());
    assert_eq!(BackgroundTuning::default(), BackgroundTuning::Adaptive);
    o.tuning_max_l0_files = 40;
    o.level0_slowdown_writes_trigger = 10_000;
    o.level0_stop_writes_trigger = 36;
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.options().level0_slowdown_writes_trigger, 10_000);
    assert_eq!(db.options().level0_stop_writes_trigger, 80);
    // Off keeps RocksDB's triggers as given.
    let mut o = tiny_options(Some(MemFs::new()));
    o.background_tuning = BackgroundTuning::Off;
    o.level0_stop_writes_trigger = 36;
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.options().level0_stop_writes_trigger, 36);
    assert_eq!(db.metrics().tuning.mode, "off");
}

/// Under an adaptive tuner, an L0 table written while L0 holds more files
/// than its trigger gets a filter sized to the runs a read probes, deferral
/// or not (the catch-up after one merges L0's fresh runs while L0 is
/// deep); with tuning off every table gets the configured bits.
#[test]
fn l0_filters_grow_with_l0_under_adaptive_tuning_only() {
    let filter_sizes = |mode: BackgroundTuning| {
        // A clock that never moves: the tuner never looks, nothing defers.
        let mut o = tiny_options(Some(MemFs::new())).with_clock(manual_clock());
        o.background_tuning = mode;
        o.disable_auto_compactions = true;
        o.bloom_bits_per_key = 10;
        o.write_buffer_size = 1 << 20;
        let db = Db::open("/db", o).unwrap();
        for flush in 0..9u32 {
            for k in 0..1000u32 {
                db.put(format!("key{flush:02}-{k:05}").as_bytes(), b"v").unwrap();
            }
            db.flush(true).unwrap();
        }
        assert!(!db.metrics().tuning.compaction_deferred);
        let props = db.get_properties_of_all_tables(&db.cf_handle("default").unwrap()).unwrap();
        // By path, which sorts by file number: oldest first.
        let sizes: Vec<u64> = props.values().map(|p| p.filter_size).collect();
        assert_eq!(sizes.len(), 9);
        assert!(props.values().all(|p| p.num_entries == 1000));
        sizes
    };
    let off = filter_sizes(BackgroundTuning::Off);
    assert!(off.iter().all(|s| *s == off[0]), "off: the configured bits throughout: {off:?}");
    let adaptive = filter_sizes(BackgroundTuning::Adaptive);
    // L0 at or under its trigger (2): the configured bits; the last, written
    // over 8 files: 10 + ceil(2.08 ln 4) = 13 bits per key.
    assert_eq!(adaptive[..3], off[..3], "{adaptive:?}");
    assert!(adaptive[8] * 10 >= off[8] * 12, "{adaptive:?} against {off:?}");
    assert!(adaptive.windows(2).all(|w| w[0] <= w[1]), "{adaptive:?}");
}

/// While clients read, adaptive holds writes by the configured L0 triggers
/// (RocksDB's controller), and by its backstop again once writes run alone.
#[test]
fn adaptive_holds_writes_as_configured_while_clients_read() {
    let clock = manual_clock();
    let mut o = tiny_options(Some(MemFs::new())).with_clock(clock.clone());
    o.background_tuning = BackgroundTuning::Adaptive;
    o.tuning_max_l0_files = 40;
    o.level0_slowdown_writes_trigger = 20;
    o.level0_stop_writes_trigger = 36;
    o.idle_probe_interval_ms = 20;
    let events = Arc::new(Events::default());
    o.listeners.push(events.clone());
    let db = Db::open("/db", o).unwrap();
    let triggers = |db: &Db| (db.options().level0_slowdown_writes_trigger, db.options().level0_stop_writes_trigger);
    assert_eq!(triggers(&db), (60, 80));
    // Runs `op` a hundred times per 20 ms of clock time (the tuner's
    // interval: it looks once each), until the triggers are `want`.
    let until = |want: (i32, i32), op: &mut dyn FnMut(u64)| {
        let start = Instant::now();
        let mut i = 0u64;
        while triggers(&db) != want && start.elapsed() < STUCK {
            for _ in 0..100 {
                op(i);
                i += 1;
            }
            clock.advance(Duration::from_millis(20));
        }
        triggers(&db)
    };
    // A writer beside readers (two reads a write): the configured triggers.
    let got = until((20, 36), &mut |i| {
        db.put(format!("k{:06}", i % 5000).as_bytes(), &[7u8; 64]).unwrap();
        for j in 0..2 {
            let _ = db.get(format!("k{:06}", (i * 7 + j) % 5000).as_bytes()).unwrap();
        }
    });
    assert_eq!(got, (20, 36));
    // The writer alone: the backstop again.
    let got = until((60, 80), &mut |i| db.put(format!("w{:06}", i % 5000).as_bytes(), &[7u8; 64]).unwrap());
    assert_eq!(got, (60, 80));
    events.wait_for(
        "both write stall events",
        &[&|e| e.starts_with("write stalls as configured"), &|e| e.starts_with("write stalls at the backstop")],
    );
    // The reads never changed what was written.
    assert_eq!(db.get(b"w000001").unwrap(), Some(vec![7u8; 64]));
}

/// Sends each tuning event's action down a channel, so a test waits for the
/// tuner's decisions instead of sleeping.
struct EventChannel(Mutex<mpsc::Sender<String>>);

impl EventListener for EventChannel {
    fn on_background_tuning(&self, event: &TuningEvent) {
        let _ = self.0.lock().unwrap().send(event.action.clone());
    }
}

/// Waits (up to 10 s) for a tuning event `wanted` accepts, calling `tick`
/// (a load that makes the tuner decide) while none has come, or else
/// waiting on the channel; panics naming `what` and the events seen
/// otherwise.
fn wait_for_event(
    events: &mpsc::Receiver<String>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
    mut tick: Option<&mut dyn FnMut()>,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let next = match tick.as_mut() {
            Some(tick) => events.try_recv().map_err(|_| tick()).ok(),
            None => events.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok(),
        };
        match next {
            Some(e) if wanted(&e) => return,
            Some(e) => seen.push(e),
            None => {}
        }
    }
    panic!("wanted {what}, saw {seen:?}");
}

/// The adaptive tuner tunes every column family for itself: a second
/// family opens with its own backstop (raised from its own configured
/// triggers); when its L0 fills to the bound while the default family is
/// quiet, the tuner forces compaction naming it; and beside readers each
/// family gets its own configured triggers back. The default family's
/// options change only by the commands for it.
#[test]
fn a_second_family_is_tuned_for_itself_while_the_first_is_quiet() {
    let (tx, events) = mpsc::channel();
    let mut o = tiny_options(Some(MemFs::new()));
    o.background_tuning = BackgroundTuning::Adaptive;
    o.tuning_max_l0_files = 8;
    o.level0_slowdown_writes_trigger = 20;
    o.level0_stop_writes_trigger = 36;
    o.idle_probe_interval_ms = 20;
    o.listeners.push(Arc::new(EventChannel(Mutex::new(tx))));
    let db = Db::open("/db", o.clone()).unwrap();
    let mut logs_options = ColumnFamilyOptions::from(&o);
    (logs_options.level0_slowdown_writes_trigger, logs_options.level0_stop_writes_trigger) = (3, 5);
    // Its L0 only grows: a flush is one more file.
    logs_options.disable_auto_compactions = true;
    let logs = db.create_column_family("logs", logs_options).unwrap();
    let triggers = |o: &ColumnFamilyOptions| (o.level0_slowdown_writes_trigger, o.level0_stop_writes_trigger);
    // The backstop is 1.5x and 2x the bound (12, 16): it raises the second
    // family's triggers and leaves the default family's, which are higher.
    assert_eq!(triggers(&db.cf_options(&logs)), (12, 16));
    assert_eq!(triggers(&db.options().cf_options()), (20, 36));
    for i in 0..8u32 {
        db.put_cf(&logs, format!("log{i:04}").as_bytes(), &[7u8; 100]).unwrap();
        db.flush_cf(&logs, true).unwrap();
    }
    let l0 = |cf: Option<&ColumnFamilyHandle>| {
        let name = "ebb.num-files-at-level0";
        cf.map_or_else(|| db.get_property(name), |cf| db.get_property_cf(cf, name)).unwrap()
    };
    assert_eq!((l0(Some(&logs)), l0(None)), ("8".to_string(), "0".to_string()));
    wait_for_event(
        &events,
        "compaction forced by the second family's L0",
        |e| e == "force compaction (L0Files) in column family 'logs'",
        None,
    );
    assert_eq!(l0(None), "0", "the default family stayed quiet");
    assert_eq!(triggers(&db.options().cf_options()), (20, 36));
    // Readers: each family's configured triggers, its own.
    let mut i = 0u32;
    wait_for_event(
        &events,
        "the configured write stalls",
        |e| e.starts_with("write stalls as configured"),
        Some(&mut || {
            let _ = db.get(format!("k{i}").as_bytes()).unwrap();
            i += 1;
        }),
    );
    assert_eq!(triggers(&db.cf_options(&logs)), (3, 5));
    assert_eq!(triggers(&db.options().cf_options()), (20, 36));
}

/// db_bench's `auto_tuned_compactions=true` selects the thesis tuner over
/// the adaptive default (and over off), and is refused beside idle.
#[test]
fn auto_tuned_compactions_takes_the_place_of_the_default_tuner() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.auto_tuned_compactions = true;
    o.rate_limiter_bytes_per_sec = 64 << 20;
    assert_eq!(o.tuning_mode(), BackgroundTuning::Thesis);
    o.background_tuning = BackgroundTuning::Off;
    assert_eq!(o.tuning_mode(), BackgroundTuning::Thesis);
    o.background_tuning = BackgroundTuning::Idle;
    let e = Db::open("/db", o).err().expect("idle and the thesis tuner together must be refused");
    assert!(e.to_string().contains("auto_tuned_compactions"), "{e}");
}

/// The idle mode on a memory file system and `clock`, quiet after ten
/// minutes without a write (probed every 20 ms), with room for L0 to pile
/// up in a burst. Ten minutes: the tests move the clock past them, and on
/// the system's time the release would never come within a test.
fn idle_after_ten_minutes(clock: &Arc<ebb::ManualClock>) -> Options {
    let mut o = tiny_options(Some(MemFs::new())).with_clock(clock.clone());
    o.background_tuning = BackgroundTuning::Idle;
    o.idle_policy = IdlePolicyKind::SinceLastWrite;
    o.idle_quiet_ms = 600_000;
    o.idle_probe_interval_ms = 20;
    o.tuning_max_l0_files = 200;
    o.max_write_buffer_number = 8;
    o
}

/// Writes 200 keys every 20 ms of `clock`'s time (a probe interval) until
/// the tuner defers compaction and L0 holds `l0_files` files; returns what
/// was written.
fn burst_until_deferred(db: &Db, clock: &ebb::ManualClock, l0_files: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(3);
    let mut model = BTreeMap::new();
    let start = Instant::now();
    let mut saw_deferred = false;
    while start.elapsed() < STUCK {
        for _ in 0..200 {
            let k = format!("key{:05}", rng.gen_range(0..20_000)).into_bytes();
            db.put(&k, &[7u8; 80]).unwrap();
            model.insert(k, vec![7u8; 80]);
        }
        clock.advance(Duration::from_millis(20));
        let m = db.metrics();
        saw_deferred |= m.tuning.compaction_deferred;
        if m.tuning.compaction_deferred && m.files_per_level[0] >= l0_files {
            return model;
        }
    }
    panic!("deferred during the burst: {saw_deferred}; L0 {:?}", db.metrics().files_per_level);
}

/// Idle-time scheduling (seed 002): compaction is deferred while the client
/// writes, and runs once it has been quiet, leaving L0 under its trigger.
#[test]
fn idle_mode_defers_during_a_burst_and_compacts_after_it() {
    let clock = manual_clock();
    let events = Arc::new(Events::default());
    let mut o = idle_after_ten_minutes(&clock);
    o.listeners.push(events.clone());
    let db = Db::open("/db", o).unwrap();
    let model = burst_until_deferred(&db, &clock, 6);
    // Quiet for eleven minutes of clock time: at its next look the tuner
    // releases compaction, and the catch-up drains L0 below its trigger.
    assert!(!events.0.with(|seen| seen.iter().any(|e| e == "enable compaction")), "released during the burst");
    clock.advance(Duration::from_secs(660));
    events.wait_for("a deferral and its end", &[&|e| e == "defer compaction", &|e| e == "enable compaction"]);
    db.wait_for_compact().unwrap();
    let m = db.metrics();
    assert!(!m.tuning.compaction_deferred, "{:?}", m.tuning);
    assert!(m.files_per_level[0] < 2, "no catch-up: {:?}", m.files_per_level);
    assert_eq!(scan(&db, ReadOptions::default()), model);
}

/// `wait_for_compact` during a deferral waits for the deferral to end and
/// the catch-up to finish: it returns with the tree compacted, as under
/// `off`, not with the deferral's L0.
#[test]
fn wait_for_compact_waits_out_a_deferral() {
    let clock = manual_clock();
    let o = idle_after_ten_minutes(&clock);
    let trigger = o.level0_file_num_compaction_trigger as usize;
    let db = Arc::new(Db::open("/db", o).unwrap());
    burst_until_deferred(&db, &clock, trigger + 2);
    // The deferral lasts until the clock moves past the quiet time, which
    // this thread does once the other is on its way into `wait_for_compact`.
    let calling = Arc::new(Watched::new(false));
    let (done, waited) = mpsc::channel();
    {
        let (db, calling) = (Arc::clone(&db), Arc::clone(&calling));
        std::thread::spawn(move || {
            calling.update(|c| *c = true);
            let _ = done.send(db.wait_for_compact());
        });
    }
    calling.wait_until("the call of wait_for_compact", |c| *c);
    clock.advance(Duration::from_secs(660));
    waited.recv_timeout(STUCK).expect("wait_for_compact never returned").unwrap();
    let m = db.metrics();
    assert!(!m.tuning.compaction_deferred, "returned during the deferral");
    assert!(m.files_per_level[0] < trigger, "returned before the catch-up: {:?}", m.files_per_level);
}

/// Every tuning mode keeps the database equal to the model through writes,
/// deletes, flushes, deferrals, pauses and reopens. The clock moves a
/// millisecond every 20 operations, and 30 ms without a write every 1500,
/// so that the tuners see busy and quiet intervals and act on them.
#[test]
fn every_mode_keeps_the_model() {
    for mode in [BackgroundTuning::Thesis, BackgroundTuning::Adaptive, BackgroundTuning::Idle] {
        let fs = MemFs::new();
        let clock = manual_clock();
        let mut rng = StdRng::seed_from_u64(mode as u64);
        let mut model = BTreeMap::new();
        for epoch in 0..3 {
            let mut o = tiny_options(Some(fs.clone())).with_clock(clock.clone());
            o.background_tuning = mode;
            o.rate_limiter_bytes_per_sec = 32 << 20;
            o.idle_probe_interval_ms = 10;
            o.tuning_interval_us = 50_000;
            o.tuning_max_l0_files = 12;
            let db = Db::open("/db", o).unwrap();
            assert_eq!(scan(&db, ReadOptions::default()), model, "{mode:?} epoch {epoch} reopen");
            for i in 0..6000u32 {
                let k = format!("key{:05}", rng.gen_range(0..3000)).into_bytes();
                if rng.gen_bool(0.8) {
                    let v = format!("{epoch}-{i}").into_bytes();
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                } else {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                if i % 20 == 0 {
                    clock.advance(Duration::from_millis(1));
                }
                if i % 1500 == 0 {
                    clock.advance(Duration::from_millis(30));
                }
            }
            assert_eq!(scan(&db, ReadOptions::default()), model, "{mode:?} epoch {epoch}");
            assert!(
                db.metrics().files_per_level[0] <= 30,
                "{mode:?}: L0 bound not held: {:?}",
                db.metrics().files_per_level
            );
            db.close().unwrap();
        }
    }
}
