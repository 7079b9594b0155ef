"""Load the ``sqlite-vec`` extension into every new SQLite connection Django opens.

Its functions (``vec_distance_l2`` ...) let the dense ranking run inside SQLite's query, with the
same tenant, visibility and filter conditions as the lexical one: no vector is read into Python.

Python's ``sqlite3`` exposes ``enable_load_extension`` only when the interpreter was built with
loadable-extension support (Debian's is; a pyenv build by default is not). Without it the
extension is loaded through SQLite's own C API on the connection's handle, with the library the
``_sqlite3`` module is linked to: the same two calls ``enable_load_extension`` makes.
"""

from __future__ import annotations

import ctypes
import sqlite3
import sys
from functools import cache
from typing import Any

import sqlite_vec


@cache
def _capi() -> Any:
    import _sqlite3

    lib = ctypes.CDLL(_sqlite3.__file__)  # dlsym on it also finds the libsqlite3 it links to
    lib.sqlite3_enable_load_extension.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.sqlite3_load_extension.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
    ]
    return lib


def _handle(conn: sqlite3.Connection) -> int:
    # CPython's connection object starts with its ``sqlite3 *db`` right after the object header
    # (3.11 to 3.13): the C struct ``pysqlite_Connection``. Other versions are refused rather
    # than guessed at.
    if not ((3, 11) <= sys.version_info[:2] <= (3, 13)) or sys.implementation.name != "cpython":
        raise RuntimeError("this Python's sqlite3 cannot load extensions: sqlite-vec is unavailable")
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle:
        raise RuntimeError("SQLite connection has no handle")
    return handle


def load(conn: sqlite3.Connection) -> None:
    """Load sqlite-vec into ``conn`` (a no-op when already there)."""
    try:
        conn.execute("SELECT vec_version()")
        return
    except sqlite3.OperationalError:
        pass
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        return
    lib, db = _capi(), _handle(conn)
    error = ctypes.c_char_p()
    lib.sqlite3_enable_load_extension(db, 1)
    try:
        failed = lib.sqlite3_load_extension(
            db, sqlite_vec.loadable_path().encode(), None, ctypes.byref(error)
        )
    finally:
        lib.sqlite3_enable_load_extension(db, 0)
    if failed:
        raise RuntimeError(f"could not load sqlite-vec: {(error.value or b'').decode(errors='replace')}")


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: SQLite connections get sqlite-vec."""
    if connection.vendor == "sqlite":
        load(connection.connection)
