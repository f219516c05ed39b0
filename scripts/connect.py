"""Where the commands that talk to a running service find it: `--url` and `--key`, else the environment."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any
from uuid import UUID

from client import DEFAULT_URL, ApiError, ClientError, FlowtrailClient
from engine.settings import Settings


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """`--url` and `--key`, the two things a command needs to reach the service."""
    parser.add_argument("--url", default=None,
                        help=f"base URL of the service (default: FLOWTRAIL_URL, else {DEFAULT_URL})")
    parser.add_argument("--key", default=None, help="API key (default: FLOWTRAIL_API_KEY)")


def run_id(text: str) -> str:
    """A run id on the command line (32 hex characters, dashes allowed), as the API spells it."""
    try:
        return UUID(text).hex
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id (32 hex characters)") from None


def service_url(given: str | None, settings: Settings) -> str:
    """The URL given, else FLOWTRAIL_URL, else the local service on FLOWTRAIL_HOST/FLOWTRAIL_PORT (default 127.0.0.1:2438)."""
    return given or settings.commands.url or f"http://{settings.host}:{settings.port}"


def api_key(given: str | None, *fallbacks: str) -> str | None:
    """The key given, else FLOWTRAIL_API_KEY, else the first non-empty fallback (a command's own key setting)."""
    for candidate in (given, Settings.from_env().commands.api_key, *fallbacks):
        if candidate:
            return candidate
    return None


def connect(url: str | None, key: str | None) -> FlowtrailClient:
    """A client of the service at `url` under `key` (both resolved as above); exits when there is no key."""
    if not key:
        raise SystemExit("error: no API key: pass --key or set FLOWTRAIL_API_KEY")
    return FlowtrailClient(service_url(url, Settings.from_env()), key)


def reported(work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's coroutine; a refusal or an unreachable service is one line on stderr and status 1."""
    try:
        return asyncio.run(work())
    except ApiError as refused:
        print(f"error: {refused.code}: {refused.message}", file=sys.stderr)
    except ClientError as failed:
        print(f"error: {failed}", file=sys.stderr)
    return 1
