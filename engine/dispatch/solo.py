"""SQLite is served by one process: an exclusive lock beside the file, held for the process's life."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class AlreadyServed(Exception):
    """Another process holds the SQLite file's serve lock."""


def hold_serve_lock(database: Path) -> IO[str]:
    """Take `<database>.lock` exclusively without waiting; keep the returned file open to keep the lock."""
    path = database.with_name(database.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise AlreadyServed(f"another flowtrail process (pid {holder}) serves the SQLite file {database}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
