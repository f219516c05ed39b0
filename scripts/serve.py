"""`flowtrail serve`: the HTTP service on the configured store."""

from __future__ import annotations

import logging
import math

import uvicorn

from api.app import create_app
from api.server import GracefulServer
from api.sse import encode_frame
from engine.bootstrap import build_services
from engine.observability.logs import configure_logging, uvicorn_logging
from engine.settings import Settings

log = logging.getLogger("flowtrail")


def serve() -> int:
    """Build the service from the environment and serve until interrupted."""
    settings = Settings.from_env()
    configure_logging(settings.log_format, settings.log_level)
    services = build_services(settings, encode_frame=encode_frame)
    if settings.demo_key_in_use:
        log.warning("FLOWTRAIL_API_KEYS is unset: created the API key 'demo-key' with no scope limit")
    log.info("store: %s", services.store.location.kind)
    log.info("listening on http://%s:%d (API docs at /schema/swagger)", settings.host, settings.port)
    config = uvicorn.Config(
        create_app(services), host=settings.host, port=settings.port, lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.stream.shutdown_grace_seconds) or None,
        **uvicorn_logging(settings.log_level),
    )
    GracefulServer(config, on_stop=services.hub.close_streams).run()
    return 0
