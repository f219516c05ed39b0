"""One listing rule for workspaces: regular files only; symbolic links are neither followed nor listed."""

from __future__ import annotations

from uuid import uuid4

from engine.workspace.directory import Workspace
from engine.workspace.listing import file_names, file_stats


def a_workspace_with_links(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    workspace = Workspace(tmp_path / "runs")
    run_id = uuid4()
    workspace.write(run_id, "notes/a.txt", b"abc")
    base = workspace.path_for(run_id)
    (base / "linked-file").symlink_to(outside / "secret.txt")
    (base / "linked-dir").symlink_to(outside, target_is_directory=True)
    return workspace, run_id


def test_a_workspace_lists_its_regular_files_and_none_of_its_links(tmp_path):
    workspace, run_id = a_workspace_with_links(tmp_path)
    assert workspace.files(run_id) == ["notes/a.txt"]


def test_stats_count_what_the_listing_lists(tmp_path):
    workspace, run_id = a_workspace_with_links(tmp_path)
    assert file_stats(workspace.path_for(run_id)) == (1, 3)


def test_a_workspace_that_is_itself_a_link_holds_nothing(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert file_names(tmp_path / "link") == [] and file_stats(tmp_path / "link") == (0, 0)


def test_a_missing_workspace_is_empty(tmp_path):
    assert file_names(tmp_path / "missing") == [] and file_stats(tmp_path / "missing") == (0, 0)
