"""SSE frames as a client records them, and the delays computed from them.

A client process splits the raw byte stream into frames (`FrameReader`) and writes, per step
frame, four doubles: client index, id, arrival time and the `t` embedded in the chunk's
content (`time.time()` when the chunk was handed to the writer). The orchestrator reads them
back as `Frames`. A frame's delay is `arrival - saved[id]` (the host's save times, see
bench/host.py) or `arrival - t`, both from `time.time()` on this machine.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from typing import Any

_STEP_RE = re.compile(
    rb'id: (\d+)\r\nevent: node_stream\r\ndata: [^\r]*\\"t\\":([0-9.]+)'
)


class FrameReader:
    """Splits an SSE body into frames and records (client, id, arrival, t) per frame."""

    def __init__(self, idx: int, rec: array, stop_id: int | None) -> None:
        self.fidx = float(idx)
        self.rec = rec
        self.stop_id = stop_id
        self.buf = b""
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.nbytes = self.frames = self.step_bytes = 0
        self.last_id = -1

    def feed(self, chunk: bytes, now: float) -> bool:
        """Take a piece of body that arrived at `now`; True once the frame `stop_id` arrived.

        Frames are found with C-level regex scans over each piece's complete frames, so a
        client process can keep up with the server (about 1 us a frame).
        """
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.nbytes += len(chunk)
        buf = self.buf + chunk if self.buf else chunk
        cut = buf.rfind(b"\r\n\r\n")
        if cut < 0:
            self.buf = buf
            return False
        complete, self.buf = buf[: cut + 4], buf[cut + 4 :]
        frames = (
            complete.count(b"\r\n\r\n")
            - complete.count(b"\r\n\r\n:")
            - complete.startswith(b":")
        )
        if frames <= 0:
            return False  # keep-alive comments only
        steps = _STEP_RE.findall(complete)
        if len(steps) == frames:
            self.step_bytes += len(complete)
        elif steps:
            self.step_bytes += sum(
                len(f) + 4 for f in complete.split(b"\r\n\r\n") if _STEP_RE.match(f)
            )
        rec, fidx = self.rec, self.fidx
        for fid, t in steps:
            rec.extend((fidx, float(fid), now, float(t)))
        self.frames += frames
        at = complete.rfind(b"\nid: ") + 1  # 0 when the only frame starts the piece
        self.last_id = int(complete[at + 4 : complete.index(b"\r", at + 4)])
        return self.stop_id is not None and self.last_id >= self.stop_id

    def summary(self, t_req: float, t_headers: float, ended: bool) -> dict[str, Any]:
        """What one stream delivered, and when (the `follow` command's answer per client)."""
        return {
            "t_req": t_req,
            "t_headers": t_headers,
            "t_first": self.t_first,
            "t_last": self.t_last,
            "frames": self.frames,
            "bytes": self.nbytes,
            "step_bytes": self.step_bytes,
            "last_id": self.last_id,
            "ended": ended,
        }


def write_records(path: str, records: list[array]) -> None:
    """Write every client's recorded quadruples to one frame file."""
    with open(path, "wb") as fh:
        fh.writelines(rec.tobytes() for rec in records)


@dataclass
class Frames:
    """What clients recorded: per frame the client index, id, arrival time and embedded append time."""

    client: array = field(default_factory=lambda: array("d"))
    id: array = field(default_factory=lambda: array("d"))
    arrival: array = field(default_factory=lambda: array("d"))
    t: array = field(default_factory=lambda: array("d"))

    @classmethod
    def load(cls, path: str) -> Frames:
        """Read a client's frame file (quadruples of doubles)."""
        raw = array("d")
        with open(path, "rb") as fh:
            raw.frombytes(fh.read())
        return cls(raw[0::4], raw[1::4], raw[2::4], raw[3::4])

    def __len__(self) -> int:
        return len(self.id)


def save_delays(
    frames: Frames, saved: dict[str, Any], *, steps_only: bool = True
) -> list[float]:
    """Per frame: arrival minus the time the writer's save of that event returned (seconds)."""
    first, times = saved["first"], saved["times"]
    out = []
    for fid, arrival, t in zip(frames.id, frames.arrival, frames.t):
        if steps_only and t == 0.0:
            continue
        k = int(fid) - first
        if 0 <= k < len(times):
            out.append(arrival - times[k])
    return out


def chunk_delays(frames: Frames) -> list[float]:
    """Per step frame: arrival minus the time its chunk was handed to the writer (seconds)."""
    return [arrival - t for arrival, t in zip(frames.arrival, frames.t) if t > 0.0]
