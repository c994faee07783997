#!/usr/bin/env python3
"""Tables and raw CSV of bench/raft.sh's results.

Usage: python3 bench/summarize_raft.py RAFT_JSONL [CSV]

Prints, as Markdown, the medians over repetitions of each case and store
and Ebb's ratio to each RocksDB store (throughput: Ebb / RocksDB, higher is
better for Ebb; p99: RocksDB / Ebb, higher is better for Ebb), and writes
every run's figures (one row per run and phase; the square wave's
per-second samples as their own rows) to CSV.
"""
import csv
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def case_of(r):
    if r["bench"] == "log":
        return ("log", f"batch {r['batch']}, {r['value_bytes']} B")
    if "series" in r:
        return ("wave", f"64 clients, square wave, {r['value_bytes']} B")
    return (r["phase"], f"{r['clients']} clients")


def main():
    runs = load(sys.argv[1])
    groups = defaultdict(list)
    for r in runs:
        groups[(case_of(r), r["store"])].append(r)
    med = lambda rs, k: statistics.median(r[k] for r in rs)

    def table(kind, rate_key, title):
        cases = sorted({c for (c, _s) in groups if c[0] == kind}, key=lambda c: (len(c[1]), c[1]))
        if not cases:
            return
        print(f"\n### {title}\n")
        print("| case | Ebb /s | rocksstore /s | rocks-batch /s | Ebb ÷ rocksstore | Ebb ÷ rocks-batch "
              "| p99 µs Ebb | rocksstore | rocks-batch | reps |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in cases:
            e, rs, rb = (groups.get((c, s), []) for s in ("ebb", "rocksstore", "rocks-batch"))
            if not e:
                continue
            fmt = lambda rs_: f"{med(rs_, rate_key):,.0f}" if rs_ else "-"
            ratio = lambda rs_: f"{med(e, rate_key) / med(rs_, rate_key):.2f}" if rs_ else "-"
            p99 = lambda rs_: f"{med(rs_, 'p99_us'):,.0f}" if rs_ else "-"
            print(f"| {c[1]} | {fmt(e)} | {fmt(rs)} | {fmt(rb)} | {ratio(rs)} | {ratio(rb)} "
                  f"| {p99(e)} | {p99(rs)} | {p99(rb)} | {len(e)} |")

    table("log", "entries_per_s", "The Raft log alone (entries appended per second)")
    table("put", "writes_per_s", "Cluster writes (acknowledged writes per second)")
    table("get-linearizable", "reads_per_s", "Linearizable reads (per second)")
    table("get-stale", "reads_per_s", "Stale reads (per second)")

    waves = {s: rs for (c, s), rs in groups.items() if c[0] == "wave"}
    if waves:
        print("\n### Square wave of writes: Ebb's default tuning and tuning off\n")
        print("| store | writes/s in bursts | p99 µs | p99.9 µs | max disk MB | end disk MB | reps |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for s, rs in sorted(waves.items()):
            print(f"| {s} | {med(rs, 'writes_per_s'):,.0f} | {med(rs, 'p99_us'):,.0f} | {med(rs, 'p999_us'):,.0f} "
                  f"| {med(rs, 'disk_bytes_max') / 1e6:.1f} | {med(rs, 'disk_bytes_end') / 1e6:.1f} | {len(rs)} |")

    if len(sys.argv) > 2:
        keys = ["rep", "bench", "phase", "store", "batch", "clients", "value_bytes", "seconds", "appends",
                "entries", "writes", "reads", "entries_per_s", "appends_per_s", "writes_per_s", "reads_per_s",
                "p50_us", "p99_us", "p999_us", "purges", "purge_p99_us", "disk_bytes", "disk_bytes_max",
                "disk_bytes_end", "t", "writing", "ops"]
        with open(sys.argv[2], "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            for r in runs:
                row = dict(r)
                if "series" in r:
                    row["bench"] = "wave"
                w.writerow(row)
                for sample in r.get("series", []):
                    w.writerow({"rep": r["rep"], "bench": "wave-sample", "store": r["store"],
                                "clients": r["clients"], "value_bytes": r["value_bytes"], **sample})


if __name__ == "__main__":
    main()
