"""Request bodies in JSON: decoded into their struct, refused with 400 when malformed or nested too deep."""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from api.errors import validation_failed

MAX_JSON_DEPTH = 64
"""Arrays and objects may nest at most this deep in a request body (decision 15)."""

T = TypeVar("T")

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(raw: bytes, stop_above: int = MAX_JSON_DEPTH) -> int:
    """How deep arrays and objects nest in `raw` (brackets inside strings do not count); stops past `stop_above`."""
    depth = deepest = 0
    for byte in _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        if byte in b"[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_above:
                    break
        else:
            depth -= 1
    return deepest


def too_deep() -> Exception:
    """The refusal of a body nested beyond the limit."""
    return validation_failed(f"the request nests arrays and objects deeper than {MAX_JSON_DEPTH} levels")


def decode_json(raw: bytes, kind: type[T]) -> T:
    """`raw` as a `kind`; 400 VALIDATION_FAILED when it is not JSON, not of that shape, or too deep."""
    if nesting_depth(raw) > MAX_JSON_DEPTH:
        raise too_deep()
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise validation_failed(f"invalid request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise validation_failed(f"the request is not valid JSON: {exc}") from None
    except RecursionError:
        raise too_deep() from None
