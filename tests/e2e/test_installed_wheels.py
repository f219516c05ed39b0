"""The built wheels are what is tested: installed into fresh environments that see no source tree, they serve the
demos, the viewer and the offline API docs, and the client's wheel alone talks to that server.

Built once per run (about 10 s) and installed with no network (tests/support/wheels.py says how).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_api_docs_offline import OPERATIONS, REDOCLY_BADGE, render_offline, require_chromium
from tests.support.process import ROOT, ServerProcess
from tests.support.wheels import build_wheels, dependency_closure, fresh_venv, install, requirements_of, wheel_of

CLIENT_LIBRARIES = {"httpx", "httpx-sse", "msgspec"}
CLIENT_SCRIPT = """
import asyncio, importlib.util, json, sys
from flowtrail_client import FlowtrailClient

async def main(url: str, key: str) -> None:
    async with FlowtrailClient(url, key) as client:
        run = await client.create("demo-clarify", {"topic": "tides"})
        await client.start(run)
        async for message in client.stream(run):
            if message.data.get("kind") == "clarify_request":
                asked = json.loads(message.data["content"])
                await client.answer(run, asked["clarify_id"], asked["choices"][1])
        view = await client.get(run)
    service = [name for name in ("api", "engine", "domain", "scripts", "litestar") if importlib.util.find_spec(name)]
    print(json.dumps({"status": view.status, "output": view.outputs, "service_modules": service}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheels(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def server_venv(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs = dependency_closure(requirements_of(wheel_of(wheels, "flowtrail")), leave_out=["flowtrail-client"])
    venv = fresh_venv(tmp_path_factory.mktemp("server") / "venv", needs)
    install(venv, wheels, "flowtrail")
    return venv


@pytest.fixture(scope="module")
def client_venv(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = fresh_venv(tmp_path_factory.mktemp("client") / "venv",
                      dependency_closure(requirements_of(wheel_of(wheels, "flowtrail-client"))))
    install(venv, wheels, "flowtrail-client")
    return venv


@pytest.fixture(scope="module")
async def installed_server(server_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    """`flowtrail serve` of the installed wheel, started outside the source tree, with its demos."""
    home = tmp_path_factory.mktemp("home")
    server = ServerProcess(f"sqlite:///{home / 'flowtrail.db'}", home / "data", command=[str(server_venv / "bin" / "flowtrail"), "serve"],
                           cwd=home, PYTHONPATH="", FLOWTRAIL_LOAD_DEMOS="true", FLOWTRAIL_SCRIPTED_PACE_SECONDS="0.01")
    await server.start()
    yield server
    await server.stop()


def run_in(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command of the environment (bin/NAME), isolated from the caller's PYTHONPATH and working directory."""
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ""})


def tree_files(directory: str) -> set[str]:
    """The files of a package directory of the working tree, as paths from the root."""
    return {path.relative_to(ROOT).as_posix() for path in (ROOT / directory).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def test_the_server_wheel_holds_every_demo_and_every_file_of_the_viewer_and_the_docs(wheels):
    names = set(zipfile.ZipFile(wheel_of(wheels, "flowtrail")).namelist())
    data = tree_files("engine/demos") | tree_files("engine/hermes/demos") | tree_files("api/static")
    assert {"engine/demos/demo-report.json", "api/static/ui/index.html", "api/static/redoc/redoc.standalone.js"} <= data
    assert data - names == set()


def test_the_server_wheel_keeps_the_service_packages_and_requires_the_client_distribution(wheels):
    wheel = wheel_of(wheels, "flowtrail")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist() if not name.startswith("flowtrail-")}
    assert tops == {"api", "domain", "engine", "projections", "scripts"}
    assert "flowtrail-client" in {requirement.name for requirement in requirements_of(wheel)}


def test_the_installed_server_imports_its_packages_from_its_own_environment(server_venv, tmp_path):
    done = run_in(server_venv, "python", "-I", "-c", "import json, api, domain, engine, projections, scripts, flowtrail_client; "
                  "print(json.dumps([m.__file__ for m in (api, domain, engine, projections, scripts, flowtrail_client)]))",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(path.startswith(f"{server_venv}/lib/") for path in json.loads(done.stdout)), done.stdout


async def test_flowtrail_demo_of_the_installed_wheel_prints_the_demo_run_to_its_success(installed_server, server_venv, tmp_path):
    done = await asyncio.to_thread(run_in, server_venv, "flowtrail", "demo", "--url", installed_server.base_url,
                                   "--key", "test-key-all", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run ") and " of demo-report created" in lines[0]
    assert any("[report] SUCCESS" in line for line in lines)
    assert lines[-1].startswith("run ") and " finished SUCCESS" in lines[-1]


async def test_the_installed_server_serves_every_file_of_the_viewer(installed_server):
    files = sorted(path.removeprefix("api/static/ui/") for path in tree_files("api/static/ui"))
    async with installed_server.client() as http:
        answers = {name: (await http.get(f"/ui/{name}")).status_code for name in files}
        root = await http.get("/")
    assert answers == {name: 200 for name in files}
    assert root.status_code in (302, 307) and root.headers["location"] == "/ui/"


async def test_the_installed_server_shows_swagger_and_redoc_with_no_network(installed_server, tmp_path):
    require_chromium()
    selectors = {operation: f"[id$='-{operation}']" for operation in OPERATIONS}
    refused, shown = await render_offline(installed_server, "/schema/swagger", "#operations-runs-createRun", selectors,
                                          tmp_path / "swagger.png")
    assert refused == [] and all(count == 1 for count in shown.values()), shown
    selectors = {operation: f"[id='operation/{operation}']" for operation in OPERATIONS}
    refused, shown = await render_offline(installed_server, "/schema/redoc", "[id='operation/createRun']", selectors,
                                          tmp_path / "redoc.png")
    assert refused in ([], [REDOCLY_BADGE]) and all(count == 1 for count in shown.values()), shown


def test_the_client_wheel_requires_only_httpx_httpx_sse_and_msgspec(wheels):
    assert {requirement.name for requirement in requirements_of(wheel_of(wheels, "flowtrail-client"))} == CLIENT_LIBRARIES


async def test_the_client_wheel_alone_runs_a_demo_on_the_installed_server(installed_server, client_venv, tmp_path):
    script = tmp_path / "integrator.py"
    script.write_text(CLIENT_SCRIPT, encoding="utf-8")
    done = await asyncio.to_thread(run_in, client_venv, "python", "-I", str(script), installed_server.base_url,
                                   "test-key-all", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == "SUCCESS" and answer["service_modules"] == []
    assert answer["output"]["data"]["format"] == "short paragraph"
