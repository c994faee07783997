//! The driver (RocksDB's `db_crashtest.py`): runs the worker as a child
//! process, kills it with SIGKILL at a random moment, and starts it again
//! with freshly drawn options; each start verifies the database against the
//! expected state before it writes. After the last kill a verify-only run
//! checks the final state, and a summary is printed.
//!
//! The WAL is always on (`disable_wal` is never set): a write made without
//! it is legitimately lost when its process dies before a flush. Writes made
//! with `sync=false` are not: SIGKILL takes the process, not the operating
//! system, which still holds what was written. So after every kill each key
//! must hold exactly its committed state, or the pending one of a write that
//! was in flight.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// What a crash test does.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Total time of the kill cycles.
    pub duration: Duration,
    /// Where the database and the expected-state file live; a fresh
    /// directory under the system's temporary directory when `None`.
    pub dir: Option<PathBuf>,
    /// Worker threads.
    pub threads: u64,
    /// Size of the key space.
    pub keys: u64,
    /// Column families the keys are spread over.
    pub column_families: u64,
    /// Seeds the options, the kill times and the workers' seeds.
    pub seed: u64,
    /// A worker is killed between these times after its start (one in five
    /// before the first).
    pub kill_after: (Duration, Duration),
    /// Keep the directory after a passing run.
    pub keep: bool,
}

/// The figures of one worker run, from its output.
#[derive(Debug, Default, Clone)]
struct RunLog {
    verified: Option<Verified>,
    ops: u64,
    done: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Verified {
    keys: u64,
    committed: u64,
    pending_applied: u64,
    pending_lost: u64,
    lost: u64,
    wrong: u64,
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn parse_line(log: &mut RunLog, line: &str) {
    if line.starts_with("verified ") {
        log.verified = Some(Verified {
            keys: field(line, "keys"),
            committed: field(line, "committed"),
            pending_applied: field(line, "pending_applied"),
            pending_lost: field(line, "pending_lost"),
            lost: field(line, "lost"),
            wrong: field(line, "wrong"),
        });
    } else if line.starts_with("progress ") {
        log.ops = field(line, "ops");
    } else if line.starts_with("done ") {
        log.ops = field(line, "ops");
        log.done = true;
    }
}

/// Options drawn for one run, in the text form `name=value;...`, and the
/// fraction of synced writes.
fn draw_options(rng: &mut StdRng, direct_io: bool) -> (String, f64) {
    let pick = |rng: &mut StdRng, xs: &[&str]| xs.choose(rng).copied().unwrap_or_default().to_string();
    let trigger: u32 = rng.gen_range(2..=8);
    let settings = [
        ("compression", pick(rng, &["none", "snappy", "lz4", "zstd"])),
        ("checksum", pick(rng, &["crc32c", "xxh3"])),
        ("write_buffer_size", pick(rng, &["65536", "262144", "1048576", "4194304"])),
        ("target_file_size_base", pick(rng, &["65536", "262144", "1048576"])),
        ("block_size", pick(rng, &["1024", "4096", "16384"])),
        ("bloom_bits_per_key", pick(rng, &["0", "10"])),
        ("level0_file_num_compaction_trigger", trigger.to_string()),
        ("level0_slowdown_writes_trigger", (trigger * rng.gen_range(3..=6)).to_string()),
        ("level0_stop_writes_trigger", (trigger * 8).to_string()),
        ("max_subcompactions", rng.gen_range(1..=4).to_string()),
        ("max_background_jobs", rng.gen_range(2..=6).to_string()),
        ("background_tuning", pick(rng, &["off", "adaptive", "idle"])),
        // Tables closed and reopened by a bounded table cache (20: ten
        // open), index and filter blocks in the block cache, pinned or not.
        ("max_open_files", pick(rng, &["-1", "-1", "20", "40"])),
        ("cache_index_and_filter_blocks", pick(rng, &["false", "true"])),
        ("pin_l0_filter_and_index_blocks_in_cache", pick(rng, &["false", "true"])),
        // New MANIFESTs written while jobs run (written without the db
        // mutex, then named by CURRENT): every few edits at 4 KiB.
        ("max_manifest_file_size", pick(rng, &["1073741824", "1073741824", "65536", "4096"])),
        // Values of 64 bytes or more in blob files in one run of three (the
        // values are 24 to 143 bytes), small blob files, garbage collected
        // or not; a blob file cache under the same bound as the tables.
        ("enable_blob_files", pick(rng, &["false", "false", "true"])),
        ("min_blob_size", "64".to_string()),
        ("blob_file_size", pick(rng, &["262144", "4194304"])),
        ("enable_blob_garbage_collection", pick(rng, &["false", "true"])),
        // Direct I/O for table and blob reads, and for what flushes and
        // compactions write (docs/io.md), each in one run of three.
        // (Only where the directory's filesystem takes O_DIRECT.)
        ("use_direct_reads", pick(rng, &["false", "false", "true"])),
        ("use_direct_io_for_flush_and_compaction", pick(rng, &["false", "false", "true"])),
    ];
    let settings = settings.map(|(k, v)| match k {
        "use_direct_reads" | "use_direct_io_for_flush_and_compaction" if !direct_io => (k, "false".to_string()),
        _ => (k, v),
    });
    let text = settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";");
    let sync_ratio = *[0.0, 0.01, 0.1, 0.5].choose(rng).unwrap_or(&0.1);
    (text, sync_ratio)
}

/// Starts a worker; its stdout is parsed into the returned log as it comes.
fn spawn_worker(
    db: &Path,
    expected: &Path,
    cfg: &DriverConfig,
    seed: u64,
    options: &str,
    sync_ratio: f64,
    verify_only: bool,
) -> std::io::Result<(Child, Arc<Mutex<RunLog>>, std::thread::JoinHandle<()>)> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg(format!("--db={}", db.display()))
        .arg(format!("--expected={}", expected.display()))
        .arg(format!("--threads={}", cfg.threads))
        .arg(format!("--keys={}", cfg.keys))
        .arg(format!("--column-families={}", cfg.column_families))
        .arg(format!("--seed={seed}"))
        .arg(format!("--sync-ratio={sync_ratio}"))
        .arg(format!("--options={options}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if verify_only {
        cmd.arg("--verify-only");
    }
    let mut child = cmd.spawn()?;
    let log = Arc::new(Mutex::new(RunLog::default()));
    let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("worker has no stdout"))?;
    let sink = Arc::clone(&log);
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            parse_line(&mut sink.lock().unwrap_or_else(|e| e.into_inner()), &line);
        }
    });
    Ok((child, log, reader))
}

/// Totals over the whole test.
#[derive(Debug, Default)]
struct Totals {
    cycles: u64,
    killed_before_verified: u64,
    ops: u64,
    verified_keys: u64,
    committed: u64,
    pending_applied: u64,
    pending_lost: u64,
    lost: u64,
    wrong: u64,
    errors: u64,
}

impl Totals {
    fn add_verified(&mut self, v: Verified) {
        self.verified_keys += v.keys;
        self.committed += v.committed;
        self.pending_applied += v.pending_applied;
        self.pending_lost += v.pending_lost;
        self.lost += v.lost;
        self.wrong += v.wrong;
    }
}

/// Whether the filesystem holding `dir` takes `O_DIRECT` (a probe file is
/// created, opened for a direct read, and removed).
fn takes_direct_io(dir: &Path) -> bool {
    use ebb::fs::FileSystem;
    let probe = dir.join("direct-io-probe");
    if std::fs::write(&probe, [0u8; 4096]).is_err() {
        return false;
    }
    let ok = ebb::fs::PosixFs::new().open_random_direct(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Runs the crash test; returns the process exit code.
pub fn run(cfg: &DriverConfig) -> i32 {
    let dir =
        cfg.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("ebb-stress-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("ebb-stress: create {}: {e}", dir.display());
        return 1;
    }
    let (db, expected) = (dir.join("db"), dir.join("expected"));
    let direct_io = takes_direct_io(&dir);
    if !direct_io {
        println!("ebb-stress: {} refuses O_DIRECT: direct I/O is not drawn", dir.display());
    }
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut totals = Totals::default();
    let start = Instant::now();
    println!(
        "ebb-stress: crash test for {:?} in {}: {} threads, {} keys in {} column families, seed {}, kills {:?}..{:?} after each start",
        cfg.duration,
        dir.display(),
        cfg.threads,
        cfg.keys,
        cfg.column_families,
        cfg.seed,
        cfg.kill_after.0,
        cfg.kill_after.1
    );
    while start.elapsed() < cfg.duration && totals.errors == 0 {
        let (options, sync_ratio) = draw_options(&mut rng, direct_io);
        let left = cfg.duration.saturating_sub(start.elapsed());
        // One kill in five comes early, often while the worker recovers
        // or verifies; the rest while it runs.
        let (earliest, latest) = (cfg.kill_after.0, cfg.kill_after.1.max(cfg.kill_after.0));
        let kill_at =
            if rng.gen_bool(0.2) { rng.gen_range(Duration::ZERO..=earliest) } else { rng.gen_range(earliest..=latest) };
        let kill_at = kill_at.min(left);
        let seed = rng.gen();
        let (mut child, log, reader) = match spawn_worker(&db, &expected, cfg, seed, &options, sync_ratio, false) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ebb-stress: start worker: {e}");
                return 1;
            }
        };
        let started = Instant::now();
        let mut exited = None;
        while started.elapsed() < kill_at {
            match child.try_wait() {
                Ok(Some(status)) => {
                    exited = Some(status);
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => {
                    eprintln!("ebb-stress: wait for worker: {e}");
                    return 1;
                }
            }
        }
        if exited.is_none() {
            // Child::kill sends SIGKILL.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = reader.join();
        let run = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        totals.cycles += 1;
        totals.ops += run.ops;
        match run.verified {
            Some(v) => totals.add_verified(v),
            None => totals.killed_before_verified += 1,
        }
        let verdict = match exited {
            Some(status) => {
                totals.errors += 1;
                format!("worker exited by itself ({status}): FAIL")
            }
            None => format!("killed after {:.2} s", started.elapsed().as_secs_f64()),
        };
        println!(
            "cycle {}: {verdict}, {} ops, verified {}; sync_ratio={sync_ratio} {options}",
            totals.cycles,
            run.ops,
            run.verified.map_or("nothing (killed first)".to_string(), |v| format!(
                "{} keys ({} in-flight applied, {} not)",
                v.keys, v.pending_applied, v.pending_lost
            )),
        );
    }
    if totals.errors == 0 {
        let (options, _) = draw_options(&mut rng, direct_io);
        match spawn_worker(&db, &expected, cfg, rng.gen(), &options, 0.0, true) {
            Ok((mut child, log, reader)) => {
                let status = child.wait();
                let _ = reader.join();
                let run = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(v) = run.verified {
                    totals.add_verified(v);
                }
                let passed = status.as_ref().is_ok_and(|s| s.success());
                if !passed {
                    totals.errors += 1;
                }
                println!("final verification: {}", if passed { "passed" } else { "FAILED" });
            }
            Err(e) => {
                eprintln!("ebb-stress: start the final verification: {e}");
                totals.errors += 1;
            }
        }
    }
    let failed = totals.errors > 0 || totals.lost > 0 || totals.wrong > 0;
    print_summary(&totals, start.elapsed(), failed);
    if failed {
        eprintln!("ebb-stress: the database is kept in {} for inspection", dir.display());
        return 2;
    }
    if !cfg.keep && cfg.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    0
}

fn print_summary(t: &Totals, elapsed: Duration, failed: bool) {
    println!("ebb-stress summary ({:.1} s)", elapsed.as_secs_f64());
    println!("  crash cycles:    {} (SIGKILL; {} before the restart had verified)", t.cycles, t.killed_before_verified);
    println!("  operations:      {}", t.ops);
    println!(
        "  verified keys:   {} ({} committed, {} in-flight writes applied, {} in-flight writes not applied)",
        t.verified_keys, t.committed, t.pending_applied, t.pending_lost
    );
    println!("  writes lost:     {}", t.lost);
    println!("  wrong values:    {}", t.wrong);
    println!("  errors:          {}", t.errors);
    println!("  result:          {}", if failed { "FAIL" } else { "PASS" });
}
