"""The event store: every module that knows SQL or the eventsourcing library."""

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
