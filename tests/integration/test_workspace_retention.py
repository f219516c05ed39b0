"""Workspaces are deleted once their run's ttlHours have passed, and not before."""

from __future__ import annotations

from datetime import timedelta

from engine.clock import utcnow
from engine.retention import sweep_workspaces
from tests.support.runs import FLOW


async def test_a_workspace_past_its_runs_retention_is_deleted_and_a_younger_one_kept(server):
    services = server.services
    old = await services.runs.create(caller_key_id="all", ttl_hours=1, **FLOW)
    young = await services.runs.create(caller_key_id="all", ttl_hours=48, **FLOW)
    for created in (old, young):
        services.workspace.write(created.originator_id, "notes/a.txt", b"x")
    removed = await sweep_workspaces(services.log, services.workspace, now=utcnow() + timedelta(hours=2))
    assert removed == [old.originator_id]
    assert services.workspace.files(old.originator_id) == []
    assert services.workspace.files(young.originator_id) == ["notes/a.txt"]
