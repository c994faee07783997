//! ebb-stress: a crash test for Ebb in the manner of RocksDB's db_stress
//! and db_crashtest.py. See `ebb-stress --help` and docs/reliability.md.

mod driver;
mod expected;
mod values;
mod worker;

use std::path::PathBuf;
use std::time::Duration;

const HELP: &str = "\
ebb-stress: random concurrent operations on an Ebb database, checked against
an expected state that survives the process being killed.

Worker (default): verify the database against the expected state, then run
until killed (or for --duration).
  --db=PATH             database directory (required)
  --expected=PATH       expected-state file (default: PATH.expected)
  --threads=N           threads of operations (default 4)
  --keys=N              size of the key space (default 10000)
  --column-families=N   column families the keys are spread over, eight
                        consecutive keys to each in turn (default 3; 1 is
                        the default family alone)
  --seed=N              seed (default: from the clock)
  --sync-ratio=F        fraction of writes with sync=true (default 0.1)
  --options=TEXT        options as name=value;name=value (Options::from_text names)
  --duration=SECS       stop after SECS and close cleanly (default: run until killed)
  --verify-only         verify, close and exit

Driver: the crash test.
  --driver              run workers as child processes, SIGKILL each at a random
                        moment, restart with freshly drawn options, verify
  --duration=SECS       total time of the kill cycles (default 60)
  --dir=PATH            where the database and expected state live
                        (default: a fresh directory under the temporary directory)
  --kill-min-ms=N       earliest kill after a start (default 1000), except
                        one kill in five, which comes before it
  --kill-max-ms=N       latest kill after a start (default 5000)
  --threads, --keys, --seed as above
  --keep                keep the directory after a passing run

Exit codes: 0 pass, 1 usage, 2 verification failed, 3 engine error.";

struct Args {
    pairs: Vec<(String, Option<String>)>,
}

impl Args {
    fn parse(raw: Vec<String>) -> Result<Args, String> {
        let mut pairs = Vec::new();
        let mut it = raw.into_iter().peekable();
        while let Some(arg) = it.next() {
            let Some(body) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            match body.split_once('=') {
                Some((k, v)) => pairs.push((k.to_string(), Some(v.to_string()))),
                None if matches!(body, "driver" | "verify-only" | "keep" | "help") => {
                    pairs.push((body.to_string(), None))
                }
                None => pairs.push((body.to_string(), it.next())),
            }
        }
        Ok(Args { pairs })
    }

    fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == name)
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == name).and_then(|(_, v)| v.as_deref())
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.text(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{name}={v:?} is not a number")),
        }
    }

    fn check_known(&self) -> Result<(), String> {
        const KNOWN: &[&str] = &[
            "db",
            "expected",
            "threads",
            "keys",
            "column-families",
            "seed",
            "sync-ratio",
            "options",
            "duration",
            "verify-only",
            "driver",
            "dir",
            "kill-min-ms",
            "kill-max-ms",
            "keep",
            "help",
        ];
        match self.pairs.iter().find(|(k, _)| !KNOWN.contains(&k.as_str())) {
            Some((k, _)) => Err(format!("unknown flag --{k} (see --help)")),
            None => Ok(()),
        }
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn run() -> Result<i32, String> {
    let args = Args::parse(std::env::args().skip(1).collect())?;
    if args.flag("help") {
        println!("{HELP}");
        return Ok(0);
    }
    args.check_known()?;
    let keys = args.num("keys", 10_000u64)?.max(1);
    // Every thread owns at least one key, and every key one thread.
    let threads = args.num("threads", 4u64)?.clamp(1, keys);
    let seed = args.num("seed", clock_seed())?;
    let column_families = args.num("column-families", 3u64)?;
    if column_families == 0 {
        return Err("--column-families must be at least 1 (the default family)".to_string());
    }
    if args.flag("driver") {
        let cfg = driver::DriverConfig {
            duration: Duration::from_secs_f64(args.num("duration", 60.0f64)?.max(0.0)),
            dir: args.text("dir").map(PathBuf::from),
            threads,
            keys,
            column_families,
            seed,
            kill_after: (
                Duration::from_millis(args.num("kill-min-ms", 1000u64)?),
                Duration::from_millis(args.num("kill-max-ms", 5000u64)?),
            ),
            keep: args.flag("keep"),
        };
        return Ok(driver::run(&cfg));
    }
    let db = PathBuf::from(args.text("db").ok_or("--db is required (or --driver)")?);
    let expected = args.text("expected").map_or_else(|| db.with_extension("expected"), PathBuf::from);
    let duration = args.num("duration", 0.0f64)?;
    let cfg = worker::WorkerConfig {
        db,
        expected,
        threads,
        keys,
        column_families,
        seed,
        sync_ratio: args.num("sync-ratio", 0.1f64)?.clamp(0.0, 1.0),
        options: args.text("options").unwrap_or_default().to_string(),
        duration: (duration > 0.0).then(|| Duration::from_secs_f64(duration)),
        verify_only: args.flag("verify-only"),
    };
    Ok(worker::run(&cfg) as i32)
}

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("ebb-stress: {e}");
            std::process::exit(worker::Exit::Usage as i32);
        }
    }
}
