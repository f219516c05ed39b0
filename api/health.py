"""GET /healthz (the process answers), GET /readyz (it should get traffic), GET /metrics (Prometheus); no key needed.

`Readiness` is what /readyz checks: the store answers a real query, the engine takes runs, which models and gateways.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from litestar import Response, get
from litestar.openapi import ResponseSpec
from litestar.plugins.prometheus import PrometheusController

from api.dependencies import Injected
from api.envelope import Envelope, ok
from api.errors import HTTP_STATUS
from api.paths import HEALTH, METRICS, READY
from engine.hermes.gateways import HermesGateway
from engine.hermes.probe import ProbeResult, probe_gateways
from engine.store import AsyncEventStore

STORE_TIMEOUT_SECONDS = 2.0
GATEWAY_PROBE_SECONDS = 30.0
"""A gateway's probe is kept this long, so a load balancer polling /readyz does not poll the gateways."""


@dataclass(frozen=True)
class ReadinessReport:
    """The checks' results; `problems` is empty when the process is ready."""

    store: dict[str, Any]
    engine: dict[str, Any]
    models: list[dict[str, Any]]
    gateways: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """True when every check passed."""
        return not self.problems

    def as_data(self) -> dict[str, Any]:
        """The report as the readiness answer's `data`."""
        return {
            "ready": self.ready, "store": self.store, "engine": self.engine, "models": self.models,
            "gateways": self.gateways,
        }


@dataclass
class Readiness:
    """The checks `/readyz` runs; `accepting_runs` says whether the engine takes runs now (none, or shutting down)."""

    store: AsyncEventStore
    accepting_runs: Callable[[], bool]
    model_ids: list[str]
    gateways: tuple[HermesGateway, ...] = ()
    timeout_seconds: float = STORE_TIMEOUT_SECONDS
    _probed: tuple[float, list[ProbeResult]] | None = None

    async def check(self) -> ReadinessReport:
        """Query the store (bounded by the timeout) and look at the engine; no model is called."""
        problems: list[str] = []
        store: dict[str, Any] = {"kind": self.store.location.kind, "reachable": True}
        try:
            await self.store.check_reachable(self.timeout_seconds)
        except TimeoutError:
            store.update(reachable=False, error=f"no answer within {self.timeout_seconds:g} s")
        except Exception as error:  # noqa: BLE001 - any driver failure means the same: the store is away
            store.update(reachable=False, error=_first_line(error))
        if not store["reachable"]:
            problems.append(f"store ({store['kind']}) unreachable: {store['error']}")
        accepting = self.accepting_runs()
        if not accepting:
            problems.append("the engine does not accept runs (none here, or the process is stopping: its runs drain)")
        models = [{"id": model_id, "probe": "not probed"} for model_id in self.model_ids]
        gateways = [{"id": r.gateway, "probe": r.status, "detail": r.detail} for r in await self.gateway_probes()]
        return ReadinessReport(store=store, engine={"acceptingRuns": accepting}, models=models, gateways=gateways,
                               problems=problems)

    async def gateway_probes(self) -> list[ProbeResult]:
        """Each configured Hermes gateway's last probe (at most GATEWAY_PROBE_SECONDS old); a gateway that is down
        is listed, not a reason to take this process out of traffic."""
        if not self.gateways:
            return []
        if self._probed is None or time.monotonic() - self._probed[0] > GATEWAY_PROBE_SECONDS:
            self._probed = (time.monotonic(), await probe_gateways(self.gateways))
        return self._probed[1]


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else type(error).__name__


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
