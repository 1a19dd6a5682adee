"""The replay's protocol between the trusted parent (the judges) and the child that runs product code.

One call, one answer, in turn: the parent sends a call and reads its answer before it sends the next, so
the child receives exactly the calls a predicate makes, each once, in the order it makes them. Frames,
both ways: a kind byte, a 4-byte big-endian payload length, the payload (ASCII JSON).
  parent -> child  C  "<scope>\\n" then the call      a scope is one run of a predicate on one record:
                                                      when it changes, the child drops every value it
                                                      kept for the scope before
  child -> parent  A  the answer
A call is [target, args, kwargs]. The target is {"m": "pkg.module.attr"} (a name the child imports),
{"h": [scope, handle]} (a value the child keeps, called), {"a": [scope, handle, name]} (that value's
attribute `name`, read by ordinary attribute access), {"r": [scope, handle]} (that value read again as
data), {"r": [scope, handle, name]} (its field `name` read again as data: a field its declaration names)
or {"op": "add"} (an operator over the arguments). An argument that is a value the child keeps is
{"\\u0000ref": [scope, handle]}; a Decimal or a Fraction is tagged as in an answer.
An answer is one of
  ["v", type, data]           the product returned; `data` is the value as data (`epoch_gate.runner.product.data`)
  ["w", type, data]           as "v", to a read again ("r") that ran product code (a property, a custom
                              `__getattribute__`): the judge holds no other value's fields as they were
  ["o", handle, type, why]    the product returned something that is not data: a handle only
  ["x", classes, message, tb] the product raised: its exception's classes (most derived first, each
                              `module.qualname`, a built-in one `builtins.Name`), its message and its own
                              frames of the traceback
  ["u", why]                  the target or an argument does not resolve: the oracle's mistake
In `data`, an array is a list and an object a dict, except objects with the protocol's keys, which the
child writes for nothing else: {"\\u0000h": handle, field: value, ...} is a product object the child
keeps (its fields), and {"\\u0000t": [...]}, {"\\u0000s": [...]}, {"\\u0000d": "1.50"}, {"\\u0000f": "1/3"} are a
tuple, a set (of numbers and texts), a Decimal and a Fraction.
The parent closes the child's stdin when done; the child then exits 0, with nothing more on the channel.
Stdlib only: the child imports it before anything of the product.
"""

from __future__ import annotations

import json
import math
import re
import struct
from decimal import Decimal
from fractions import Fraction
from typing import Any, BinaryIO, Callable, Optional

CALL, ANSWER = b"C", b"A"
REF = "\u0000ref"
HANDLE, TUPLE, SET, DECIMAL, FRACTION = "\u0000h", "\u0000t", "\u0000s", "\u0000d", "\u0000f"
TAGS = frozenset((TUPLE, SET, DECIMAL, FRACTION))
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "getitem")
MAX_DIGITS = 4300  # of an int, a Decimal or a Fraction's parts: more is not data (CPython 3.11+ agrees)
_HEADER = struct.Struct(">cI")
MAX_PAYLOAD = 1 << 30  # a call: the parent's own, as large as a record
MAX_ANSWER = 64 << 20  # an answer: the child says a larger value is not data; the parent reads a frame whole


class ProtocolError(Exception):
    """The channel broke the protocol: truncated, oversized, of an unknown kind, or malformed."""


class Truncated(ProtocolError):
    """The stream ended inside a frame: its writer ended (or closed it) mid-frame."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def read_frame(stream: BinaryIO, cap: int = MAX_PAYLOAD) -> Optional[tuple[bytes, bytes]]:
    """The next (kind, payload), or None at a clean end of stream (EOF on a frame boundary); a payload over
    `cap` bytes is refused before it is read."""
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) != _HEADER.size:
        raise Truncated(f"truncated frame header ({len(header)} bytes)")
    kind, size = _HEADER.unpack(header)
    if size > cap:
        raise ProtocolError(f"frame of {size} bytes is over the cap of {cap}")
    payload = stream.read(size)
    if len(payload) != size:
        raise Truncated(f"truncated frame ({len(payload)} of {size} bytes)")
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
PART_COST, TEXT_COST, ITEM_COST, FIELD_COST = 400, 56, 40, 140


def parsed_cost(payload: bytes) -> int:
    """An estimate, erring high, of the bytes the parent holds once it has parsed `payload` (ASCII JSON
    whose escapes may widen a string to 4 bytes a character): the product shapes its answers, and a list
    of empty objects parses to some 40 times its text."""
    width = 4 if b"\\u" in payload else 1
    parts = payload.count(b"{") + payload.count(b"[")
    texts = payload.count(b'"') // 2
    fields = payload.count(b":")  # a key, its pair and its slot in the dict, alive at once while it is made
    items = payload.count(b",")
    return (1 + width) * len(payload) + PART_COST * parts + TEXT_COST * texts + FIELD_COST * fields + ITEM_COST * items


def refuse_constant(token: str) -> object:
    raise ValueError(f"{token} is not JSON")


def finite(token: str) -> float:
    value = float(token)
    if value in (math.inf, -math.inf):  # 1e999 is JSON's text for a number no float holds
        raise ValueError(f"{token[:40]} is not a finite number")
    return value


def _is_int(value: object) -> bool:
    return type(value) is int and value >= 0


_FRACTION = re.compile(r"-?[0-9]{1,%d}(/[0-9]{1,%d})?" % (MAX_DIGITS, MAX_DIGITS), re.ASCII)


_LONG_INT = re.compile(r"[0-9]{%d}" % (MAX_DIGITS + 1))


def bounded_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an int of over {MAX_DIGITS} digits")
    return int(token)


# A key's end: a quote no backslash escapes, right before its colon (the child writes no space there)
_KEY_END = re.compile(r'(?<!\\)(?:\\\\)*":')


def _keys_written(text: str) -> int:
    """How many keys the JSON text holds as written."""
    return len(_KEY_END.findall(text)) if '\\"' in text else text.count('":')


def tagged(tag: str, value: object) -> object:
    """A tagged value of an answer, rebuilt as the parent's own: a tuple, a frozenset, a Decimal, a Fraction."""
    if tag == TUPLE and type(value) is list:
        return tuple(value)
    if tag == SET and type(value) is list and all(type(item) in (str, int, float, bool) for item in value):
        return frozenset(value)
    if tag == DECIMAL and type(value) is str and len(value) <= 2 * MAX_DIGITS:
        try:
            return Decimal(value)
        except ArithmeticError:
            pass
    if tag == FRACTION and type(value) is str and _FRACTION.fullmatch(value):  # never "1e999999999": 10**n
        try:
            return Fraction(value)
        except ZeroDivisionError:
            pass
    raise ProtocolError(f"a malformed tagged value ({tag!r})")


def parse_answer(
    payload: bytes, make_object: Callable[[int, dict[str, Any]], object], make_dict: Callable[[dict[str, Any]], object]
) -> list[Any]:
    """The child's answer to one call, checked for its shape, nothing more: plain JSON only (ASCII, finite
    numbers, ints of at most MAX_DIGITS digits, no key twice in an object, tags as the protocol has them).
    A product object (its first key HANDLE) goes through `make_object`, any other object through
    `make_dict`."""
    try:
        text = payload.decode("ascii")  # as text: json.loads would guess UTF-16 or UTF-32 for bytes
    except UnicodeDecodeError:
        raise ProtocolError("an answer that is not ASCII JSON") from None
    keys = [0]

    def made(fields: dict[str, Any]) -> object:
        keys[0] += len(fields)
        if HANDLE in fields:
            handle = fields.pop(HANDLE)
            if not _is_int(handle):
                raise ProtocolError("a malformed product object")
            return make_object(handle, fields)
        if len(fields) == 1:
            ((tag, value),) = fields.items()
            if tag in TAGS:
                return tagged(tag, value)
        return make_dict(fields)

    try:
        # An int of over MAX_DIGITS digits is refused before int() reads it (3.9 would take quadratic time)
        ints = bounded_int if _LONG_INT.search(text) else None
        answer = json.loads(text, parse_constant=refuse_constant, parse_float=finite, parse_int=ints, object_hook=made)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"an answer that is not JSON ({type(exc).__name__})") from None
    if keys[0] != _keys_written(text):  # a key twice: the parse kept one of them
        raise ProtocolError("an object with a key twice")
    if (
        type(answer) is not list
        or not answer
        or type(answer[0]) is not str
        or answer[0] not in ("v", "w", "o", "x", "u")
    ):
        raise ProtocolError("an answer of an unknown kind")
    kind, rest = answer[0], answer[1:]
    if kind in ("v", "w"):
        ok = len(rest) == 2 and type(rest[0]) is str
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
