"""Webhook deliveries on the job queue (PostgreSQL): one procrastinate job per delivery, retried by the queue.

Each execution of the job makes one attempt (`Deliverer.attempt`); when the delivery must be tried again the
job raises `TryAgain` and the queue schedules it that many seconds later, in PostgreSQL: a restart, or another
replica, picks it up there. A job whose replica died during an attempt is run again by another replica once
that one's heart-beat is overdue (`JobDispatch.retried_when_stalled`). The job's queueing lock is the
`webhook-id`, so a delivery planned twice (by the replica that appended its trigger and by a start-up's look at
the log) waits in the queue once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import msgspec
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import Job
from procrastinate.retry import BaseRetryStrategy, RetryDecision

from engine.clock import utcnow
from engine.dispatch.jobs import JobDispatch
from engine.webhooks.delivery import FAILED_ATTEMPT_SECONDS, Delivery

WEBHOOK_TASK = "flowtrail.deliver_webhook"
WEBHOOK_QUEUE = "webhooks"
MAX_JOB_RUNS = 10_000


class TryAgain(Exception):
    """The delivery's attempt failed and must be made again after `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"next attempt in {seconds:.1f} s")
        self.seconds = seconds


class AfterTheWait(BaseRetryStrategy):
    """Run the job again when its attempt says, soon after an interruption or a failure of the service itself."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        """When the job runs again (None: never; its attempt ended the delivery)."""
        if isinstance(exception, TryAgain):
            return RetryDecision(retry_at=utcnow() + timedelta(seconds=exception.seconds))
        if isinstance(exception, asyncio.CancelledError):
            return RetryDecision(retry_in={"seconds": 0})
        if job.attempts >= MAX_JOB_RUNS:
            return None
        return RetryDecision(retry_at=utcnow() + timedelta(seconds=FAILED_ATTEMPT_SECONDS))


class QueuedDeliveries:
    """Queues deliveries as jobs of the replicas' shared queue; the worker of any replica makes their attempts."""

    def __init__(self, dispatch: JobDispatch, attempt: Callable[[Delivery], Awaitable[float | None]]) -> None:
        self.app = dispatch.app
        self._attempt = attempt
        self.app.task(name=WEBHOOK_TASK, queue=WEBHOOK_QUEUE, retry=AfterTheWait(), pass_context=False)(self._deliver)
        dispatch.retried_when_stalled.append(WEBHOOK_TASK)

    async def _deliver(self, run_id: str, webhook_id: str, url: str, trigger_position: int) -> None:
        wait = await self._attempt(Delivery(run_id, webhook_id, url, trigger_position))
        if wait is not None:
            raise TryAgain(wait)

    async def send(self, delivery: Delivery) -> None:
        """Queue the delivery's first attempt now (a delivery already waiting in the queue is left as it is)."""
        deferrer = self.app.configure_task(WEBHOOK_TASK, queue=WEBHOOK_QUEUE, queueing_lock=delivery.webhook_id)
        try:
            await deferrer.defer_async(**msgspec.structs.asdict(delivery))
        except AlreadyEnqueued:
            pass

    async def close(self) -> None:
        """Nothing of its own to close: the queue's pool is the dispatch's."""
