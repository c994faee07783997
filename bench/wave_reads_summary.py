#!/usr/bin/env python3
"""Per-run figures of a bench/wave_reads.sh series, and their medians.

Usage: bench/wave_reads_summary.py OUT_DIR [CSV]
  Reads SHAPE-VARIANT.REP.json / .read.json (the wave and the read-back) and
  their logs: the wave's ingest, the reader's rate and p99 beside the wave
  (shapes with --readers), the read-back's rate and how many of its keys
  it found (a found key reads its value; an engine that ingested less finds
  fewer), and the L0 files in the tree read back (its "Levels now" line). Writes one row per run to CSV (if
  given) and prints each shape's medians and their ratios.
"""
import csv
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, "*.read.json"))):
    name = os.path.basename(path)[: -len(".read.json")]
    stem, rep = name.rsplit(".", 1)
    shape, variant = stem.split("-", 1)
    base = os.path.join(out, f"{stem}.{rep}")
    with open(base + ".json") as f:
        wave = next(r for r in json.load(f)["results"] if r["name"] == "fillrandom")
    with open(path) as f:
        read = next(r for r in json.load(f)["results"] if r["name"] == "readrandom")
    reader_ops = reader_p99 = ""
    with open(base + ".log") as f:
        m = re.search(r"reader alongside: (\d+) reads/sec .* p99 ([\d.]+) micros", f.read())
        if m:
            reader_ops, reader_p99 = int(m.group(1)), float(m.group(2))
    with open(base + ".read.log") as f:
        text = f.read()
        m = re.search(r"Levels now: L0 (\d+) files", text)
        l0 = int(m.group(1)) if m else 0
        m = re.search(r"\((\d+) of \d+ found\)", text)
        found = int(m.group(1)) if m else ""
    rows.append({
        "shape": shape, "variant": variant, "rep": int(rep),
        "ingest_mb_per_sec": round(wave["mb_per_sec"], 2),
        "reader_ops_per_sec": reader_ops, "reader_p99_micros": reader_p99,
        "readback_ops_per_sec": round(read["ops_per_sec"]), "readback_found": found,
        "l0_files_read_back": l0,
    })

if len(sys.argv) > 2:
    with open(sys.argv[2], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(sorted(rows, key=lambda r: (r["shape"], r["variant"], r["rep"])))

med = {}
for r in rows:
    med.setdefault((r["shape"], r["variant"]), []).append(r)
for (shape, variant), rs in sorted(med.items()):
    fig = {k: statistics.median(r[k] for r in rs) for k in ("ingest_mb_per_sec", "readback_ops_per_sec")}
    p99 = [r["reader_p99_micros"] for r in rs if r["reader_p99_micros"] != ""]
    per = " / ".join(f"{r['readback_ops_per_sec']:,}" for r in sorted(rs, key=lambda r: r["rep"]))
    l0 = " / ".join(str(r["l0_files_read_back"]) for r in sorted(rs, key=lambda r: r["rep"]))
    l0 += "  found " + " / ".join(str(r["readback_found"]) for r in sorted(rs, key=lambda r: r["rep"]))
    extra = f" reader p99 {statistics.median(p99):.1f} us" if p99 else ""
    print(f"{shape:9} {variant:8} ingest {fig['ingest_mb_per_sec']:6.1f} MB/s  read-back {fig['readback_ops_per_sec']:8,.0f} ({per})  L0 {l0}{extra}")
shapes = sorted({s for s, _ in med})
for shape in shapes:
    m = {v: {k: statistics.median(r[k] for r in rs) for k in ("ingest_mb_per_sec", "readback_ops_per_sec")}
         for (s, v), rs in med.items() if s == shape}
    if "ebb" in m and "rocksdb" in m:
        line = (f"{shape:9} ebb/rocksdb ingest {m['ebb']['ingest_mb_per_sec'] / m['rocksdb']['ingest_mb_per_sec']:.2f}"
                f" read-back {m['ebb']['readback_ops_per_sec'] / m['rocksdb']['readback_ops_per_sec']:.2f}")
        if "before" in m:
            line += (f"; ebb/before read-back {m['ebb']['readback_ops_per_sec'] / m['before']['readback_ops_per_sec']:.2f}"
                     f" ingest {m['ebb']['ingest_mb_per_sec'] / m['before']['ingest_mb_per_sec']:.2f}"
                     f"; before/rocksdb read-back {m['before']['readback_ops_per_sec'] / m['rocksdb']['readback_ops_per_sec']:.2f}")
        print(line)
