"""The `ebb` Python package: its dict face, iterators, snapshots, batches,
column families, options, errors, threads, and a model test against a dict
with reopens. Run by tools/test.sh (the README's test command) after it
builds the package into .venv/."""

import os
import random
import subprocess
import sys
import threading

import pytest

import ebb


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


def test_wide_column_entities(path):
    with ebb.Db(path, ebb.Options(merge_operator="stringappend")) as db:
        db.put_entity(b"user", {b"city": b"London", "": b"Ada"})
        assert db.get(b"user") == b"Ada"  # the default column
        assert db.get_entity(b"user") == {b"": b"Ada", b"city": b"London"}
        assert list(db.get_entity(b"user")) == [b"", b"city"], "by name"
        db.put(b"plain", b"v")
        assert db.get_entity(b"plain") == {b"": b"v"}
        assert db.get_entity(b"missing") is None
        assert db.get_entity(b"missing", {}) == {}
        db.merge(b"user", b"Lovelace")
        assert db.get_entity(b"user") == {b"": b"Ada,Lovelace", b"city": b"London"}
        batch = ebb.WriteBatch()
        batch.put_entity(b"pairs", [(b"a", b"1"), (b"b", b"2")])
        db.write(batch)
        assert db.get(b"pairs") == b"" and db.get_entity(b"pairs") == {b"a": b"1", b"b": b"2"}
        it = db.iter()
        it.seek(b"pairs")
        assert it.key() == b"pairs" and it.columns() == {b"a": b"1", b"b": b"2"}
        it.seek(b"plain")
        assert it.columns() == {b"": b"v"}
        it.seek(b"zzz")
        with pytest.raises(ebb.InvalidArgumentError, match="not valid"):
            it.columns()
        with pytest.raises(ebb.InvalidArgumentError, match="given twice"):
            db.put_entity(b"bad", [(b"a", b"1"), ("a", b"2")])
        with pytest.raises(TypeError):
            db.put_entity(b"bad", [(1, b"1")])
    with ebb.Db(path, mode="str") as db:
        db.put_entity("s", {"": "x", "n": "y"})
        assert db.get_entity("s") == {"": "x", "n": "y"}


def test_the_dict_face(path):
    with ebb.Db(path) as db:
        db[b"apple"] = b"red"
        db["banana"] = "yellow"  # str is UTF-8 encoded
        assert db[b"apple"] == b"red"
        assert db[b"banana"] == b"yellow"
        assert b"apple" in db and "banana" in db and b"cherry" not in db
        assert db.get(b"cherry") is None
        assert db.get(b"cherry", b"none") == b"none"
        with pytest.raises(KeyError):
            db[b"cherry"]
        del db[b"apple"]
        assert b"apple" not in db
        with pytest.raises(KeyError):
            del db[b"apple"]
        db.put(b"k", b"v", sync=True)
        db.delete(b"k")
        assert db.get(b"k") is None
        with pytest.raises(TypeError):
            db[42] = b"x"


def test_iterators_both_ways_with_bounds(path):
    with ebb.Db(path) as db:
        for i in range(100):
            db[b"key%03d" % i] = b"value%d" % i
        assert list(db.keys())[:2] == [b"key000", b"key001"]
        assert len(list(db)) == 100
        assert list(db.keys(from_key=b"key095")) == [b"key%03d" % i for i in range(95, 100)]
        assert list(db.keys(from_key=b"key004", backwards=True)) == [b"key%03d" % i for i in range(4, -1, -1)]
        assert list(db.values(lower_bound=b"key010", upper_bound=b"key012")) == [b"value10", b"value11"]
        assert list(db.items(backwards=True, lower_bound=b"key098")) == [(b"key099", b"value99"), (b"key098", b"value98")]
        it = db.iter(upper_bound=b"key050")
        it.seek_to_last()
        assert it.key() == b"key049"
        it.prev()
        assert (it.key(), it.value()) == (b"key048", b"value48")
        it.seek(b"key0305")
        assert it.key() == b"key031"
        it.seek_for_prev(b"key0305")
        assert it.key() == b"key030"
        it.next()
        it.next()
        assert it.key() == b"key032"
        it.seek(b"zzz")
        assert not it.valid()
        with pytest.raises(ebb.InvalidArgumentError):
            it.key()
        it.status()


def test_snapshots_see_the_past(path):
    with ebb.Db(path) as db:
        db[b"a"] = b"1"
        with db.snapshot() as snap:
            db[b"a"] = b"2"
            db[b"b"] = b"new"
            assert snap.get(b"a") == b"1"
            assert snap.get(b"b", b"absent") == b"absent"
            assert [kv for kv in snap.iter().__iter__()] == []  # not positioned
            it = snap.iter()
            it.seek_to_first()
            assert (it.key(), it.value()) == (b"a", b"1")
            it.next()
            assert not it.valid()
            assert snap.sequence < db.snapshot().sequence
        with pytest.raises(ebb.InvalidArgumentError):
            snap.get(b"a")
        assert db[b"a"] == b"2"


def test_batches_apply_together(path):
    with ebb.Db(path, ebb.Options(merge_operator="uint64add")) as db:
        db[b"gone"] = b"x"
        for i in range(10):
            db[b"r%d" % i] = b"x"
        batch = ebb.WriteBatch()
        batch.put(b"a", b"1")
        batch.delete(b"gone")
        batch.merge(b"count", (5).to_bytes(8, "little"))
        batch.merge(b"count", (7).to_bytes(8, "little"))
        batch.delete_range(b"r2", b"r8")
        assert len(batch) == 5
        db.write(batch, sync=True)
        assert db[b"a"] == b"1" and b"gone" not in db
        assert int.from_bytes(db[b"count"], "little") == 12
        assert [k for k in db.keys(from_key=b"r", upper_bound=b"s")] == [b"r0", b"r1", b"r8", b"r9"]
        batch.clear()
        assert len(batch) == 0
        db.merge(b"count", (1).to_bytes(8, "little"))
        assert int.from_bytes(db[b"count"], "little") == 13


def test_column_families_survive_a_reopen(path):
    with ebb.Db(path) as db:
        users = db.create_column_family("users")
        assert users.name == "users"
        db.put(b"ada", b"1815", cf=users)
        db[b"ada"] = b"default"
        batch = ebb.WriteBatch()
        batch.put(b"bob", b"1990", cf=users)
        db.write(batch)
        db.flush(cf=users)
        assert sorted(db.column_families()) == ["default", "users"]
    with ebb.Db(path) as db:
        users = db.get_column_family("users")
        assert db.get(b"ada", cf=users) == b"1815"
        assert db[b"ada"] == b"default"
        assert list(db.keys(cf=users)) == [b"ada", b"bob"]
        with pytest.raises(ebb.InvalidArgumentError):
            db.get_column_family("nobody")
        db.drop_column_family(users)
        assert db.column_families() == ["default"]


def test_options_have_rocksdb_names(path):
    o = ebb.Options(write_buffer_size=1 << 20, compression="kNoCompression", disable_auto_compactions=True)
    assert o.write_buffer_size == str(1 << 20)
    o.max_write_buffer_number = 3
    assert o.get("max_write_buffer_number") == "3"
    back = ebb.Options.from_text(o.to_text())
    assert back.to_text() == o.to_text()
    with pytest.raises(ebb.InvalidArgumentError):
        ebb.Options(no_such_option=1)
    with pytest.raises(ebb.InvalidArgumentError):
        o.compression = "kNoSuchCompression"
    with ebb.Db(path, o) as db:
        db[b"k"] = b"v"
        db.flush()
        assert db.get_property("ebb.num-files-at-level0") == "1"
        db.resume()  # no background error: nothing to recover, nothing changes
        assert db[b"k"] == b"v" and db.get_property("ebb.background-errors") == "0"
        assert db.get_property("ebb.no-such-property") is None
        db.set_options({"disable_auto_compactions": False})
        db.compact_range()
        with pytest.raises(ebb.InvalidArgumentError):
            db.set_options({"num_levels": 3})  # not dynamic


def test_errors_are_exceptions_with_the_engines_messages(path, tmp_path):
    db = ebb.Db(path)
    db[b"k"] = b"v"
    # The LOCK is held: another process cannot open the database.
    code = "import ebb, sys\ntry:\n    ebb.Db(sys.argv[1])\nexcept ebb.BusyError as e:\n    print('busy:', e)\n"
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("busy:") and "lock" in out.stdout.lower(), out.stdout + out.stderr
    db.close()
    with pytest.raises(ebb.EbbError, match="closed"):
        db[b"k"]
    # A directory that is not a database, refused with the engine's words.
    os.makedirs(tmp_path / "other")
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ebb.InvalidArgumentError, match="not empty"):
        ebb.Db(str(tmp_path / "other"))
    # A damaged table: the open or the read fails as corruption, never with
    # a value.
    with ebb.Db(path, ebb.Options(compression="kNoCompression")) as db:
        for i in range(200):
            db[b"key%03d" % i] = b"v" * 100
        db.flush()
    table = next(n for n in os.listdir(path) if n.endswith(".sst"))
    with open(os.path.join(path, table), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x40]))
    # (The open opens every table: damage to a block it reads fails it.)
    with pytest.raises(ebb.CorruptionError, match=table):
        with ebb.Db(path) as db:
            for _ in db.items():
                pass
    assert issubclass(ebb.CorruptionError, ebb.EbbError)


def test_threads_write_at_once(path):
    with ebb.Db(path, ebb.Options(write_buffer_size=64 << 10)) as db:
        def writer(t):
            for i in range(500):
                db[b"t%d-%04d" % (t, i)] = b"%d" % i
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        # The engine releases the GIL: this thread keeps running Python.
        spins = 0
        while any(th.is_alive() for th in threads):
            spins += 1
        for th in threads:
            th.join()
        assert len(list(db.keys())) == 2000
        assert spins > 0


def test_a_model_with_reopens(path):
    rng = random.Random(7)
    model = {}
    db = ebb.Db(path, ebb.Options(write_buffer_size=16 << 10))
    for step in range(3000):
        op = rng.random()
        key = b"k%04d" % rng.randrange(400)
        if op < 0.55:
            value = b"v%d-" % step + b"x" * rng.randrange(50)
            db[key] = value
            model[key] = value
        elif op < 0.75:
            db.delete(key)
            model.pop(key, None)
        elif op < 0.9:
            assert db.get(key) == model.get(key), (step, key)
        elif op < 0.99:
            lo = b"k%04d" % rng.randrange(400)
            want = sorted(k for k in model if k >= lo)[:20]
            got = []
            for k in db.keys(from_key=lo):
                if len(got) == 20:
                    break
                got.append(k)
            assert got == want, step
        else:
            db.close()
            db = ebb.Db(path, ebb.Options(write_buffer_size=16 << 10))
    assert dict(db.items()) == model
    assert list(db.keys(backwards=True)) == sorted(model, reverse=True)
    db.close()
    ebb.destroy(path)
    assert not os.path.exists(os.path.join(path, "CURRENT"))


def test_the_readme_example_runs():
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")).read()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "b'red' [(b'apple', b'red')]"


def test_str_and_pickle_modes(path, tmp_path):
    with ebb.Db(path, mode="str") as db:
        db["ключ"] = "значение"
        assert db["ключ"] == "значение"
        assert list(db.items()) == [("ключ", "значение")]
        with pytest.raises(TypeError):
            db[b"bytes"] = "x"
        batch = ebb.WriteBatch(mode="str")
        batch.put("b", "2")
        db.write(batch)
        assert db.get("b") == "2"
    # The same data read as bytes.
    with ebb.Db(path) as db:
        assert db["ключ".encode()] == "значение".encode()
        db[b"bad"] = b"\xff"
    with ebb.Db(path, mode="str") as db:
        with pytest.raises(ebb.InvalidArgumentError, match="UTF-8"):
            db["bad"]
    with ebb.Db(str(tmp_path / "pickled"), mode="pickle") as db:
        db[("tuple", 1)] = {"a": [1, 2, None]}
        db[7] = None
        assert db[("tuple", 1)] == {"a": [1, 2, None]}
        assert db[7] is None and 7 in db and 8 not in db
        with pytest.raises(KeyError):
            db[8]
        assert sorted(map(repr, db.keys())) == ["('tuple', 1)", "7"]
        with db.snapshot() as s:
            assert s.get(7, "default") is None
            assert s.get(8, "default") == "default"
    with pytest.raises(ebb.InvalidArgumentError, match="mode"):
        ebb.Db(path, mode="json")


def test_checkpoints_and_backups(path, tmp_path):
    with ebb.Db(path) as db:
        for i in range(100):
            db[b"k%03d" % i] = b"v%d" % i
        db.checkpoint(str(tmp_path / "ckpt"))
        with pytest.raises(ebb.InvalidArgumentError, match="already exists"):
            db.checkpoint(str(tmp_path / "ckpt"))
        engine = ebb.BackupEngine(str(tmp_path / "backups"))
        first = engine.create_new_backup(db)
        db[b"k000"] = b"changed"
        second = engine.create_new_backup(db, flush_before_backup=False)
        assert [b["backup_id"] for b in engine.backup_info()] == [first, second]
        engine.verify_backup(first)
        engine.restore_db_from_backup(first, str(tmp_path / "restored"))
        with pytest.raises(ebb.InvalidArgumentError, match="overwrite"):
            engine.restore_db_from_latest_backup(str(tmp_path / "restored"))
        engine.restore_db_from_latest_backup(str(tmp_path / "restored"), overwrite=True)
        engine.purge_old_backups(1)
        assert [b["backup_id"] for b in engine.backup_info()] == [second]
    with ebb.Db(str(tmp_path / "ckpt")) as copy:
        assert copy[b"k000"] == b"v0" and len(list(copy.keys())) == 100
    with ebb.Db(str(tmp_path / "restored")) as restored:
        assert restored[b"k000"] == b"changed"


def test_close_ends_the_iterators_and_snapshots_made_from_the_database(path):
    db = ebb.Db(path)
    for i in range(10):
        db[b"k%d" % i] = b"v"
    items = db.items()
    next(items)  # half read
    it = db.iter()
    it.seek_to_first()
    snap = db.snapshot()
    at_snap = snap.iter()
    db.close()
    # Closed for real: the same process opens it again at once...
    with ebb.Db(path) as again:
        assert again[b"k2"] == b"v"
    # ...and what was made from the closed one says so when used.
    for use in (lambda: next(items), it.valid, it.next, lambda: snap.get(b"k1"), at_snap.seek_to_first, snap.iter):
        with pytest.raises(ebb.EbbError, match="closed"):
            use()
    snap.release()  # harmless now


def test_an_iterator_made_in_a_with_block_does_not_keep_the_database(path):
    with ebb.Db(path) as db:
        db[b"a"] = b"1"
        keys = db.keys()
        assert next(keys) == b"a"
    with ebb.Db(path) as db:
        assert db[b"a"] == b"1"
    with pytest.raises(ebb.EbbError, match="closed"):
        next(keys)
