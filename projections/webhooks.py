"""A run's webhook deliveries as `GET run` shows them: one entry a delivery, folded from its attempts and its end."""

from __future__ import annotations

from typing import Literal

from domain import events as ev
from projections.payloads import Camel
from projections.wire import iso_utc

DeliveryState = Literal["PENDING", "DELIVERED", "ABANDONED"]


class WebhookView(Camel, kw_only=True):
    """One delivery: where, for what, how many attempts, what the last one got, and how it stands."""

    webhook_id: str
    url: str
    """Without credentials, query or fragment."""
    trigger: str
    trigger_event_id: int
    attempts: int
    last_status_code: int | None
    last_error: str | None
    """Why the last attempt got no answer: timeout, refused, connect, address (null when it got one)."""
    last_attempt_at: str | None
    state: DeliveryState
    abandoned_reason: str | None = None


class WebhookDeliveries:
    """The deliveries of one run, in the order their first event came."""

    def __init__(self) -> None:
        self._views: dict[str, WebhookView] = {}

    def apply(self, event: ev.WebhookAttempted | ev.WebhookAbandoned) -> None:
        """Fold one attempt or abandonment."""
        view = self._views.get(event.webhook_id) or WebhookView(
            webhook_id=event.webhook_id, url=event.url, trigger=event.trigger,
            trigger_event_id=event.trigger_position, attempts=0, last_status_code=None, last_error=None,
            last_attempt_at=None, state="PENDING",
        )
        if isinstance(event, ev.WebhookAttempted):
            view.attempts = max(view.attempts, event.attempt)
            view.last_status_code, view.last_error = event.status_code, event.error or None
            view.last_attempt_at = iso_utc(event.timestamp)
            if event.delivered:
                view.state = "DELIVERED"
        else:
            view.state, view.abandoned_reason = "ABANDONED", event.reason
        self._views[event.webhook_id] = view

    def views(self) -> list[WebhookView]:
        """Every delivery with at least one event."""
        return list(self._views.values())
