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
    ] {
        assert!(sample.get(field).is_some(), "interval field {field} missing");
    }
    assert_eq!(v["flags"]["num"]["explicit"], true);
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
