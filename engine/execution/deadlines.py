"""Paused runs keep their time limit: a run waiting for an answer fails when the limit passes.

The limit counts from the run's start, pause included. Answering or cancelling disarms the
deadline; recovery arms it again for every paused run, so it holds across a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any
from uuid import UUID

from engine.clock import utcnow

Expiry = Callable[[UUID], Coroutine[Any, Any, None]]


class PauseDeadlines:
    """One timer per paused run; when it fires, `on_expire(run_id)` runs as a task of its own."""

    def __init__(self, limit_seconds: float, on_expire: Expiry) -> None:
        self.limit_seconds = limit_seconds
        self.on_expire = on_expire
        self._timers: dict[UUID, asyncio.TimerHandle] = {}
        self._expiring: set[asyncio.Task[None]] = set()

    def arm(self, run_id: UUID, started_at: datetime | None) -> None:
        """Expire the run once its time limit from `started_at` (none recorded: now) has passed."""
        self.disarm(run_id)
        started = started_at or utcnow()
        remaining = self.limit_seconds - (utcnow() - started).total_seconds()
        loop = asyncio.get_running_loop()
        self._timers[run_id] = loop.call_later(max(0.0, remaining), self._expire_soon, run_id)

    def disarm(self, run_id: UUID) -> None:
        """Forget the run's deadline (it was answered or cancelled)."""
        handle = self._timers.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    def stop(self) -> list[asyncio.Task[None]]:
        """Cancel every deadline and every expiry under way; the expiries, for the caller to wait for."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        expiring = list(self._expiring)
        for task in expiring:
            task.cancel()
        return expiring

    def _expire_soon(self, run_id: UUID) -> None:
        self._timers.pop(run_id, None)
        task = asyncio.ensure_future(self.on_expire(run_id))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)
