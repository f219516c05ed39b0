"""Group commit: the appends queued while the store writes go to it together, in one transaction.

Fifty runs starting at once make hundreds of small appends; one at a time, each waits for every
commit queued before it (on SQLite's one writer connection, or one PostgreSQL round trip each).
Here one append at a time is being written; every append queued meanwhile joins the next group,
up to `max_rows` events, and the group is one transaction (`EventStore.append_together`). Each
append keeps its own outcome: a lost race fails only its own append (the group is then made
again, each append alone), and the caller's retries and deadline work as for a single append.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from engine.store.retries import LEAST_ATTEMPT_SECONDS

MAX_GROUP_ROWS = 1024
"""The most events one group commit writes (a single larger append is still written whole)."""
SMALL_APPEND = 8
"""Appends of at most so many events (a run's decisions) go into the next group before stream chunks."""

WriteTogether = Callable[[Sequence[Sequence[Any]], Sequence[bool]], "list[list[int] | Exception]"]


class _Queued:
    __slots__ = ("events", "retried", "outcome", "taken", "stream")

    def __init__(self, events: Sequence[Any], retried: bool, outcome: asyncio.Future[list[int]]) -> None:
        self.events, self.retried, self.outcome = events, retried, outcome
        self.taken = False
        self.stream = events[0].originator_id if events else None


class AppendGroups:
    """Queues appends and writes them in groups, one group at a time, on a writer thread."""

    def __init__(self, write: WriteTogether, executor: Executor, *, max_rows: int = MAX_GROUP_ROWS) -> None:
        self._write = write
        self._executor = executor
        self.max_rows = max_rows
        self._queue: list[_Queued] = []
        self._committer: asyncio.Future[None] | None = None
        self.written = 0
        """Groups written so far."""

    @property
    def queued(self) -> int:
        """Appends waiting for the next group."""
        return len(self._queue)

    @property
    def writing(self) -> bool:
        """True while a group is being written (or about to be)."""
        return self._committer is not None

    async def append(self, events: Sequence[Any], *, retried: bool, deadline: float | None) -> list[int]:
        """Append with the next group; its notification ids. An append still queued at the deadline is
        dropped (TimeoutError); one whose group has begun is waited for, so its outcome is always known."""
        loop = asyncio.get_running_loop()
        queued = _Queued(events, retried, loop.create_future())
        self._queue.append(queued)
        if self._committer is None:
            self._committer = asyncio.ensure_future(self._commit_queued())
        try:
            if deadline is not None:
                await asyncio.wait({queued.outcome}, timeout=max(deadline - time.monotonic(), LEAST_ATTEMPT_SECONDS))
                if not queued.taken:
                    self._queue.remove(queued)
                    raise TimeoutError("the write waited past the request's deadline for its turn with the store")
            return await asyncio.shield(queued.outcome)
        except asyncio.CancelledError:
            if queued.taken:
                queued.outcome.add_done_callback(unheard)
            else:
                self._queue.remove(queued)  # not made: the caller learns nothing of an attempt it left
            raise

    async def _commit_queued(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                group = self._take_group()
                outcomes: Sequence[list[int] | BaseException]
                try:
                    outcomes = await loop.run_in_executor(
                        self._executor, self._write, [q.events for q in group], [q.retried for q in group])
                except RuntimeError as error:  # the executor shut down (the write returns every other error)
                    outcomes = [error] * len(group)
                except asyncio.CancelledError:  # the loop is closing; the group's outcome is unknown
                    _settle(group, [asyncio.CancelledError()] * len(group))
                    raise
                self.written += 1
                _settle(group, outcomes)
        finally:
            self._committer = None

    def _take_group(self) -> list[_Queued]:
        """The next group: the queue's small appends (decisions) first, then the rest in order, up to `max_rows`."""
        order = self._queue
        if len(order) > 1 and len({q.stream for q in order}) == len(order):  # one append per stream: order is free
            order = sorted(order, key=lambda q: len(q.events) > SMALL_APPEND)
        group: list[_Queued] = []
        rows = 0
        for queued in order:
            if group and rows + len(queued.events) > self.max_rows:
                break
            rows += len(queued.events)
            group.append(queued)
            queued.taken = True
        self._queue = [q for q in self._queue if not q.taken]
        return group


def _settle(group: Sequence[_Queued], outcomes: Sequence[list[int] | BaseException]) -> None:
    for queued, outcome in zip(group, outcomes, strict=True):
        if queued.outcome.done():
            continue
        if isinstance(outcome, asyncio.CancelledError):
            queued.outcome.cancel()
        elif isinstance(outcome, BaseException):
            queued.outcome.set_exception(outcome)
        else:
            queued.outcome.set_result(outcome)


def unheard(outcome: asyncio.Future[Any]) -> None:
    """Take the outcome of an attempt nobody waits for any more (its failure is its caller's or the outage's)."""
    if not outcome.cancelled():
        outcome.exception()
