"""Which webhooks a run's events call for, and handing them to whatever makes their attempts.

A run's trigger event (its end, or a pause for an answer) calls for one delivery to each of its targets: the URL
the run was created with, and the subscriptions of the key that created it (as the keys in force list them:
a reloaded key file counts from its reload on). The process that appended the trigger plans its deliveries at
once; a process that starts plans again every delivery its log leaves pending (a trigger within the time bound
without a delivered attempt or an abandonment), so a delivery planned by a process that stopped is not lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Protocol
from uuid import UUID

from domain import events as ev
from domain.run_state import Run
from domain.webhooks import TRIGGER_TAGS, InvalidWebhook, check_webhook_url, trigger_of, webhook_id
from engine.access import KeyRing
from engine.clock import utcnow
from engine.webhooks.delivery import FAILED_ATTEMPT_SECONDS, Deliverer, Delivery
from engine.webhooks.settings import WebhookSettings

logger = logging.getLogger("flowtrail.webhooks")
ReadEvents = Callable[..., Awaitable[list[ev.RunEvent]]]


class Courier(Protocol):
    """What makes a delivery's attempts until it ends."""

    async def send(self, delivery: Delivery) -> None:
        """Take the delivery on (a delivery it holds already is not taken twice)."""

    async def close(self) -> None:
        """Stop making attempts; what is left is planned again at the next start."""


class LocalDeliveries:
    """Makes the attempts in this process, one task per delivery (SQLite: one process serves the log)."""

    def __init__(self, attempt: Callable[[Delivery], Awaitable[float | None]]) -> None:
        self._attempt = attempt
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def send(self, delivery: Delivery) -> None:
        """Start the delivery's attempts unless they are under way."""
        task = self._tasks.get(delivery.webhook_id)
        if task is None or task.done():
            self._tasks[delivery.webhook_id] = asyncio.create_task(
                self._deliver(delivery), name=f"flowtrail-webhook-{delivery.webhook_id}",
            )

    async def _deliver(self, delivery: Delivery) -> None:
        try:
            while True:
                try:
                    wait = await self._attempt(delivery)
                except Exception as error:  # noqa: BLE001 - an attempt the service could not make is made again
                    logger.warning("run %s: webhook %s: attempt not made (%s: %s); trying again",
                                   delivery.run_id, delivery.webhook_id, type(error).__name__, error)
                    wait = FAILED_ATTEMPT_SECONDS
                if wait is None:
                    return
                await asyncio.sleep(wait)
        finally:
            if self._tasks.get(delivery.webhook_id) is asyncio.current_task():
                del self._tasks[delivery.webhook_id]

    async def close(self) -> None:
        """Cancel every delivery under way (the log keeps them pending)."""
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Webhooks:
    """Plans the webhook deliveries that runs' events call for and hands them to a courier."""

    def __init__(
        self, settings: WebhookSettings, *, enabled: bool, keys: KeyRing, read_events: ReadEvents,
        read_all: Callable[[str], Awaitable[list[ev.RunEvent]]],
    ) -> None:
        self.settings = settings
        self.enabled = enabled
        """False when no signing secret is configured: the service sends no webhooks."""
        self.keys = keys
        self._read_events = read_events
        self._read_all = read_all
        self.courier: Courier | None = None
        self.deliverer: Deliverer | None = None
        self._planning: set[asyncio.Task[None]] = set()

    def check_url(self, url: str) -> str:
        """A run's webhook URL as given, when the service may send to it; InvalidWebhook (400) otherwise."""
        if not self.enabled:
            raise InvalidWebhook("webhook: this service sends no webhooks (no signing secret is configured)")
        return check_webhook_url(url, allow_http=self.settings.allow_http, allow_private=self.settings.allow_private)

    def appended(self, run: Run, events: Sequence[ev.RunEvent]) -> None:
        """After a run's writer appended events: plan the deliveries its trigger events call for."""
        positions = [e.originator_version for e in events if trigger_of(e) is not None]
        if positions and self.enabled and self.courier is not None:
            task = asyncio.create_task(self._plan(run.id, positions), name="flowtrail-webhook-plan")
            self._planning.add(task)
            task.add_done_callback(self._planning.discard)

    async def _plan(self, run_id: UUID, positions: list[int]) -> None:
        try:
            created = await self._created(run_id)
            for position in positions:
                await self._send_all(created, position, settled=frozenset())
        except Exception:
            logger.exception("run %s: its webhooks could not be planned now; the next start plans them", run_id.hex)

    async def _created(self, run_id: UUID) -> ev.RunCreated:
        return (await self._head(run_id))[0]

    async def _head(self, run_id: UUID) -> tuple[ev.RunCreated, int]:
        """The run's RunCreated, and the last position its fork copied (0: not a fork)."""
        head = await self._read_events(run_id, limit=2)
        assert isinstance(head[0], ev.RunCreated), "a run's first event is its RunCreated"
        forked = head[1] if len(head) > 1 and isinstance(head[1], ev.RunForked) else None
        return head[0], 0 if forked is None else 2 + len(forked.copied_positions)

    async def _send_all(self, created: ev.RunCreated, position: int, *, settled: frozenset[str]) -> None:
        assert self.courier is not None
        run_id = created.originator_id.hex
        for url in self.targets(created):
            delivery = Delivery(run_id, webhook_id(run_id, position, url), url, position)
            if delivery.webhook_id not in settled:
                await self.courier.send(delivery)

    def targets(self, created: ev.RunCreated) -> list[str]:
        """Where a run's webhooks go: the URL it was created with, then its key's subscriptions (the keys in force)."""
        urls = [created.webhook] if created.webhook else []
        for key in self.keys.keys:
            if key.id == created.caller_key_id:
                urls += [url for url in key.webhooks if self._allowed_subscription(key.id, url)]
        return list(dict.fromkeys(urls))

    def _allowed_subscription(self, key_id: str, url: str) -> bool:
        try:
            check_webhook_url(url, allow_http=self.settings.allow_http, allow_private=self.settings.allow_private)
        except InvalidWebhook as refusal:
            logger.warning("the webhook subscription of key %r is not sent to: %s", key_id, refusal.message)
            return False
        return True

    async def resume(self) -> int:
        """Hand the courier every delivery the log leaves pending (at start-up); how many."""
        if not self.enabled or self.courier is None:
            return 0
        settled, begun = await self._outcomes()
        horizon = utcnow() - timedelta(seconds=self.settings.delivery_seconds)
        resumed = 0
        heads: dict[UUID, tuple[ev.RunCreated, int]] = {}
        for tag in TRIGGER_TAGS:
            for event in await self._read_all(tag):
                if event.timestamp < horizon:
                    continue
                if event.originator_id not in heads:
                    heads[event.originator_id] = await self._head(event.originator_id)
                created, copied = heads[event.originator_id]
                # a fork's copy of its source's event triggers nothing; a run with no target has nothing to send
                if event.originator_version > copied and self.targets(created):
                    await self._send_all(created, event.originator_version, settled=settled)
                    resumed += 1
        for attempt in begun.values():  # past the bound, never settled: their next attempt records the abandonment
            if attempt.webhook_id not in settled:
                await self.courier.send(Delivery(
                    attempt.originator_id.hex, attempt.webhook_id, attempt.url, attempt.trigger_position,
                ))
        return resumed

    async def _outcomes(self) -> tuple[frozenset[str], dict[str, ev.WebhookAttempted]]:
        """The ids of the settled deliveries, and the last attempt of every delivery begun."""
        begun: dict[str, ev.WebhookAttempted] = {}
        settled: set[str] = set()
        for event in await self._read_all("WebhookAttempted"):
            assert isinstance(event, ev.WebhookAttempted)
            begun[event.webhook_id] = event
            if event.delivered:
                settled.add(event.webhook_id)
        settled |= {e.webhook_id for e in await self._read_all("WebhookAbandoned") if isinstance(e, ev.WebhookAbandoned)}
        return frozenset(settled), begun

    async def close(self) -> None:
        """Stop planning and making attempts (the log keeps what is pending)."""
        for task in list(self._planning):
            task.cancel()
        await asyncio.gather(*self._planning, return_exceptions=True)
        if self.courier is not None:
            await self.courier.close()
        if self.deliverer is not None:
            await self.deliverer.close()
