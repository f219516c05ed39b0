"""Canonical JSON and its digest: the one rule for "the same request" and "the same definition".

Digests are stored (catalogue versions, idempotency claims), so this text must never change.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no spaces, non-ASCII kept as it is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_digest(value: Any) -> str:
    """sha256 (hex) of the value's canonical JSON, UTF-8 encoded."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
