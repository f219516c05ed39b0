"""The composition root: builds every service part from settings, starts and stops them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from uuid import UUID

from engine.access import KeyFile, KeyRing
from engine.catalogue import DEMO_DIR, Catalogue
from engine.context.access import VisitContextTools
from engine.context.tokens import ContextTokens
from engine.context.views import ContextReader
from engine.dispatch import HAND_BACK_SECONDS, JobDispatch
from engine.dispatch.webhooks import QueuedDeliveries
from engine.execution import Engine, RunExecutor, RunLocks, RunTasks, session_tools
from engine.execution.models import build_registry
from engine.execution.ports import ContextTools
from engine.hermes import DEMO_DIR as HERMES_DEMO_DIR
from engine.readmodel import ReadModel
from engine.runs.erasure import RunEraser
from engine.runs.hot import FrameEncoder
from engine.runs.hot_runs import HotRuns
from engine.runs.retention import Retention
from engine.runs.service import RunService
from engine.settings import Settings
from engine.store import AsyncEventStore, EventStore, parse_database_url
from engine.store.postgres_tail import PostgresTail
from engine.webhooks.delivery import Deliverer
from engine.webhooks.service import LocalDeliveries, Webhooks
from engine.webhooks.signing import parse_secret
from engine.workspace.directory import Workspace
from engine.workspace.retention import sweep_workspaces

logger = logging.getLogger("flowtrail")


@dataclass
class Services:
    """Everything a request handler may use."""

    settings: Settings
    store: AsyncEventStore
    hot_runs: HotRuns
    runs: RunService
    keys: KeyRing
    catalogue: Catalogue
    workspace: Workspace
    tokens: ContextTokens
    context: ContextReader
    context_tools: VisitContextTools
    read_model: ReadModel
    eraser: RunEraser
    retention: Retention
    webhooks: Webhooks
    key_file: KeyFile | None = None
    tail: PostgresTail | None = None
    engine: RunExecutor | None = None
    dispatch: JobDispatch | None = None
    _sweepers: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        """Open connections, load the catalogue and begin the live tail."""
        await self.store.start()
        await asyncio.to_thread(self.read_model.start)
        await self.catalogue.load()
        directories = [DEMO_DIR] if self.settings.load_demos else []
        if self.settings.load_demos and self.settings.engine.hermes_gateways:
            directories.append(HERMES_DEMO_DIR)
        if self.settings.workflows_dir is not None:
            directories.append(self.settings.workflows_dir)
        await self.catalogue.publish_directories(directories)
        if self.tail is not None:
            await self.tail.start()
        hot_interval = max(1.0, min(60.0, self.settings.stream.hot_retention_seconds / 4))
        self._sweepers = [
            asyncio.create_task(_every(hot_interval, self._evict_idle_runs), name="flowtrail-hot-sweeper"),
            asyncio.create_task(
                _every(self.settings.uploads.sweep_interval_seconds, self._sweep_workspaces),
                name="flowtrail-workspace-sweeper",
            ),
        ]
        if self.retention.enabled:
            self._sweepers.append(asyncio.create_task(
                _every(self.retention.settings.sweep_seconds, self._sweep_retention), name="flowtrail-retention-sweeper",
            ))
        if self.dispatch is not None:
            await self.dispatch.start()
            self._sweepers.append(asyncio.create_task(
                _every(self.settings.dispatch.stall_seconds, self._requeue_orphans), name="flowtrail-orphan-sweeper",
            ))
        if self.engine is not None:
            await self.engine.recover()
        self._sweepers.append(asyncio.create_task(self._resume_webhooks(), name="flowtrail-webhooks-resume"))
        self.tokens.start()
        if self.key_file is not None:
            self._sweepers.append(asyncio.create_task(self.key_file.watch(), name="flowtrail-key-file-watch"))

    def reload_keys(self) -> None:
        """Re-read the key file now (SIGHUP); keys from FLOWTRAIL_API_KEYS cannot change while the process runs."""
        if self.key_file is not None:
            self.key_file.ask()
            return
        logger.warning("asked to reload the API keys, but they come from FLOWTRAIL_API_KEYS (or are the demo key), "
                       "which a running process cannot re-read: nothing changed (FLOWTRAIL_API_KEYS_FILE can be reloaded)")

    async def _resume_webhooks(self) -> None:
        """Take up the deliveries the log leaves pending, beside the start (a long history does not hold it up)."""
        try:
            resumed = await self.webhooks.resume()
        except Exception:
            logger.exception("the pending webhooks could not be taken up now; the next start takes them up")
            return
        if resumed:
            logger.info("webhooks of %d run events are being delivered again (pending when the service stopped)", resumed)

    async def _requeue_orphans(self) -> None:
        if self.engine is not None:
            rows = await self.read_model.running()
            await self.engine.requeue_orphans([(UUID(hex=row.run_id), row.last_event_id) for row in rows])

    async def _evict_idle_runs(self) -> None:
        self.hot_runs.evict_idle()

    async def _sweep_workspaces(self) -> None:
        removed = await sweep_workspaces(self.store, self.workspace)
        if removed:
            logger.info("deleted %d workspaces (past their retention, or left by an unfinished upload)", len(removed))

    async def _sweep_retention(self) -> None:
        erased = await self.retention.sweep()
        if erased:
            logger.info("retention erased the content of %d runs", erased)

    def stop_taking_work(self) -> None:
        """The process stops (a signal): streams end with the reconnect hint, readiness says not ready, no job is
        taken and no visit begins; the visits in flight go on (`drain`)."""
        self.hot_runs.close_streams()
        if self.engine is not None:
            self.engine.stop_taking_runs()
        if self.dispatch is not None:
            self.dispatch.stop_taking_jobs(self.settings.dispatch.drain_seconds)

    async def drain(self) -> None:
        """After `stop_taking_work`: wait (at most FLOWTRAIL_DRAIN_SECONDS) until every run executing here reached
        a visit boundary and was handed over; hand over the rest at once (both logged)."""
        if self.engine is not None:
            await self.engine.drain(self.settings.dispatch.drain_seconds)
        if self.dispatch is not None:
            await self.dispatch.stopped(HAND_BACK_SECONDS)

    async def close(self) -> None:
        """Hand over at once what still executes here, flush writers, stop the tail and close the store."""
        for sweeper in self._sweepers:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        if self.engine is not None:
            self.engine.stop_taking_runs()
        if self.dispatch is not None:
            await self.dispatch.close()
        await self.webhooks.close()
        if self.engine is not None:
            await self.engine.close()
        await self.tokens.close()
        await self.runs.close()
        if self.tail is not None:
            await self.tail.close()
        await asyncio.to_thread(self.read_model.close)
        await self.store.close()


async def _every(seconds: float, job: Callable[[], Awaitable[None]]) -> None:
    """Run a housekeeping job forever at an interval; a failure is logged, not fatal."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await job()
        except Exception:
            logger.exception("housekeeping job %s failed", getattr(job, "__name__", job))


# Collect the young generation every 50,000 allocations instead of 700. A hot run holds
# thousands of long-lived objects, and with the default thresholds loading one cold run
# set off a full collection about every third time (30-40 ms each). Our projections make
# no reference cycles, so little garbage waits for the collector (docs/decisions/0009).
# The server sets this at start-up; benches that build the services themselves do too.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    """Move start-up objects out of the collector's way and make collections rarer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def build_services(settings: Settings, *, encode_frame: FrameEncoder,
                   context_tools: ContextTools | None = None) -> Services:
    """Wire the store, the hot read side, the run service and the keys (nothing connects yet).

    `encode_frame` is the HTTP edge's SSE framing (`api.sse.encode_frame`): the engine keeps frames, not Litestar.
    `context_tools` replaces what hands model visits their context tools (tests hand in fakes).
    """
    location = parse_database_url(settings.store.database_url)
    sync_store = EventStore(location)
    store = AsyncEventStore(
        sync_store, write_threads=settings.store.write_threads, retry_seconds=settings.store.write_retry_seconds,
    )
    hot_runs = HotRuns(
        lambda run_id, after, limit: store.read_stream(run_id, after=after, limit=limit),
        store.last_position,
        max_frames=settings.stream.hot_buffer_messages,
        retention_seconds=settings.stream.hot_retention_seconds,
        encode_frame=encode_frame, rows=store,
    )
    runs = RunService(
        store, hot_runs, coalesce_seconds=settings.stream.coalesce_ms / 1000.0, turn_seconds=settings.stream.turn_ms / 1000.0,
        ahead_chunks=settings.stream.ahead_chunks, run_ahead_chunks=settings.stream.run_ahead_chunks,
    )
    tokens = ContextTokens(settings.context)
    registry = build_registry(settings.engine)
    catalogue = Catalogue(store, model_ids=registry.model_ids)
    workspace = Workspace(settings.workspaces_dir)
    context = ContextReader(
        runs, hot_runs, tokens, enabled=settings.context.enabled,
        hot_retention_seconds=settings.stream.hot_retention_seconds,
    )
    visit_tools = VisitContextTools(tokens, settings.context, base_url=f"http://127.0.0.1:{settings.port}",
                                    reader=context)
    tools = session_tools(settings.engine, registry, workspace, visit_tools if context_tools is None else context_tools)
    # The engine in order, with no setter: its run tasks, the dispatch that calls them, then its commands.
    tasks = RunTasks(runs, catalogue, tools, RunLocks())
    tail, dispatch = None, None
    if location.kind == "postgres":
        tail = PostgresTail(
            location, sync_store.mapper, wanted=lambda run_id, at: hot_runs.wants(run_id, at) or tasks.executing(run_id),
            deliver=partial(_deliver_foreign, hot_runs, tasks), local_appends_done=store.appends_done,
        )
        sync_store.ids_taken = tail.appended_here
        dispatch = JobDispatch(location, settings.dispatch, execute=tasks.execute_here)
    engine = Engine(runs, tasks, dispatch=dispatch)
    keys = KeyRing(settings.api_keys)
    key_file = None if settings.api_keys_file is None else KeyFile(
        settings.api_keys_file, keys, poll_seconds=settings.api_keys_poll_seconds,
    )
    read_model = ReadModel(store)
    eraser = RunEraser(store, hot_runs, workspace)
    webhooks = _webhooks(settings, store, runs, keys, tasks, dispatch)
    return Services(
        settings=settings, store=store, hot_runs=hot_runs, runs=runs, keys=keys, key_file=key_file,
        catalogue=catalogue, workspace=workspace, tail=tail, engine=engine, tokens=tokens,
        context=context, context_tools=visit_tools, read_model=read_model, dispatch=dispatch, eraser=eraser,
        retention=Retention(settings.retention, store, read_model, eraser), webhooks=webhooks,
    )


def _webhooks(settings: Settings, store: AsyncEventStore, runs: RunService, keys: KeyRing, tasks: RunTasks,
              dispatch: JobDispatch | None) -> Webhooks:
    """Webhooks signed with the secret the settings name (none set: none sent), their attempts made by the job
    queue (PostgreSQL) or by this process (SQLite); every batch a run's writer appends is looked at for triggers."""
    secret = os.environ.get(settings.webhooks.secret_env, "")
    key = parse_secret(settings.webhooks.secret_env, secret) if secret else b""
    webhooks = Webhooks(settings.webhooks, enabled=bool(key), keys=keys, read_events=runs.events,
                        read_all=store.read_all)
    if key:
        deliverer = Deliverer(
            settings.webhooks, key, link_base=settings.webhooks.link_base or f"http://{settings.host}:{settings.port}",
            read_events=runs.events, writing=tasks.writing,
        )
        webhooks.deliverer = deliverer
        webhooks.courier = (
            QueuedDeliveries(dispatch, deliverer.attempt) if dispatch is not None else LocalDeliveries(deliverer.attempt)
        )
        runs.on_appended = webhooks.appended
    return webhooks


def _deliver_foreign(hot_runs: HotRuns, tasks: RunTasks, events: Sequence[Any]) -> None:
    """Events other processes appended: to the hot runs, and a cancel to the run's task when it executes here."""
    hot_runs.publish(events)
    tasks.foreign_events(events)
