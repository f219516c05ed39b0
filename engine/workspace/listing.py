"""The one rule for what a workspace holds: its regular files; symbolic links are neither followed nor listed.

Listings, stats and downloads all walk a workspace through `regular_files`, so a node cannot
smuggle a file from outside its workspace into any of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


class TooManyEntries(Exception):
    """The walk saw more files than its budget allowed."""


def regular_files(base: Path, budget: int | None = None) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative posix path, directory entry) of every regular file under `base`, in no set order.

    With a `budget`, TooManyEntries once more files than that were found.
    """
    found = 0
    pending = [] if base.is_symlink() else [(str(base), "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False):
                    found += 1
                    if budget is not None and found > budget:
                        raise TooManyEntries(str(base))
                    yield f"{prefix}{entry.name}", entry


def file_names(base: Path) -> list[str]:
    """Relative paths of every regular file, sorted."""
    return sorted(name for name, _ in regular_files(base))


def file_stats(base: Path, budget: int | None = None) -> tuple[int, int] | None:
    """(file count, total bytes) of the regular files; None when there are more than `budget`."""
    count = size = 0
    try:
        for _, entry in regular_files(base, budget):
            try:
                size += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
            count += 1
    except TooManyEntries:
        return None
    return count, size
