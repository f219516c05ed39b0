"""API keys: who the caller is (constant-time) and which workflows it may touch."""

from __future__ import annotations

import hashlib
import hmac

import msgspec

from domain.errors import FlowtrailError
from engine.config import SettingsError


class ApiKey(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One external API key, the workflows it may use (both empty: no limit) and whose runs it sees."""

    key: str
    workflow_names: tuple[str, ...] = ()
    workflow_ids: tuple[int, ...] = ()
    id: str = ""
    sees_all_runs: bool = False
    """True: every run of its workflows (auditors, operators); false: only the runs this key created."""
    may_erase: bool = False
    """True: it may erase every run it sees (`DELETE` of a run); a run's owner may always erase it."""

    def key_id(self) -> str:
        """A stable, non-secret name for this key (stored with runs it creates)."""
        return self.id or "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:12]


DEMO_KEY = ApiKey(key="demo-key", id="demo", sees_all_runs=True)
"""The key a service with FLOWTRAIL_API_KEYS unset is served under."""


def check_api_keys(keys: tuple[ApiKey, ...]) -> None:
    """A usable key list: not empty, no empty secret, ids distinct (runs are owned by key id)."""
    variable, accepted = "FLOWTRAIL_API_KEYS", "a non-empty JSON list of keys with distinct ids (unset: `demo-key`)"
    if not keys:
        raise SettingsError(variable, "the list is empty, so no caller could use the service", accepted)
    if any(not k.key for k in keys):
        raise SettingsError(variable, "a key has an empty `key`", accepted)
    ids = [k.key_id() for k in keys]
    if len(set(ids)) != len(ids):
        shared = sorted({i for i in ids if ids.count(i) > 1})
        raise SettingsError(variable, f"two keys share the id {shared[0]!r} (runs are owned by key id)", accepted)


class Unauthorized(FlowtrailError):
    """No key, or a key this service does not know."""

    code = "UNAUTHORIZED"


class KeyRing:
    """The configured external API keys."""

    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self.keys = keys
        self._encoded = [(k.key.encode(), k) for k in keys]

    def authenticate(self, presented: str | None) -> ApiKey:
        """The key matching the presented secret, compared in constant time."""
        if not presented:
            raise Unauthorized("missing X-API-Key header")
        candidate = presented.encode()
        found: ApiKey | None = None
        for secret, key in self._encoded:
            if hmac.compare_digest(secret, candidate) and found is None:
                found = key
        if found is None:
            raise Unauthorized("invalid API key")
        return found


def may_use(key: ApiKey, workflow_name: str, workflow_id: int) -> bool:
    """True when the key's scope includes the workflow (both lists empty: no limit)."""
    if not key.workflow_names and not key.workflow_ids:
        return True
    return workflow_name in key.workflow_names or workflow_id in key.workflow_ids


def may_erase_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the key may erase a run it sees: its own, or any when it was given the right (seeing is not enough)."""
    return key.may_erase or hmac.compare_digest(owner_key_id.encode(), key.key_id().encode())


def sees_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the run is the key's own (compared by stable key id), or the key sees all runs."""
    return key.sees_all_runs or hmac.compare_digest(owner_key_id.encode(), key.key_id().encode())
