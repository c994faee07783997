#!/usr/bin/env python3
"""Summarise the JSON reports of bench/w2.sh or bench/w3.sh into a markdown table.

Usage: bench/summarize.py OUT_DIR [--baseline VARIANT]

For each variant (file names VARIANT.REP.json and VARIANT.REP.read.json) it
prints medians over the repetitions: ingest MB/s over the run (and over burst
time when the run had bursts), compaction MB/s, write amplification, stall %,
p99 write latency, L0 files at the end, and readrandom ops/s afterwards. Runs
with --readers (w2.sh: EXTRA_FLAGS=--readers=N) add the reads during the wave:
the readers' ops/s and p99 over the run, and the worst interval's read p99.
"""
import glob
import json
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def fill_result(report):
    for r in report["results"]:
        if r["name"].startswith("fill"):
            return r
    return report["results"][0]


def figures(run, read):
    r = fill_result(run)
    iv = r.get("intervals") or []
    secs = sum(i["interval_secs"] for i in iv) or r["elapsed_secs"]
    flush = sum(i["flush_mb_per_sec"] * i["interval_secs"] for i in iv)
    comp = sum(i["compaction_mb_per_sec"] * i["interval_secs"] for i in iv)
    ingest = r["mb_per_sec"] * r["elapsed_secs"]
    stall = sum(i["stall_percent"] * i["interval_secs"] for i in iv) / secs if iv else 0.0
    lat = r.get("latency") or {}
    p99 = None
    for name, s in lat.items():
        if name in ("write", "put", "all") or p99 is None:
            p99 = s.get("p99")
    out = {
        "ingest": r["mb_per_sec"],
        "compaction": comp / secs if secs else 0.0,
        "wamp": (flush + comp) / ingest if ingest else 0.0,
        "stall": stall,
        "p99": p99 or 0.0,
        "l0": iv[-1]["l0_files"] if iv else 0,
        "read": fill_result(read)["ops_per_sec"] if read else None,
    }
    readers = r.get("readers")
    if readers:
        out["wave_reads"] = readers["ops_per_sec"]
        out["wave_read_p99"] = (readers.get("latency") or {}).get("p99")
        p99s = [i["reads"]["p99_latency_micros"] for i in iv
                if i.get("reads") and i["reads"].get("p99_latency_micros") is not None]
        out["wave_read_p99_worst"] = max(p99s) if p99s else None
    burst = r.get("burst")
    if burst:
        out["burst_ingest"] = burst.get("mb_per_sec_burst_only")
    # Share of compaction bytes written while the client was writing (W3).
    busy = sum(i["compaction_mb_per_sec"] * i["interval_secs"] for i in iv if i["ingest_mb_per_sec"] > 0.5)
    out["comp_in_bursts_pct"] = 100.0 * busy / comp if comp else 0.0
    return out


def main():
    out_dir = sys.argv[1]
    baseline = None
    if "--baseline" in sys.argv:
        baseline = sys.argv[sys.argv.index("--baseline") + 1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        name = os.path.basename(path)
        if name.endswith(".read.json"):
            continue
        variant, rep, _ = name.rsplit(".", 2)
        read_path = os.path.join(out_dir, f"{variant}.{rep}.read.json")
        read = load(read_path) if os.path.exists(read_path) else None
        runs.setdefault(variant, []).append(figures(load(path), read))
    keys = [("ingest", "ingest MB/s"), ("burst_ingest", "ingest MB/s (bursts)"), ("compaction", "compaction MB/s"),
            ("wamp", "write-amp"), ("stall", "stall %"), ("p99", "p99 write µs"), ("l0", "L0 files at end"),
            ("read", "readrandom ops/s after"), ("wave_reads", "reads/s during wave"),
            ("wave_read_p99", "read p99 µs during wave"), ("wave_read_p99_worst", "worst interval read p99 µs"),
            ("comp_in_bursts_pct", "compaction during writes %")]
    keys = [k for k in keys if any(k[0] in f and f[k[0]] is not None for fs in runs.values() for f in fs)]
    print("| variant | runs | " + " | ".join(label for _, label in keys) + (" | ingest vs " + baseline if baseline else "") + " |")
    print("|---" * (len(keys) + 2 + (1 if baseline else 0)) + "|")
    med = {}
    for variant, fs in runs.items():
        med[variant] = {k: statistics.median([f[k] for f in fs if f.get(k) is not None]) for k, _ in keys
                        if any(f.get(k) is not None for f in fs)}
    for variant, fs in runs.items():
        cells = []
        for k, _ in keys:
            v = med[variant].get(k)
            cells.append("" if v is None else (f"{v:.0f}" if k in ("l0", "read", "p99", "wave_reads") else f"{v:.1f}"))
        ratio = ""
        if baseline and baseline in med:
            ratio = f" | {med[variant]['ingest'] / med[baseline]['ingest']:.2f}"
        print(f"| {variant} | {len(fs)} | " + " | ".join(cells) + ratio + " |")


if __name__ == "__main__":
    main()
