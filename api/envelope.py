"""The success envelope every JSON answer is wrapped in."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


class Envelope(msgspec.Struct, Generic[T]):
    """`{code: "OK", message: "", data}`."""

    data: T
    code: str = "OK"
    message: str = ""


def ok(data: Any) -> Envelope[Any]:
    """Wrap data in the success envelope."""
    return Envelope(data=data)
