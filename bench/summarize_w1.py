#!/usr/bin/env python3
"""Summarise bench/w1.sh's JSON reports: median ops/s per benchmark and
variant, each repetition's figure, and the ratio of medians to a baseline.

Usage: bench/summarize_w1.py OUT_DIR [BASELINE]   (BASELINE default: off)
"""
import collections
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
base = sys.argv[2] if len(sys.argv) > 2 else "off"
runs = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for path in sorted(glob.glob(os.path.join(out, "*.json")), key=lambda p: (p.split(".")[-2], p)):
    name = os.path.basename(path).split(".")[0]
    with open(path) as f:
        report = json.load(f)
    for r in report["results"]:
        if r["name"] == "stats":
            continue
        if r["name"] not in order:
            order.append(r["name"])
        runs[r["name"]][name].append(r["ops_per_sec"])
variants = sorted({v for b in runs.values() for v in b}, key=lambda v: (v != base, v))
print("| benchmark | " + " | ".join(f"{v} ops/s (median; per rep)" for v in variants) + " | "
      + " | ".join(f"{v} / {base}" for v in variants if v != base) + " |")
print("|---" * (2 * len(variants)) + "|")
for b in order:
    meds = {v: statistics.median(runs[b][v]) for v in variants if runs[b][v]}
    cells = [f"{meds[v]:,.0f} ({' / '.join(f'{x/1000:.0f}K' for x in runs[b][v])})" for v in variants]
    ratios = [f"{meds[v] / meds[base]:.2f}" for v in variants if v != base and base in meds]
    print(f"| {b} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
