"""Drive the workflow engine directly: services on a test store, small workflows, waiting for a run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

from api.sse import encode_frame
from domain import events as ev
from domain.run import Run, RunStatus
from engine.bootstrap import Services, build_services
from engine.execution import RunExecutor
from engine.execution.ports import ContextTools
from engine.runs.creation import NewRun
from engine.settings import EngineSettings, Settings
from tests.support.server import server_settings

QUICK_RETRIES: dict[str, Any] = {"model_retry_base_seconds": 0.001, "model_retry_max_seconds": 0.05}
"""Backoff for tests: real retries, waits of milliseconds."""


def engine_settings(store: str, data_dir: Path, *, load_demos: bool = True, coalesce_ms: float = 5.0,
                    **engine: Any) -> Settings:
    """Test server settings with the demos loaded and engine settings overridden (model retries wait milliseconds)."""
    settings = server_settings(store, data_dir, load_demos=load_demos, coalesce_ms=coalesce_ms)
    return replace(settings, engine=replace(EngineSettings(), **{**QUICK_RETRIES, **engine}))


@contextlib.asynccontextmanager
async def running(settings: Settings, *, context_tools: ContextTools | None = None) -> AsyncIterator[Services]:
    """Started services (engine included, with these context tools if given), closed afterwards."""
    services = build_services(settings, encode_frame=encode_frame, context_tools=context_tools)
    await services.start()
    try:
        yield services
    finally:
        await services.close()


def node(node_id: str, type_: str, label: str = "", **data: Any) -> dict[str, Any]:
    """A node definition."""
    return {"id": node_id, "type": type_, "label": label or node_id, "data": data}


def edge(source: str, target: str, condition: str | None = None) -> dict[str, Any]:
    """An edge definition."""
    found: dict[str, Any] = {"source": source, "target": target}
    if condition is not None:
        found["condition"] = condition
    return found


def workflow(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], mode: str = "DAG",
             **extra: Any) -> dict[str, Any]:
    """A workflow definition."""
    return {"name": name, "displayName": name.replace("-", " ").title(), "mode": mode, "nodes": nodes,
            "edges": edges, **extra}


def text_turn(text: str, thinking: str | None = None) -> list[dict[str, Any]]:
    """One scripted turn answering `text` (after some thinking)."""
    return ([{"thinking": thinking}] if thinking else []) + [{"text": text}]


async def create(services: Services, name: str, variables: dict[str, Any] | None = None) -> UUID:
    """Create a run of the latest version of a workflow; returns its id."""
    entry = services.catalogue.find(name)
    created = await services.runs.create(NewRun.of(entry, variables=variables or {}, caller_key_id="all"))
    return created.run_id


async def start(services: Services, name: str, variables: dict[str, Any] | None = None) -> UUID:
    """Create and start a run; returns its id."""
    run_id = await create(services, name, variables)
    await executor(services).start(run_id)
    return run_id


def executor(services: Services) -> RunExecutor:
    """The services' engine (these tests always build one)."""
    assert services.engine is not None
    return services.engine


async def wait_until(services: Services, run_id: UUID, *statuses: RunStatus, timeout: float = 15.0) -> Run:
    """The run's state once it reaches one of `statuses` (default: any terminal one)."""
    wanted = set(statuses) or {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        run = await services.runs.state(run_id)
        if run.status in wanted:
            return run
        if loop.time() > deadline:
            raise AssertionError(f"run {run_id.hex} is {run.status.value}, not {sorted(s.value for s in wanted)}")
        await asyncio.sleep(0.005)


async def wait_for_event(services: Services, run_id: UUID, predicate: Any, timeout: float = 15.0) -> ev.RunEvent:
    """The first stored event of the run that satisfies `predicate`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for event in await services.runs.events(run_id):
            if predicate(event):
                return event
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id.hex} never stored the awaited event")


async def events_of(services: Services, run_id: UUID) -> list[ev.RunEvent]:
    """Every stored event of the run."""
    return await services.runs.events(run_id)


def of_type(events: list[ev.RunEvent], kind: type) -> list[Any]:
    """The events of one type, in order."""
    return [event for event in events if isinstance(event, kind)]


def chunks(events: list[ev.RunEvent], kind: str, node_id: str | None = None) -> list[ev.NodeStreamed]:
    """The stream chunks of one kind (of one node)."""
    return [e for e in of_type(events, ev.NodeStreamed) if e.kind == kind and (node_id is None or e.node_id == node_id)]


def positions_are_contiguous(events: list[ev.RunEvent]) -> bool:
    """True when the run's positions are 1..n with no gap."""
    return [event.originator_version for event in events] == list(range(1, len(events) + 1))
