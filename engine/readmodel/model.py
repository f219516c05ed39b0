"""The run read model: the table, how it is fed, how it is read and how it is rebuilt.

Feeding (docs/decisions/0021-run-read-model.md): every append this process makes is folded into
the rows on the same writer thread before the append's caller resumes, in the append's own
transaction behind a savepoint (one commit for both); so a client sees its
own writes in the listing at once, on both stores. On PostgreSQL the library's `ProjectionRunner`
also follows the notification log (reading what 50 ms of notifications announced at once:
`GatheringSubscription`), so appends by other processes reach the rows (and a row this process
failed to write is repaired); the positions this process folded itself are skipped (`FoldedHere`).
The runner stops when its connection is lost (an outage, a server restart); a watcher thread
starts a new one, which goes on from the tracked position, once the server answers again.
Reads of the rows are retried within the caller's time like every store read
(`AsyncEventStore.bounded`): during an outage a listing answers 503 STORE_UNAVAILABLE.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.projection import Projection, ProjectionRunner

from domain import events as ev
from engine.readmodel.folded import FoldedHere
from engine.readmodel.listing import PostgresRowReader, RunQuery, SqliteRowReader
from engine.readmodel.rows import RunRows
from engine.readmodel.table import ROWS_TABLE, PostgresRunRows, SqliteRunRows, micros
from engine.store import AsyncEventStore, EventStore
from engine.store.event_store import STORED_EVENT_TYPES, FlowtrailApplication
from engine.store.faults import first_line, is_passing, outage_of
from engine.store.location import check_reachable, library_env
from engine.store.mapper import MsgspecMapper
from engine.store.url import APP_NAME, qualified_table
from projections.run_row import RunRow, fold_rows

log = logging.getLogger("flowtrail.readmodel")
RUN_TAGS = tuple(str(t.__struct_config__.tag) for t in ev.RUN_EVENT_TYPES)
_RUNNER_TYPES = frozenset(t for t in ev.RUN_EVENT_TYPES if t is not ev.NodeStreamed)
RUNNER_TOPICS = tuple(str(t.__struct_config__.tag) for t in ev.RUN_EVENT_TYPES if t in _RUNNER_TYPES)
"""What the runner follows: every run event but stream chunks (they move only `last_event_id`; the next
other event catches the row up from the stream)."""
TRACK_SKIPPED_EVERY_SECONDS = 1.0
"""How often the runner records its position while it only skips positions this process folded."""
REBUILD_PAGE = 5000
WATCH_SECONDS = 0.5
"""How often the watcher looks whether the PostgreSQL runner stopped (and tries to start a new one)."""


def followed_by_runner(event: Any) -> bool:
    """True for the events the PostgreSQL runner follows (RUNNER_TOPICS)."""
    return type(event) in _RUNNER_TYPES


class RunRowProjection(Projection[PostgresRunRows]):
    """The library's projection of the log into the run rows, one event and its tracking per transaction;
    positions this process folded in their append's transaction are skipped."""

    name = ROWS_TABLE
    topics = RUNNER_TOPICS
    folded_here: FoldedHere | None = None
    """Set by the read model once the runner is built (until then every position is folded)."""

    def __init__(self, view: PostgresRunRows) -> None:
        super().__init__(view)
        self.rows = RunRows(view, events_table=f"{APP_NAME}_events", mapper=MsgspecMapper(STORED_EVENT_TYPES))
        self._tracked_at = 0.0

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Fold the event into its run's row and record its position, in one transaction; a position another
        replica's runner recorded first is skipped (its transaction folded the event). A position this process
        folded already is skipped too, its position recorded at most once a second."""
        folded = self.folded_here
        skipped = folded is not None and folded.take(tracking.notification_id)
        if skipped and time.monotonic() - self._tracked_at < TRACK_SKIPPED_EVERY_SECONDS:
            return
        try:
            self.rows.apply([] if skipped else [domain_event], tracking.notification_id, track=True)
        except IntegrityError:
            log.debug("position %d was projected by another process", tracking.notification_id)
        self._tracked_at = time.monotonic()


class ReadModel:
    """The run rows of one store: fed after each append, read by pages, rebuilt from the log."""

    def __init__(self, store: AsyncEventStore) -> None:
        self.store = store
        self.kind = store.location.kind
        self.rows = run_rows(store.sync)
        self.reader: SqliteRowReader | PostgresRowReader
        if store.location.sqlite_path is not None:
            self.reader = SqliteRowReader(store.location.sqlite_path, ROWS_TABLE)
        else:
            self.reader = PostgresRowReader(lambda: store.pool, qualified_table(store.location.schema, ROWS_TABLE))
        self.runner: ProjectionRunner[Any, PostgresRunRows] | None = None
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self.runner_restarts = 0
        self._behind = False
        self.folded_here = FoldedHere()
        """Positions fed in their append's transaction, which the PostgreSQL runner need not fold again."""
        store.sync.after_append = self.feed
        store.sync.within_append = self.feed_within

    def feed_within(self, curs: Any, events: Sequence[Any], notification_ids: Sequence[int]) -> bool:
        """Fold an append into the rows in its own transaction (one commit for both); False when the rows are behind
        the log (SQLite), so `feed` catches them up after the commit. A failure is logged, never raised: the rows'
        part is rolled back to its savepoint and the append commits without it."""
        if self._behind:
            return False
        curs.execute("SAVEPOINT flowtrail_run_rows")
        try:
            with settled(curs):
                self.rows.apply_in(curs, events, notification_ids[-1] if notification_ids else None,
                                   track=self.kind == "sqlite")
        except Exception as error:  # noqa: BLE001 - the append stands; the rows are caught up or repaired
            curs.execute("ROLLBACK TO flowtrail_run_rows")
            self._missed(error)
        else:
            if self.kind == "postgres":
                self.folded_here.add(i for event, i in zip(events, notification_ids) if followed_by_runner(event))
        curs.execute("RELEASE flowtrail_run_rows")
        return True

    def feed(self, events: Sequence[Any], notification_ids: Sequence[int]) -> None:
        """Fold an append this process just stored (on its writer thread); a failure is logged, never raised.

        On SQLite the feed also tracks the position; on PostgreSQL the runner does. When the store
        fails the feed for a moment (disk full, connection lost), the rows are caught up from the
        log at the next append (SQLite) or by the runner (PostgreSQL).
        """
        try:
            if self._behind:
                self.catch_up()
                self._behind = False
            else:
                self.rows.apply(events, notification_ids[-1] if notification_ids else None, track=self.kind == "sqlite")
        except Exception as error:  # noqa: BLE001 - the append stands; the rows are caught up or repaired
            self._missed(error)

    def _missed(self, error: Exception) -> None:
        """A feed failed: log it; when the store was away for a moment, catch up at the next append (SQLite)."""
        if not is_passing(error):
            log.error("the run read model missed an append; `flowtrail rebuild-read-model` repairs it", exc_info=error)
            return
        outage_of(self.store.location).failed(error, "read model")
        self._behind = self.kind == "sqlite"  # on PostgreSQL the runner brings the rows up to date

    def start(self) -> None:
        """Rebuild the rows when the table just got new columns; then catch up with the log (SQLite), or start the
        runner that follows it (PostgreSQL)."""
        added = self.rows.add_missing_columns()
        if added:
            rows, position = rebuilt_rows(self.store.sync)
            self.rows.replace_all(rows, position)
            log.info("the run read model got the column(s) %s; its %d rows were rebuilt from the log",
                     ", ".join(added), len(rows))
        if self.kind == "sqlite":
            self.catch_up()
            return
        self.runner = self._new_runner()
        self._watcher = threading.Thread(target=self._watch, name="flowtrail-readmodel-watcher", daemon=True)
        self._watcher.start()

    def _new_runner(self) -> ProjectionRunner[Any, PostgresRunRows]:
        env = {**library_env(self.store.location), "POSTGRES_POOL_SIZE": "0", "POSTGRES_MAX_OVERFLOW": "2"}
        runner: ProjectionRunner[Any, PostgresRunRows] = ProjectionRunner(
            application_class=FlowtrailApplication, projection_class=RunRowProjection,
            view_class=PostgresRunRows, env=env,
        )
        projection = runner.projection
        assert isinstance(projection, RunRowProjection)
        projection.folded_here = self.folded_here
        runner.__enter__()
        return runner

    def _watch(self) -> None:
        """Replace a runner that stopped on an error with a new one, once the server accepts connections."""
        while not self._closing.wait(WATCH_SECONDS):
            runner = self.runner
            if runner is None or not runner.is_interrupted.is_set():
                continue
            outage = False
            try:
                runner.run_forever(timeout=0)  # raises what stopped it
            except Exception as error:  # noqa: BLE001 - whatever stopped it, a new runner goes on from the tracking
                outage = is_passing(error)
                if outage:
                    outage_of(self.store.location).failed(error, "read model")
                else:  # e.g. another process's runner tracked the event first (its transaction was refused)
                    log.debug("the run read model's runner stopped: %s", first_line(error))
            self._stop_runner(runner)
            self.runner = None
            while not self._closing.is_set() and self.runner is None:
                self.runner = self._runner_when_reachable(outage)

    def _runner_when_reachable(self, after_outage: bool) -> ProjectionRunner[Any, PostgresRunRows] | None:
        """A new runner if the server accepts a connection now (checked first, so no half-built runner is left)."""
        if check_reachable(self.store.location) is not None:
            self._closing.wait(WATCH_SECONDS)
            return None
        try:
            runner = self._new_runner()
        except Exception as error:  # noqa: BLE001 - the server went away again; try later
            log.debug("the run read model's runner could not start: %s", first_line(error))
            self._closing.wait(WATCH_SECONDS)
            return None
        self.runner_restarts += 1
        log.log(logging.INFO if after_outage else logging.DEBUG, "the run read model follows the log again (runner restarted)")
        return runner

    @staticmethod
    def _stop_runner(runner: ProjectionRunner[Any, PostgresRunRows]) -> None:
        try:
            runner.__exit__(None, None, None)
        except Exception as error:  # noqa: BLE001 - it stopped on this error already
            log.debug("the run read model's runner stopped: %s", first_line(error))
        finally:
            runner.view.datastore.close()  # the runner closes its application, not its view

    def catch_up(self) -> int:
        """Fold every run event after the tracked position (idempotent); how many were read."""
        after, seen = self.rows.tracking_position(), 0
        recorder, mapper = self.store.sync.app.recorder, self.store.sync.mapper
        while True:
            notes = recorder.select_notifications(after + 1, REBUILD_PAGE, topics=RUN_TAGS)
            if not notes:
                return seen
            self.rows.apply([mapper.to_domain_event(n) for n in notes], notes[-1].id, track=True)
            after, seen = notes[-1].id, seen + len(notes)

    async def page(self, query: RunQuery) -> list[RunRow]:
        """One page of rows (up to limit + 1), newest first."""
        return await self.store.bounded(lambda: self.reader.page(query), "listing")

    async def running(self, *, page: int = 500) -> list[RunRow]:
        """Every row that says RUNNING (executing, paused or asked to cancel), newest first."""
        rows: list[RunRow] = []
        query = RunQuery(limit=page, statuses=("RUNNING",))
        while True:
            found = await self.page(query)
            rows.extend(found[:page])
            if len(found) <= page:
                return rows
            last = found[page - 1]
            query = RunQuery(limit=page, statuses=("RUNNING",), before=(micros(last.created_at) or 0, last.run_id))

    async def ended_before(self, cutoff: datetime, *, limit: int) -> list[UUID]:
        """Runs that ended before `cutoff` and are not erased, the longest ended first (at most `limit`)."""
        at = micros(cutoff) or 0
        found = await self.store.bounded(lambda: self.reader.ended_before(at, limit), "listing")
        return [UUID(hex=run_id) for run_id in found]

    async def row(self, run_id: UUID) -> RunRow | None:
        """A run's stored row."""
        return await self.store.bounded(lambda: self.reader.row(run_id.hex), "listing")

    def close(self) -> None:
        """Stop the watcher, the runner and the reader threads."""
        self.store.sync.after_append = None
        self.store.sync.within_append = None
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        runner, self.runner = self.runner, None
        if runner is not None:
            try:
                runner.__exit__(None, None, None)
            except Exception:
                log.exception("the run read model's runner stopped with an error")
            finally:
                runner.view.datastore.close()  # the runner closes its application, not its view
        self.reader.close()


def rebuilt_rows(store: EventStore) -> tuple[list[RunRow], int]:
    """Every run's row folded afresh from the log, and the log position they reflect."""
    rows: dict[UUID, RunRow | None] = {}
    after = 0
    last = store.last_notification_id()
    while True:
        notes = store.app.recorder.select_notifications(after + 1, REBUILD_PAGE, stop=last, topics=RUN_TAGS)
        for note in notes:
            event = store.mapper.to_domain_event(note)
            rows[event.originator_id] = fold_rows(rows.get(event.originator_id), [event])
        if len(notes) < REBUILD_PAGE:
            return [r for r in rows.values() if r is not None], last
        after = notes[-1].id


def rebuild(store: EventStore) -> int:
    """Replace every row with its fold from the log (one transaction); how many rows there are."""
    rows, position = rebuilt_rows(store)
    run_rows(store).replace_all(rows, position)
    return len(rows)


def run_rows(store: EventStore) -> RunRows:
    """The run-row table's writer over a store's own connections (the table is created if missing)."""
    factory: Any = store.app.factory
    recorder: SqliteRunRows | PostgresRunRows
    if store.location.kind == "sqlite":
        recorder = factory.tracking_recorder(SqliteRunRows)
    else:
        recorder = PostgresRunRows(datastore=factory.datastore, tracking_table_name=f"{ROWS_TABLE}_tracking")
        recorder.create_table()
    return RunRows(recorder, events_table=store.events_table, mapper=store.mapper)


def settled(curs: Any) -> contextlib.AbstractContextManager[Any]:
    """Statements whose errors are raised by the end of the block: PostgreSQL's insert runs in psycopg's pipeline
    mode, where an error is only known at the next sync (a nested pipeline block syncs as it ends)."""
    connection: Any = getattr(curs, "connection", None)
    if getattr(getattr(connection, "info", None), "pipeline_status", None):
        pipeline: contextlib.AbstractContextManager[Any] = connection.pipeline()
        return pipeline
    return contextlib.nullcontext()
