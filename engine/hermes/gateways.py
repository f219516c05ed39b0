"""The remote Hermes Agent gateways an operator configures (FLOWTRAIL_HERMES_GATEWAYS), and their rules."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import msgspec

from engine.config import SettingsError, decode_json_list

_GATEWAY_PATH = re.compile(r"(/p/[A-Za-z0-9_.-]+)?/?")


class HermesGateway(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One remote Hermes Agent gateway; its bearer key is read from the variable `api_key_env`, never given inline."""

    id: str
    base_url: str
    api_key_env: str = "FLOWTRAIL_HERMES_API_KEY"
    profile: str = ""
    """An informative deployment label; not a credential and not used in URLs."""
    model: str = ""
    effort: str = ""
    system_prompt: str = ""
    auto_approve: bool = False
    idle_timeout_seconds: float = 600.0
    enabled: bool = True
    """False keeps the gateway configured but refuses its use: a node on it fails saying so, its probe is `disabled`."""
    stop_confirm_seconds: float = 30.0
    """How long a stop waits for the gateway to confirm it (the run ends cancelled) before it is recorded unconfirmed."""
    status_retry_seconds: float = 60.0
    """How long a run's status that cannot be read is asked again before its outcome is recorded as unknown."""

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a gateway needs a non-empty id")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"gateway {self.id!r}: base_url must be an http(s) URL with a host")
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ValueError(f"gateway {self.id!r}: base_url must carry no credentials, query or fragment")
        if not _GATEWAY_PATH.fullmatch(parts.path):
            raise ValueError(f"gateway {self.id!r}: base_url may only have the path /p/<profile>")
        if not self.api_key_env:
            raise ValueError(f"gateway {self.id!r}: api_key_env must name an environment variable")
        for name in ("idle_timeout_seconds", "stop_confirm_seconds", "status_retry_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"gateway {self.id!r}: {name} must be positive")


def parse_hermes_gateways(raw: str | None) -> tuple[HermesGateway, ...]:
    """The gateways in FLOWTRAIL_HERMES_GATEWAYS (a JSON list); anything else is a SettingsError saying what is wrong."""
    if not raw or not raw.strip():
        return ()
    gateways = decode_json_list("FLOWTRAIL_HERMES_GATEWAYS", raw, HermesGateway)
    check_gateways(gateways)
    return gateways


def check_gateways(gateways: tuple[HermesGateway, ...]) -> None:
    """Gateway ids are distinct (a node names its gateway by id)."""
    ids = [gateway.id for gateway in gateways]
    shared = sorted({i for i in ids if ids.count(i) > 1})
    if shared:
        raise SettingsError("FLOWTRAIL_HERMES_GATEWAYS", f"two gateways share the id {shared[0]!r}", "distinct gateway ids")
