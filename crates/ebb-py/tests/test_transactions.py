"""Transactions from Python (docs/python.md, "Transactions"): the context
manager's commit and rollback, conflicts on the optimistic database, locks,
timeouts and deadlocks on the pessimistic one, get_for_update, savepoints,
iterators over a transaction, two-phase commit across a close and a reopen,
the errors of a finished transaction, and the example of docs/python.md.
Run by tools/test.sh with test_ebb.py."""

import os
import subprocess
import sys
import threading
import time

import pytest

import ebb

KINDS = [ebb.TransactionDb, ebb.OptimisticTransactionDb]


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


def lock_waits(db):
    return int(db.get_property("ebb.txn.lock-waits"))


def wait_until(what, cond):
    """Waits, yielding, until cond() holds; fails after ten seconds."""
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, "never happened: " + what
        time.sleep(0.001)


@pytest.mark.parametrize("kind", KINDS)
def test_a_block_commits_at_its_end_and_others_see_nothing_before(path, kind):
    with kind(path) as db:
        assert isinstance(db, ebb.Db)
        db[b"kept"] = b"old"
        with db.transaction() as txn:
            txn.put(b"a", b"1")
            txn[b"b"] = b"2"
            del txn[b"kept"]
            # Its reads see its writes; nobody else's do.
            assert txn.get(b"a") == b"1" and txn[b"b"] == b"2"
            assert b"kept" not in txn and b"a" in txn
            with pytest.raises(KeyError):
                txn[b"kept"]
            assert db.get(b"a") is None and db[b"kept"] == b"old"
            assert txn.state == "started"
        assert txn.state == "committed"
        assert db[b"a"] == b"1" and db[b"b"] == b"2" and b"kept" not in db


@pytest.mark.parametrize("kind", KINDS)
def test_an_exception_rolls_the_block_back_and_goes_on(path, kind):
    with kind(path) as db:
        db[b"a"] = b"before"
        with pytest.raises(ValueError, match="boom"):
            with db.transaction() as txn:
                txn.put(b"a", b"after")
                txn.put(b"b", b"new")
                raise ValueError("boom")
        assert txn.state == "rolled_back"
        assert db[b"a"] == b"before" and b"b" not in db
        # What it held is released: another transaction writes the keys at once.
        with db.transaction() as other:
            other.put(b"a", b"other")
        assert db[b"a"] == b"other"


def test_an_optimistic_conflict_is_busy_and_writes_nothing(path):
    with ebb.OptimisticTransactionDb(path) as db:
        db[b"balance"] = b"10"
        with pytest.raises(ebb.BusyError, match="conflict"):
            with db.transaction() as txn:
                balance = int(txn.get_for_update(b"balance"))
                db[b"balance"] = b"20"  # written by another since the read
                txn.put(b"balance", b"%d" % (balance - 1))
                txn.put(b"other", b"x")
        assert txn.state == "rolled_back"
        assert db[b"balance"] == b"20" and b"other" not in db
        # A plain get keeps nothing from others: no conflict.
        with db.transaction() as txn:
            txn.get(b"balance")
            db[b"balance"] = b"30"
            txn.put(b"other", b"y")
        assert db[b"other"] == b"y"
        # A blind write conflicts too, and with a snapshot so does a key
        # written after it and touched later.
        txn = db.transaction(set_snapshot=True)
        db[b"late"] = b"theirs"
        txn.put(b"late", b"mine")
        with pytest.raises(ebb.BusyError):
            txn.commit()
        txn.rollback()
        assert db[b"late"] == b"theirs"


def test_a_retry_loop_runs_the_transaction_again_after_a_conflict(path):
    with ebb.OptimisticTransactionDb(path) as db:
        db[b"n"] = b"0"
        attempts = 0
        while True:
            attempts += 1
            try:
                with db.transaction() as txn:
                    n = int(txn.get_for_update(b"n"))
                    if attempts == 1:
                        db[b"n"] = b"100"  # another writer gets in first
                    txn.put(b"n", b"%d" % (n + 1))
                break
            except ebb.BusyError:
                continue
        assert attempts == 2 and db[b"n"] == b"101"


def test_a_commit_that_cannot_be_checked_is_try_again(path):
    # One byte of memtable history: the flushes below leave the read's
    # sequence out of reach.
    o = ebb.Options(max_write_buffer_size_to_maintain=1)
    with ebb.OptimisticTransactionDb(path, o) as db:
        db[b"k"] = b"0"
        txn = db.transaction()
        txn.get_for_update(b"k")
        for i in range(3):
            db[b"other%d" % i] = b"x"
            db.flush()
        with pytest.raises(ebb.TryAgainError, match="max_write_buffer_size_to_maintain"):
            txn.commit()


def test_pessimistic_locks_time_out(path):
    with ebb.TransactionDb(path) as db:
        a = db.transaction()
        a.put(b"k", b"a")
        b = db.transaction(lock_timeout=50)
        with pytest.raises(ebb.TimedOutError):
            b.put(b"k", b"b")
        with pytest.raises(ebb.TimedOutError):
            b.get_for_update(b"k")
        assert not issubclass(ebb.TimedOutError, ebb.BusyError)
        a.commit()
        b.put(b"k", b"b")
        b.commit()
        assert db[b"k"] == b"b"


def test_writes_on_a_pessimistic_database_wait_for_transaction_locks(path):
    with ebb.TransactionDb(path, default_lock_timeout=0) as db:
        txn = db.transaction()
        txn.put(b"k", b"txn")
        batch = ebb.WriteBatch()
        batch.put(b"k", b"batch")
        for write in (lambda: db.put(b"k", b"plain"), lambda: db.delete(b"k"), lambda: db.write(batch)):
            with pytest.raises(ebb.TimedOutError):
                write()
        db[b"free"] = b"yes"  # a key no transaction holds
        txn.commit()
        db[b"k"] = b"plain"
        assert db[b"k"] == b"plain" and db[b"free"] == b"yes"


def test_a_lock_wait_lets_other_python_threads_run(path):
    with ebb.TransactionDb(path) as db:
        a = db.transaction()
        a.put(b"k", b"a")
        result = {}

        def second():
            b = db.transaction(lock_timeout=10_000)
            try:
                b.put(b"k", b"b")
                b.commit()
                result["ok"] = True
            except ebb.EbbError as e:
                result["error"] = e

        th = threading.Thread(target=second)
        th.start()
        # The waiting thread released the GIL: this one sees it wait, and
        # commits, which lets it go on.
        wait_until("the second transaction waits", lambda: lock_waits(db) >= 1)
        a.commit()
        th.join()
        assert result == {"ok": True}
        assert db[b"k"] == b"b"


def test_get_for_update_locks_exclusively_or_shared(path):
    with ebb.TransactionDb(path) as db:
        db[b"k"] = b"v"
        a = db.transaction()
        assert a.get_for_update(b"k") == b"v"
        assert a.get_for_update(b"missing") is None
        b = db.transaction(lock_timeout=0)
        with pytest.raises(ebb.TimedOutError):
            b.get_for_update(b"k")
        with pytest.raises(ebb.TimedOutError):
            b.put(b"missing", b"x")
        # A plain get locks nothing.
        assert b.get(b"k") == b"v"
        a.put(b"k", b"mine")
        assert a.get_for_update(b"k") == b"mine"
        a.rollback()
        # Shared: readers together, a writer kept out.
        r1, r2, w = db.transaction(), db.transaction(), db.transaction(lock_timeout=0)
        assert r1.get_for_update(b"k", exclusive=False) == b"v"
        assert r2.get_for_update(b"k", exclusive=False) == b"v"
        with pytest.raises(ebb.TimedOutError):
            w.put(b"k", b"w")
        r1.rollback()
        r2.rollback()
        w.put(b"k", b"w")
        w.commit()
        assert db[b"k"] == b"w"


def test_a_deadlock_is_a_busy_error_told_to_the_one_closing_the_cycle(path):
    with ebb.TransactionDb(path) as db:
        a = db.transaction(deadlock_detect=True, lock_timeout=10_000)
        b = db.transaction(deadlock_detect=True, lock_timeout=10_000)
        a.put(b"x", b"a")
        b.put(b"y", b"b")
        result = {}

        def a_wants_y():
            try:
                a.put(b"y", b"a")
                a.commit()
                result["a"] = "committed"
            except ebb.EbbError as e:
                result["a"] = e

        th = threading.Thread(target=a_wants_y)
        th.start()
        wait_until("a waits for y", lambda: lock_waits(db) >= 1)
        with pytest.raises(ebb.DeadlockError) as caught:
            b.put(b"x", b"b")
        assert isinstance(caught.value, ebb.BusyError)
        b.rollback()
        th.join()
        assert result == {"a": "committed"}
        assert db[b"x"] == b"a" and db[b"y"] == b"a"
        assert db.get_property("ebb.txn.deadlocks") == "1"


def test_an_expired_transaction_loses_its_locks(path):
    with ebb.TransactionDb(path) as db:
        a = db.transaction(expiration=50)
        a.put(b"k", b"a")
        time.sleep(0.3)
        b = db.transaction(lock_timeout=0)
        b.put(b"k", b"b")  # takes the expired transaction's lock
        with pytest.raises(ebb.ExpiredError):
            a.commit()
        assert a.state == "locks_stolen"
        b.commit()
        assert db[b"k"] == b"b"


@pytest.mark.parametrize("kind", KINDS)
def test_savepoints_undo_what_came_after_them(path, kind):
    with kind(path) as db:
        with db.transaction() as txn:
            txn.put(b"a", b"1")
            txn.set_save_point()
            txn.put(b"b", b"2")
            txn.delete(b"a")
            txn.rollback_to_save_point()
            assert txn.get(b"a") == b"1" and txn.get(b"b") is None
            with pytest.raises(ebb.NotFoundError):
                txn.rollback_to_save_point()
            with pytest.raises(ebb.NotFoundError):
                txn.pop_save_point()
            # Nested: popping the inner one keeps its writes for the outer.
            txn.set_save_point()
            txn.put(b"c", b"3")
            txn.set_save_point()
            txn.put(b"d", b"4")
            txn.pop_save_point()
            assert txn.get(b"d") == b"4"
            txn.rollback_to_save_point()
            assert txn.get(b"c") is None and txn.get(b"d") is None
        assert dict(db.items()) == {b"a": b"1"}


def test_a_savepoint_rollback_unlocks_the_keys_locked_since(path):
    with ebb.TransactionDb(path) as db:
        txn = db.transaction()
        txn.put(b"before", b"x")
        txn.set_save_point()
        txn.put(b"after", b"x")
        other = db.transaction(lock_timeout=0)
        with pytest.raises(ebb.TimedOutError):
            other.put(b"after", b"other")
        txn.rollback_to_save_point()
        other.put(b"after", b"other")
        with pytest.raises(ebb.TimedOutError):
            other.put(b"before", b"other")
        other.commit()
        txn.commit()
        assert db[b"after"] == b"other" and db[b"before"] == b"x"


@pytest.mark.parametrize("kind", KINDS)
def test_iterators_read_the_transactions_writes_over_the_database(path, kind):
    with kind(path) as db:
        for k in (b"a", b"c", b"e"):
            db[k] = b"db-" + k
        txn = db.transaction()
        txn.put(b"b", b"txn-b")
        txn.put(b"e", b"txn-e")
        txn.delete(b"c")
        assert list(txn.items()) == [(b"a", b"db-a"), (b"b", b"txn-b"), (b"e", b"txn-e")]
        assert list(txn.keys(backwards=True)) == [b"e", b"b", b"a"]
        assert list(txn.values(from_key=b"b", upper_bound=b"e")) == [b"txn-b"]
        assert list(txn) == [b"a", b"b", b"e"]
        it = txn.iter(lower_bound=b"b")
        it.seek_to_first()
        assert (it.key(), it.value()) == (b"b", b"txn-b")
        # The transaction cannot change while an iterator over it lives.
        with pytest.raises(ebb.InvalidArgumentError, match="iterator"):
            txn.put(b"z", b"z")
        with pytest.raises(ebb.InvalidArgumentError, match="iterator"):
            txn.commit()
        assert txn.get(b"b") == b"txn-b"  # reads are fine
        del it
        txn.put(b"z", b"z")
        txn.commit()
        assert list(db.keys()) == [b"a", b"b", b"e", b"z"]
        # A block left by an exception with an iterator still open: the
        # exception goes on, nothing is committed, and the transaction is
        # rolled back when dropped.
        with pytest.raises(KeyError, match="mine"):
            with db.transaction() as txn:
                txn.put(b"q", b"q")
                it = txn.iter()
                raise KeyError("mine")
        assert txn.state == "started" and b"q" not in db
        del it, txn
        with db.transaction() as other:
            other.put(b"q", b"other")
        assert db[b"q"] == b"other"


@pytest.mark.parametrize("kind", KINDS)
def test_reads_at_the_transactions_snapshot(path, kind):
    with kind(path) as db:
        db[b"k"] = b"old"
        txn = db.transaction(set_snapshot=True)
        db[b"k"] = b"new"
        db[b"n"] = b"new"
        assert txn.get(b"k") == b"new"
        assert txn.get(b"k", at_snapshot=True) == b"old"
        assert txn.multi_get([b"k", b"n", b"none"], at_snapshot=True) == [b"old", None, None]
        assert list(txn.keys(at_snapshot=True)) == [b"k"]
        assert list(txn.keys()) == [b"k", b"n"]
        txn.rollback()


@pytest.mark.parametrize("kind", KINDS)
def test_column_families_merges_and_multi_get_in_a_transaction(path, kind):
    o = ebb.Options(merge_operator="uint64add")
    with kind(path, o) as db:
        users = db.create_column_family("users", o)
        db.put(b"ada", b"default", cf=None)
        with db.transaction() as txn:
            txn.put(b"ada", b"1815", cf=users)
            txn.put(b"bob", b"1990", cf=users)
            txn.merge(b"count", (5).to_bytes(8, "little"))
            txn.merge(b"count", (7).to_bytes(8, "little"))
            assert txn.multi_get([b"ada", b"bob", b"cy"], cf=users) == [b"1815", b"1990", None]
            assert int.from_bytes(txn.get(b"count"), "little") == 12
            assert list(txn.keys(cf=users)) == [b"ada", b"bob"]
    with kind(path, o) as db:
        users = db.get_column_family("users")
        assert db.get(b"ada", cf=users) == b"1815" and db[b"ada"] == b"default"
        assert int.from_bytes(db[b"count"], "little") == 12


def test_transactions_in_str_mode(path):
    with ebb.TransactionDb(path, mode="str") as db:
        with db.transaction() as txn:
            txn["ключ"] = "значение"
            assert txn["ключ"] == "значение"
            assert list(txn.items()) == [("ключ", "значение")]
            with pytest.raises(TypeError):
                txn.put(b"bytes", "x")
        assert db["ключ"] == "значение"


def test_prepare_then_commit_across_a_close_and_a_reopen(path):
    db = ebb.TransactionDb(path)
    txn = db.transaction(sync=True)
    txn.set_name("xid-1")
    txn.put(b"a", b"1")
    txn.prepare()
    assert txn.state == "prepared" and txn.name == "xid-1"
    assert db.get(b"a") is None, "prepared, not committed"
    with pytest.raises(ebb.InvalidArgumentError, match="prepared"):
        txn.put(b"c", b"3")
    other = db.transaction()
    with pytest.raises(ebb.InvalidArgumentError, match="in use"):
        other.set_name("xid-1")
    # Prepared then committed in a block.
    with db.transaction() as done:
        done.set_name("xid-2")
        done.put(b"z", b"9")
        done.prepare()
    assert done.state == "committed" and db[b"z"] == b"9"
    # Closed with txn prepared and still referenced: the close ends it, so
    # the database can be opened again.
    db.close()
    with pytest.raises(ebb.EbbError, match="closed"):
        txn.commit()
    with ebb.TransactionDb(path) as db:
        assert db.get(b"a") is None and db[b"z"] == b"9"
        # Its key is locked again.
        with pytest.raises(ebb.TimedOutError):
            db.transaction(lock_timeout=0).put(b"a", b"x")
        [found] = db.prepared_transactions()
        assert found.name == "xid-1" and found.state == "prepared"
        assert found.get(b"a") == b"1", "its writes are in it"
        found.commit()
        assert db[b"a"] == b"1"
        assert db.prepared_transactions() == []
    with ebb.TransactionDb(path) as db:
        assert db.prepared_transactions() == [], "committed once, not again"
        assert db[b"a"] == b"1"


def test_a_prepared_transaction_rolled_back_after_a_reopen_leaves_nothing(path):
    with ebb.TransactionDb(path) as db:
        for name, key in (("keep", b"k"), ("drop", b"d")):
            txn = db.transaction()
            txn.set_name(name)
            txn.put(key, b"v")
            txn.prepare()
        del txn
    with ebb.TransactionDb(path) as db:
        found = {t.name: t for t in db.prepared_transactions()}
        assert sorted(found) == ["drop", "keep"]
        found["drop"].rollback()
        assert found["drop"].state == "rolled_back"
        found["keep"].commit()
    with ebb.TransactionDb(path) as db:
        assert db.prepared_transactions() == []
        assert db[b"k"] == b"v" and b"d" not in db


def test_optimistic_transactions_have_no_two_phase_commit(path):
    with ebb.OptimisticTransactionDb(path) as db:
        txn = db.transaction()
        with pytest.raises(ebb.NotSupportedError):
            txn.set_name("x")
        with pytest.raises(ebb.NotSupportedError):
            txn.prepare()
        assert not hasattr(db, "prepared_transactions")


@pytest.mark.parametrize("kind", KINDS)
def test_a_finished_transaction_refuses_everything(path, kind):
    with kind(path) as db:
        txn = db.transaction()
        txn.put(b"k", b"v")
        txn.commit()
        for call in (
            lambda: txn.put(b"k", b"w"),
            lambda: txn.get(b"k"),
            lambda: txn.get_for_update(b"k"),
            lambda: txn.delete(b"k"),
            lambda: txn.iter(),
            lambda: txn.commit(),
            lambda: txn.rollback(),
        ):
            with pytest.raises(ebb.InvalidArgumentError, match="already been committed"):
                call()
        rolled = db.transaction()
        rolled.rollback()
        with pytest.raises(ebb.InvalidArgumentError, match="already been rolled back"):
            rolled.put(b"k", b"w")
        # A block whose transaction was finished inside it leaves it so.
        with db.transaction() as inner:
            inner.put(b"k", b"rolled back")
            inner.rollback()
        with db.transaction() as inner:
            inner.put(b"k", b"committed")
            inner.commit()
        assert db[b"k"] == b"committed"


@pytest.mark.parametrize("kind", KINDS)
def test_close_ends_open_transactions(path, kind):
    db = kind(path)
    txn = db.transaction()
    txn.put(b"k", b"never committed")
    db.close()
    with pytest.raises(ebb.EbbError, match="closed"):
        txn.get(b"k")
    # The database closed: it opens again, without the transaction's write.
    with kind(path) as db:
        assert b"k" not in db
    assert repr(db) == '%s("%s")' % (kind.__name__, path)


def test_the_docs_example_runs(tmp_path):
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "python.md")).read()
    code = doc.split("## Transactions", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"/tmp/', '"%s/' % tmp_path)
    code += (
        "\nwith ebb.TransactionDb(%r) as db:\n    print(db[b'alice'], db[b'bob'])\n"
        "with ebb.OptimisticTransactionDb(%r) as db:\n    print(db[b'n'])\n"
    ) % (str(tmp_path / "accounts"), str(tmp_path / "counters"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["b'90'", "b'10'", "b'1'"]


@pytest.mark.parametrize("kind", KINDS)
def test_close_ends_a_transactions_open_iterator(path, kind):
    db = kind(path)
    db[b"a"] = b"1"
    txn = db.transaction()
    txn.put(b"b", b"never committed")
    it = txn.iter()
    it.seek_to_first()
    assert it.key() == b"a"
    db.close()
    # The iterator held the transaction, which held the database: all ended.
    with kind(path) as again:
        assert again[b"a"] == b"1" and b"b" not in again
    with pytest.raises(ebb.EbbError, match="closed"):
        it.valid()
