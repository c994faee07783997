"""Ebb for Python: an embeddable, persistent LSM-tree key-value store.

A dict-like face on the engine, as rocksdict's ``Rdict``::

    import ebb
    with ebb.Db("/tmp/example") as db:
        db[b"key"] = b"value"
        assert db[b"key"] == b"value"
        for key, value in db.items():
            print(key, value)

Keys and values are ``bytes`` (a ``str`` given is UTF-8 encoded). Engine
errors are ``EbbError`` and its subclasses. Transactions::

    with ebb.TransactionDb("/tmp/accounts") as db:
        with db.transaction() as txn:        # commits at the end of the block
            balance = int(txn.get_for_update(b"alice") or b"0")
            txn.put(b"alice", b"%d" % (balance - 10))

See docs/python.md.
"""

from ._ebb import (
    BackupEngine,
    BusyError,
    ColumnFamily,
    CorruptionError,
    Db,
    DeadlockError,
    EbbError,
    ExpiredError,
    InvalidArgumentError,
    IOError,
    Iterator,
    NotFoundError,
    NotSupportedError,
    OptimisticTransactionDb,
    Options,
    Snapshot,
    TimedOutError,
    Transaction,
    TransactionDb,
    TryAgainError,
    WriteBatch,
    destroy,
)

__all__ = [
    "BackupEngine",
    "BusyError",
    "ColumnFamily",
    "CorruptionError",
    "Db",
    "DeadlockError",
    "EbbError",
    "ExpiredError",
    "InvalidArgumentError",
    "IOError",
    "Iterator",
    "NotFoundError",
    "NotSupportedError",
    "OptimisticTransactionDb",
    "Options",
    "Snapshot",
    "TimedOutError",
    "Transaction",
    "TransactionDb",
    "TryAgainError",
    "WriteBatch",
    "destroy",
]
