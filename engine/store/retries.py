"""Store calls retried while the store is away, for as long as the caller may wait.

Inside an HTTP request that is until the request's deadline (`engine.store.deadline`), else
`retry_seconds`; then `StoreUnavailable` is raised. Backoff is capped exponential with jitter
(tenacity). The outage is logged once per episode (`engine.store.faults`), never per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_before_delay, wait_exponential_jitter

from engine.store.deadline import REQUEST_DEADLINE
from engine.store.event_store import StoreUnavailable
from engine.store.faults import Outage, first_line, is_passing
from engine.store.location import POOL_WAIT_SECONDS

T = TypeVar("T")
RETRY_SECONDS = 30.0
"""Outside a request, how long a read or write is retried while the store is away."""
FIRST_BACKOFF_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 1.0
"""Retries wait 0.05 s, then twice as long each time (with jitter), at most 1 s."""
LEAST_ATTEMPT_SECONDS = 0.25
"""An operation started at or after its request's deadline still gets this long for one attempt."""
ANSWER_SECONDS = 0.05
"""In a request, the store gives up this long before the deadline, so the 503 itself is sent by then."""
WRITE_ATTEMPT_SECONDS = POOL_WAIT_SECONDS
"""A write attempt that has begun is never cut; in a request, writes stop retrying this much before the deadline
(an attempt in an outage lasts at most the pool's wait for a connection), so the answer still comes in time."""


class StoreRetries:
    """Retries of one store's calls while it is away, reported to its outage."""

    def __init__(self, outage: Outage, retry_seconds: float = RETRY_SECONDS) -> None:
        self.outage = outage
        self.retry_seconds = retry_seconds

    async def bounded(self, attempt: Callable[[], Awaitable[T]], what: str, *, write: bool = False) -> T:
        """`attempt()` retried while the store is away, within the caller's time; StoreUnavailable after it.

        In a request, retries stop at the request's deadline, and a read's attempt is cut there;
        a write's attempt is never cut once it has begun (its outcome would be unknown: it could
        still commit after the caller was told it failed), so writes stop retrying a little
        earlier. Outside a request, retries stop after `retry_seconds`. The first attempt goes
        straight through: retrying costs nothing while the store answers.
        """
        deadline = REQUEST_DEADLINE.get()
        in_request = deadline is not None
        if deadline is None:
            deadline = time.monotonic() + self.retry_seconds
        else:
            deadline -= ANSWER_SECONDS + (WRITE_ATTEMPT_SECONDS if write else 0.0)
        cut = deadline if in_request and not write else None
        try:
            result = await self._once(attempt, cut)
        except Exception as error:
            if not is_passing(error):
                raise
            self.outage.failed(error, what)
            result = await self._retried(attempt, deadline, cut, what)
        if self.outage.ongoing:
            self.outage.succeeded()
        return result

    @staticmethod
    async def _once(attempt: Callable[[], Awaitable[T]], cut: float | None) -> T:
        if cut is None:
            return await attempt()
        async with asyncio.timeout(max(cut - time.monotonic(), LEAST_ATTEMPT_SECONDS)):
            return await attempt()

    async def _retried(self, attempt: Callable[[], Awaitable[T]], deadline: float, cut: float | None, what: str) -> T:
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_passing),
            stop=stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=wait_exponential_jitter(multiplier=FIRST_BACKOFF_SECONDS, max=MAX_BACKOFF_SECONDS, jitter=FIRST_BACKOFF_SECONDS),
            before_sleep=lambda state: self._failed(state, what),
            reraise=True,
        )
        try:
            found: T = await retrying(self._once, attempt, cut)
        except Exception as error:
            if not is_passing(error):
                raise
            self.outage.failed(error, what)
            raise StoreUnavailable(
                f"the event store is unavailable ({first_line(error)}); try again later", operation=what,
            ) from error
        return found

    def _failed(self, state: RetryCallState, what: str) -> None:
        if state.outcome is not None and state.outcome.failed:
            error = state.outcome.exception()
            if error is not None:
                self.outage.failed(error, what)
