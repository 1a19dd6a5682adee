"""What a violated record's judgement shows of its run: the calls the predicate made and what the product
answered, written as Python would write them, read again from the bytes that crossed (the parent's own
JSON), and only for a record that is violated."""

from __future__ import annotations

import json
from typing import Sequence

from epoch_gate.runner import protocol
from epoch_gate.runner.protocol import REF

SHOWN_CALLS, SHOWN_BYTES, SHOWN_TEXT = 8, 2048, 240


def transcript(calls: Sequence[tuple[bytes, bytes]], made: int) -> str:
    """A violated record's calls and the product's answers (`calls`, the first SHOWN_CALLS of the `made`
    as they crossed, each cut at SHOWN_BYTES), each on a line of its own cut at SHOWN_TEXT, after a line
    that counts them (`verdict.suite` reads it): what the predicate read."""
    try:
        lines = [one_line(f"{_shown_call(call)} -> {_shown_answer(answer)}")[:SHOWN_TEXT] for call, answer in calls]
    except Exception:  # noqa: BLE001 - the product's words, cut anywhere: never worth the judgement
        return ""
    if not lines:
        return ""
    first = f"the first {len(lines)} of " if made > len(lines) else ""
    named = f"{first}its {made} call{'s' if made > 1 else ''} and the product's answers:"
    return "\n" + "\n".join([named, *(f"  {line}" for line in lines)])


def _shown_call(call: bytes) -> str:
    try:
        target, args, kwargs = json.loads(call)
        ((kind, named),) = target.items()
    except (ValueError, TypeError):
        return call.decode("ascii", "replace") + "..."  # cut at SHOWN_BYTES
    name = {
        "m": lambda: str(named),
        "op": lambda: f"operator {named}",
        "h": lambda: "<product value>",
        "a": lambda: f"<product value>.{named[2]}",
        "r": lambda: f"<product value>{'.' + str(named[2]) if len(named) > 2 else ''} read again",
    }[kind]()
    shown = [_shown(arg) for arg in args] + [f"{key}={_shown(arg)}" for key, arg in kwargs.items()]
    return f"{name}({', '.join(shown)})" if kind in ("m", "op", "h") else name


def _shown_answer(answer: bytes) -> str:
    try:
        kind, *rest = json.loads(answer)
    except ValueError:
        return answer.decode("ascii", "replace") + "..."  # cut at SHOWN_BYTES
    if kind in ("v", "w"):
        type_name, data = rest
        return _shown(data, type_name)
    if kind == "o":
        return f"<{rest[1]}: not data ({rest[2]})>"
    if kind == "x":
        classes, message = rest[0], rest[1]
        return f"raised {classes[0].rpartition('.')[2] if classes else 'an exception'}: {message}"
    return f"does not resolve: {rest[0]}"


def _shown(value: object, type_name: str = "") -> str:
    """A value as it crossed, written as Python would write it (a product object as its class and fields)."""
    if isinstance(value, list):
        return f"[{', '.join(_shown(item) for item in value)}]"
    if not isinstance(value, dict):
        return repr(value)
    if REF in value:
        return "<product value>"
    if protocol.HANDLE in value:
        fields = ", ".join(f"{key}={_shown(item)}" for key, item in value.items() if key != protocol.HANDLE)
        return f"{type_name.rpartition('.')[2] or 'object'}({fields})"
    ((tag, tagged),) = value.items() if len(value) == 1 else ((None, None),)
    if tag == protocol.TUPLE:
        return f"({', '.join(_shown(item) for item in tagged)}{',' if len(tagged) == 1 else ''})"
    if tag == protocol.SET:
        return f"{{{', '.join(_shown(item) for item in tagged)}}}"
    if tag in (protocol.DECIMAL, protocol.FRACTION):
        return f"{'Decimal' if tag == protocol.DECIMAL else 'Fraction'}({tagged!r})"
    return f"{{{', '.join(f'{key!r}: {_shown(item)}' for key, item in value.items())}}}"


def one_line(text: str) -> str:
    """The text with every character that is not printable escaped: the product names its classes and
    words its exceptions, and none of that may start a line of the detail (or a log's, or a CI command's)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
