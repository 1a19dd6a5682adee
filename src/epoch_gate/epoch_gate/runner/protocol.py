"""The replay's protocol between the trusted parent (the judges) and the child that runs product code.

The child is a server of product callables: it answers calls, and only with data. Frames, both ways: a
kind byte, a 4-byte big-endian payload length, the payload (JSON, UTF-8).
  parent -> child  C  "scope", then the projection, then each call: lines of JSON (JSON text never
                      holds a raw newline). The projection is null (every answer whole) or
                      [names, whole]: the answers cross with only the fields and properties `names`
                      names, at every depth (every field when it holds WHOLE), except those of the
                      calls whose indexes `whole` lists
                   D  scope                   the scope's handles can go
  child -> parent  A  [answer, ...]           exactly one answer per call of the batch, in order
A call is [target, args, kwargs]. The target is {"m": "pkg.module.attr.attr"} (imported by the child),
{"h": [scope, handle, path]} (reached from an earlier answer), {"op": "add"} (an operator over args)
or {"p": [scope, handle, path]} (that value's public properties, as an object of them).
An argument that is an earlier answer, or a part of it, is {"\\u0000ref": [scope, handle, path]}.
An answer is one of
  ["v", handle, type, data, properties]
                              the product returned; `data` is its value as data (epoch_gate.runner.data)
                              and `properties` an object's public properties ({} otherwise); handle -1:
                              a number, text or None, its own value
  ["o", handle, type, why]    the product returned something that is not data (a handle only)
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
from typing import Any, BinaryIO, Callable, Optional, Sequence

CALLS, DROP, ANSWERS = b"C", b"D", b"A"
REF = "\u0000ref"
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs")
_HEADER = struct.Struct(">cI")
MAX_PAYLOAD = 1 << 30


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


Projection = Optional[frozenset[str]]  # the names an answer crosses with; None: all of them
# Among the names: every field crosses (a predicate that reads whole values), its properties only those named
WHOLE = "\u0000whole"


def calls(scope: int, encoded: list[bytes], names: Projection = None, whole: Sequence[int] = ()) -> bytes:
    """A batch of calls, each already encoded as JSON by the parent, answered with `names` only (except
    the calls at the indexes `whole`: all of them)."""
    projection = b"null" if names is None else json.dumps([sorted(names), list(whole)]).encode()
    return frame(CALLS, b"%d\n%s\n%s" % (scope, projection, b"\n".join(encoded)))


def projections(line: bytes, count: int) -> list[Projection]:
    """Each call's projection, from the projection line of a batch of `count` calls."""
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):
        parsed = False
    if parsed is None:
        return [None] * count
    if not (
        type(parsed) is list
        and len(parsed) == 2
        and type(parsed[0]) is list
        and all(type(name) is str for name in parsed[0])
        and type(parsed[1]) is list
        and all(type(index) is int for index in parsed[1])
    ):
        raise ProtocolError("a malformed projection")
    names, whole = frozenset(parsed[0]), set(parsed[1])
    return [None if index in whole else names for index in range(count)]


def drop(scope: int) -> bytes:
    return frame(DROP, b"%d" % scope)


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


# What the parent holds once it has parsed answers, at most, per part of their text (measured on CPython
# 3.9 at its peak, while a list is still beside its tuple): an object (a dict and a Remote) or a list (and
# its tuple), a text, an item or a field (a pointer, a number).
PART_COST, TEXT_COST, ITEM_COST = 320, 56, 40


def parsed_cost(payload: bytes) -> int:
    """An estimate, erring high, of the bytes the parent holds once it has parsed `payload`: the product
    shapes its answers, and a list of empty objects parses to some 40 times its text. The text is
    counted twice (the decoded copy json.loads makes, and the strings parsed from it), at 4 bytes a
    character once any is not ASCII (one beyond the BMP widens its whole string so)."""
    width = 4 if not payload.isascii() or b"\\u" in payload else 1
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


def loads(payload: bytes, object_hook: Callable[[dict[str, Any]], object]) -> object:
    """JSON as the parent reads what the child says: finite numbers, plain values only; each object
    through `object_hook`."""
    try:
        return json.loads(payload, parse_constant=refuse_constant, parse_float=finite, object_hook=object_hook)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"a payload that is not JSON ({type(exc).__name__})") from None


def _is_int(value: object) -> bool:
    return type(value) is int and value >= -1


def parse_answers(
    payload: bytes, count: int, object_hook: Callable[[dict[str, Any]], object], mapping: type
) -> list[list[object]]:
    """The child's answers to a batch of `count` calls, each checked for its shape, nothing more. Its
    objects go through `object_hook`, which makes each a `mapping`."""
    answers = loads(payload, object_hook)
    if type(answers) is not list:
        raise ProtocolError("answers that are not a list")
    if len(answers) != count:
        raise ProtocolError(f"{len(answers)} answers to {count} calls")
    for answer in answers:
        if (
            type(answer) is not list
            or not answer
            or type(answer[0]) is not str
            or answer[0] not in ("v", "o", "x", "u")
        ):
            raise ProtocolError("an answer of an unknown kind")
        kind, rest = answer[0], answer[1:]
        if kind == "v":
            ok = (
                len(rest) == 4
                and _is_int(rest[0])
                and type(rest[1]) is str
                and type(rest[3]) is mapping
                and (rest[0] != -1 or (type(rest[2]) is not mapping and type(rest[2]) is not list))
            )  # a value without a handle is a scalar
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
    return answers  # type: ignore[return-value]
