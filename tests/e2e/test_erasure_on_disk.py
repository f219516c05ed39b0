"""Erased bytes leave the disk: a marker put into a run's variables, an uploaded file, its thinking and its output is,
once the run is erased, in no file of the SQLite store or the data directory, and in no pg_dump of the schema."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from tests.support.erasure import BASE, MARKERS, finished_run
from tests.support.stores import PG_BASE

KEPT = "-kept"
"""The tag of a second run that is not erased: its markers must be found, or the search proves nothing."""


def files_under(*roots: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for root in roots for path in root.rglob("*") if path.is_file()}


def pg_dump(schema: str) -> bytes:
    return subprocess.run(["pg_dump", "--no-owner", "-n", schema, PG_BASE.split("?")[0]], capture_output=True,
                          check=True, timeout=120).stdout


def found(haystack: bytes, marker: str) -> bool:
    """The marker as text, or as the hex digits bytea columns are dumped in."""
    return marker.encode() in haystack or marker.encode().hex().encode() in haystack


@pytest.mark.parametrize("marker", MARKERS)
async def test_an_erased_runs_content_is_in_no_file_and_no_dump(api, client, marker):
    erased = await finished_run(api, client, tag="-gone")
    await finished_run(api, client, tag=KEPT)
    assert (await client.delete(f"{BASE}/{erased.hex}")).status_code == 200
    location = api.services.store.location
    places = {str(path): data for path, data in files_under(api.settings.data_dir).items()}
    if location.kind == "sqlite":
        assert location.sqlite_path is not None
        places |= {str(path): data for path, data in files_under(location.sqlite_path.parent).items()}
    else:
        places["pg_dump"] = await asyncio.to_thread(pg_dump, location.schema)
    holding = sorted(place for place, data in places.items() if found(data, marker + "-gone"))
    assert holding == [], f"{marker} is still in {holding}"
    assert any(found(data, marker + KEPT) for data in places.values())
