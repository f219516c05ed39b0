"""`flowtrail export RUN_ID`: a run's events as JSON Lines, straight from the log."""

from __future__ import annotations

import sys
from uuid import UUID

import msgspec

from engine.settings import Settings
from engine.store import EventStore, parse_database_url


def export_run(run_id: str, output: str) -> int:
    """Write every event of the run, one JSON object per line, in order."""
    try:
        stream_id = UUID(run_id)
    except ValueError:
        print(f"error: {run_id!r} is not a run id", file=sys.stderr)
        return 2
    store = EventStore(parse_database_url(Settings.from_env().store.database_url))
    try:
        events = store.read_stream(stream_id)
    finally:
        store.close()
    if not events:
        print(f"error: run {stream_id.hex} not found", file=sys.stderr)
        return 1
    encoder = msgspec.json.Encoder()
    lines = b"".join(encoder.encode(e) + b"\n" for e in events)
    if output == "-":
        sys.stdout.buffer.write(lines)
    else:
        with open(output, "wb") as handle:
            handle.write(lines)
    return 0
