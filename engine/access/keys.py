"""API keys: who the caller is (constant-time), which workflows and runs it may touch, and the keys in force."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import urlsplit

import msgspec

from domain.errors import FlowtrailError
from domain.events import RunCreated
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
    may_erase: bool = False
    """True: it may erase every run it sees (`DELETE` of a run); a run's owner may always erase it."""
    webhooks: tuple[str, ...] = ()
    """URLs the webhooks of every run this key creates are sent to, besides the run's own (docs/api.md, "Webhooks")."""


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
    for place, key in enumerate(keys, 1):
        if any(not is_web_url(url) for url in key.webhooks):
            raise SettingsError(variable, f"key {place} of {len(keys)} ({key.id!r}) has a webhook that is not an "
                                "absolute http(s) URL", f"{accepted}; `webhooks`: a list of https URLs")
    ids = [k.id for k in keys]
    if len(set(ids)) != len(ids):
        shared = sorted({i for i in ids if ids.count(i) > 1})
        raise SettingsError(variable, f"two keys share the id {shared[0]!r} (runs are owned by key id)", accepted)


def is_web_url(url: str) -> bool:
    """True for an absolute http or https URL with a host (a valid port, if any)."""
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        return False


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
    """The external API keys in force; `replace` puts a new list in force at once (a reload of the keys)."""

    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self._state = _Ring(keys, 0)

    @property
    def keys(self) -> tuple[ApiKey, ...]:
        """The keys in force."""
        return self._state.keys

    @property
    def generation(self) -> int:
        """How many times the keys were replaced (a holder of older answers asks again when it changed)."""
        return self._state.generation

    def replace(self, keys: tuple[ApiKey, ...]) -> None:
        """Put a new key list in force (one assignment: a request sees the old list or the new one, never a mix)."""
        self._state = _Ring(keys, self._state.generation + 1)

    def authenticate(self, presented: str | None) -> ApiKey:
        """The key matching the presented secret, compared in constant time."""
        if not presented:
            raise Unauthorized("missing X-API-Key header")
        found = self._state.find(presented)
        if found is None:
            raise Unauthorized("invalid API key")
        return found

    def current(self, key: ApiKey) -> ApiKey | None:
        """The key in force with this key's secret (its scope as reloaded); None once it was removed."""
        return self._state.find(key.key)


class _Ring:
    """One key list, with its secrets encoded once for comparison."""

    __slots__ = ("keys", "generation", "_encoded")

    def __init__(self, keys: tuple[ApiKey, ...], generation: int) -> None:
        self.keys, self.generation = keys, generation
        self._encoded = [(k.key.encode(), k) for k in keys]

    def find(self, presented: str) -> ApiKey | None:
        """The key whose secret this is, compared with every key in constant time."""
        candidate = presented.encode()
        found: ApiKey | None = None
        for secret, key in self._encoded:
            if hmac.compare_digest(secret, candidate) and found is None:
                found = key
        return found


def may_use(key: ApiKey, workflow_name: str, workflow_id: int) -> bool:
    """True when the key's scope includes the workflow (both lists empty: no limit)."""
    if not key.workflow_names and not key.workflow_ids:
        return True
    return workflow_name in key.workflow_names or workflow_id in key.workflow_ids


def may_erase_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the key may erase a run it sees: its own, or any when it was given the right (seeing is not enough)."""
    return key.may_erase or hmac.compare_digest(owner_key_id.encode(), key.id.encode())


def sees_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the run is the key's own (compared by stable key id), or the key sees all runs."""
    return key.sees_all_runs or hmac.compare_digest(owner_key_id.encode(), key.id.encode())


def reaches(key: ApiKey, created: RunCreated) -> bool:
    """True when the key may see the run: its workflow is in the key's scope, and it is the key's own (or the key
    sees all runs)."""
    return may_use(key, created.workflow_name, created.workflow_id) and sees_run(key, created.caller_key_id)


class StandingAccess:
    """A caller's access to one run, asked again of the keys in force whenever they were reloaded (open streams)."""

    __slots__ = ("_ring", "_key", "_created", "_checked", "_holds")

    def __init__(self, ring: KeyRing, key: ApiKey, created: RunCreated) -> None:
        self._ring, self._key, self._created = ring, key, created
        self._checked, self._holds = ring.generation, True

    def holds(self) -> bool:
        """False once a reload removed the caller's key or left the run outside what it reaches."""
        if self._checked != self._ring.generation:
            self._checked = self._ring.generation
            current = self._ring.current(self._key)
            self._holds = current is not None and reaches(current, self._created)
        return self._holds
