"""Maps msgspec event Structs to the library's stored events and back.

The stored topic is the event's stable tag (not a Python path), so code can move freely.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import reduce
from typing import Any

import msgspec
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, Transcoder


class _NoTranscoding(Transcoder):
    """The library's transcoder slot, unused: msgspec encodes and decodes whole events."""

    def encode(self, obj: Any) -> bytes:
        """Never called."""
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        """Never called."""
        raise NotImplementedError


class MsgspecMapper(Mapper):
    """Encodes events as JSON with msgspec; decodes by tag through one long-lived decoder."""

    def __init__(self, event_types: Sequence[type[msgspec.Struct]]) -> None:
        super().__init__(transcoder=_NoTranscoding())
        self.encoder = msgspec.json.Encoder()
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(reduce(operator.or_, event_types))
        self.tags = {t: str(t.__struct_config__.tag) for t in event_types}

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """One event as a stored row: (stream id, position, tag, JSON state)."""
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=self.tags[type(domain_event)],
            state=self.encoder.encode(domain_event),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """The event a stored row holds."""
        return self.decode_state(stored_event.state, stored_event.topic, stored_event.originator_version)

    def decode_state(self, state: bytes, topic: str = "", position: int = 0) -> Any:
        """Decode one row's state (used by the asyncpg read path too)."""
        try:
            return self.decoder.decode(state)
        except msgspec.DecodeError as exc:
            raise MapperDeserialisationError(
                f"cannot decode stored event {topic!r} at position {position}: {exc}"
            ) from exc
