//! The plain-language summary that closes a run (`--summary`, on by
//! default): per benchmark its throughput and the background work the engine
//! did meanwhile (and, with `--readers`, the reads beside it), then the whole
//! run's write amplification, the levels as the
//! run leaves them and what the background tuner did. db_bench prints no such
//! block; its own lines above stay as they are, and no summary line contains
//! ` : `, so parsers of db_bench's result lines (`compare`) pass over it.

use std::fmt::Write as _;

use crate::engine::{EngineMetrics, JobCounts, TunerActivity};
use crate::report::BenchResult;

const MB: f64 = 1048576.0;

/// What the engine did between two metric snapshots of one open database.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Work {
    /// Bytes of keys and values the client wrote.
    pub user_bytes: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Jobs finished, when the engine counts them.
    pub jobs: Option<JobCounts>,
    /// The tuner's decisions (its mode and phase are those at the end).
    pub tuner: Option<TunerActivity>,
    /// MANIFEST syncs `--manifest_sync_delay_ms` slowed, and the
    /// microseconds they slept.
    pub slowed_manifest_syncs: (u64, u64),
}

impl Work {
    /// The work between `before` and `after`, snapshots of the same open database.
    pub fn between(before: &EngineMetrics, after: &EngineMetrics) -> Work {
        let jobs = match (&before.jobs, &after.jobs) {
            (Some(b), Some(a)) => Some(JobCounts {
                flushes: a.flushes.saturating_sub(b.flushes),
                compactions: a.compactions.saturating_sub(b.compactions),
                trivial_moves: a.trivial_moves.saturating_sub(b.trivial_moves),
            }),
            _ => None,
        };
        let tuner = match (&before.tuner, &after.tuner) {
            (Some(b), Some(a)) => Some(TunerActivity {
                mode: a.mode.clone(),
                phase: a.phase.clone(),
                disables: a.disables.saturating_sub(b.disables),
                enables: a.enables.saturating_sub(b.enables),
                pauses: a.pauses.saturating_sub(b.pauses),
                catch_ups: a.catch_ups.saturating_sub(b.catch_ups),
                forced: a.forced.saturating_sub(b.forced),
            }),
            _ => None,
        };
        Work {
            user_bytes: after.user_bytes_written.saturating_sub(before.user_bytes_written),
            wal_bytes: after.wal_bytes.saturating_sub(before.wal_bytes),
            flush_bytes: after.flush_bytes_written.saturating_sub(before.flush_bytes_written),
            compaction_bytes: after.compaction_bytes_written.saturating_sub(before.compaction_bytes_written),
            stall_micros: after.stall_micros.saturating_sub(before.stall_micros),
            jobs,
            tuner,
            slowed_manifest_syncs: (
                after.slowed_manifest_syncs.0.saturating_sub(before.slowed_manifest_syncs.0),
                after.slowed_manifest_syncs.1.saturating_sub(before.slowed_manifest_syncs.1),
            ),
        }
    }

    fn add(&mut self, other: &Work) {
        self.user_bytes += other.user_bytes;
        self.wal_bytes += other.wal_bytes;
        self.flush_bytes += other.flush_bytes;
        self.compaction_bytes += other.compaction_bytes;
        self.stall_micros += other.stall_micros;
        self.slowed_manifest_syncs.0 += other.slowed_manifest_syncs.0;
        self.slowed_manifest_syncs.1 += other.slowed_manifest_syncs.1;
        if let Some(o) = &other.jobs {
            let j = self.jobs.get_or_insert_with(JobCounts::default);
            j.flushes += o.flushes;
            j.compactions += o.compactions;
            j.trivial_moves += o.trivial_moves;
        }
        if let Some(o) = &other.tuner {
            let t = self.tuner.get_or_insert_with(TunerActivity::default);
            t.mode.clone_from(&o.mode);
            t.phase.clone_from(&o.phase);
            t.disables += o.disables;
            t.enables += o.enables;
            t.pauses += o.pauses;
            t.catch_ups += o.catch_ups;
            t.forced += o.forced;
        }
    }
}

/// One benchmark's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The benchmark.
    pub name: String,
    /// Its ops/sec, as its result line says; `None` for a one-shot job
    /// (`compact`, `flush`, `waitforcompaction`), whose rate means nothing.
    pub ops_per_sec: Option<f64>,
    /// Seconds it ran.
    pub seconds: f64,
    /// Its MB/s, when it moved bytes.
    pub mb_per_sec: Option<f64>,
    /// The `--readers` threads' reads per second beside it, when they ran.
    pub reads_per_sec: Option<f64>,
    /// Their 99th percentile latency (µs), when they read anything.
    pub read_p99_micros: Option<f64>,
    /// What the engine did while it ran.
    pub work: Work,
}

impl Row {
    /// The line of `result`, with the engine's metrics from before and after
    /// it; `one_shot` for a benchmark that runs one engine call.
    pub fn new(result: &BenchResult, one_shot: bool, before: &EngineMetrics, after: &EngineMetrics) -> Row {
        Row {
            name: result.name.clone(),
            ops_per_sec: Some(result.ops_per_sec).filter(|_| !one_shot),
            seconds: result.elapsed_secs,
            mb_per_sec: result.mb_per_sec,
            reads_per_sec: result.readers.as_ref().map(|r| r.ops_per_sec),
            read_p99_micros: result.readers.as_ref().and_then(|r| r.latency.as_ref()).map(|l| l.p99),
            work: Work::between(before, after),
        }
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / MB)
}

fn times(n: u64, what: &str) -> String {
    match n {
        1 => format!("{what} once"),
        n => format!("{what} {n} times"),
    }
}

/// The tuner's decisions in a few words (`-` for none).
fn tuner_words(t: &TunerActivity) -> String {
    let words: Vec<String> = [
        (t.disables, "deferred"),
        (t.enables, "resumed"),
        (t.pauses, "paused"),
        (t.catch_ups, "caught up"),
        (t.forced, "forced"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, w)| if *n == 1 { (*w).to_string() } else { format!("{w} x{n}") })
    .collect();
    if words.is_empty() {
        "-".to_string()
    } else {
        words.join(", ")
    }
}

/// The summary of `rows`, with `end` the engine's metrics as the run ends.
pub fn render(rows: &[Row], end: &EngineMetrics) -> String {
    let mut out = String::from("\nSummary (ebb-bench's own; db_bench prints no such block)\n");
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max("benchmark".len());
    let tuning = rows.iter().any(|r| r.work.tuner.as_ref().is_some_and(|t| t.mode != "off"));
    let reading = rows.iter().any(|r| r.reads_per_sec.is_some());
    let _ = write!(
        out,
        "  {:<width$} {:>10} {:>8} {:>8} {:>8} {:>12} {:>8}",
        "benchmark", "ops/sec", "MB/s", "seconds", "flushes", "compactions", "bg MB"
    );
    if reading {
        let _ = write!(out, " {:>10} {:>9}", "reads/sec", "read p99");
    }
    out.push_str(if tuning { "  tuner\n" } else { "\n" });
    let mut total = Work::default();
    for r in rows {
        total.add(&r.work);
        let (flushes, compactions) = match &r.work.jobs {
            Some(j) => (j.flushes.to_string(), j.compactions.to_string()),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = write!(
            out,
            "  {:<width$} {:>10} {:>8} {:>8.1} {:>8} {:>12} {:>8.1}",
            r.name,
            r.ops_per_sec.map_or_else(|| "-".to_string(), |o| format!("{o:.0}")),
            r.mb_per_sec.map_or_else(|| "-".to_string(), |m| format!("{m:.1}")),
            r.seconds,
            flushes,
            compactions,
            (r.work.flush_bytes + r.work.compaction_bytes) as f64 / MB,
        );
        if reading {
            let dash = || "-".to_string();
            let _ = write!(
                out,
                " {:>10} {:>9}",
                r.reads_per_sec.map_or_else(dash, |o| format!("{o:.0}")),
                r.read_p99_micros.map_or_else(dash, |p| format!("{p:.1}")),
            );
        }
        if tuning {
            let _ = write!(out, "  {}", r.work.tuner.as_ref().map_or_else(|| "-".to_string(), tuner_words));
        }
        out.push('\n');
    }
    out.push_str("  (flushes, compactions, bg MB: the engine's background work while the benchmark ran");
    if reading {
        out.push_str("; reads/sec, read p99 (µs): the --readers threads' point reads beside it");
    }
    out.push_str(if tuning { "; tuner: its decisions meanwhile)\n" } else { ")\n" });
    write_amplification(&mut out, &total);
    if total.stall_micros > 0 {
        let _ = writeln!(
            out,
            "  Writers were stalled {:.2} s in all (the engine slowed them while background work fell behind).",
            total.stall_micros as f64 / 1e6
        );
    }
    let (slowed, slept) = total.slowed_manifest_syncs;
    if slowed > 0 {
        let _ = writeln!(
            out,
            "  MANIFEST syncs slowed by --manifest_sync_delay_ms: {slowed}, {:.2} s of delay in all (--histogram shows \
             whether writes waited on them).",
            slept as f64 / 1e6
        );
    }
    levels(&mut out, end);
    tuner_line(&mut out, &total, end);
    out
}

fn write_amplification(out: &mut String, w: &Work) {
    if w.user_bytes == 0 {
        out.push_str("  The client wrote nothing, so there is no write amplification to report.\n");
        return;
    }
    let per = |bytes: u64| bytes as f64 / w.user_bytes as f64;
    let engine = w.wal_bytes + w.flush_bytes + w.compaction_bytes;
    let _ = writeln!(
        out,
        "  Write amplification {:.1} (bytes the engine wrote per byte the client wrote): WAL {:.1} + flushes {:.1} \
         + compactions {:.1}; the client wrote {}, the engine {}.",
        per(engine),
        per(w.wal_bytes),
        per(w.flush_bytes),
        per(w.compaction_bytes),
        mb(w.user_bytes),
        mb(engine),
    );
    if let Some(j) = &w.jobs {
        let moves = if j.trivial_moves > 0 {
            format!(", {} of them moves of whole files without rewriting", j.trivial_moves)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  Background jobs: {} (memtable to L0 file), {}{moves}.",
            times_plain(j.flushes, "flush", "flushes"),
            times_plain(j.compactions, "compaction", "compactions"),
        );
    }
}

fn times_plain(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn levels(out: &mut String, end: &EngineMetrics) {
    let parts: Vec<String> = end
        .files_per_level
        .iter()
        .enumerate()
        .filter(|(_, files)| **files > 0)
        .map(|(level, files)| {
            let size = end.bytes_per_level.get(level).map_or_else(String::new, |b| format!(", {}", mb(*b)));
            format!("L{level} {}{size}", times_plain(*files, "file", "files"))
        })
        .collect();
    if parts.is_empty() {
        out.push_str(
            "  Levels now: no table files; everything is still in the memtable \
             (more data or a smaller --write_buffer_size makes the engine flush).\n",
        );
    } else {
        let _ = writeln!(out, "  Levels now: {}.", parts.join("; "));
    }
}

fn tuner_line(out: &mut String, total: &Work, end: &EngineMetrics) {
    let Some(now) = &end.tuner else { return };
    if now.mode == "off" {
        out.push_str(
            "  Tuner: off; the default, --background_tuning=adaptive, lets Ebb hold compaction back while \
             writes peak and compaction falls behind, and catch up afterwards (docs/tuning.md).\n",
        );
        return;
    }
    let t = total.tuner.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "  Tuner ({}): {} while writes pressed, {} afterwards, {}, {} by a bound; phase now {} (docs/tuning.md).",
        now.mode,
        times(t.disables, "deferred compaction"),
        times(t.catch_ups, "caught up"),
        times(t.pauses, "paused running compactions"),
        times(t.forced, "forced compaction"),
        now.phase,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(user: u64, flush: u64, compaction: u64, flushes: u64, disables: u64) -> EngineMetrics {
        EngineMetrics {
            user_bytes_written: user,
            wal_bytes: user,
            flush_bytes_written: flush,
            compaction_bytes_written: compaction,
            files_per_level: vec![0, 2, 5],
            bytes_per_level: vec![0, 4 << 20, 20 << 20],
            jobs: Some(JobCounts { flushes, compactions: 3, trivial_moves: 1 }),
            tuner: Some(TunerActivity {
                mode: "adaptive".into(),
                phase: "paced".into(),
                disables,
                ..TunerActivity::default()
            }),
            ..EngineMetrics::default()
        }
    }

    fn row(name: &str, before: &EngineMetrics, after: &EngineMetrics) -> Row {
        Row {
            name: name.into(),
            ops_per_sec: Some(1000.0),
            seconds: 1.0,
            mb_per_sec: Some(1.5),
            reads_per_sec: None,
            read_p99_micros: None,
            work: Work::between(before, after),
        }
    }

    #[test]
    fn rows_are_deltas_and_the_totals_add_up() {
        let zero = metrics(0, 0, 0, 0, 0);
        let mid = metrics(10 << 20, 10 << 20, 0, 2, 1);
        let end = metrics(20 << 20, 20 << 20, 40 << 20, 4, 1);
        let text = render(&[row("fillrandom", &zero, &mid), row("overwrite", &mid, &end)], &end);
        let line = |name: &str| text.lines().find(|l| l.trim_start().starts_with(name)).unwrap().to_string();
        assert!(line("fillrandom").contains("deferred"), "{text}");
        assert!(line("overwrite").trim_end().ends_with('-'), "no new tuner decision:\n{text}");
        // 20 MB written: WAL 20 + flushes 20 + compactions 40 = 4.0 per byte.
        assert!(
            text.contains("Write amplification 4.0") && text.contains("WAL 1.0 + flushes 1.0 + compactions 2.0"),
            "{text}"
        );
        assert!(text.contains("L1 2 files, 4.0 MB; L2 5 files, 20.0 MB"), "{text}");
        assert!(text.contains("Tuner (adaptive): deferred compaction once"), "{text}");
        assert!(!text.contains(" : "), "a result-line parser must not take a summary line:\n{text}");
    }

    #[test]
    fn reads_beside_a_benchmark_get_their_columns() {
        let zero = metrics(0, 0, 0, 0, 0);
        let plain = render(&[row("fillrandom", &zero, &zero)], &zero);
        assert!(!plain.contains("reads/sec"), "no columns without --readers:\n{plain}");
        let with =
            Row { reads_per_sec: Some(25000.0), read_p99_micros: Some(812.5), ..row("fillrandom", &zero, &zero) };
        let text = render(&[with, row("readrandom", &zero, &zero)], &zero);
        let line = |name: &str| text.lines().find(|l| l.trim_start().starts_with(name)).unwrap().to_string();
        assert!(line("benchmark").contains("reads/sec") && line("benchmark").contains("read p99"), "{text}");
        assert!(line("fillrandom").contains(" 25000     812.5"), "{text}");
        assert!(line("readrandom").contains(" 0.0          -         -"), "{text}");
        assert!(text.contains("--readers threads' point reads"), "{text}");
    }

    #[test]
    fn slowed_manifest_syncs_are_counted_per_run_only_when_slowed() {
        let zero = metrics(0, 0, 0, 0, 0);
        let plain = render(&[row("fillrandom", &zero, &zero)], &zero);
        assert!(!plain.contains("MANIFEST"), "nothing slowed, nothing said:\n{plain}");
        let mid = EngineMetrics { slowed_manifest_syncs: (5, 100_000), ..zero.clone() };
        let end = EngineMetrics { slowed_manifest_syncs: (12, 240_000), ..zero.clone() };
        let text = render(&[row("fillrandom", &zero, &mid), row("overwrite", &mid, &end)], &end);
        assert!(
            text.contains("MANIFEST syncs slowed by --manifest_sync_delay_ms: 12, 0.24 s of delay in all"),
            "{text}"
        );
        let later = render(&[row("overwrite", &mid, &end)], &end);
        assert!(later.contains("slowed by --manifest_sync_delay_ms: 7, 0.14 s"), "the run's own syncs:\n{later}");
    }

    #[test]
    fn an_empty_tree_and_no_tuner_are_explained() {
        let zero = EngineMetrics {
            files_per_level: vec![0; 7],
            tuner: Some(TunerActivity { mode: "off".into(), ..TunerActivity::default() }),
            ..EngineMetrics::default()
        };
        let text = render(&[row("readrandom", &zero, &zero)], &zero);
        assert!(text.contains("still in the memtable"), "{text}");
        assert!(text.contains("wrote nothing"), "{text}");
        assert!(text.contains("Tuner: off") && !text.contains("  tuner"), "{text}");
    }
}
