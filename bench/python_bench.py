"""Ebb's Python package beside rocksdict (RocksDB) and plyvel (LevelDB), in
one process run after run: put, get, batch write and a full iteration of N
items, each engine with its defaults on a fresh database, the engines
alternating (A B C A B C ...), REPS times; medians (issue 20).

Usage: python bench/python_bench.py [--num N] [--reps R] [--engines ebb,rocksdict,plyvel]
Needs `ebb` (a release wheel: maturin build --release -m crates/ebb-py/Cargo.toml),
and `pip install rocksdict plyvel` in the same environment. Prints one line
per run and the medians; ops/s (items per second).
"""

import argparse
import random
import shutil
import statistics
import tempfile
import time

VALUE = b"v" * 100


def keys(n, seed):
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [b"%016d" % i for i in order]


class DictEngine:
    """An engine with rocksdict's dict face (Ebb's package and rocksdict):
    the same calls for both, so the rows measure the engines."""

    def put(self, k, v):
        self.db[k] = v

    def get(self, k):
        return self.db[k]

    def batch(self, items):
        b = self.new_batch()
        for k, v in items:
            b.put(k, v)
        self.db.write(b)

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def close(self):
        self.db.close()


class Ebb(DictEngine):
    name = "ebb"

    def __init__(self, path):
        import ebb

        self.db = ebb.Db(path)
        self.new_batch = ebb.WriteBatch


class Rocksdict(DictEngine):
    name = "rocksdict"

    def __init__(self, path):
        import rocksdict

        self.db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
        self.new_batch = lambda: rocksdict.WriteBatch(raw_mode=True)


class Plyvel:
    name = "plyvel"

    def __init__(self, path):
        import plyvel

        self.db = plyvel.DB(path, create_if_missing=True)

    def put(self, k, v):
        self.db.put(k, v)

    def get(self, k):
        return self.db.get(k)

    def batch(self, items):
        with self.db.write_batch() as b:
            for k, v in items:
                b.put(k, v)

    def scan(self):
        n = 0
        for _ in self.db:
            n += 1
        return n

    def close(self):
        self.db.close()


ENGINES = {"ebb": Ebb, "rocksdict": Rocksdict, "plyvel": Plyvel}


def run(engine, num, seed):
    """ops/s of put, get, batch and scan on one fresh database."""
    ks = keys(num, seed)
    out = {}
    d = tempfile.mkdtemp(prefix="pybench-")
    try:
        db = engine(d + "/put")
        t = time.perf_counter()
        for k in ks:
            db.put(k, VALUE)
        out["put"] = num / (time.perf_counter() - t)
        gets = ks[:]
        random.Random(seed + 1).shuffle(gets)
        t = time.perf_counter()
        for k in gets:
            db.get(k)
        out["get"] = num / (time.perf_counter() - t)
        t = time.perf_counter()
        seen = db.scan()
        out["iterate"] = num / (time.perf_counter() - t)
        assert seen == num, (engine.name, seen)
        db.close()
        db = engine(d + "/batch")
        t = time.perf_counter()
        for i in range(0, num, 1000):
            db.batch((k, VALUE) for k in ks[i : i + 1000])
        out["batch"] = num / (time.perf_counter() - t)
        db.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--num", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--engines", default="ebb,rocksdict,plyvel")
    a = p.parse_args()
    names = a.engines.split(",")
    results = {n: {} for n in names}
    for rep in range(a.reps):
        for n in names:
            r = run(ENGINES[n], a.num, rep)
            for op, v in r.items():
                results[n].setdefault(op, []).append(v)
            print(n, rep + 1, " ".join(f"{op}={v:,.0f}" for op, v in r.items()), flush=True)
    print("\nmedians (ops/s) and ratio to the first engine's:")
    for op in ["put", "get", "batch", "iterate"]:
        base = statistics.median(results[names[0]][op])
        row = [f"{op:8}"]
        for n in names:
            m = statistics.median(results[n][op])
            row.append(f"{n} {m:,.0f} ({base / m:.2f}x)")
        print("  ".join(row))


if __name__ == "__main__":
    main()
