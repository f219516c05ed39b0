"""`flowtrail serve`: bind the port, then (SQLite) take the file's serve lock, then open the store, join the
job workers (PostgreSQL) and recover runs, then say "listening" and serve. A process that cannot bind or lock
touches no run."""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import signal
import socket
from collections.abc import Callable
from typing import IO

import uvicorn

from api.app import create_app
from api.protocol import connection_options
from api.server import GracefulServer
from api.sse import encode_frame
from engine.access import warn_of_former_ids
from engine.bootstrap import build_services
from engine.config import SettingsError
from engine.dispatch.solo import AlreadyServed, hold_serve_lock
from engine.dispatch.startup import StartupLock
from engine.observability.logs import configure_logging, uvicorn_logging
from engine.observability.tracing import start_tracing, stop_tracing
from engine.store import parse_database_url
from scripts.connect import server_settings

log = logging.getLogger("flowtrail")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, so that a second copy stops here, before it touches the store or a run."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        variable = "FLOWTRAIL_PORT" if error.errno == errno.EADDRINUSE else "FLOWTRAIL_HOST"
        raise SettingsError(variable, f"cannot listen on {host}:{port}: {error.strerror}",
                            "a free port on an address of this machine") from None
    return sock


def lock_sqlite(database_url: str) -> IO[str] | None:
    """On SQLite, the file's serve lock (held while the returned file stays open); None on PostgreSQL."""
    location = parse_database_url(database_url)
    if location.kind != "sqlite":
        return None
    assert location.sqlite_path is not None
    try:
        return hold_serve_lock(location.sqlite_path)
    except AlreadyServed as error:
        raise SettingsError("FLOWTRAIL_DATABASE_URL", str(error),
                            "one server per SQLite file (several replicas need PostgreSQL)") from None
    except OSError as error:
        raise SettingsError("FLOWTRAIL_DATABASE_URL",
                            f"cannot open the SQLite file {location.sqlite_path}: {error.strerror or error}",
                            "a path in a directory this process can create and write") from None


class Server(GracefulServer):
    """The graceful server on our socket; it says "listening" once the app has started and it accepts requests."""

    started_up: StartupLock | None = None
    """Released once the app has started (or failed to), so the next replica may start."""
    on_hangup: Callable[[], None] | None = None
    """What SIGHUP does (re-read the API key file); without it, SIGHUP ends the process as by default."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start the app (the store opens, runs are recovered), then serve the sockets."""
        if self.on_hangup is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.on_hangup)
        try:
            await super().startup(sockets=sockets)
        finally:
            if self.started_up is not None:
                self.started_up.release()
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            log.info("listening on http://%s:%d (API docs at /schema/swagger)", host, port)


def serve() -> int:
    """Build the service from the environment and serve until interrupted."""
    settings = server_settings()
    configure_logging(settings.log_format, settings.log_level)
    tracer_provider = start_tracing()
    if tracer_provider is not None:
        log.info("tracing: exporting spans over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables)")
    sock = bind(settings.host, settings.port)
    try:
        serve_lock = lock_sqlite(settings.store.database_url)
    except SettingsError:
        sock.close()
        raise
    location = parse_database_url(settings.store.database_url)
    startup_lock = StartupLock(location) if location.kind == "postgres" else None
    if startup_lock is not None:
        startup_lock.acquire()
    services = build_services(settings, encode_frame=encode_frame)
    if settings.demo_key_in_use:
        log.warning("FLOWTRAIL_API_KEYS is unset: created the API key 'demo-key' with no scope limit")
    warn_of_former_ids(settings.api_keys)
    log.info("store: %s", services.store.location.kind)
    config = uvicorn.Config(
        create_app(services, tracer_provider=tracer_provider), lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.stream.shutdown_grace_seconds) or None,
        **uvicorn_logging(settings.log_level), **connection_options(settings),
    )
    server = Server(config, on_stop=services.stop_taking_work, drain=services.drain)
    server.started_up = startup_lock
    server.on_hangup = services.reload_keys
    try:
        server.run(sockets=[sock])
    finally:
        stop_tracing(tracer_provider)
        if startup_lock is not None:
            startup_lock.release()
        if serve_lock is not None:
            serve_lock.close()
    return 0
