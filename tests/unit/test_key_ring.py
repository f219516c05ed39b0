"""The keys in force: a reload replaces them whole, and a standing access (an open stream's) is asked again after it."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain.events import RunCreated
from engine.access import ApiKey, KeyRing, StandingAccess, Unauthorized, reaches
from engine.access.reload import changes

OPS = ApiKey(key="ops-secret", id="ops", sees_all_runs=True)
TEAM = ApiKey(key="team-secret", id="team", workflow_names=("report",))


def created_by(owner: str, workflow: str = "report", workflow_id: int = 7) -> RunCreated:
    return RunCreated(originator_id=uuid4(), originator_version=1, timestamp=datetime.now(UTC), workflow_id=workflow_id,
                      workflow_name=workflow, workflow_version=1, display_name=workflow, mode="DAG",
                      caller_key_id=owner)


def test_a_replaced_ring_authenticates_only_the_new_keys_and_counts_the_replacement():
    ring = KeyRing((OPS, TEAM))
    ring.replace((OPS,))
    assert ring.authenticate("ops-secret") is OPS and ring.generation == 1
    with pytest.raises(Unauthorized):
        ring.authenticate("team-secret")


def test_the_current_key_is_found_by_its_secret_with_its_reloaded_scope():
    ring = KeyRing((OPS, TEAM))
    wider = ApiKey(key="team-secret", id="team", workflow_names=("report", "audit"))
    ring.replace((OPS, wider))
    assert ring.current(TEAM) is wider
    ring.replace((OPS,))
    assert ring.current(TEAM) is None


def test_a_key_reaches_a_run_of_its_scope_that_it_created_or_any_when_it_sees_all():
    assert reaches(TEAM, created_by("team")) and reaches(OPS, created_by("team"))
    assert not reaches(TEAM, created_by("ops")) and not reaches(TEAM, created_by("team", workflow="audit", workflow_id=8))


@pytest.mark.parametrize("reloaded,holds", [
    ((OPS, TEAM), True),
    ((OPS, ApiKey(key="team-secret", id="team", workflow_names=("report", "audit"))), True),
    ((OPS,), False),
    ((OPS, ApiKey(key="team-secret", id="team", workflow_names=("audit",))), False),
    ((OPS, ApiKey(key="team-secret", id="team-2", workflow_names=("report",))), False),
    ((OPS, ApiKey(key="team-rotated", id="team", workflow_names=("report",))), False),
], ids=["unchanged", "widened", "removed", "narrowed", "renamed", "secret-changed"])
def test_a_standing_access_holds_after_a_reload_only_while_the_same_secret_still_reaches_the_run(reloaded, holds):
    ring = KeyRing((OPS, TEAM))
    access = StandingAccess(ring, TEAM, created_by("team"))
    assert access.holds()
    ring.replace(reloaded)
    assert access.holds() is holds


def test_a_reload_is_described_by_key_ids_alone():
    moved = ApiKey(key="team-secret", id="team", workflow_names=("audit",))
    newcomer = ApiKey(key="new-secret", id="new")
    described = changes((OPS, TEAM), (moved, newcomer))
    assert described == "added: new; removed: ops; changed: team"
    assert "secret" not in described and changes((OPS,), (OPS,)) == ""
