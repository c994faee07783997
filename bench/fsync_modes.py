#!/usr/bin/env python3
"""How many durable 100-byte appends a second this disk takes, four ways.

  grow      write to the end of a growing file, then fdatasync (what a WAL
            that is appended to does: the size changes with each sync, so
            the filesystem journals the inode too);
  prealloc  overwrite a file already written and synced to its full size,
            then fdatasync (only the data block is flushed);
  dsync     the same overwrites through O_DSYNC;
  direct    4 KiB aligned overwrites through O_DIRECT | O_DSYNC.

Usage: python3 bench/fsync_modes.py DIR [N] [REPS]; prints one JSON object
per repetition with appends per second for each way. DIR must be on the
disk to measure (not a tmpfs); the files are removed.
"""
import json
import mmap
import os
import sys
import time


def run(path, mode, n):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    if mode != "grow":
        os.write(fd, b"\0" * (n * 4096 + 8192))
        os.fsync(fd)
        os.close(fd)
        extra = {"prealloc": 0, "dsync": os.O_DSYNC, "direct": os.O_DSYNC | os.O_DIRECT}[mode]
        fd = os.open(path, os.O_RDWR | extra)
    block = mmap.mmap(-1, 4096)
    block.write(b"x" * 4096)
    start = time.time()
    for i in range(n):
        if mode == "direct":
            os.pwrite(fd, block, i * 4096)
        elif mode == "dsync":
            os.write(fd, b"x" * 100)
        else:
            os.write(fd, b"x" * 100)
            os.fdatasync(fd)
    elapsed = time.time() - start
    os.close(fd)
    os.unlink(path)
    return round(n / elapsed)


def main():
    directory = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    for rep in range(reps):
        result = {"rep": rep + 1, "appends": n}
        for mode in ["grow", "prealloc", "dsync", "direct"]:
            result[mode] = run(os.path.join(directory, f"fsync-modes-{mode}"), mode, n)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
