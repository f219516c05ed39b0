"""A replay's stream pieces framed from their stored JSON: the strings are copied as stored, not decoded and encoded.

A stored `NodeStreamed` row and its `node_stream` message carry the same strings, encoded by the same
msgspec rules; only the names and order of the members differ. So the message's `data` is assembled from
the row's raw members (`msgspec.Raw`), which costs a fraction of decoding the event and encoding its
payload. The pieces whose message differs from the row otherwise (a tool call or result, cut to 500
characters; any piece of an erased run, marked) are left to the decoding path (`None`).
"""

from __future__ import annotations

import msgspec

from projections.sse import CUT_KINDS, SseMessage

STREAM_TAG = "NodeStreamed"
"""The stored tag of the rows this module frames."""
EVENT = "node_stream"
_DATA = b'{"runId":"%b","type":"node_stream","nodeId":%b,"visitUuid":%b,"kind":%b,"content":%b,"toolName":%b}'
_NULL = msgspec.Raw(b"null")


class _StoredPiece(msgspec.Struct):
    """The members of a stored NodeStreamed row that its message repeats, as stored (the others are skipped)."""

    visit_uuid: msgspec.Raw
    node_id: msgspec.Raw
    kind: str
    content: msgspec.Raw
    tool_name: msgspec.Raw = _NULL


_decode_piece = msgspec.json.Decoder(_StoredPiece).decode
_decode_string = msgspec.json.Decoder(str).decode
_encode = msgspec.json.Encoder().encode


def stream_message(position: int, state: bytes, run_hex: bytes) -> SseMessage | None:
    """The `node_stream` message of a stored NodeStreamed row; None when the decoding path must render it."""
    try:
        piece = _decode_piece(state)
    except msgspec.DecodeError:
        return None
    if piece.kind in CUT_KINDS:  # the message cuts their content: decoded, not copied
        return None
    node_id = _decode_string(piece.node_id)
    data = _DATA % (run_hex, piece.node_id, piece.visit_uuid, _encode(piece.kind), piece.content, piece.tool_name)
    return SseMessage(position, EVENT, data, node_id)
