"""Drive runs through the real run service, the way the engine does."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID, uuid4

from domain import run as decide
from engine.bootstrap import Services
from engine.runs.creation import NewRun
from engine.runs.writer import RunWriter

FLOW = {"workflow_id": 7, "workflow_name": "allowed-flow", "workflow_version": 1, "display_name": "Allowed", "mode": "DAG"}
OTHER_FLOW = {"workflow_id": 8, "workflow_name": "other-flow", "workflow_version": 1, "display_name": "Other", "mode": "DAG"}


async def new_run(services: Services, flow: dict[str, Any] = FLOW) -> UUID:
    """Create and start a run; returns its id."""
    created = await services.runs.create(NewRun(caller_key_id="all", **flow))
    writer = await services.runs.writer(created.run_id)
    await writer.decide(decide.start_run)
    return created.run_id


async def open_visit(writer: RunWriter, node_id: str = "research") -> str:
    """Start a visit of a node; returns its uuid."""
    visit_uuid = uuid4().hex
    await writer.decide(lambda run, at: decide.start_visit(
        run, at, visit_uuid=visit_uuid, node_id=node_id, node_type="agent", node_label=node_id.title(),
        iter_seq=1, sort_order=1,
    ))
    return visit_uuid


async def stream_steps(writer: RunWriter, visit_uuid: str, count: int, node_id: str = "research", start: int = 0) -> None:
    """Append `count` distinct step chunks (steps are never merged)."""
    for i in range(start, start + count):
        await writer.stream(visit_uuid=visit_uuid, node_id=node_id, kind="step", content=f'{{"iteration":{i}}}')


async def finish(writer: RunWriter, visit_uuid: str, node_id: str = "research") -> None:
    """Close the visit and complete the run."""
    await writer.decide(
        lambda run, at: decide.complete_visit(run, at, visit_uuid=visit_uuid, node_id=node_id,
                                              output={"status": 200, "message": "ok", "data": {"x": 1}}),
        lambda run, at: decide.record_visit(run, at, visit_uuid=visit_uuid, node_id=node_id),
        lambda run, at: decide.complete_run(run, at, output={"status": 200, "message": "done", "data": {}}),
    )


async def appending(services: Services, run_id: UUID, visit: str, rounds: int) -> None:
    """Append `rounds` batches of 100 step chunks, a moment apart, then close the visit and the run."""
    writer = await services.runs.writer(run_id)
    for i in range(rounds):
        await stream_steps(writer, visit, 100, start=i * 100)
        await asyncio.sleep(0.01)
    await finish(writer, visit)


async def run_with_steps(services: Services, steps: int) -> UUID:
    """A finished run with one visit of `steps` step chunks."""
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visit = await open_visit(writer)
    await stream_steps(writer, visit, steps)
    await finish(writer, visit)
    await services.runs.release(run_id)
    return run_id
