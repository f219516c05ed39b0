"""SSE framing: the one function that turns a run's message into the bytes a stream sends.

The engine keeps frames but does not know Litestar: the composition root is handed this function
(`build_services(settings, encode_frame=encode_frame)`) and passes it to the hot runs.
"""

from __future__ import annotations

from litestar.response import ServerSentEventMessage

from projections.sse import SseMessage

_FRAME = b"id: %d\r\nevent: %b\r\ndata: %b\r\n\r\n"


def encode_frame(message: SseMessage) -> bytes:
    """One SSE message framed (`id:`, `event:`, `data:` lines), once, for every client that reads it.

    A message on one line (compact JSON always is) is framed by one bytes format, exactly as Litestar's
    `ServerSentEventMessage.encode` frames it, at a fifth of its cost; anything else goes through Litestar.
    """
    data, event = message.data, message.event
    if b"\n" in data or b"\r" in data or "\n" in event or "\r" in event:
        return ServerSentEventMessage(data=data, event=event, id=message.id).encode()
    return _FRAME % (message.id, event.encode(), data)
