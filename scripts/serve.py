"""`flowtrail serve`: the HTTP service on the configured store."""

from __future__ import annotations

import logging

import uvicorn

from api.app import create_app
from api.sse import encode_frame
from engine.bootstrap import build_services
from engine.settings import Settings

log = logging.getLogger("flowtrail")


def serve() -> int:
    """Build the service from the environment and serve until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    settings = Settings.from_env()
    services = build_services(settings, encode_frame=encode_frame)
    if settings.demo_key_in_use:
        log.warning("FLOWTRAIL_API_KEYS is unset: created the API key 'demo-key' with no scope limit")
    log.info("store: %s", services.store.location.kind)
    log.info("listening on http://%s:%d (API docs at /schema/swagger)", settings.host, settings.port)
    uvicorn.run(
        create_app(services), host=settings.host, port=settings.port, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=int(settings.stream.shutdown_grace_seconds) or None,
    )
    return 0
