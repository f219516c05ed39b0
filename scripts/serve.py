"""`flowtrail serve`: bind the port, then open the store and recover runs, then say "listening" and serve."""

from __future__ import annotations

import errno
import logging
import math
import socket

import uvicorn

from api.app import create_app
from api.server import GracefulServer, connection_options
from api.sse import encode_frame
from engine.bootstrap import build_services
from engine.observability.logs import configure_logging, uvicorn_logging
from engine.settings import Settings, SettingsError

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


class Server(GracefulServer):
    """The graceful server on our socket; it says "listening" once the app has started and it accepts requests."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start the app (the store opens, runs are recovered), then serve the sockets."""
        await super().startup(sockets=sockets)
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            log.info("listening on http://%s:%d (API docs at /schema/swagger)", host, port)


def serve() -> int:
    """Build the service from the environment and serve until interrupted."""
    settings = Settings.from_env()
    configure_logging(settings.log_format, settings.log_level)
    sock = bind(settings.host, settings.port)
    services = build_services(settings, encode_frame=encode_frame)
    if settings.demo_key_in_use:
        log.warning("FLOWTRAIL_API_KEYS is unset: created the API key 'demo-key' with no scope limit")
    log.info("store: %s", services.store.location.kind)
    config = uvicorn.Config(
        create_app(services), lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.stream.shutdown_grace_seconds) or None,
        **uvicorn_logging(settings.log_level), **connection_options(settings),
    )
    Server(config, on_stop=services.hub.close_streams).run(sockets=[sock])
    return 0
