"""Whether this process should get traffic: the store answers a real query, the engine takes runs, which models."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.store import AsyncEventStore

STORE_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class ReadinessReport:
    """The checks' results; `problems` is empty when the process is ready."""

    store: dict[str, Any]
    engine: dict[str, Any]
    models: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """True when every check passed."""
        return not self.problems

    def as_data(self) -> dict[str, Any]:
        """The report as the readiness answer's `data`."""
        return {"ready": self.ready, "store": self.store, "engine": self.engine, "models": self.models}


@dataclass
class Readiness:
    """The checks `/readyz` runs; `accepting_runs` says whether the engine takes runs now (none, or shutting down)."""

    store: AsyncEventStore
    accepting_runs: Callable[[], bool]
    model_ids: list[str]
    timeout_seconds: float = STORE_TIMEOUT_SECONDS

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
            problems.append("the engine does not accept runs (none here, or shutting down)")
        models = [{"id": model_id, "probe": "not probed"} for model_id in self.model_ids]
        return ReadinessReport(store=store, engine={"acceptingRuns": accepting}, models=models, problems=problems)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else type(error).__name__
