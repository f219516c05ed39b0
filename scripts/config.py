"""`flowtrail config`: the effective settings with secrets masked, and the settings reference (README table)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from domain.urls import shown_url
from engine.access import ApiKey
from engine.config import Variable, accepted_values, value_at, variables
from engine.settings import Settings
from scripts.connect import CommandSettings, server_settings

MASK = "***"


def masked(variable: Variable, value: Any) -> Any:
    """A setting's value as JSON-ready data, with every secret in it replaced by ***."""
    if value is None:
        return None
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple) and all(isinstance(item, ApiKey) for item in value):
        return [{**msgspec.to_builtins(item), "key": MASK, "webhooks": [shown_url(url) for url in item.webhooks]}
                for item in value]
    if isinstance(value, tuple):
        return msgspec.to_builtins(value)
    if variable.name == "FLOWTRAIL_DATABASE_URL":
        return _url_without_password(value)
    if variable.secret and value:
        return MASK
    return value


def _url_without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:{MASK}@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def effective(groups: tuple[Any, ...], environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each variable's effective (masked) value and whether it came from the environment or the default."""
    return {
        v.name: {"value": masked(v, value_at(group, v.path)), "source": source(v.name, environ)}
        for group in groups
        for v in variables(type(group))
    }


def source(name: str, environ: Mapping[str, str]) -> str:
    """Where a variable's value came from: `environment`, `key file` (the keys of FLOWTRAIL_API_KEYS_FILE) or `default`."""
    if environ.get(name):
        return "environment"
    if name == "FLOWTRAIL_API_KEYS" and environ.get("FLOWTRAIL_API_KEYS_FILE"):
        return "key file"
    return "default"


SOURCE_NOTES = {"default": "  # default", "key file": "  # from FLOWTRAIL_API_KEYS_FILE"}


def text_line(name: str, entry: Mapping[str, Any]) -> str:
    """`NAME=value`, as an environment file would say it, marked when it is the default or read from the key file."""
    value = entry["value"]
    shown = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    return f"{name}={shown}" + SOURCE_NOTES.get(entry["source"], "")


def show_config(*, as_json: bool = False) -> int:
    """Print the effective settings (secrets masked); a bad setting is a SettingsError like at start-up."""
    groups = (server_settings(), CommandSettings.from_env())
    found = effective(groups, os.environ)
    if as_json:
        print(json.dumps(found, indent=2))
    else:
        print("\n".join(text_line(name, entry) for name, entry in found.items()))
    return 0


def _default_text(variable: Variable) -> str:
    if variable.name == "FLOWTRAIL_API_KEYS" or variable.default in (None, "", ()):
        return "unset"
    default = variable.default
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, float):
        return f"`{default:g}`"
    return f"`{default}`"


def every_variable() -> tuple[Variable, ...]:
    """Every FLOWTRAIL_* variable a flowtrail process reads: the service's, then the client commands'."""
    return (*variables(Settings), *variables(CommandSettings))


def reference_table() -> str:
    """The README's settings table, generated from the settings model."""
    rows = ["| variable | default | accepts | meaning |", "|---|---|---|---|"]
    for v in every_variable():
        meaning = v.description.replace("|", "\\|")
        rows.append(f"| `{v.name}` | {_default_text(v)} | {accepted_values(v.hint)} | {meaning} |")
    return "\n".join(rows)


def show_reference() -> int:
    """Print the settings reference (the README's Configuration table)."""
    print(reference_table())
    return 0
