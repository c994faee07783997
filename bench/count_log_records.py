#!/usr/bin/env python3
"""Counts the records of a log-format file (a WAL or a MANIFEST: LevelDB's
and RocksDB's format, docs/format.md "Log format"): 32 KiB blocks of
fragments, each with a 7-byte header (masked CRC, length, type), or 11 bytes
for RocksDB's recyclable types. A record is a FULL fragment or a FIRST one.

Usage: bench/count_log_records.py FILE
"""
import struct
import sys

BLOCK = 32 * 1024
FULL, FIRST = 1, 2
RECYCLABLE_FULL, RECYCLABLE_FIRST = 5, 6


def count(data):
    records = 0
    pos = 0
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        length = struct.unpack_from("<H", data, pos + 4)[0]
        kind = data[pos + 6]
        header = 11 if kind >= 5 else 7
        if kind == 0 and length == 0:
            pos += left
            continue
        if kind in (FULL, FIRST, RECYCLABLE_FULL, RECYCLABLE_FIRST):
            records += 1
        pos += header + length
    return records


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        print(count(f.read()))
