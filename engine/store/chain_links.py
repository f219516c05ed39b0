"""The hash chain at append time: the cells of rows about to be stored, from each stream's last link.

Computed on the writer thread for every append attempt, so an append that lost a race to
another process (and is decided again at later positions) is chained again from what that
process stored. A stream's last link is remembered after each append this process made (a
stored link never changes, so the memory cannot go stale); otherwise it is read from the row
before. That row having no link means the stream was stored before the chain existed: its
chain starts here, from link(0).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.chain import ChainCells, cells_for, genesis
from domain.erasure import may_hold_content, skeleton_of

CHAIN_COLUMNS = ("chain_link", "chain_skeleton", "chain_content")
"""The events table's columns for `domain.chain.ChainCells`, in its field order (NULL: none)."""
REMEMBERED_STREAMS = 10_000

StoredLink = Callable[[UUID, int], "bytes | None"]
"""The link stored at a stream position (None: the row has none); raises LookupError when there is no row."""


class UnchainedPosition(LookupError):
    """An append would follow a position that is not stored."""


class ChainLinks:
    """Chains rows to their streams' last links."""

    def __init__(self, stored_link: StoredLink) -> None:
        self._stored_link = stored_link
        self._last: OrderedDict[UUID, tuple[int, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def cells(self, rows: Sequence[StoredEvent]) -> list[ChainCells]:
        """The chain cells of rows to append now, in order (rows of several streams each follow their own)."""
        running: dict[UUID, bytes] = {}
        found = []
        for row in rows:
            stream = _uuid(row.originator_id)
            previous = running.get(stream)
            if previous is None:
                previous = self._link_before(stream, row.originator_version)
            skeleton = skeleton_of(row.state) if may_hold_content(row.topic) else row.state
            cells = cells_for(row.state, skeleton, previous)
            running[stream] = cells.link
            found.append(cells)
        return found

    def stored(self, rows: Sequence[StoredEvent], cells: Sequence[ChainCells]) -> None:
        """Remember each stream's last link after an append of these rows was stored."""
        with self._lock:
            for row, chained in zip(rows, cells, strict=True):
                stream = _uuid(row.originator_id)
                self._last[stream] = (row.originator_version, chained.link)
                self._last.move_to_end(stream)
            while len(self._last) > REMEMBERED_STREAMS:
                self._last.popitem(last=False)

    def _link_before(self, stream: UUID, position: int) -> bytes:
        if position <= 1:
            return genesis(stream)
        with self._lock:
            last = self._last.get(stream)
        if last is not None and last[0] == position - 1:
            return last[1]
        try:
            stored = self._stored_link(stream, position - 1)
        except LookupError:
            raise UnchainedPosition(f"stream {stream.hex}: position {position - 1} is not stored") from None
        return genesis(stream) if stored is None else stored


def _uuid(stream: UUID | str) -> UUID:
    return stream if isinstance(stream, UUID) else UUID(stream)
