"""Run workspaces: one directory per run, for uploads and files that nodes write."""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path, PurePosixPath
from uuid import UUID

from domain.errors import FlowtrailError
from engine.workspace.listing import file_names

MAX_NAME_BYTES = 255
"""A file or directory name may be at most this long in UTF-8, as filesystems count (decision 15)."""
MAX_PATH_SEGMENTS = 32
"""A relative path may have at most this many names."""
MAX_PATH_BYTES = 1024
"""A whole relative path may be at most this long in UTF-8."""


BIDI_FORMATTING = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})
"""The bidirectional classes of the embedding, override and isolate characters: a name holding one can show
itself as another (`report\u202etxt.md` reads as `reportdm.txt`)."""


class UnsafePath(FlowtrailError):
    """A relative path that would escape the workspace (or is not relative)."""


def safe_relative(raw: str) -> str:
    """Normalise a client-given relative path; refuse absolute paths, `..` and other escapes."""
    text = raw.replace("\\", "/").strip()
    if not text or text.startswith("/") or "\x00" in text or (len(text) > 1 and text[1] == ":"):
        raise UnsafePath(f"path {raw[:200]!r} must be relative")
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise UnsafePath(f"path {raw[:200]!r} escapes the workspace")
    if any(_misleading(char) for char in text):
        raise UnsafePath(f"path {raw[:200]!r} holds a control or bidirectional-formatting character")
    if len(parts) > MAX_PATH_SEGMENTS:
        raise UnsafePath(f"path {raw[:200]!r} has more than {MAX_PATH_SEGMENTS} segments")
    try:
        sizes = [len(p.encode("utf-8")) for p in parts]
    except UnicodeEncodeError:
        raise UnsafePath(f"path {raw[:200]!r} is not valid Unicode text") from None
    if max(sizes) > MAX_NAME_BYTES:
        raise UnsafePath(f"path {raw[:200]!r} has a name over {MAX_NAME_BYTES} bytes in UTF-8")
    if sum(sizes) + len(sizes) - 1 > MAX_PATH_BYTES:
        raise UnsafePath(f"path {raw[:200]!r} is over {MAX_PATH_BYTES} bytes in UTF-8")
    return "/".join(parts)


def _misleading(char: str) -> bool:
    """A control character (C0, DEL, C1) or a bidirectional embedding, override or isolate."""
    return unicodedata.category(char) == "Cc" or unicodedata.bidirectional(char) in BIDI_FORMATTING


class Workspace:
    """The directory tree under which every run keeps its files."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, run_id: UUID) -> Path:
        """The run's directory (it may not exist yet)."""
        return self.root / run_id.hex

    def write(self, run_id: UUID, relative: str, data: bytes) -> str:
        """Write one file; returns its normalised relative path."""
        rel = safe_relative(relative)
        target = self.path_for(run_id) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return rel

    def files(self, run_id: UUID) -> list[str]:
        """Relative paths of every regular file, sorted (symbolic links are not listed)."""
        return file_names(self.path_for(run_id))

    def remove(self, run_id: UUID) -> None:
        """Delete a run's files."""
        shutil.rmtree(self.path_for(run_id), ignore_errors=True)

    def run_folders(self) -> dict[UUID, float]:
        """Every folder named like a run id, with its last-modified time (other names are not ours)."""
        if not self.root.is_dir():
            return {}
        found = {}
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False) and len(entry.name) == 32:
                try:
                    found[UUID(hex=entry.name)] = entry.stat(follow_symlinks=False).st_mtime
                except ValueError:
                    continue
        return found
