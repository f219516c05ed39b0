"""Webhooks of a run: what triggers one, its id, which URLs are accepted, when an attempt is retried, and the two
decisions that record a delivery's attempts and its end (docs/api.md, "Webhooks"; decision 41).

A delivery is one (trigger event, URL) pair. Its `webhook-id` is derived from the run, the trigger's position and
the URL, so the same delivery has the same id on every attempt, in every process, and after any restart.
"""

from __future__ import annotations

import hashlib
import ipaddress
from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit

from domain import events as ev
from domain.errors import FlowtrailError, IllegalTransition
from domain.guards import next_fields
from domain.run_state import Run

Trigger = Literal["run.completed", "run.failed", "run.cancelled", "run.waiting"]
TRIGGERS: dict[type[ev.RunEvent], Trigger] = {
    ev.RunCompleted: "run.completed",
    ev.RunFailed: "run.failed",
    ev.RunCancelled: "run.cancelled",
    ev.ClarifyRequested: "run.waiting",
}
"""The events a webhook is sent for, and the `type` of its body."""
TRIGGER_TAGS = tuple(str(kind.__struct_config__.tag) for kind in TRIGGERS)
"""The stored tags of the trigger events."""
MAX_URL_CHARS = 2048
ErrorKind = Literal["timeout", "refused", "connect", "address"]
"""Why an attempt got no answer: the receiver did not answer in time, refused the connection, the connection
failed otherwise, or the host resolved to an address the operator does not allow."""


class InvalidWebhook(FlowtrailError):
    """A webhook URL the service will not send to (400 VALIDATION_FAILED; nothing appended)."""


def trigger_of(event: ev.RunEvent) -> Trigger | None:
    """The webhook trigger an event is (None: it triggers none)."""
    return TRIGGERS.get(type(event))


def webhook_id(run_id_hex: str, trigger_position: int, url: str) -> str:
    """The `webhook-id` of the delivery of one trigger to one URL (the same on every attempt)."""
    digest = hashlib.sha256(f"{run_id_hex}:{trigger_position}:{url}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def check_webhook_url(url: str, *, allow_http: bool, allow_private: bool) -> str:
    """The URL itself when the service may send to it; InvalidWebhook otherwise (https only unless `allow_http`;
    a loopback, private, link-local or reserved address only with `allow_private`)."""
    if len(url) > MAX_URL_CHARS:
        raise InvalidWebhook(f"webhook: longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading the port checks it
    except ValueError:
        raise InvalidWebhook("webhook: not a valid URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidWebhook("webhook: must be an absolute https URL")
    if parts.scheme == "http" and not allow_http:
        raise InvalidWebhook("webhook: must be https (this service does not send webhooks over plain http)")
    if not allow_private and is_private_host(parts.hostname):
        raise InvalidWebhook("webhook: a loopback, private or reserved address is not allowed by this service")
    return url


def is_private_host(host: str) -> bool:
    """True for `localhost` and for an address that is loopback, private, link-local, multicast or reserved."""
    if host.lower().rstrip(".") == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not address.is_global


def is_retried(status_code: int | None) -> bool:
    """True when a failed attempt is tried again: no answer (timeout, refused), 5xx, 408 or 429; a 3xx (never
    followed) or another 4xx ends the delivery."""
    return status_code is None or status_code >= 500 or status_code in (408, 429)


def backoff_seconds(attempt: int, first: float, longest: float) -> float:
    """The wait after the `attempt`-th failed attempt: `first`, doubling, at most `longest`."""
    return min(longest, first * 2 ** min(attempt - 1, 32))


def _check_open(run: Run, webhook_id: str, trigger_position: int) -> None:
    if webhook_id in run.settled_webhooks:
        raise IllegalTransition(f"webhook {webhook_id} of run {run.id.hex} was already delivered or abandoned",
                                run_id=run.id.hex)
    if not 1 < trigger_position <= run.version:
        raise IllegalTransition(f"run {run.id.hex} has no event at {trigger_position} to send a webhook for",
                                run_id=run.id.hex)


def record_attempt(
    run: Run, at: datetime, *, webhook_id: str, url: str, trigger: Trigger, trigger_position: int, attempt: int,
    status_code: int | None, error: ErrorKind | None, duration_ms: float,
) -> ev.WebhookAttempted:
    """Record one ended attempt of an open delivery (on a run in any state, an ended one too)."""
    _check_open(run, webhook_id, trigger_position)
    delivered = status_code is not None and 200 <= status_code < 300
    return ev.WebhookAttempted(
        **next_fields(run, at), webhook_id=webhook_id, url=url, trigger=trigger, trigger_position=trigger_position,
        attempt=attempt, status_code=status_code, error=error or "", duration_ms=round(duration_ms, 1),
        delivered=delivered,
    )


def abandon_delivery(
    run: Run, at: datetime, *, webhook_id: str, url: str, trigger: Trigger, trigger_position: int, attempts: int,
    reason: str,
) -> ev.WebhookAbandoned:
    """Give up an open delivery (its time bound passed, or the receiver refused it for good)."""
    _check_open(run, webhook_id, trigger_position)
    return ev.WebhookAbandoned(
        **next_fields(run, at), webhook_id=webhook_id, url=url, trigger=trigger, trigger_position=trigger_position,
        attempts=attempts, reason=reason,
    )
