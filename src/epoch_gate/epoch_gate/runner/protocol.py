"""The replay's protocol between the trusted parent (the judges) and the child that runs product code.

One call, one answer, in turn: the parent sends a call and reads its answer before it sends the next, so
the child receives exactly the calls a predicate makes, each once, in the order it makes them. Frames,
both ways: a kind byte, a 4-byte big-endian payload length, the payload (ASCII JSON).
  parent -> child  C  "<scope>\\n" then the call      a scope is one run of a predicate on one record:
                                                      when it changes, the child drops every value it
                                                      kept for the scope before
  child -> parent  A  the answer
A call is [target, args, kwargs]. The target is {"m": "pkg.module.attr"} (a name the child imports),
{"h": [scope, handle]} (a value the child keeps), {"h": [scope, handle, name]} (that value's attribute
`name`, called), {"a": [scope, handle, name]} (that value's attribute `name`, read) or {"op": "add"}
(an operator over the arguments). An argument that is a value the child keeps is {"\\u0000ref":
[scope, handle]}.
An answer is one of
  ["v", first, type, data]    the product returned; `data` is the value as data (`epoch_gate.runner.data`)
                              and each JSON object in it is a value the child keeps, numbered from
                              `first` in the order its object closes (json's object_hook order)
  ["d", handle, type, data]   the product returned data that is not JSON's own (an Enum, a Decimal, a
                              Fraction, a set): `data` as above, and a handle to pass the value back
  ["o", handle, type, why]    the product returned something that is not data: a handle only
  ["x", types, message, tb]   the product raised: its exception's class names (most derived first), its
                              message and its own frames of the traceback
  ["u", why]                  the target or an argument does not resolve: the oracle's mistake
The parent closes the child's stdin when done; the child then exits 0, with nothing more on the channel.
Stdlib only: the child imports it before anything of the product.
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Any, BinaryIO, Callable, Optional

CALL, ANSWER = b"C", b"A"
REF = "\u0000ref"
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs")
_HEADER = struct.Struct(">cI")
MAX_PAYLOAD = 1 << 30  # a call: the parent's own, as large as a record
MAX_ANSWER = 64 << 20  # an answer: the child says a larger value is not data; the parent reads a frame whole


class ProtocolError(Exception):
    """The channel broke the protocol: truncated, oversized, of an unknown kind, or malformed."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def read_frame(stream: BinaryIO, cap: int = MAX_PAYLOAD) -> Optional[tuple[bytes, bytes]]:
    """The next (kind, payload), or None at a clean end of stream (EOF on a frame boundary); a payload over
    `cap` bytes is refused before it is read."""
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) != _HEADER.size:
        raise ProtocolError(f"truncated frame header ({len(header)} bytes)")
    kind, size = _HEADER.unpack(header)
    if size > cap:
        raise ProtocolError(f"frame of {size} bytes is over the cap of {cap}")
    payload = stream.read(size)
    if len(payload) != size:
        raise ProtocolError(f"truncated frame ({len(payload)} of {size} bytes)")
    return kind, payload


def call_frame(scope: int, call: bytes) -> bytes:
    return frame(CALL, b"%d\n%s" % (scope, call))


# A JSON string, or the rest of the text from an unclosed one (so that the scan stays linear)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def nested_deeper(text: str, limit: int) -> bool:
    """Whether the JSON text's arrays and objects nest deeper than `limit` (its strings aside)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for bracket in _NOT_A_BRACKET.sub("", STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


# What the parent holds once it has parsed an answer, at most, per part of its text (measured on CPython
# 3.9 at its peak, while a list is still beside its tuple): an object (a dict and a Remote) or a list (and
# its tuple), a text, an item or a field (a pointer, a number).
PART_COST, TEXT_COST, ITEM_COST = 320, 56, 40


def parsed_cost(payload: bytes) -> int:
    """An estimate, erring high, of the bytes the parent holds once it has parsed `payload` (ASCII JSON
    whose escapes may widen a string to 4 bytes a character): the product shapes its answers, and a list
    of empty objects parses to some 40 times its text."""
    width = 4 if b"\\u" in payload else 1
    parts = payload.count(b"{") + payload.count(b"[")
    items = payload.count(b",") + payload.count(b":")
    texts = payload.count(b'"') // 2
    return (1 + width) * len(payload) + PART_COST * parts + TEXT_COST * texts + ITEM_COST * items


def refuse_constant(token: str) -> object:
    raise ValueError(f"{token} is not JSON")


def finite(token: str) -> float:
    value = float(token)
    if value in (math.inf, -math.inf):  # 1e999 is JSON's text for a number no float holds
        raise ValueError(f"{token[:40]} is not a finite number")
    return value


def _is_int(value: object) -> bool:
    return type(value) is int and value >= 0


def parse_answer(payload: bytes, make_object: Callable[[dict[str, Any]], object]) -> list[Any]:
    """The child's answer to one call, checked for its shape, nothing more: plain JSON only (ASCII, finite
    numbers, no key twice in an object). Each object of it goes through `make_object`, in the order it
    closes."""
    if not payload.isascii():
        raise ProtocolError("an answer that is not ASCII JSON")

    def pairs(items: list[tuple[str, Any]]) -> object:
        fields = dict(items)
        if len(fields) != len(items):
            raise ProtocolError(f"an object with a key twice ({_first_repeated(items)!r})")
        return make_object(fields)

    try:
        answer = json.loads(payload, parse_constant=refuse_constant, parse_float=finite, object_pairs_hook=pairs)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"an answer that is not JSON ({type(exc).__name__})") from None
    if type(answer) is not list or not answer or type(answer[0]) is not str or answer[0] not in ("v", "d", "o", "x", "u"):
        raise ProtocolError("an answer of an unknown kind")
    kind, rest = answer[0], answer[1:]
    if kind in ("v", "d"):
        ok = len(rest) == 3 and _is_int(rest[0]) and type(rest[1]) is str
    elif kind == "o":
        ok = len(rest) == 3 and _is_int(rest[0]) and type(rest[1]) is str and type(rest[2]) is str
    elif kind == "x":
        ok = (
            len(rest) == 3
            and type(rest[0]) is list
            and all(type(t) is str for t in rest[0])
            and type(rest[1]) is str
            and type(rest[2]) is str
        )
    else:
        ok = len(rest) == 1 and type(rest[0]) is str
    if not ok:
        raise ProtocolError(f"a malformed {kind!r} answer")
    return answer  # type: ignore[no-any-return]


def _first_repeated(items: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in items:
        if key in seen:
            return key[:80]
        seen.add(key)
    return ""
