"""`flowtrail runs show | watch | cancel | answer` against a real server running the demos, through the client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from flowtrail_client import FlowtrailClient
from tests.support.process import ROOT

pytestmark = pytest.mark.store


async def flowtrail(server, action: str, *args: str, key: str = "test-key-all",
                    **variables: str) -> subprocess.CompletedProcess[str]:
    """`flowtrail runs ACTION ...` with the key in FLOWTRAIL_API_KEY (none when `key` is empty), the URL in
    FLOWTRAIL_URL, and these FLOWTRAIL_* variables."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env.update(PYTHONPATH=str(ROOT), FLOWTRAIL_URL=server.base_url, **({"FLOWTRAIL_API_KEY": key} if key else {}),
               **variables)
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "scripts.cli", "runs", action, *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )


async def created(server, workflow: str = "demo-report"):
    async with FlowtrailClient(server.base_url, "test-key-all") as client:
        return await client.create(workflow, {"topic": "tidal energy"})


async def started(server, workflow: str = "demo-report"):
    run = await created(server, workflow)
    async with FlowtrailClient(server.base_url, "test-key-all") as client:
        await client.start(run)
    return run


async def test_watching_a_run_prints_every_message_as_json_and_a_progress_line_until_it_ends(demo_server):
    run = await started(demo_server)
    done = await flowtrail(demo_server, "watch", run.run_id, "--json")
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert messages[-1]["event"] == "workflow_complete"
    assert [m["id"] for m in messages] == sorted({m["id"] for m in messages})
    progress = done.stderr.splitlines()
    assert progress[0].startswith("visits done 0, current node ") and ", events " in progress[-1]


async def test_watching_as_text_ends_with_the_outcome(demo_server):
    run = await started(demo_server)
    done = await flowtrail(demo_server, "watch", run.run_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"run {run.run_id} ended: workflow_complete after ")


async def test_show_prints_the_run_as_json_or_as_text(demo_server):
    run = await started(demo_server)
    await flowtrail(demo_server, "watch", run.run_id)
    as_json = await flowtrail(demo_server, "show", run.run_id, "--json")
    as_text = await flowtrail(demo_server, "show", run.run_id)
    assert json.loads(as_json.stdout)["status"] == "SUCCESS"
    assert as_text.stdout.startswith(f"run {run.run_id} of demo-report: SUCCESS")


async def test_cancel_asks_for_the_run_to_be_cancelled(demo_server):
    run = await created(demo_server)
    done = await flowtrail(demo_server, "cancel", run.run_id, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["runId"] == run.run_id and answer["cancelRequested"] is True


async def test_answer_replies_to_the_question_the_run_waits_on(demo_server):
    run = await started(demo_server, "demo-clarify")
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        async for message in client.stream(run):
            if message.data.get("kind") == "clarify_request":
                break
    done = await flowtrail(demo_server, "answer", run.run_id, "markdown", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runId"] == run.run_id
    watched = await flowtrail(demo_server, "watch", run.run_id)
    assert watched.returncode == 0, watched.stderr


async def test_answering_a_run_that_waits_on_nothing_says_so(demo_server):
    run = await created(demo_server)
    done = await flowtrail(demo_server, "answer", run.run_id, "yes")
    assert done.returncode == 1 and done.stderr.strip() == f"error: run {run.run_id} waits on no question (status CREATED)"


async def test_an_unknown_run_or_a_wrong_key_is_one_line_and_status_1(demo_server):
    unknown = await flowtrail(demo_server, "show", "0" * 32)
    stranger = await flowtrail(demo_server, "show", "0" * 32, key="wrong-key")
    assert unknown.returncode == stranger.returncode == 1
    assert unknown.stderr.splitlines() == ["error: RUN_NOT_FOUND: run not found"]
    assert len(stranger.stderr.splitlines()) == 1 and stranger.stderr.startswith("error: UNAUTHORIZED: ")


async def test_a_malformed_run_id_is_refused_by_the_command_line(demo_server):
    done = await flowtrail(demo_server, "show", "not-a-run")
    assert done.returncode == 2 and "is not a run id" in done.stderr


async def test_show_prints_the_question_a_waiting_run_asks_and_its_choices(demo_server):
    run = await started(demo_server, "demo-clarify")
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        async for message in client.stream(run):
            if message.data.get("kind") == "clarify_request":
                asked = json.loads(message.data["content"])
                break
    shown = await flowtrail(demo_server, "show", run.run_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    waiting = next(line for line in lines if "waiting for an answer since" in line)
    assert waiting.endswith(f": {asked['question']}")
    assert [line.strip() for line in lines if line.startswith("    ")] == [
        f"{number}. {choice}" for number, choice in enumerate(asked["choices"], start=1)
    ]
    listed = await flowtrail(demo_server, "list", "--status", "WAITING", "--json")
    assert [item["runId"] for item in json.loads(listed.stdout)["items"]] == [run.run_id]


async def test_create_starts_a_run_with_its_variables_and_files_and_watches_it_to_its_end(demo_server, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("tides are long waves")
    done = await flowtrail(demo_server, "create", "demo-report", "--var", "topic=tidal energy", "--file", str(notes),
                           "--watch")
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split()[1]
    assert done.stdout.splitlines()[-1].startswith(f"run {run_id} ended: workflow_complete after ")
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        first = await anext(client.events(run_id))
    assert (first.data()["variables"], first.data()["uploaded_files"]) == (
        {"topic": "tidal energy", "uploadedFiles": ["notes.md"]}, ["notes.md"])


async def test_create_refuses_variables_that_do_not_fit_the_declared_inputs_before_any_request_creates_a_run(
    demo_server,
):
    missing = await flowtrail(demo_server, "create", "demo-report")
    typo = await flowtrail(demo_server, "create", "demo-report", "--var", "topik=x", "--var", "nonsense")
    assert (missing.returncode, typo.returncode) == (2, 2)
    assert "missing required input(s): topic" in missing.stderr
    assert "topik: not an input of demo-report" in typo.stderr and "--var 'nonsense' is not name=value" in typo.stderr
    listed = await flowtrail(demo_server, "list", "--json")
    assert json.loads(listed.stdout)["items"] == []


async def test_every_runs_command_falls_back_to_the_key_flowtrail_demo_uses(demo_server):
    keys = json.dumps([{"key": "test-key-all", "id": "all"}])
    done = await flowtrail(demo_server, "create", "demo-report", "--var", "topic=x", "--json", key="",
                           FLOWTRAIL_API_KEYS=keys)
    assert done.returncode == 0, done.stderr
    shown = await flowtrail(demo_server, "show", json.loads(done.stdout)["runId"], key="", FLOWTRAIL_DEMO_KEY="test-key-all")
    assert shown.returncode == 0, shown.stderr
