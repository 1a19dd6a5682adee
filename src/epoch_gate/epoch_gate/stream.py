"""The replay's protocol between its trusted parent and the child that runs product code.

Frames, both ways: a kind byte, a 4-byte big-endian payload length, the payload.
  parent -> child  R  u32 property index, then the batch's exact record bytes joined by "\\n"
  child -> parent  V  one verdict line per record of the request, joined by "\\n", in order
                   E  JSON {"code", "detail"}: the request's property cannot be evaluated
Verdict lines: `1` held; `!` + a JSON string: violated, and why; `=` + JSON: a probe's observed data.
The parent closes the child's stdin when done; the child then exits 0, with nothing more on the channel.
Stdlib only: the child imports it before anything of the product.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO, Optional

REQUEST, VERDICTS, ERROR = b"R", b"V", b"E"
HELD, VIOLATED, OBSERVED = b"1", b"!", b"="
RAISED = "predicate raised "
_HEADER = struct.Struct(">cI")
_INDEX = struct.Struct(">I")
MAX_PAYLOAD = 1 << 30


class ProtocolError(Exception):
    """The channel broke the protocol: truncated, oversized, of an unknown kind, or the wrong count."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def read_frame(stream: BinaryIO) -> Optional[tuple[bytes, bytes]]:
    """The next (kind, payload), or None at a clean end of stream (EOF on a frame boundary)."""
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) != _HEADER.size:
        raise ProtocolError(f"truncated frame header ({len(header)} bytes)")
    kind, size = _HEADER.unpack(header)
    if size > MAX_PAYLOAD:
        raise ProtocolError(f"frame of {size} bytes is over the cap")
    payload = stream.read(size)
    if len(payload) != size:
        raise ProtocolError(f"truncated frame ({len(payload)} of {size} bytes)")
    return kind, payload


def request(index: int, records: list[bytes]) -> bytes:
    """A batch: records are lines of the world, so none holds a newline."""
    return frame(REQUEST, _INDEX.pack(index) + b"\n".join(records))


def parse_request(payload: bytes) -> tuple[int, list[bytes]]:
    if len(payload) <= _INDEX.size:
        raise ProtocolError("a request without records")
    (index,) = _INDEX.unpack_from(payload)
    return index, payload[_INDEX.size:].split(b"\n")


def error(code: str, detail: str) -> bytes:
    return frame(ERROR, json.dumps({"code": code, "detail": detail}).encode("ascii"))


def parse_error(payload: bytes) -> tuple[str, str]:
    try:
        raw = json.loads(payload)
    except ValueError:
        raw = None
    if not (isinstance(raw, dict) and set(raw) == {"code", "detail"}
            and all(isinstance(v, str) for v in raw.values())):
        raise ProtocolError("a malformed error frame")
    return raw["code"], raw["detail"]


def violated(detail: str) -> bytes:
    return VIOLATED + json.dumps(detail).encode("ascii")


def parse_detail(line: bytes) -> str:
    """The why of a `!` verdict line."""
    try:
        detail = json.loads(line[1:])
    except ValueError:
        detail = None
    if not isinstance(detail, str):
        raise ProtocolError("a violation without its detail")
    return detail


def _refuse_constant(token: str) -> object:
    raise ValueError(f"{token} is not JSON")


def parse_observed(line: bytes) -> object:
    """A probe's observed data, parsed here: whatever the child sent, the parent holds plain JSON values."""
    try:
        return json.loads(line[1:], parse_constant=_refuse_constant)
    except ValueError:
        raise ProtocolError("observed data that is not JSON") from None
