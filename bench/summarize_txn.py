#!/usr/bin/env python3
"""The transaction benchmarks of bench/txn.sh: one CSV row per run (the raw
data), then a Markdown table of medians per case and engine, with Ebb's
ratio to RocksDB in transactions begun per second and in commits per second.

Usage: bench/summarize_txn.py OUT CSV_PATH   (prints the table)
"""
import csv
import glob
import json
import os
import statistics
import sys

out, csv_path = sys.argv[1], sys.argv[2]
rows = []
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    base = os.path.basename(path)[: -len(".json")]
    name_engine, rep = base.rsplit(".", 1)
    case, engine = name_engine.rsplit("-", 1)
    with open(path) as f:
        report = json.load(f)
    for r in report.get("results", []):
        t = r.get("transactions") or {}
        secs = r.get("elapsed_secs") or 0
        rows.append({
            "case": case, "engine": engine, "rep": int(rep), "benchmark": r["name"],
            "ops": r.get("ops"), "elapsed_secs": secs, "ops_per_sec": r.get("ops_per_sec"),
            "committed": t.get("committed"), "commits_per_sec": (t.get("committed") or 0) / secs if secs else None,
            "prepared": t.get("prepared"), "rolled_back": t.get("rolled_back"), "busy": t.get("busy"),
            "deadlock": t.get("deadlock"), "timed_out": t.get("timed_out"), "try_again": t.get("try_again"),
            "expired": t.get("expired"),
        })
cols = ["case", "engine", "rep", "benchmark", "ops", "elapsed_secs", "ops_per_sec", "committed", "commits_per_sec",
        "prepared", "rolled_back", "busy", "deadlock", "timed_out", "try_again", "expired"]
with open(csv_path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols)
    w.writeheader()
    for r in sorted(rows, key=lambda r: (r["case"], r["rep"], r["engine"])):
        w.writerow(r)

def med(case, engine, field):
    v = [r[field] for r in rows if r["case"] == case and r["engine"] == engine and r[field] is not None]
    return statistics.median(v) if v else None

print("| case | Ebb txn/s | RocksDB txn/s | ratio | Ebb commits/s | RocksDB commits/s | ratio | Ebb aborts (busy/deadlock/timeout) | RocksDB aborts |")
print("|---|---:|---:|---:|---:|---:|---:|---|---|")
for case in sorted({r["case"] for r in rows}):
    e, k = med(case, "ebb", "ops_per_sec"), med(case, "rocksdb", "ops_per_sec")
    ec, kc = med(case, "ebb", "commits_per_sec"), med(case, "rocksdb", "commits_per_sec")
    def aborts(engine):
        return "/".join(str(int(med(case, engine, f) or 0)) for f in ("busy", "deadlock", "timed_out"))
    ratio = f"{e / k:.2f}" if e and k else "-"
    cratio = f"{ec / kc:.2f}" if ec and kc else "-"
    print(f"| {case} | {e:,.0f} | {k:,.0f} | {ratio} | {ec:,.0f} | {kc:,.0f} | {cratio} | {aborts('ebb')} | {aborts('rocksdb')} |")
