"""One attempt of one webhook delivery: read the run's log, send the signed body, record the attempt (and the end
of the delivery when it ends), and say when to try again.

Whoever schedules the attempts (the job queue on PostgreSQL, a task of this process on SQLite) calls `attempt`
until it answers None. Each attempt reads the run's log first: a delivery already settled, by this process or
another, sends nothing again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from functools import partial
from urllib.parse import urlsplit
from uuid import UUID

import httpx
import msgspec

from domain import events as ev
from domain.errors import IllegalTransition
from domain.urls import shown_url
from domain.webhooks import (
    ErrorKind,
    Trigger,
    abandon_delivery,
    backoff_seconds,
    is_private_host,
    is_retried,
    record_attempt,
    trigger_of,
)
from engine.clock import utcnow
from engine.observability.metrics import WEBHOOK_ATTEMPTS, WEBHOOK_DELIVERIES
from engine.runs.writer import Decision, RunWriter
from engine.webhooks.payload import webhook_body
from engine.webhooks.settings import WebhookSettings
from engine.webhooks.signing import signed_headers

logger = logging.getLogger("flowtrail.webhooks")
Writing = Callable[[UUID], AbstractAsyncContextManager[RunWriter]]
"""The run's writer under the run's lock (`RunTasks.writing`)."""


class Delivery(msgspec.Struct, frozen=True):
    """One trigger of one run to one URL (the URL as configured, credentials and query included)."""

    run_id: str
    webhook_id: str
    url: str
    trigger_position: int


FAILED_ATTEMPT_SECONDS = 5.0
"""When an attempt could not even be made or recorded (the store away), the wait before it is made again; the
delivery's time bound still ends it."""


class Answer(msgspec.Struct, frozen=True):
    """What one POST got: the receiver's status, or why there was none, and how long it took."""

    status_code: int | None
    error: ErrorKind | None
    duration_ms: float


class Deliverer:
    """Makes the attempts of webhook deliveries."""

    def __init__(
        self, settings: WebhookSettings, key: bytes, *, link_base: str,
        read_events: Callable[..., Awaitable[list[ev.RunEvent]]], writing: Writing,
    ) -> None:
        self.settings = settings
        self._key = key
        self.link_base = link_base.rstrip("/")
        self._read_events = read_events
        self._writing = writing
        self._client = httpx.AsyncClient(
            follow_redirects=False, timeout=httpx.Timeout(settings.timeout_seconds), trust_env=False,
        )

    async def attempt(self, delivery: Delivery) -> float | None:
        """Make the delivery's next attempt; the seconds to wait before the one after (None: the delivery ended)."""
        pending = await self._pending(delivery)
        if pending is None:
            return None
        if utcnow() >= pending.deadline:
            await self._abandon(pending.record, "time bound passed")
            return None
        body = webhook_body(self.link_base, pending.created, pending.record.trigger, pending.trigger_event)
        answer = await self._post(delivery, body)
        record = msgspec.structs.replace(pending.record, attempts=pending.record.attempts + 1)
        if not await self._record_attempt(record, answer):
            return None
        return await self._next_wait(record, answer, pending.deadline)

    async def _pending(self, delivery: Delivery) -> _Pending | None:
        """The delivery as the run's log has it; None when it was settled, or its trigger is not in the log.

        Reads the run's first event, its trigger and what followed the trigger (where every attempt of the delivery
        stands), never the whole log: a long run's attempts stay cheap.
        """
        run_id, position = UUID(hex=delivery.run_id), delivery.trigger_position
        head = await self._read_events(run_id, limit=1)
        at = await self._read_events(run_id, after=position - 1, limit=1)
        if not head or not at or at[0].originator_version != position:
            return None
        created, trigger_event = head[0], at[0]
        trigger = trigger_of(trigger_event)
        if not isinstance(created, ev.RunCreated) or trigger is None:
            logger.error("run %s: no webhook trigger at position %d; delivery %s dropped",
                         run_id.hex, position, delivery.webhook_id)
            return None
        mine = [e for e in await self._read_events(run_id, after=position)
                if isinstance(e, ev.WebhookAttempted | ev.WebhookAbandoned) and e.webhook_id == delivery.webhook_id]
        if any(isinstance(e, ev.WebhookAbandoned) or e.delivered for e in mine):
            return None
        attempts = sum(1 for e in mine if isinstance(e, ev.WebhookAttempted))
        return _Pending(
            _Record(delivery, shown_url(delivery.url), trigger, attempts), created, trigger_event,
            trigger_event.timestamp + timedelta(seconds=self.settings.delivery_seconds),
        )

    async def _next_wait(self, record: _Record, answer: Answer, deadline: datetime) -> float | None:
        """After a recorded attempt: None when it delivered or ended the delivery, else the wait before the next."""
        if answer.status_code is not None and 200 <= answer.status_code < 300:
            WEBHOOK_DELIVERIES.labels("delivered").inc()
            logger.info("run %s: webhook %s delivered to %s (attempt %d)", record.run_id.hex,
                        record.delivery.webhook_id, record.url, record.attempts)
            return None
        if answer.error == "address" or not is_retried(answer.status_code):
            await self._abandon(record, _refusal(answer.status_code))
            return None
        wait = backoff_seconds(record.attempts, self.settings.retry_first_seconds, self.settings.retry_max_seconds)
        if utcnow() + timedelta(seconds=wait) > deadline:
            await self._abandon(record, "time bound passed")
            return None
        return wait

    async def _post(self, delivery: Delivery, body: bytes) -> Answer:
        """POST the body once, signed now; never follows a redirect."""
        began = time.perf_counter()
        if not self.settings.allow_private and await resolves_privately(delivery.url):
            return Answer(None, "address", 0.0)
        headers = signed_headers(self._key, delivery.webhook_id, int(time.time()), body)
        error: ErrorKind | None = None
        status: int | None = None
        try:
            response = await self._client.post(delivery.url, content=body, headers=headers)
            status = response.status_code
        except httpx.TimeoutException:
            error = "timeout"
        except httpx.TransportError as failure:
            error = "refused" if _was_refused(failure) else "connect"
        duration = (time.perf_counter() - began) * 1000
        WEBHOOK_ATTEMPTS.labels(_outcome(status, error)).inc()
        return Answer(status, error, duration)

    async def _record_attempt(self, record: _Record, answer: Answer) -> bool:
        """Append the attempt; False when the delivery was settled meanwhile (by another process)."""
        return await self._decide(record.run_id, partial(
            record_attempt, webhook_id=record.delivery.webhook_id, url=record.url, trigger=record.trigger,
            trigger_position=record.delivery.trigger_position, attempt=record.attempts,
            status_code=answer.status_code, error=answer.error, duration_ms=answer.duration_ms,
        ))

    async def _abandon(self, record: _Record, reason: str) -> None:
        if await self._decide(record.run_id, partial(
            abandon_delivery, webhook_id=record.delivery.webhook_id, url=record.url, trigger=record.trigger,
            trigger_position=record.delivery.trigger_position, attempts=record.attempts, reason=reason,
        )):
            WEBHOOK_DELIVERIES.labels("abandoned").inc()
            logger.warning("run %s: webhook %s to %s abandoned after %d attempts (%s)", record.run_id.hex,
                           record.delivery.webhook_id, record.url, record.attempts, reason)

    async def _decide(self, run_id: UUID, decision: Decision) -> bool:
        try:
            async with self._writing(run_id) as writer:
                await writer.decide(decision)
        except IllegalTransition:
            return False
        return True

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.aclose()


class _Record(msgspec.Struct, frozen=True):
    """What an attempt's or an abandonment's event says of its delivery."""

    delivery: Delivery
    url: str
    trigger: Trigger
    attempts: int

    @property
    def run_id(self) -> UUID:
        return UUID(hex=self.delivery.run_id)


class _Pending(msgspec.Struct, frozen=True):
    """An open delivery and what its next attempt needs of the run's log."""

    record: _Record
    created: ev.RunCreated
    trigger_event: ev.RunEvent
    deadline: datetime


def _refusal(status_code: int | None) -> str:
    if status_code is not None and 300 <= status_code < 400:
        return f"answered {status_code}: a redirect, not followed"
    if status_code is None:
        return "its host resolves to an address this service does not send to"
    return f"answered {status_code}"


def _outcome(status: int | None, error: ErrorKind | None) -> str:
    if status is None:
        return error or "connect"
    return f"{status // 100}xx"


def _was_refused(failure: BaseException) -> bool:
    """True when the connection was refused (somewhere in the chain of causes httpx and anyio wrap it in)."""
    cause: BaseException | None = failure
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


async def resolves_privately(url: str) -> bool:
    """True when the URL's host is, or resolves to, an address that is not public (or does not resolve)."""
    host = urlsplit(url).hostname or ""
    if is_private_host(host):
        return True
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False  # the POST reports the failure to resolve as a connection failure, and is retried
    return any(is_private_host(str(info[4][0])) for info in found)
