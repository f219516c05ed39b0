"""`flowtrail` started as an operator starts it: a bad setting, a taken port or an unreachable store is one line, exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.process import ROOT
from tests.support.server import free_port
from tests.support.stores import PG_BASE, require_postgres

MODEL = {"id": "m", "base_url": "http://127.0.0.1:1/v1", "model": "x"}


def flowtrail(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the command in a process of its own, with only these FLOWTRAIL_* variables set."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    return subprocess.run([sys.executable, "-m", "scripts.cli", *args], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=timeout)


def refused_in_one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused start printed (exit status 2, no traceback, nothing else on stderr)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"FLOWTRAIL_DATA_DIR": str(tmp_path / "data"), "FLOWTRAIL_PORT": str(free_port()), **extra}


@pytest.mark.parametrize("variable,value,field", [
    ("FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflow_names": ["demo-report"]}]', "workflow_names"),
    ("FLOWTRAIL_MODELS", json.dumps([{**MODEL, "apiKeyEnv": "K"}]), "apiKeyEnv"),
])
def test_serve_exits_with_a_one_line_error_naming_the_unknown_field(tmp_path, variable, value, field):
    line = refused_in_one_line(flowtrail("serve", env=serve_env(tmp_path, **{variable: value})))
    assert line.startswith(variable) and f"`{field}`" in line and "accepted fields:" in line


@pytest.mark.parametrize("variable,value", [
    ("FLOWTRAIL_LOAD_DEMOS", "ture"),
    ("FLOWTRAIL_PORT", "eighty"),
    ("FLOWTRAIL_API_KEYS", "[]"),
    ("FLOWTRAIL_API_KEYS", '[{"key": "s3cret",'),
    ("FLOWTRAIL_API_KEYS", '[{"key": "s3cret"}]'),
    ("FLOWTRAIL_DATABASE_URL", "mysql://root:s3cret@db/flowtrail"),
    ("FLOWTRAIL_MODELS", json.dumps([MODEL, MODEL])),
    ("FLOWTRAIL_DEFAULT_MODEL", "gpt-9"),
    ("FLOWTRAIL_LOAD_DEMO", "true"),
    ("FLOWTRAIL_HOST", "0.0.0.0"),
])
def test_a_misconfigured_server_refuses_to_start_in_one_line_naming_the_variable(tmp_path, variable, value):
    line = refused_in_one_line(flowtrail("serve", env=serve_env(tmp_path, **{variable: value})))
    assert line.startswith(f"{variable}: ") and "; accepted: " in line and "s3cret" not in line
    assert not (tmp_path / "data").exists()


def test_demo_with_an_empty_key_list_is_refused_like_serve_not_crashed(tmp_path):
    line = refused_in_one_line(flowtrail("demo", env=serve_env(tmp_path, FLOWTRAIL_API_KEYS="[]")))
    assert line.startswith("FLOWTRAIL_API_KEYS: the list is empty")


def test_a_taken_port_stops_the_start_before_the_store_is_created(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = flowtrail("serve", env=serve_env(tmp_path, FLOWTRAIL_PORT=str(port)))
    line = refused_in_one_line(done)
    assert line.startswith(f"FLOWTRAIL_PORT: cannot listen on 127.0.0.1:{port}: Address already in use")
    assert not (tmp_path / "data").exists()


def test_an_unreachable_postgresql_is_named_with_its_host_port_and_the_drivers_reason(tmp_path):
    port = free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/flowtrail"
    line = refused_in_one_line(flowtrail("serve", env=serve_env(tmp_path, FLOWTRAIL_DATABASE_URL=url), timeout=30))
    assert line.startswith(f"FLOWTRAIL_DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:{port}")
    assert "Connection refused" in line


def test_a_postgresql_database_that_does_not_exist_is_named_with_the_drivers_reason(tmp_path):
    require_postgres()
    url = PG_BASE.rsplit("/", 1)[0] + "/flowtrail_no_such_database"
    line = refused_in_one_line(flowtrail("serve", env=serve_env(tmp_path, FLOWTRAIL_DATABASE_URL=url), timeout=30))
    assert "cannot reach PostgreSQL at" in line and 'database "flowtrail_no_such_database" does not exist' in line


def test_the_server_says_listening_only_once_it_answers(tmp_path):
    env = serve_env(tmp_path, FLOWTRAIL_LOAD_DEMOS="false", FLOWTRAIL_API_KEYS='[{"key": "k", "id": "ops"}]')
    process = subprocess.Popen([sys.executable, "-m", "scripts.cli", "serve"], cwd=ROOT, stderr=subprocess.PIPE,
                               text=True, env={**{k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIL_")}, **env})
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline()]
        while "listening on" not in lines[-1] and len(lines) < 20:
            lines.append(process.stderr.readline())
        assert any("store: sqlite" in line for line in lines[:-1])
        assert f"listening on http://127.0.0.1:{env['FLOWTRAIL_PORT']}" in lines[-1]
        assert httpx.get(f"http://127.0.0.1:{env['FLOWTRAIL_PORT']}/healthz", timeout=10).status_code == 200
    finally:
        process.terminate()
        process.wait(15)


def test_version_comes_from_the_package_metadata():
    done = flowtrail("--version", env={})
    assert done.returncode == 0 and done.stdout.strip() == "flowtrail 0.1.0"


def test_serve_help_points_at_the_settings_reference():
    done = flowtrail("serve", "--help", env={})
    assert done.returncode == 0 and "`flowtrail config`" in done.stdout and "docs/operations.md" in done.stdout


def test_demo_help_lists_the_demo_workflows():
    done = flowtrail("demo", "--help", env={})
    assert done.returncode == 0
    for name in ("demo-report", "demo-agentic", "demo-clarify"):
        assert f"\n  {name} " in done.stdout


SECRETS = {
    "FLOWTRAIL_API_KEYS": json.dumps([{"key": "k-s3cret-1", "id": "ops"}, {"key": "k-s3cret-2", "id": "auditor", "seesAllRuns": True}]),
    "FLOWTRAIL_DATABASE_URL": "postgresql://flow:pw-s3cret@db.internal:5433/flowtrail",
    "FLOWTRAIL_DEMO_KEY": "k-s3cret-1",
    "FLOWTRAIL_MODELS": json.dumps([{**MODEL, "api_key_env": "FLOWTRAIL_OPENAI_KEY"}]),
    "FLOWTRAIL_OPENAI_KEY": "sk-s3cret",
}


def test_config_prints_the_effective_settings_with_every_secret_masked():
    done = flowtrail("config", env={**SECRETS, "FLOWTRAIL_PORT": "9000"})
    assert done.returncode == 0 and "s3cret" not in done.stdout
    lines = done.stdout.splitlines()
    assert "FLOWTRAIL_PORT=9000" in lines and "FLOWTRAIL_HOST=127.0.0.1  # default" in lines
    assert "FLOWTRAIL_DATABASE_URL=postgresql://flow:***@db.internal:5433/flowtrail" in lines
    assert "FLOWTRAIL_DEMO_KEY=***" in lines


def test_config_as_json_names_each_variables_value_and_source():
    done = flowtrail("config", "--json", env=SECRETS)
    assert done.returncode == 0 and "s3cret" not in done.stdout
    found = json.loads(done.stdout)
    assert found["FLOWTRAIL_API_KEYS"] == {"value": [
        {"key": "***", "workflowNames": [], "workflowIds": [], "id": "ops", "seesAllRuns": False, "mayErase": False,
         "webhooks": []},
        {"key": "***", "workflowNames": [], "workflowIds": [], "id": "auditor", "seesAllRuns": True, "mayErase": False,
         "webhooks": []},
    ], "source": "environment"}
    assert found["FLOWTRAIL_PORT"] == {"value": 2438, "source": "default"}


def test_config_shows_the_keys_of_the_key_file_masked_and_says_where_they_came_from(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"key": "k-s3cret-1", "id": "ops"}]))
    done = flowtrail("config", env={"FLOWTRAIL_API_KEYS_FILE": str(path)})
    assert done.returncode == 0 and "s3cret" not in done.stdout
    assert ('FLOWTRAIL_API_KEYS=[{"key": "***", "workflowNames": [], "workflowIds": [], "id": "ops", '
            '"seesAllRuns": false, "mayErase": false, "webhooks": []}]  # from FLOWTRAIL_API_KEYS_FILE') in done.stdout.splitlines()


def test_config_shows_a_keys_webhook_subscription_without_its_query_or_credentials(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"key": "k-1", "id": "ops",
                                 "webhooks": ["https://user:pw-s3cret@hooks.example.com/in?token=s3cret"]}]))
    done = flowtrail("config", "--json", env={"FLOWTRAIL_API_KEYS_FILE": str(path)})
    assert done.returncode == 0 and "s3cret" not in done.stdout
    [key] = json.loads(done.stdout)["FLOWTRAIL_API_KEYS"]["value"]
    assert key["webhooks"] == ["https://hooks.example.com/in"]


def test_config_refuses_a_bad_setting_as_serve_does():
    line = refused_in_one_line(flowtrail("config", env={"FLOWTRAIL_LOAD_DEMOS": "ture"}))
    assert line.startswith("FLOWTRAIL_LOAD_DEMOS: got 'ture'")


def test_a_sqlite_file_that_cannot_be_created_is_named_in_one_line(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    url = f"sqlite:///{tmp_path / 'a-file' / 'flowtrail.db'}"
    line = refused_in_one_line(flowtrail("serve", env=serve_env(tmp_path, FLOWTRAIL_DATABASE_URL=url)))
    assert line.startswith("FLOWTRAIL_DATABASE_URL: cannot open the SQLite file ") and "a-file" in line
