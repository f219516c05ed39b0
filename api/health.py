"""GET /healthz (the process answers), GET /readyz (it should get traffic), GET /metrics (Prometheus); no key needed."""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from litestar.openapi import ResponseSpec
from litestar.plugins.prometheus import PrometheusController

from api.dependencies import Injected
from api.envelope import Envelope, ok
from api.errors import HTTP_STATUS
from api.paths import HEALTH, METRICS, READY
from engine.observability.readiness import Readiness


@get(HEALTH, operation_id="health", summary="Service liveness (no store access)", tags=["service"], security=[])
async def health(store_kind: Injected[str]) -> Envelope[dict[str, Any]]:
    """The process answers and names its store; nothing is queried."""
    return ok({"status": "ok", "store": store_kind})


@get(
    READY, operation_id="readiness", summary="Service readiness: store reachable, engine accepting runs, models",
    tags=["service"], security=[],
    responses={503: ResponseSpec(Envelope[dict[str, Any]], description="NOT_READY: the message names each problem")},
)
async def readiness(readiness: Injected[Readiness]) -> Response[Envelope[dict[str, Any]]]:
    """200 when the store answered a real query and the engine takes runs; else 503 NOT_READY naming why."""
    report = await readiness.check()
    if report.ready:
        return Response(ok(report.as_data()))
    envelope = Envelope(data=report.as_data(), code="NOT_READY", message="; ".join(report.problems))
    return Response(envelope, status_code=HTTP_STATUS["NOT_READY"])


class MetricsController(PrometheusController):
    """The Prometheus text exposition of this process's metrics (docs/observability.md)."""

    path = METRICS
    include_in_schema = False
