"""Retrying model calls: exponential backoff with full jitter, `Retry-After` honoured, one shared budget.

The loop is tenacity's (`AsyncRetrying`); this module only says what it retries (a retryable
`LlmError`), how long it waits (the endpoint's `Retry-After` when it sent one, else a random
wait in an exponentially widening window), when it stops (the budget is spent, or the
endpoint asks for a longer wait than allowed) and how it sleeps (waking early on a cancel).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception
from tenacity.wait import wait_random_exponential

from engine.llm.types import LlmCancelled, LlmError, LlmRetriesExhausted
from engine.waiting import wait_event

T = TypeVar("T")
Announce = Callable[[LlmError, int, float], Awaitable[None]]
"""Told of each retry before its wait: the error, the number of the attempt to come, the wait in seconds."""


class RetryBudget:
    """The retries one visit may still make, shared by every layer: model calls, re-formats, re-runs."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.spent = 0

    @property
    def left(self) -> int:
        """Retries not spent yet."""
        return self.limit - self.spent

    def take(self) -> bool:
        """Spend one retry; False (and nothing spent) when none is left."""
        if self.left <= 0:
            return False
        self.spent += 1
        return True


@dataclass(frozen=True)
class Backoff:
    """How long to wait before a retry: `Retry-After` if the endpoint sent one, else full jitter."""

    base_seconds: float = 1.0
    max_seconds: float = 30.0

    def wait(self, state: RetryCallState) -> float:
        """The wait before the next attempt (tenacity's `wait` strategy)."""
        asked = _error_of(state).retry_after
        if asked is not None:
            return asked
        return wait_random_exponential(multiplier=self.base_seconds, max=self.max_seconds)(state)


def _error_of(state: RetryCallState) -> LlmError:
    assert state.outcome is not None
    error = state.outcome.exception()
    assert isinstance(error, LlmError)
    return error


def is_retryable(error: BaseException) -> bool:
    """True for model failures worth sending again: 408, 429, 5xx, timeouts, broken streams, no connection."""
    return isinstance(error, LlmError) and bool(error.retryable)


class _Policy:
    """The stop, sleep and announce hooks of one retried call, over the shared budget."""

    def __init__(self, budget: RetryBudget, backoff: Backoff, announce: Announce | None,
                 cancel: asyncio.Event | None) -> None:
        self.budget = budget
        self.backoff = backoff
        self.announce = announce
        self.cancel = cancel

    def stop(self, state: RetryCallState) -> bool:
        return self.budget.left <= 0 or state.upcoming_sleep > self.backoff.max_seconds

    async def before_sleep(self, state: RetryCallState) -> None:
        self.budget.take()
        if self.announce is not None:
            await self.announce(_error_of(state), state.attempt_number + 1, state.upcoming_sleep)

    async def sleep(self, seconds: float) -> None:
        if self.cancel is None:
            await asyncio.sleep(seconds)
        elif await wait_event(self.cancel, seconds):
            raise LlmCancelled("cancelled while waiting to retry the model call")

    def give_up(self, state: RetryCallState) -> None:
        last = _error_of(state)
        if state.upcoming_sleep > self.backoff.max_seconds and self.budget.left > 0:
            why = (f"the endpoint asked to wait {state.upcoming_sleep:g} s, "
                   f"more than the {self.backoff.max_seconds:g} s allowed")
        else:
            why = f"the retry budget of {self.budget.limit} is spent"
        raise LlmRetriesExhausted(f"{last} (gave up after {state.attempt_number} attempt(s): {why})",
                                  last, attempts=state.attempt_number, why=why)


async def retried(call: Callable[[int], Awaitable[T]], budget: RetryBudget, backoff: Backoff, *,
                  announce: Announce | None = None, cancel: asyncio.Event | None = None) -> T:
    """`call(attempt number)`, sent again after each retryable error while the budget lasts.

    A retryable error that may not be retried ends in LlmRetriesExhausted; any other error is
    raised as it is; a cancel during a wait is LlmCancelled.
    """
    policy = _Policy(budget, backoff, announce, cancel)
    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable), wait=backoff.wait, stop=policy.stop, sleep=policy.sleep,
        before_sleep=policy.before_sleep, retry_error_callback=policy.give_up,
    )
    numbers = itertools.count(1)

    async def numbered() -> T:
        return await call(next(numbers))

    result: T = await retrying(numbered)
    return result
