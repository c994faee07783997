//! The JSON report round-trips through its schema, and `plot` draws a
//! non-empty figure from it.

use std::process::Command;

use ebb_bench::plot::{draw, panels};
use ebb_bench::report::{synthetic_report, Report, SCHEMA_VERSION};

#[test]
fn report_round_trips_through_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let report = synthetic_report("ebb", 60);
    report.write(&path).unwrap();
    let back = Report::read(&path).unwrap();
    assert_eq!(back, report);
    // The documented field names are the ones written.
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["schema_version"], SCHEMA_VERSION);
    let sample = &v["results"][0]["intervals"][0];
    for field in [
        "t_secs",
        "interval_secs",
        "ops",
        "ops_per_sec",
        "ingest_mb_per_sec",
        "cap_mb_per_sec",
        "flush_mb_per_sec",
        "compaction_mb_per_sec",
        "stall_percent",
        "l0_files",
        "pending_compaction_bytes",
        "compaction_enabled",
        "block_cache_hit_rate",
        "p99_latency_micros",
        "cumulative_ingest_mb_per_sec",
        "cumulative_compaction_mb_per_sec",
        "reads",
    ] {
        assert!(sample.get(field).is_some(), "interval field {field} missing");
    }
    // --readers: per interval, and in total beside the benchmark's own figures.
    for field in ["ops", "ops_per_sec", "found", "not_found", "p50_latency_micros", "p99_latency_micros"] {
        assert!(sample["reads"].get(field).is_some(), "interval reads field {field} missing");
    }
    let readers = &v["results"][0]["readers"];
    for field in ["threads", "ops", "elapsed_secs", "ops_per_sec", "found", "not_found", "latency"] {
        assert!(readers.get(field).is_some(), "readers field {field} missing");
    }
    assert!(readers["latency"].get("p99").is_some());
    assert_eq!(v["flags"]["num"]["explicit"], true);
}

/// A report written before `--readers` existed has neither `readers` nor
/// `reads`; it still reads, as a run without readers.
#[test]
fn a_report_without_reader_fields_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    synthetic_report("ebb", 5).write(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let result = v["results"][0].as_object_mut().unwrap();
    result.remove("readers");
    for i in result["intervals"].as_array_mut().unwrap() {
        i.as_object_mut().unwrap().remove("reads");
    }
    std::fs::write(&path, v.to_string()).unwrap();
    let back = Report::read(&path).unwrap();
    assert!(back.results[0].readers.is_none());
    assert!(back.results[0].intervals.iter().all(|i| i.reads.is_none()));
}

#[test]
fn a_wrong_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let mut report = synthetic_report("ebb", 5);
    report.schema_version = SCHEMA_VERSION + 1;
    report.write(&path).unwrap();
    let e = Report::read(&path).unwrap_err().to_string();
    assert!(e.contains("schema version"), "{e}");
    std::fs::write(&path, "{\"not\": \"a report\"}").unwrap();
    assert!(Report::read(&path).is_err());
}

#[test]
fn plot_draws_svg_and_png_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let reports = vec![
        ("enabled".to_string(), synthetic_report("ebb", 120)),
        ("disabled".to_string(), synthetic_report("rocksdb", 120)),
    ];
    let p = panels(&reports);
    assert_eq!(p.len(), 2);
    let svg = dir.path().join("fig.svg");
    draw(&p, &svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.len() > 5_000, "svg of {} bytes", text.len());
    assert!(text.contains("interval writes") && text.contains("compaction disabled"));
    let png = dir.path().join("fig.png");
    draw(&p, &png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 5_000, "png of {} bytes", bytes.len());
    let e = draw(&p, &dir.path().join("fig.jpg")).unwrap_err().to_string();
    assert!(e.contains(".svg or .png"), "{e}");
}

/// With `--readers` series, a second row under the write panels: read ops/s
/// and read p99; a report without them says so in its place.
#[test]
fn plot_draws_reads_beside_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut without = synthetic_report("rocksdb", 60);
    without.results[0].readers = None;
    for i in &mut without.results[0].intervals {
        i.reads = None;
    }
    let svg = dir.path().join("reads.svg");
    draw(&panels(&[("with".to_string(), synthetic_report("ebb", 60)), ("without".to_string(), without.clone())]), &svg)
        .unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(r#"height="960""#), "two rows of panels");
    for label in ["interval writes", "with: fillrandom (ebb): reads beside the writes", "read ops/s", "read p99"] {
        assert!(text.contains(label), "{label} missing");
    }
    assert!(text.contains("(none: run without --readers)"), "the panel without reads says so");
    // Without any reads the figure keeps its one row.
    draw(&panels(&[("without".to_string(), without)]), &svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(r#"height="480""#) && !text.contains("read ops/s"));
}

#[test]
fn plot_subcommand_via_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    synthetic_report("ebb", 30).write(&json).unwrap();
    let out = dir.path().join("a.svg");
    let status = Command::new(env!("CARGO_BIN_EXE_ebb-bench"))
        .args(["plot", json.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(std::fs::metadata(&out).unwrap().len() > 1000);
    // A report without series is an error, exit code 1, not a panic.
    let mut empty = synthetic_report("ebb", 30);
    empty.results[0].intervals.clear();
    empty.write(&json).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ebb-bench"))
        .args(["plot", json.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no interval series"));
}

/// What the engine actually has, read back from it: printed by the `options`
/// benchmark and kept in the JSON report, flags given and flags left out alike.
#[test]
fn effective_options_are_read_back_from_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ebb-bench"))
        .args(["--benchmarks=options", "--num=10", "--bloom_bits=7", "--options_preset=read", "--summary=false"])
        .arg(format!("--db={}", dir.path().join("db").display()))
        .arg(format!("--json={}", json.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shown = ebb_bench::engine::options_map::parse_effective(&stdout);
    assert_eq!(shown.get("bloom_bits").map(String::as_str), Some("7"), "given: {stdout}");
    // Left out: the preset's 512 MiB cache and Ebb's CRC-32C.
    assert_eq!(shown.get("cache_size").map(String::as_str), Some("536870912"), "{stdout}");
    assert_eq!(shown.get("checksum_type").map(String::as_str), Some("1"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["effective_options"]["bloom_bits"], 7);
    assert_eq!(v["effective_options"]["compression_type"], "snappy");
}
