"""The external API under test: a server with seed-like keys and workflows, and a hand-driven engine.

`ManualEngine` implements the engine's interface (start, answer, cancel) with the run
writer and nothing else, so contract tests decide exactly what each run does next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from domain import run as decide
from engine.access import ApiKey, read_key_file
from engine.bootstrap import Services
from engine.execution import CancelOutcome, RunExecutor
from engine.settings import UploadSettings
from tests.support.server import RunningServer, server_settings

DEMO_KEY = "demo-key"
SCOPED_KEY = "scoped-key"
ID_SCOPED_KEY = "id-scoped-key"
AUDITOR_KEY = "auditor-key"

KEYS = (
    ApiKey(key=DEMO_KEY, id="demo", sees_all_runs=True),
    ApiKey(key=SCOPED_KEY, id="scoped", workflow_names=("report-pipeline",)),
    ApiKey(key=ID_SCOPED_KEY, id="id-scoped", workflow_ids=(2,)),
    ApiKey(key=AUDITOR_KEY, id="auditor", workflow_names=("report-pipeline",), sees_all_runs=True),
)

MILITARY = {
    "name": "military-analyze-agent",
    "displayName": "军事分析助手",
    "description": "分析一个主题并写出报告",
    "mode": "DAG",
    "nodes": [
        {"id": "node-1", "type": "userInput", "label": "输入", "data": {"inputs": [
            {"name": "topic", "type": "string", "required": True, "description": "主题"},
            {"name": "maxTokens", "type": "number"},
        ]}},
        {"id": "node-2", "type": "agent", "label": "研究助手", "data": {"prompt": "研究 {{topic}}"}},
        {"id": "node-3", "type": "output", "label": "输出", "data": {"outputs": [
            {"name": "summary", "type": "string", "value": "{{node-2.research}}", "description": "摘要"},
        ]}},
    ],
    "edges": [{"source": "node-1", "target": "node-2"}, {"source": "node-2", "target": "node-3"}],
}

REPORT = {
    "name": "report-pipeline",
    "displayName": "报告流水线",
    "mode": "DAG",
    "nodes": [
        {"id": "input", "type": "userInput", "data": {"inputs": [{"name": "topic"}]}},
        {"id": "done", "type": "output", "data": {"outputs": [{"name": "report", "value": "{{topic}}"}]}},
    ],
    "edges": [{"source": "input", "target": "done"}],
}

OK_ENVELOPE = {"status": 200, "message": "调用成功", "data": {"research": "..."}}


class ManualEngine:
    """The engine interface, driven by hand: start/answer/cancel append exactly one fact each."""

    def __init__(self, services: Services) -> None:
        self.services = services
        engine = services.engine
        self.replaced: RunExecutor | None = engine.replaced if isinstance(engine, ManualEngine) else engine
        self.started: list[UUID] = []

    async def recover(self) -> None:
        """Nothing executes, so nothing is recovered."""

    async def requeue_orphans(self, running: Sequence[tuple[UUID, int]]) -> list[UUID]:
        """Nothing executes, so no run lacks a job."""
        return []

    def stop_taking_runs(self) -> None:
        """Nothing executes, so nothing stops."""

    async def drain(self, window: float) -> None:
        """Nothing executes, so nothing is handed over."""

    async def close(self) -> None:
        """Release what the real engine it stands in for holds."""
        if self.replaced is not None:
            await self.replaced.close()

    async def start(self, run_id: UUID) -> None:
        """Append RunStarted (the domain refuses a second start)."""
        writer = await self.services.runs.writer(run_id)
        await writer.decide(decide.start_run)
        self.started.append(run_id)

    async def answer(self, run_id: UUID, clarify_id: str, answer: str) -> bool:
        """Append ClarifyAnswered; the run is not woken (nothing executes), so not accepted."""
        writer = await self.services.runs.writer(run_id)
        await writer.decide(lambda run, at: decide.answer_clarify(run, at, clarify_id=clarify_id, answer=answer))
        return True

    async def cancel(self, run_id: UUID) -> CancelOutcome:
        """Record the request; confirming it is up to the test (`confirm_cancel`)."""
        writer = await self.services.runs.writer(run_id)
        run = writer.run
        if run.status.is_terminal:
            return "already_finished"
        if run.cancel_requested:
            return "already_requested"
        await writer.decide(decide.request_cancel)
        return "requested"


async def start_api_server(
    store: str, data_dir: Path, *, keys: tuple[ApiKey, ...] = KEYS, uploads: UploadSettings | None = None,
    manual: bool = True, key_file: Path | None = None, key_poll_seconds: float = 3600.0, **stream: Any,
) -> RunningServer:
    """A server over `store` with the seed's keys (or a key file's) and the two test workflows published."""
    settings = replace(server_settings(store, data_dir, **stream), api_keys=keys)
    if key_file is not None:
        settings = replace(settings, api_keys=read_key_file(key_file), api_keys_file=key_file,
                           api_keys_poll_seconds=key_poll_seconds)
    if uploads is not None:
        settings = replace(settings, uploads=uploads)
    server = RunningServer(settings)
    if manual:
        server.services.engine = ManualEngine(server.services)
    await server.start()
    await server.services.catalogue.publish(MILITARY)
    await server.services.catalogue.publish(REPORT)
    return server


async def open_visit(services: Services, run_id: UUID, node_id: str = "node-2", label: str = "研究助手") -> str:
    """Start a visit of a node in a started run; returns its uuid."""
    writer = await services.runs.writer(run_id)
    visit_uuid = uuid4().hex
    await writer.decide(lambda run, at: decide.start_visit(
        run, at, visit_uuid=visit_uuid, node_id=node_id, node_type="agent", node_label=label,
        iter_seq=1, sort_order=run.visit_count + 1,
    ))
    return visit_uuid


async def stream(services: Services, run_id: UUID, visit_uuid: str, kind: str, content: str,
                 node_id: str = "node-2", tool_name: str | None = None) -> None:
    """Append one stream chunk and flush it."""
    writer = await services.runs.writer(run_id)
    await writer.stream(visit_uuid=visit_uuid, node_id=node_id, kind=kind, content=content, tool_name=tool_name)
    await writer.flush()


async def ask(services: Services, run_id: UUID, visit_uuid: str, clarify_id: str, question: str,
              choices: tuple[str, ...], node_id: str = "node-2") -> None:
    """Pause the run with a question."""
    writer = await services.runs.writer(run_id)
    await writer.decide(lambda run, at: decide.request_clarify(
        run, at, clarify_id=clarify_id, visit_uuid=visit_uuid, node_id=node_id, question=question, choices=choices,
    ))


async def complete_visit(services: Services, run_id: UUID, visit_uuid: str, node_id: str = "node-2",
                         output: dict[str, Any] = OK_ENVELOPE) -> None:
    """Close a visit with an output envelope and record it."""
    writer = await services.runs.writer(run_id)
    await writer.decide(
        lambda run, at: decide.complete_visit(run, at, visit_uuid=visit_uuid, node_id=node_id, output=output),
        lambda run, at: decide.record_visit(run, at, visit_uuid=visit_uuid, node_id=node_id),
    )


async def finish(services: Services, run_id: UUID, data: Any = None) -> None:
    """Complete the run with the seed's output envelope."""
    writer = await services.runs.writer(run_id)
    output = {"status": 200, "message": "工作流执行成功", "data": data if data is not None else {"summary": "本报告探讨了..."}}
    await writer.decide(lambda run, at: decide.complete_run(run, at, output=output))


async def fail(services: Services, run_id: UUID, error: str) -> None:
    """Fail the run."""
    writer = await services.runs.writer(run_id)
    await writer.decide(lambda run, at: decide.fail_run(run, at, error=error))


async def confirm_cancel(services: Services, run_id: UUID) -> None:
    """The engine confirms it stopped the run."""
    writer = await services.runs.writer(run_id)
    await writer.decide(decide.cancel_run)


async def log_end(services: Services) -> int:
    """The newest notification id of the whole log (to prove a refusal appended nothing)."""
    return await services.store.last_notification_id()


def tags_since(services: Services, notification_id: int) -> list[str]:
    """The tags of the events stored after a notification id, in log order (ids may skip: on PostgreSQL an
    insert that was refused, e.g. a group commit with a lost race in it, still used up its sequence values)."""
    return [n.topic for n in services.store.sync.app.recorder.select_notifications(notification_id + 1, 1000)]
