"""The workspace zip: streamed in chunks from a thread, symlinks left out, stops when the client goes."""

from __future__ import annotations

import asyncio
import io
import os
import threading
import zipfile

from api.downloads import CHUNK_BYTES, zip_chunks


async def collect(base) -> list[bytes]:
    return [chunk async for chunk in zip_chunks(base)]


async def test_a_large_workspace_arrives_in_many_chunks_and_unzips_to_the_same_files(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    blob = os.urandom(3 * CHUNK_BYTES)
    (tmp_path / "a" / "b" / "random.bin").write_bytes(blob)
    (tmp_path / "note.txt").write_text("你好", encoding="utf-8")
    chunks = await collect(tmp_path)
    assert len(chunks) >= 3 and all(len(c) <= CHUNK_BYTES for c in chunks)
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    assert archive.namelist() == ["a/b/random.bin", "note.txt"]
    assert archive.read("a/b/random.bin") == blob and archive.testzip() is None


async def test_symbolic_links_are_not_followed_into_the_zip(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    base = tmp_path / "ws"
    base.mkdir()
    (base / "ok.txt").write_text("ok")
    (base / "link.txt").symlink_to(outside / "secret.txt")
    (base / "linkdir").symlink_to(outside, target_is_directory=True)
    archive = zipfile.ZipFile(io.BytesIO(b"".join(await collect(base))))
    assert archive.namelist() == ["ok.txt"]


async def test_a_missing_workspace_is_an_empty_zip(tmp_path):
    assert zipfile.ZipFile(io.BytesIO(b"".join(await collect(tmp_path / "none")))).namelist() == []


async def test_a_client_that_stops_reading_stops_the_zipping_thread(tmp_path):
    (tmp_path / "big.bin").write_bytes(os.urandom(40 * CHUNK_BYTES))
    before = threading.active_count()
    chunks = zip_chunks(tmp_path)
    assert await chunks.__anext__()
    await chunks.aclose()
    for _ in range(50):
        if threading.active_count() <= before:
            break
        await asyncio.sleep(0.05)
    assert threading.active_count() <= before


async def test_workspace_stats_count_exactly_what_a_download_contains(tmp_path):
    from api.downloads import measure_workspace
    from engine.workspace.listing import file_stats

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(b"12345")
    (tmp_path / "b.txt").write_bytes(b"")
    (tmp_path / "link").symlink_to(tmp_path / "d" / "a.txt")
    assert await measure_workspace(tmp_path) == (2, 5)
    assert file_stats(tmp_path, budget=1) is None
    assert await measure_workspace(tmp_path / "missing") == (0, 0)
    names = zipfile.ZipFile(io.BytesIO(b"".join(await collect(tmp_path)))).namelist()
    assert len(names) == 2
