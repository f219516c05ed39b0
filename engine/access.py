"""API keys: who the caller is (constant-time) and which workflows it may touch."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

import msgspec

from domain.errors import FlowtrailError
from engine.config import SettingsError


class ApiKey(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One external API key, the workflows it may use (both empty: no limit) and whose runs it sees."""

    key: str
    workflow_names: tuple[str, ...] = ()
    workflow_ids: tuple[int, ...] = ()
    id: str = ""
    """The stable, non-secret name the runs this key creates are recorded under; required (decision 36)."""
    sees_all_runs: bool = False
    """True: every run of its workflows (auditors, operators); false: only the runs this key created."""


DEMO_KEY = ApiKey(key="demo-key", id="demo", sees_all_runs=True)
"""The key a service with FLOWTRAIL_API_KEYS unset is served under."""


FORMER_ID = (
    'a key used before keeps the runs it created with the id they carry: "key-" and the first 12 hex digits of '
    'the SHA-256 of its secret (printf %s "$KEY" | sha256sum | cut -c1-12), then give it a new secret '
    '(docs/operations.md, "Upgrading")'
)
"""How an operator upgrading from unnamed keys keeps their runs (decision 36)."""


def check_api_keys(keys: tuple[ApiKey, ...], variable: str = "FLOWTRAIL_API_KEYS") -> None:
    """A usable key list: not empty, no empty secret, every key named by an `id`, ids distinct (runs are owned
    by key id)."""
    accepted = "a non-empty JSON list of keys with distinct ids, every key named by its `id` (unset: `demo-key`)"
    if not keys:
        raise SettingsError(variable, "the list is empty, so no caller could use the service", accepted)
    if any(not k.key for k in keys):
        raise SettingsError(variable, "a key has an empty `key`", accepted)
    unnamed = [place for place, k in enumerate(keys, 1) if not k.id]
    if unnamed:
        raise SettingsError(
            variable, f"key {unnamed[0]} of {len(keys)} has no `id` (runs are recorded under a key's id, which is "
            "a name you choose: a hash of the secret would let a weak key be guessed offline)", f"{accepted}; {FORMER_ID}",
        )
    ids = [k.id for k in keys]
    if len(set(ids)) != len(ids):
        shared = sorted({i for i in ids if ids.count(i) > 1})
        raise SettingsError(variable, f"two keys share the id {shared[0]!r} (runs are owned by key id)", accepted)


def ids_naming_their_secret(keys: Iterable[ApiKey]) -> list[str]:
    """The ids that are still the former hash of their own key's secret (an upgraded key whose secret was kept)."""
    return [k.id for k in keys if k.id == former_id(k.key)]


def former_id(secret: str) -> str:
    """The id a key without one was recorded under before decision 36 (a prefix of its secret's SHA-256)."""
    return "key-" + hashlib.sha256(secret.encode()).hexdigest()[:12]


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


def sees_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the run is the key's own (compared by stable key id), or the key sees all runs."""
    return key.sees_all_runs or hmac.compare_digest(owner_key_id.encode(), key.id.encode())
