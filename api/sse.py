"""SSE framing, by Litestar: the one function that turns a run's message into the bytes a stream sends.

The engine keeps frames but does not know Litestar: the composition root is handed this function
(`build_services(settings, encode_frame=encode_frame)`) and passes it to the hot runs.
"""

from __future__ import annotations

from litestar.response import ServerSentEventMessage

from projections.sse import SseMessage


def encode_frame(message: SseMessage) -> bytes:
    """One SSE message framed by Litestar (`id:`, `event:`, `data:` lines), once, for every client that reads it."""
    return ServerSentEventMessage(data=message.data, event=message.event, id=message.id).encode()
