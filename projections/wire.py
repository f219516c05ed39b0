"""The wire format: the one JSON encoder every wire body goes through, and the two timestamp renderings.

Stream messages, context answers, tool results and stream chunk contents are all encoded here,
by one long-lived encoder (msgspec encoders are cheap to call and costly to build).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, overload

import msgspec

encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """Compact JSON bytes of a value (Structs, dicts, lists, scalars)."""
    return encoder.encode(value)


def to_json(value: Any) -> str:
    """Compact JSON text of a value."""
    return encoder.encode(value).decode()


@overload
def iso_utc(at: datetime) -> str: ...
@overload
def iso_utc(at: datetime | None) -> str | None: ...
def iso_utc(at: datetime | None) -> str | None:
    """ISO-8601 in UTC with `Z`, milliseconds kept when present (naive means UTC)."""
    if at is None:
        return None
    return _iso(at) + "Z"


@overload
def iso_local(at: datetime) -> str: ...
@overload
def iso_local(at: datetime | None) -> str | None: ...
def iso_local(at: datetime | None) -> str | None:
    """ISO_LOCAL_DATE_TIME (no zone), wall time in UTC, milliseconds kept when present."""
    if at is None:
        return None
    return _iso(at)


def _iso(at: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS[.mmm]` in UTC (msgspec's RFC 3339 text, the fast path)."""
    if at.tzinfo is not None and at.utcoffset():
        at = at.astimezone(UTC)
    text = encoder.encode(at)[1:-1].decode()
    return text[:23] if len(text) > 20 else text[:19]
