"""Range reads of one stream straight from the library's SQLite table, on reader threads.

The library's `select_events` builds a `StoredEvent` and parses a UUID per row and
shares the writers' connection. Reading `(position, tag, state)` on read-only
connections of our own is 3-5x faster and never waits behind a write (WAL mode).
PostgreSQL reads are the asyncpg equivalent in `engine.store.async_store`.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import UUID

Row = tuple[int, str, bytes]
LineRow = tuple[int, bytes, bytes | None, bytes | None, bytes | None]
"""(position, state, chain link, skeleton digest, content digest) of one stored event."""
LINE_COLUMNS = "originator_version, state, chain_link, chain_skeleton, chain_content"


class ReadOnlyConnections:
    """Read-only connections to one SQLite file, one per thread that asks, all closed together."""

    def __init__(self, path: Path) -> None:
        self.uri = f"{path.resolve().as_uri()}?mode=ro"
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.uri, uri=True, check_same_thread=False, isolation_level=None)
            self._local.connection = connection
            with self._lock:
                self._opened.append(connection)
        return connection

    def close(self) -> None:
        """Close every connection opened so far (their threads have stopped)."""
        with self._lock:
            for connection in self._opened:
                connection.close()
            self._opened.clear()


class SqliteStreamReader:
    """Reads a stream's rows with read-only connections, one per reader thread."""

    def __init__(self, path: Path, table: str, *, threads: int = 2) -> None:
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="flowtrail-read")
        self._connections = ReadOnlyConnections(path)
        quoted = '"{}"'.format(table.replace('"', '""'))
        self._select = (
            f"SELECT originator_version, topic, state FROM {quoted} "
            "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version LIMIT ?"
        )
        self._select_lines = (
            f"SELECT {LINE_COLUMNS} FROM {quoted} "
            "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version LIMIT ?"
        )
        self._select_head = (
            f"SELECT originator_version, chain_link FROM {quoted} WHERE originator_id = ? "
            "ORDER BY originator_version DESC LIMIT 1"
        )
        self._select_last = f"SELECT COALESCE(MAX(originator_version), 0) FROM {quoted} WHERE originator_id = ?"
        self._select_any = f"SELECT 1 FROM {quoted} LIMIT 1"

    def rows(self, stream_id: UUID, after: int, limit: int | None) -> list[Row]:
        """(position, tag, state) of the stream's rows after `after`, in order."""
        return self._connections.get().execute(self._select, (stream_id.hex, after, -1 if limit is None else limit)).fetchall()

    def lines(self, stream_id: UUID, after: int, limit: int | None) -> list[LineRow]:
        """The stream's stored JSON and chain cells after `after`, in order."""
        return self._connections.get().execute(self._select_lines, (stream_id.hex, after, -1 if limit is None else limit)).fetchall()

    def head(self, stream_id: UUID) -> tuple[int, bytes | None] | None:
        """(position, chain link) of the stream's last event (None: no such stream)."""
        found = self._connections.get().execute(self._select_head, (stream_id.hex,)).fetchone()
        return None if found is None else (found[0], found[1])

    def last_position(self, stream_id: UUID) -> int:
        """The stream's last position (0: no such stream)."""
        return int(self._connections.get().execute(self._select_last, (stream_id.hex,)).fetchone()[0])

    def check_readable(self) -> None:
        """Open the file anew and query the table (the kept connections could go on reading a file gone bad)."""
        connection = sqlite3.connect(self._connections.uri, uri=True, check_same_thread=False, isolation_level=None, timeout=1.0)
        try:
            connection.execute(self._select_any).fetchone()
        finally:
            connection.close()

    def close(self) -> None:
        """Stop the reader threads and close their connections."""
        self.executor.shutdown(wait=True)
        self._connections.close()
