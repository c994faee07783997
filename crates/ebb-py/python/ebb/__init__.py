"""Ebb for Python: an embeddable, persistent LSM-tree key-value store.

A dict-like face on the engine, as rocksdict's ``Rdict``::

    import ebb
    with ebb.Db("/tmp/example") as db:
        db[b"key"] = b"value"
        assert db[b"key"] == b"value"
        for key, value in db.items():
            print(key, value)

Keys and values are ``bytes`` (a ``str`` given is UTF-8 encoded). Engine
errors are ``EbbError`` and its subclasses. See docs/python.md.
"""

from ._ebb import (
    BackupEngine,
    BusyError,
    ColumnFamily,
    CorruptionError,
    Db,
    EbbError,
    InvalidArgumentError,
    IOError,
    Iterator,
    NotSupportedError,
    Options,
    Snapshot,
    WriteBatch,
    destroy,
)

__all__ = [
    "BackupEngine",
    "BusyError",
    "ColumnFamily",
    "CorruptionError",
    "Db",
    "EbbError",
    "InvalidArgumentError",
    "IOError",
    "Iterator",
    "NotSupportedError",
    "Options",
    "Snapshot",
    "WriteBatch",
    "destroy",
]
