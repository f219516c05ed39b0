"""Erasing a stream's content in place: each event's stored JSON becomes its skeleton, in one transaction
with the event that records the erasure (docs/decisions/0038-erasure-by-redaction-in-place.md).

The one change the store makes to stored events. A chained event keeps its chain: its link is not
touched, and its content digest, which the stored JSON no longer gives, is kept beside it. The
skeleton must hash to the skeleton digest the chain committed to when the event was appended; if it
does not, nothing is erased. On SQLite the freed bytes are overwritten (`secure_delete`) and the
write-ahead log is emptied once the transaction is in the file, so the content is on no page and in
no log; PostgreSQL keeps the old row versions until VACUUM, out of every read and dump.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.chain import ChainCells, digest
from domain.erasure import may_hold_content, skeleton_of
from engine.store.url import qualified_table

CHECKPOINT_TRIES = 50
CHECKPOINT_PAUSE_SECONDS = 0.02
"""An SQLite checkpoint that finds a reader in the log's way is tried again after this pause, a bounded number of times."""


class SkeletonMismatch(Exception):
    """A stored event's skeleton does not hash to what its chain holds: erasing it would break the chain."""


class Redaction(NamedTuple):
    """One stored event to rewrite: its position, its skeleton, and its content digest (None: unchained)."""

    position: int
    skeleton: bytes
    content: bytes | None


@dataclass(frozen=True)
class ErasureSql:
    """The statements of one store's events table."""

    select_rows: str
    update_row: str
    mark: str

    @classmethod
    def of(cls, kind: str, schema: str, table: str) -> ErasureSql:
        """The statements for SQLite (`?`, hex ids) or PostgreSQL (`%s`)."""
        mark = "?" if kind == "sqlite" else "%s"
        name = f'"{table}"' if kind == "sqlite" else qualified_table(schema, table)
        return cls(
            select_rows=(
                f"SELECT originator_version, topic, state, chain_link, chain_skeleton, chain_content FROM {name} "
                f"WHERE originator_id = {mark} ORDER BY originator_version"
            ),
            update_row=(
                f"UPDATE {name} SET state = {mark}, chain_content = {mark} "
                f"WHERE originator_id = {mark} AND originator_version = {mark}"
            ),
            mark=mark,
        )


def redactions(rows: Sequence[Any]) -> list[Redaction]:
    """What erasing these stored rows (position, topic, state, link, skeleton, content) rewrites, in order."""
    found = []
    for position, topic, state, link, skeleton_digest, content_digest in rows:
        if content_digest is not None or not may_hold_content(topic):
            continue
        state = bytes(state)
        skeleton = skeleton_of(state)
        if skeleton is state:
            continue
        if link is not None and (skeleton_digest is None or digest(skeleton) != bytes(skeleton_digest)):
            raise SkeletonMismatch(
                f"position {position}: its skeleton does not hash to the digest its chain holds; nothing was erased"
            )
        found.append(Redaction(position, skeleton, None if link is None else digest(state)))
    return found


Insert = Callable[[Any, Sequence[StoredEvent], Sequence[ChainCells]], list[int]]
"""Inserts rows with their cells on a cursor inside the caller's transaction; their notification ids."""


def rewrite(curs: Any, sql: ErasureSql, stream_key: Any, found: Sequence[Redaction]) -> None:
    """Store each redaction's skeleton and content digest (inside the caller's transaction)."""
    if found:
        curs.executemany(sql.update_row, [(r.skeleton, r.content, stream_key, r.position) for r in found])


def checkpoint_sqlite(datastore: Any) -> None:
    """Move the log into the database file and empty it (TRUNCATE), trying again while a reader holds it."""
    for _ in range(CHECKPOINT_TRIES):
        with datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            busy = cursor.fetchone()[0]
        if not busy:
            return
        time.sleep(CHECKPOINT_PAUSE_SECONDS)


def stream_key(kind: str, stream_id: UUID) -> Any:
    """The stream id as the table stores it (hex text on SQLite)."""
    return stream_id.hex if kind == "sqlite" else stream_id
