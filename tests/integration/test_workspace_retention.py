"""Workspaces are deleted once their run's ttlHours have passed, and not before."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from uuid import uuid4

from engine.clock import utcnow
from engine.runs.creation import NewRun
from engine.workspace.retention import sweep_workspaces
from tests.support.runs import FLOW


async def test_a_workspace_past_its_runs_retention_is_deleted_and_a_younger_one_kept(services):
    old = await services.runs.create(NewRun(caller_key_id="all", ttl_hours=1, **FLOW))
    young = await services.runs.create(NewRun(caller_key_id="all", ttl_hours=48, **FLOW))
    for created in (old, young):
        services.workspace.write(created.run_id, "notes/a.txt", b"x")
    removed = await sweep_workspaces(services.store, services.workspace, now=utcnow() + timedelta(hours=2))
    assert removed == [old.run_id]
    assert services.workspace.files(old.run_id) == []
    assert services.workspace.files(young.run_id) == ["notes/a.txt"]


async def test_an_upload_folder_whose_run_was_never_created_is_deleted_after_an_hour_of_quiet(services):
    abandoned, uploading = uuid4(), uuid4()
    for run_id in (abandoned, uploading):
        services.workspace.write(run_id, "data.csv", b"1,2")
    an_hour_ago = time.time() - 3700
    os.utime(services.workspace.path_for(abandoned), (an_hour_ago, an_hour_ago))
    not_ours = services.workspace.root / "notes"
    not_ours.mkdir()
    removed = await sweep_workspaces(services.store, services.workspace)
    assert removed == [abandoned]
    assert services.workspace.files(uploading) == ["data.csv"]
    assert not_ours.is_dir()
