"""`flowtrail rebuild-read-model`: fold every run's listing row afresh from the log and replace the stored rows."""

from __future__ import annotations

import sys

from engine.readmodel import rebuild
from engine.store import EventStore, parse_database_url
from scripts.connect import server_settings


def rebuild_read_model() -> int:
    """Replace the run rows and their tracking position with the fold of the log (one transaction)."""
    location = parse_database_url(server_settings().store.database_url)
    if location.sqlite_path is not None and not location.sqlite_path.exists():
        print(f"error: no event log at {location.sqlite_path} (nothing was created)", file=sys.stderr)
        return 1
    store = EventStore(location)
    try:
        count = rebuild(store)
    finally:
        store.close()
    print(f"rebuilt {count} run rows from the log")
    return 0
