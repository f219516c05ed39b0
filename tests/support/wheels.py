"""Wheels built from the working tree and installed into fresh virtual environments that see no source tree.

No network is needed: the wheels are built with the test environment's setuptools (`--no-build-isolation`),
and a fresh environment gets its dependencies from the test environment's installed copies, linked one
distribution at a time: exactly the distributions the wheel's metadata requires, and what they require, so a
dependency missing from the metadata is missing there too. The wheels themselves are installed by pip with
`--no-index` from the directory they were built into.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from email.parser import HeaderParser
from importlib.metadata import Distribution, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.process import ROOT

SERVER_SOURCES = (Path("api"), Path("domain"), Path("engine"), Path("projections"), Path("scripts"), Path("pyproject.toml"))
"""What the server's wheel is built from (a copy, so a build never writes into the working tree)."""
CLIENT_SOURCE = Path("clients", "python")
LEFT_BEHIND = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")


def build_wheels(into: Path) -> Path:
    """The server's and the client's wheels, built from a copy of the working tree; the directory holding them."""
    source, wheels = into / "source", into / "wheels"
    for name in (*SERVER_SOURCES, CLIENT_SOURCE):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=LEFT_BEHIND)
        else:
            shutil.copy(ROOT / name, source / name)
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels),
        str(source), str(source / CLIENT_SOURCE))
    return wheels


def wheel_of(wheels: Path, name: str) -> Path:
    """The one wheel of a distribution in the directory."""
    (found,) = wheels.glob(f"{canonicalize_name(name).replace('-', '_')}-*.whl")
    return found


def requirements_of(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist without extras' requirements."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(archive.read(metadata).decode("utf-8"))
    requirements = [Requirement(line) for line in headers.get_all("Requires-Dist") or []]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def dependency_closure(requirements: Iterable[Requirement], leave_out: Iterable[str] = ()) -> list[Distribution]:
    """The installed distributions the requirements need, transitively, with the extras they name."""
    found: dict[str, Distribution] = {}
    left_out = {canonicalize_name(name) for name in leave_out}
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = list(requirements)
    while pending:
        requirement = pending.pop()
        name, extras = canonicalize_name(requirement.name), frozenset(requirement.extras)
        if name in left_out or (name, extras) in seen:
            continue
        seen.add((name, extras))
        found[name] = found.get(name) or distribution(name)
        for line in found[name].requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(needed.marker.evaluate({"extra": e}) for e in {"", *extras}):
                pending.append(needed)
    return list(found.values())


def fresh_venv(path: Path, dependencies: Iterable[Distribution]) -> Path:
    """A new virtual environment (no pip, no system packages) that sees only these installed distributions."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    shelf = path / "dependencies"
    shelf.mkdir()
    for dist in dependencies:
        base = Path(str(dist.locate_file("")))
        for entry in {Path(str(file)).parts[0] for file in dist.files or ()} - {"..", "__pycache__"}:
            if not (shelf / entry).exists():
                (shelf / entry).symlink_to(base / entry)
    (site_packages,) = (path / "lib").glob("python*/site-packages")
    (site_packages / "dependencies.pth").write_text(f"{shelf}\n", encoding="utf-8")
    return path


def install(venv: Path, wheels: Path, name: str) -> None:
    """Install a distribution from the wheel directory alone (`--no-index`) into the environment."""
    pip("--python", str(venv / "bin" / "python"), "install", "--no-index", "--find-links", str(wheels), name)


def pip(*args: str) -> None:
    """Run the test environment's pip; its output becomes the error when it fails."""
    done = subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
