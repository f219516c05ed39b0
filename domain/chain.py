"""The hash chain of a stream: every stored event commits to the one before it (docs/history.md, exactly).

    link(0) = SHA-256("flowtrail-chain-v1:" + the stream id as 32 lowercase hex digits, ASCII)
    c(n)    = SHA-256(the event's JSON as it was appended)                      its content
    s(n)    = SHA-256(the event's JSON once erased, `domain.erasure.skeleton_of`) its skeleton
    link(n) = SHA-256(link(n-1) || s(n) || c(n))                                 raw 32-byte digests

An event that holds nothing to erase has s(n) = c(n). Erasing replaces the stored JSON by the
skeleton and keeps c(n): the chain still holds, and the skeleton itself stays covered.

On the wire (GET .../events, `flowtrail export`) each line is the stored JSON with one member
added at its end, `"chain": {...}` (`ChainMember`); the JSON the digests are over is the line
up to its last `,"chain":` followed by `}`. A stream stored before the chain existed has lines
without the member; its chain starts at its first line with one, from link(0).
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple
from uuid import UUID

import msgspec

CHAIN_VERSION = "flowtrail-chain-v1"
MEMBER = b',"chain":'
"""What precedes the chain member in a line (it is always the line's last member)."""


def digest(data: bytes) -> bytes:
    """SHA-256 of some bytes (32 raw bytes)."""
    return hashlib.sha256(data).digest()


def genesis(stream_id: UUID) -> bytes:
    """link(0): the link the first event of a stream's chain follows."""
    return digest(f"{CHAIN_VERSION}:{stream_id.hex}".encode("ascii"))


def next_link(previous: bytes, skeleton: bytes, content: bytes) -> bytes:
    """link(n) from link(n-1), s(n) and c(n)."""
    return digest(previous + skeleton + content)


class ChainCells(NamedTuple):
    """What the store keeps of the chain beside one event."""

    link: bytes
    skeleton: bytes | None = None
    """s(n) when it differs from c(n) (the event holds content); None: s(n) = c(n)."""
    content: bytes | None = None
    """c(n), kept once the event is erased (its stored JSON is then the skeleton); None while it is whole."""


def cells_for(state: bytes, skeleton: bytes, previous: bytes) -> ChainCells:
    """The chain cells of an event appended with this JSON and skeleton after `previous`."""
    content = digest(state)
    erased = content if skeleton is state else digest(skeleton)
    return ChainCells(next_link(previous, erased, content), None if skeleton is state else erased)


class ChainMember(msgspec.Struct, frozen=True, omit_defaults=True):
    """The `chain` member of an event line: the event's link, and the one digest its JSON does not give."""

    link: str
    skeleton: str | None = None
    """s(n) in hex, on a whole event whose skeleton differs from it."""
    content: str | None = None
    """c(n) in hex, on an erased event (its JSON is the skeleton)."""
    erased: bool = False

    @classmethod
    def of(cls, cells: ChainCells) -> ChainMember:
        """The member of stored cells."""
        if cells.content is not None:
            return cls(link=cells.link.hex(), content=cells.content.hex(), erased=True)
        return cls(link=cells.link.hex(), skeleton=None if cells.skeleton is None else cells.skeleton.hex())

    def digests(self, state: bytes) -> tuple[bytes, bytes]:
        """(s(n), c(n)) of the event whose line carries this member and whose JSON is `state`."""
        if self.content is not None:
            return digest(state), bytes.fromhex(self.content)
        content = digest(state)
        return (content if self.skeleton is None else bytes.fromhex(self.skeleton)), content


class _Line(msgspec.Struct):
    """What a line's top level tells the chain: its chain member, if it has one (other members ignored)."""

    chain: ChainMember | None = None


_member_encoder = msgspec.json.Encoder()
_line_decoder = msgspec.json.Decoder(_Line)


def event_line(state: bytes, cells: ChainCells | None) -> bytes:
    """One line of an export: the stored JSON, with its chain member when it has one (no newline)."""
    if cells is None:
        return state
    return state[:-1] + MEMBER + _member_encoder.encode(ChainMember.of(cells)) + b"}"


def split_line(line: bytes) -> tuple[bytes, ChainMember | None]:
    """(the stored JSON, the chain member or None) of one line; msgspec.DecodeError if it is not such a line.

    Only a `chain` member of the line's top level counts (an event's own content may hold that name
    deeper down); it is the last member, so the event's JSON ends where its last `,"chain":` begins.
    """
    line = line.strip()
    member = _line_decoder.decode(line).chain
    if member is None:
        return line, None
    return line[:line.rfind(MEMBER)] + b"}", member
