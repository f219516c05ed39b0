"""How replicas share the runs through the job queue, and how a stopping process hands its runs over: the settings
group `Settings.dispatch` (read by engine.settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from engine.config import setting


@dataclass(frozen=True)
class DispatchSettings:
    """How replicas on one PostgreSQL share the runs (procrastinate jobs), and how a stopping process hands its runs
    over (on SQLite too: to its own next start)."""

    worker_concurrency: Annotated[int, setting(
        "FLOWTRAIL_WORKER_CONCURRENCY", "runs one replica executes at once (the rest wait as queued jobs)", ge=1,
    )] = 100
    heartbeat_seconds: Annotated[float, setting(
        "FLOWTRAIL_WORKER_HEARTBEAT_SECONDS", "how often a replica's job worker says it is alive", gt=0,
    )] = 5.0
    stall_seconds: Annotated[float, setting(
        "FLOWTRAIL_WORKER_STALL_SECONDS", "a replica silent this long is taken for dead: its runs continue on "
        "another replica", gt=0,
    )] = 30.0
    pool_size: Annotated[int, setting(
        "FLOWTRAIL_WORKER_POOL_SIZE", "PostgreSQL connections of the job queue per replica (one more listens)", ge=2,
    )] = 3
    drain_seconds: Annotated[float, setting(
        "FLOWTRAIL_DRAIN_SECONDS", "on SIGTERM/SIGINT, how long the visits in flight get to end: each run stops at its "
        "next visit boundary and continues from its log on another replica (SQLite: at the next start); a run still "
        "in a visit when this ends is handed over at once and that visit runs again", ge=0,
    )] = 20.0
