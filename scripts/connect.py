"""Where the commands that talk to a running service find it: `--url` and `--key`, else the environment."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from engine.config import read_field, read_section, setting, variables
from engine.settings import Settings, configured_keys
from flowtrail_client import DEFAULT_URL, ApiError, ClientError, FlowtrailClient


@dataclass(frozen=True)
class CommandSettings:
    """What the client commands (`flowtrail demo`, `audit`, `export`, `runs`) read; the server only lets them be."""

    url: Annotated[str, setting(
        "FLOWTRAIL_URL", "base URL where the client commands find the service (empty: http://FLOWTRAIL_HOST:FLOWTRAIL_PORT)",
    )] = ""
    api_key: Annotated[str, setting(
        "FLOWTRAIL_API_KEY", "API key the client commands use when `--key` is not given", secret=True,
    )] = ""

    demo_key: Annotated[str, setting(
        "FLOWTRAIL_DEMO_KEY", "API key `flowtrail demo` uses (empty: the first configured key)", secret=True,
    )] = ""
    demo_workflow: Annotated[str, setting(
        "FLOWTRAIL_DEMO_WORKFLOW", "workflow `flowtrail demo` (and `./run`) starts when none is named",
    )] = "demo-report"
    audit_key: Annotated[str, setting(
        "FLOWTRAIL_AUDIT_KEY", "API key `flowtrail audit` uses (empty: the first configured key; it needs "
        "`seesAllRuns` to audit other keys' runs)", secret=True,
    )] = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CommandSettings:
        """The client commands' variables alone: a command never checks the server's configuration."""
        return read_section(cls, os.environ if environ is None else environ)


CONNECT_SECONDS = 3.0
"""A command that cannot connect to the service within this says so (naming the URL) and exits 1."""
COMMAND_VARIABLES = frozenset(v.name for v in variables(CommandSettings))
"""The variables the client commands read: `flowtrail serve` accepts them beside its own."""



def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """`--url` and `--key`, the two things a command needs to reach the service."""
    parser.add_argument("--url", default=None,
                        help=f"base URL of the service (default: FLOWTRAIL_URL, else {DEFAULT_URL})")
    parser.add_argument("--key", default=None, help="API key (default: FLOWTRAIL_API_KEY, else the key `flowtrail demo` "
                        "uses: FLOWTRAIL_DEMO_KEY, else the service's first)")


def run_id(text: str) -> str:
    """A run id on the command line (32 hex characters, dashes allowed), as the API spells it."""
    try:
        return UUID(text).hex
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id (32 hex characters)") from None


def service_url(given: str | None) -> str:
    """The URL given, else FLOWTRAIL_URL, else the local service on FLOWTRAIL_HOST/FLOWTRAIL_PORT (default 127.0.0.1:2438)."""
    if given or (given := CommandSettings.from_env().url):
        return given
    return f"http://{read_field(Settings, 'host', os.environ)}:{read_field(Settings, 'port', os.environ)}"


def served_key() -> str:
    """The first key the local service is configured with (its key file, else FLOWTRAIL_API_KEYS; unset: `demo-key`)."""
    return configured_keys(os.environ)[0].key


def api_key(given: str | None, *fallbacks: str) -> str | None:
    """The key given, else FLOWTRAIL_API_KEY, else the first non-empty fallback (a command's own key setting)."""
    for candidate in (given, CommandSettings.from_env().api_key, *fallbacks):
        if candidate:
            return candidate
    return None


def command_key(given: str | None) -> str | None:
    """The key of the client commands (`runs`, `export`): `--key`, else FLOWTRAIL_API_KEY, else the key
    `flowtrail demo` uses (FLOWTRAIL_DEMO_KEY, else the service's first)."""
    return api_key(given, CommandSettings.from_env().demo_key, served_key())


def connect(url: str | None, key: str | None) -> FlowtrailClient:
    """A client of the service at `url` under `key` (both resolved as above); exits when there is no key."""
    if not key:
        raise SystemExit("error: no API key: pass --key or set FLOWTRAIL_API_KEY")
    return FlowtrailClient(service_url(url), key, connect_timeout=CONNECT_SECONDS)


def reported(work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's coroutine; a refusal or an unreachable service is one line on stderr and status 1 (a file
    error is `main`'s to report, the same way)."""
    try:
        return asyncio.run(work())
    except ApiError as refused:
        print(f"error: {refused.code}: {refused.message}", file=sys.stderr)
    except ClientError as failed:
        print(f"error: {failed}", file=sys.stderr)
    return 1


def os_error(error: OSError) -> str:
    """A file or system error in a line: the file it names and what went wrong, no traceback."""
    named = f"{error.filename}: " if error.filename else ""
    return f"{named}{error.strerror or error}"


def server_settings() -> Settings:
    """The service's settings from the environment, the client commands' variables let be."""
    return Settings.from_env(also_known=COMMAND_VARIABLES)
