"""The flowtrail service inside a bench process, and all that benches ask of it.

This is the only bench module that knows `engine.bootstrap.Services` (and `create_app`, which
takes it): the host process and the benches that build the service themselves (append,
engine_throughput, context_query) go through `Service`, so a change to the shape of
`Services` is followed here alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import uvicorn
from litestar import Litestar

from api.app import create_app
from api.sse import encode_frame
from bench.names import FLOW, NODE_ID
from bench.stores import Store
from domain import events as ev
from domain import run as decide
from engine.bootstrap import build_services, tune_collector
from engine.readmodel import ReadModel
from engine.runs.creation import NewRun
from engine.runs.writer import RunWriter
from engine.settings import Settings, StoreSettings
from engine.store import AsyncEventStore


def settings_for(store: Store, data_dir: Path, **fields: Any) -> Settings:
    """The service's settings on a bench store, with `fields` (Settings field names) over the defaults."""
    return Settings(data_dir=data_dir, store=StoreSettings(database_url=store.url), **fields)


class Service:
    """The service as the server builds it (`build_services`), not started until `running`/`serving`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app: Litestar | None = None
        self._services = build_services(settings, encode_frame=encode_frame)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Service]:
        """Started without HTTP, the collector tuned as the server does at start-up; closed on exit."""
        try:
            await self._services.start()
            tune_collector()
            yield self
        finally:
            await self._services.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Service]:
        """Behind uvicorn on the settings' host and port, as `flowtrail serve` runs it (the app's lifespan starts and closes it)."""
        self.app = create_app(self._services)
        config = uvicorn.Config(
            self.app, host=self.settings.host, port=self.settings.port, log_level="warning", lifespan="on"
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
                raise SystemExit("server stopped during start-up")
            await asyncio.sleep(0.01)
        try:
            yield self
        finally:
            server.should_exit = True
            await task

    @property
    def store(self) -> AsyncEventStore:
        """The event store the service writes to."""
        return self._services.store

    @property
    def read_model(self) -> ReadModel:
        """The run read model the service lists runs from."""
        return self._services.read_model

    async def started_run(self) -> tuple[UUID, RunWriter]:
        """A new run of the bench workflow (FLOW), started: its id and its writer."""
        run_id = (await self._services.runs.create(NewRun(caller_key_id="bench", **FLOW))).run_id
        writer = await self._services.runs.writer(run_id)
        await writer.decide(decide.start_run)
        return run_id, writer

    async def open_run_visit(self, node_id: str = NODE_ID) -> tuple[UUID, RunWriter, str]:
        """A started run with one open agent visit: (run id, its writer, the visit uuid)."""
        run_id, writer = await self.started_run()
        visit = uuid.uuid4().hex
        await writer.decide(
            lambda run, at: decide.start_visit(
                run, at, visit_uuid=visit, node_id=node_id, node_type="agent", node_label="Research",
                iter_seq=1, sort_order=1,
            )
        )
        return run_id, writer, visit

    async def writer(self, run_id: UUID) -> RunWriter:
        """The run's writer in this process."""
        return await self._services.runs.writer(run_id)

    async def release(self, run_id: UUID) -> None:
        """Flush and let go of the run's writer."""
        await self._services.runs.release(run_id)

    def evict_idle(self) -> int:
        """Evict every idle hot run now, as the retention sweeper does once their time is up; how many went."""
        return self._services.hot_runs.evict_idle(now=time.monotonic() + 1e9)

    def is_hot(self, run_id: UUID) -> bool:
        """Whether the run is held in memory."""
        return self._services.hot_runs.is_hot(run_id)

    def forget(self, run_id: UUID) -> None:
        """Drop the run from memory at once, so its next reader goes to the store."""
        self._services.hot_runs.forget(run_id)

    def hot_summary(self, run_id: UUID | None = None) -> dict[str, Any]:
        """How many runs and frames are in memory; with `run_id`, that run's position, frames, watchers, writers."""
        hot_runs = self._services.hot_runs
        info: dict[str, Any] = {"hot_runs": len(hot_runs), "frames": sum(len(h.ids) for h in hot_runs)}
        if run_id is not None:
            hot = hot_runs.find(run_id)
            info["run"] = (
                None
                if hot is None
                else {"version": hot.version, "frames": len(hot.ids), "watchers": hot.watchers, "writers": hot.writers}
            )
        return info

    async def publish(self, definition: dict[str, Any]) -> None:
        """Publish a workflow definition to the catalogue."""
        await self._services.catalogue.publish(definition)

    async def start_workflow_run(self, name: str, variables: dict[str, Any]) -> UUID:
        """Create and start, on the engine, a run of the latest version of a workflow."""
        engine = self._services.engine
        if engine is None:
            raise RuntimeError("this service executes no runs")
        entry = self._services.catalogue.find(name)
        created = await self._services.runs.create(NewRun.of(entry, variables=variables))
        await engine.start(created.run_id)
        return created.run_id

    def fold_every_cold_read(self) -> None:
        """Keep no cold context folds, so every context read of a cold run folds its whole log."""
        self._services.context.cold.max_runs = 0

    async def is_finished(self, run_id: UUID) -> bool:
        """Whether the run has reached a terminal status."""
        return (await self._services.runs.state(run_id)).status.is_terminal

    async def events(self, run_id: UUID) -> list[ev.RunEvent]:
        """The run's events, in order."""
        return await self._services.runs.events(run_id)

    def issue_token(self, run_id: UUID, visit_uuid: str) -> str:
        """A context token for the visit (RuntimeError when the context API is off)."""
        token = self._services.tokens.issue(run_id, visit_uuid)
        if token is None:
            raise RuntimeError("the context query API is disabled")
        return token

    def invalidate_tokens(self, run_id: UUID, visit_uuid: str) -> None:
        """Forget every context token of the visit."""
        self._services.tokens.invalidate_visit(run_id, visit_uuid)
