"""GET /healthz: liveness for load balancers and scripts (no key needed)."""

from __future__ import annotations

from typing import Any

from litestar import get

from api.dependencies import Injected
from api.envelope import Envelope, ok
from api.paths import HEALTH


@get(HEALTH, operation_id="health", summary="Service liveness", tags=["service"], security=[])
async def health(store_kind: Injected[str]) -> Envelope[dict[str, Any]]:
    """The service answers and names its store."""
    return ok({"status": "ok", "store": store_kind})
