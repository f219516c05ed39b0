"""The event log's store: the events table, its reads and writes, the live tail.

The read model (engine/readmodel) and the job queue (engine/dispatch) own their own tables and SQL.
"""

from engine.store.async_store import AsyncEventStore
from engine.store.event_store import (
    STORED_EVENT_TYPES,
    ConcurrentAppend,
    EventStore,
    StoreError,
    StoreUnavailable,
    StoreUnreachable,
)
from engine.store.url import StoreLocation, parse_database_url

__all__ = [
    "STORED_EVENT_TYPES", "AsyncEventStore", "ConcurrentAppend", "EventStore", "StoreError", "StoreLocation",
    "StoreUnavailable", "StoreUnreachable", "parse_database_url",
]
