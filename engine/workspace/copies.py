"""Copies of workspaces: a fork starts with its own copy of its source's files."""

from __future__ import annotations

import shutil
from uuid import UUID

from engine.workspace.directory import Workspace
from engine.workspace.listing import regular_files


def copy_workspace(workspace: Workspace, source: UUID, target: UUID) -> int:
    """Copy every regular file of the source run's workspace into the target run's (times kept); how many."""
    into = workspace.path_for(target)
    copied = 0
    for name, entry in regular_files(workspace.path_for(source)):
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(entry.path, path, follow_symlinks=False)
        copied += 1
    return copied
