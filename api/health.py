"""GET /healthz: liveness for load balancers and scripts (no key needed)."""

from __future__ import annotations

from typing import Any

from litestar import get
from litestar.di import NamedDependency

from api.envelope import Envelope, ok
from engine.bootstrap import Services


@get("/healthz", operation_id="health", summary="Service liveness", tags=["service"], security=[])
async def health(services: NamedDependency[Services]) -> Envelope[dict[str, Any]]:
    """The service answers and names its store."""
    return ok({"status": "ok", "store": services.store.location.kind})
