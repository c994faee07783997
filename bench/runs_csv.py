#!/usr/bin/env python3
"""Flatten ebb-bench JSON reports into one CSV row per run and benchmark:
the raw data kept beside a docs/benchmarks.md table.

Usage: bench/runs_csv.py OUT_DIR [SERIES] > runs.csv
  Reports are named VARIANT.REP.json or VARIANT.REP.PART.json (w1.sh, w2.sh,
  w5.sh); the columns are series, variant, rep, part, benchmark, ops,
  elapsed_secs, ops_per_sec, mb_per_sec.
"""
import csv
import glob
import json
import os
import sys

out = sys.argv[1]
series = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(os.path.normpath(out))
w = csv.writer(sys.stdout)
w.writerow(["series", "variant", "rep", "part", "benchmark", "ops", "elapsed_secs", "ops_per_sec", "mb_per_sec"])
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    parts = os.path.basename(path)[: -len(".json")].split(".")
    variant, rep = parts[0], parts[1]
    part = ".".join(parts[2:]) or "main"
    with open(path) as f:
        report = json.load(f)
    for r in report.get("results", []):
        if r.get("skipped"):
            continue
        w.writerow([series, variant, rep, part, r["name"], r.get("ops"), r.get("elapsed_secs"),
                    r.get("ops_per_sec"), r.get("mb_per_sec")])
