"""The service's clock (one place, so tests and replays can pin it)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)
