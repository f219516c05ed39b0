"""Runs shaped like the examples of the context query spec (§2), driven through the real writer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import httpx

from domain import run as decide
from engine.bootstrap import Services
from engine.runs.writer import RunWriter
from tests.support.runs import new_run

B_OUTPUT = {"status": 200, "message": "调用成功", "data": {"result": "hello", "count": 10}}
B_TODOS = [{"text": "任务A", "status": "completed"}, {"text": "任务B", "status": "pending"}]


@dataclass
class ExampleRun:
    """A run whose visits are named like the spec's (`v1`...), and the visit that asks."""

    run_id: UUID
    asker: str


class Visits:
    """Opens and closes visits of one run with a running sortOrder."""

    def __init__(self, writer: RunWriter) -> None:
        self.writer = writer
        self.sort_order = 0
        self.iter_seqs: dict[str, int] = {}
        self.node_of: dict[str, str] = {}

    async def open(self, node_id: str, uuid: str, *, after: str | None = None,
                   predecessors: tuple[str, ...] = ()) -> str:
        """Start a visit of `node_id` coming from `after` (or joining `predecessors`)."""
        self.sort_order += 1
        self.iter_seqs[node_id] = self.iter_seqs.get(node_id, 0) + 1
        sort_order, iter_seq = self.sort_order, self.iter_seqs[node_id]
        from_node = self.node_of.get(after) if after else None
        self.node_of[uuid] = node_id
        await self.writer.decide(lambda run, at: decide.start_visit(
            run, at, visit_uuid=uuid, node_id=node_id, node_type="agent", node_label=node_id,
            iter_seq=iter_seq, sort_order=sort_order, from_visit_uuid=after,
            from_node_id=from_node,
            predecessor_visit_uuids=predecessors,
        ))
        return uuid

    async def close(self, node_id: str, uuid: str, output: dict[str, Any] | None = None) -> None:
        """Complete the visit with an envelope."""
        envelope = output or {"status": 200, "message": "调用成功", "data": {"node": node_id}}
        await self.writer.decide(lambda run, at: decide.complete_visit(
            run, at, visit_uuid=uuid, node_id=node_id, output=envelope))

    async def record(self, node_id: str, uuid: str) -> None:
        """Record the ended visit, as the engine does after it ends."""
        await self.writer.decide(lambda run, at: decide.record_visit(run, at, visit_uuid=uuid, node_id=node_id))

    async def visit(self, node_id: str, uuid: str, **how: Any) -> str:
        """Open and complete a visit."""
        await self.open(node_id, uuid, **how)
        await self.close(node_id, uuid)
        return uuid


async def stream_b(writer: RunWriter, uuid: str = "v2") -> None:
    """B's intermediate data as §2.3 shows it: two thinking steps, tool calls, two TODO lists."""
    async def chunk(kind: str, content: str, tool: str | None = None) -> None:
        await writer.stream(visit_uuid=uuid, node_id="B", kind=kind, content=content, tool_name=tool)

    await chunk("thinking", "第一")
    await chunk("thinking", "步")
    await chunk("status", "searching")
    await chunk("thinking", "第二步")
    await chunk("tool_call", "{q:1}", "search")
    await chunk("tool_result", "结果摘要", "search")
    await chunk("tool_call", "{x:2}", "calc")
    await chunk("todo_update", json.dumps([{"text": "任务A", "status": "pending"}], ensure_ascii=False))
    await chunk("todo_update", json.dumps(B_TODOS, ensure_ascii=False))
    await writer.flush()


async def linear_run(services: Services) -> ExampleRun:
    """§2.1 first example: A -> B -> C -> G; G (v4) is running and asks."""
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visits = Visits(writer)
    await visits.visit("A", "v1")
    await visits.open("B", "v2", after="v1")
    await stream_b(writer)
    await visits.close("B", "v2", B_OUTPUT)
    await visits.visit("C", "v3", after="v2")
    await visits.open("G", "v4", after="v3")
    return ExampleRun(run_id, "v4")


async def back_edge_run(services: Services) -> ExampleRun:
    """§2.1 second example: A -> C, A -> B -> G, then G flies back to C (v4, iterSeq 2), which asks."""
    run_id = await new_run(services)
    visits = Visits(await services.runs.writer(run_id))
    await visits.visit("A", "v1")
    await visits.visit("C", "c1", after="v1")
    await visits.visit("B", "v2", after="v1")
    await visits.visit("G", "v3", after="v2")
    await visits.open("C", "v4", after="v3")
    return ExampleRun(run_id, "v4")


async def join_run(services: Services) -> ExampleRun:
    """A DAG join: A -> B, A -> C, then D (running, asking) joins B and C; E comes after D."""
    run_id = await new_run(services)
    visits = Visits(await services.runs.writer(run_id))
    await visits.visit("A", "a")
    await visits.visit("B", "b", after="a")
    await visits.visit("C", "c", after="a")
    await visits.open("D", "d", predecessors=("b", "c"))
    await visits.visit("E", "e", after="d")
    return ExampleRun(run_id, "d")


class ContextClient:
    """Posts context queries to a server with a token, the way the agent's tools do."""

    def __init__(self, base_url: str, run_id: UUID, token: str | None) -> None:
        self.run_id = run_id
        headers = {"X-Context-Token": token} if token else {}
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=httpx.Timeout(10.0))

    async def post(self, what: str, **body: Any) -> httpx.Response:
        """POST /internal/context/{what} with runId and the given camelCase fields."""
        return await self.http.post(f"/internal/context/{what}", json={"runId": self.run_id.hex, **body})

    async def __aenter__(self) -> ContextClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()


CHAIN, LOOPS = 150, 99
"""A long run: a DAG chain of 150 nodes, then 99 AGENTIC revisits of plan/act, then the asker: 250 visits."""


async def long_run(services: Services) -> ExampleRun:
    """250 visits, past the memory index's 200: `step-001`...`step-150`, plan/act revisited in turn, then `report` asks.

    Every visit past the cap streams a thinking step and is recorded, as the engine records visits.
    """
    run_id = await new_run(services)
    writer = await services.runs.writer(run_id)
    visits = Visits(writer)
    previous: str | None = None
    names = [f"step-{i:03}" for i in range(1, CHAIN + 1)] + [("plan", "act")[i % 2] for i in range(LOOPS)]
    for number, node_id in enumerate(names, start=1):
        uuid = f"v{number:03}"
        await visits.open(node_id, uuid, after=previous)
        if number > 200:
            await writer.stream(visit_uuid=uuid, node_id=node_id, kind="thinking", content=f"thought {number}")
        await visits.close(node_id, uuid, {"status": 200, "message": "调用成功", "data": {"n": number}})
        await visits.record(node_id, uuid)
        previous = uuid
    await visits.open("report", "v250", after=previous)
    await writer.flush()
    return ExampleRun(run_id, "v250")
