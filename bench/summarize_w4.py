#!/usr/bin/env python3
"""Summarise bench/w4.sh's output into markdown tables of medians and ratios.

Usage: bench/summarize_w4.py OUT_DIR

cachebench (files cache.VARIANT.tTHREADS.REP.log, from ebb-bench cachebench or
RocksDB's cache_bench): medians over the repetitions of "Rough parallel
ops/sec" and "Thread ops/sec", in thousands, and each variant's parallel rate
over its baseline at the same thread count (Ebb's caches against RocksDB's
LRU, RocksDB's HyperClockCache against RocksDB's LRU).

readrandom (files read.VARIANT.REP.json, ebb-bench JSON reports): median
ops/s of the readrandom result, and the ratio to RocksDB LRU.
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict

CACHE_ORDER = ["ebb-lru", "ebb-lru-nopromote", "ebb-clock", "rocks-lru", "rocks-hcc",
               "ebb10-lru", "ebb10-clock", "rocks10-lru", "rocks10-hcc"]
READ_ORDER = ["ebb-lru", "ebb-clock", "rocks-lru", "rocks-hcc"]
BASELINE = "rocks-lru"
# cache_bench 10's loop (variants ebb10-*, rocks10-*) is compared with its own
# RocksDB LRU run.
BASELINE10 = "rocks10-lru"


def baseline_of(variant):
    return BASELINE10 if "10-" in variant else BASELINE


def hcc_of(variant):
    """The HyperClockCache run a clock variant is also compared with."""
    return "rocks10-hcc" if "10-" in variant else "rocks-hcc"

PARALLEL = re.compile(r"Rough parallel ops/sec = (\d+)")
THREAD = re.compile(r"Thread ops/sec = (\d+)")
HIT = re.compile(r"Lookup hit ratio: ([0-9.eE+-]+)")


def order(names, preferred):
    return [n for n in preferred if n in names] + sorted(n for n in names if n not in preferred)


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, scale=1.0, digits=0):
    return "-" if x is None else f"{x / scale:,.{digits}f}"


def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"


def cache_table(out):
    runs = defaultdict(lambda: {"parallel": [], "thread": [], "hit": []})
    for path in glob.glob(os.path.join(out, "cache.*.log")):
        m = re.match(r"cache\.(.+)\.t(\d+)\.(\d+)\.log$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            text = f.read()
        p, t = PARALLEL.search(text), THREAD.search(text)
        if not p or not t:
            print(f"warning: no result in {path}", file=sys.stderr)
            continue
        r = runs[(m.group(1), int(m.group(2)))]
        r["parallel"].append(float(p.group(1)))
        r["thread"].append(float(t.group(1)))
        h = HIT.search(text)
        if h:
            r["hit"].append(float(h.group(1)))
    if not runs:
        return
    variants = order({v for v, _ in runs}, CACHE_ORDER)
    threads = sorted({t for _, t in runs})
    print("### cachebench (W4 mix), K ops/s: parallel / per thread (median of reps)\n")
    print(f"(vs: against {BASELINE}, or {BASELINE10} for cache_bench 10's loop)\n")
    print("| cache | " + " | ".join(f"{t} thr parallel | {t} thr per thread | {t} thr vs" for t in threads)
          + " | reps | hit ratio |")
    print("|---|" + "---|---|---|" * len(threads) + "---|---|")
    for v in variants:
        cells = []
        reps = 0
        hits = []
        for t in threads:
            r = runs.get((v, t))
            base = runs.get((baseline_of(v), t))
            par = median(r["parallel"]) if r else None
            thr = median(r["thread"]) if r else None
            cells += [fmt(par, 1e3), fmt(thr, 1e3), ratio(par, median(base["parallel"]) if base else None)]
            if r:
                reps = max(reps, len(r["parallel"]))
                hits += r["hit"]
        print(f"| {v} | " + " | ".join(cells) + f" | {reps} | {fmt(median(hits), 1, 3)} |")
    print()
    clocks = [v for v in variants if v.startswith("ebb") and "clock" in v and any((hcc_of(v), t) in runs for t in threads)]
    if clocks:
        print("Ebb's clock cache against RocksDB's HyperClockCache in the same loop (parallel ops/s, medians):\n")
        print("| cache | " + " | ".join(f"{t} thr" for t in threads) + " |")
        print("|---|" + "---|" * len(threads))
        for v in clocks:
            cells = []
            for t in threads:
                r, h = runs.get((v, t)), runs.get((hcc_of(v), t))
                cells.append(ratio(median(r["parallel"]) if r else None, median(h["parallel"]) if h else None))
            print(f"| {v} vs {hcc_of(v)} | " + " | ".join(cells) + " |")
        print()


def read_table(out):
    runs = defaultdict(list)
    for path in glob.glob(os.path.join(out, "read.*.json")):
        m = re.match(r"read\.(.+)\.(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            report = json.load(f)
        for r in report.get("results", []):
            if r.get("name") == "readrandom" and not r.get("skipped"):
                runs[m.group(1)].append(r["ops_per_sec"])
    if not runs:
        return
    base = median(runs.get(BASELINE, []))
    hcc = median(runs.get("rocks-hcc", []))
    print("### readrandom, 8 threads, database within a 1 GiB block cache (median of reps)\n")
    print(f"| engine and cache | ops/s | vs {BASELINE} | vs rocks-hcc | reps |")
    print("|---|---|---|---|---|")
    for v in order(set(runs), READ_ORDER):
        ops = median(runs[v])
        print(f"| {v} | {fmt(ops)} | {ratio(ops, base)} | {ratio(ops, hcc)} | {len(runs[v])} |")
    print()


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    cache_table(sys.argv[1])
    read_table(sys.argv[1])


if __name__ == "__main__":
    main()
