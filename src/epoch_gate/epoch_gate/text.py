"""Text the gate did not write (paths from git and the disk, the change's own strings), made safe to
encode (`from_os`) and to print or render on one line (`printable`, `last_line`).

Every path from git or the disk enters the core through `from_os`; every line the gate prints, and every
cell of report.md, goes through `printable`.
"""

from __future__ import annotations

import re
from typing import Any, Union

# Lone surrogates: how Python's surrogateescape (git output, os.listdir, os.fsdecode) carries bytes that
# are not UTF-8 (U+DC80-U+DCFF), or what a JSON/YAML `\ud800` escape yields. No UTF-8 writer accepts them.
_SURROGATE = re.compile("[\ud800-\udfff]")

# C0 controls, DEL, C1 controls (NEL included), and the characters that break or reorder a line as a
# reader sees it: line/paragraph separators and the bidi controls (embeddings, overrides, isolates, marks).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def from_os(value: Union[str, bytes]) -> str:
    """A path (or any text) from git or the OS as UTF-8 can carry it: a byte that is not UTF-8 reads `\\xff`.

    The same as decoding the raw bytes with `backslashreplace`, so `freezes/<0xff>.json` is judged and
    reported as `freezes/\\xff.json` (still under `freezes/`). Other lone surrogates read `\\ud800`.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return _SURROGATE.sub(_escape_surrogate, value)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def printable(value: str) -> str:
    """`value` on one line, as a reader sees it: controls, separators and bidi controls as visible escapes.

    A path or message is the change's own text: raw, a newline would start a line of its own (a CI runner
    reads `::` at the start of a stdout line as a workflow command) and ESC or U+202E would hide text.
    """
    return _UNPRINTABLE.sub(_visible, from_os(value))


def last_line(stderr: bytes, limit: int = 300) -> str:
    """A process's last line of stderr, where it names its cause, printable and at most `limit` characters
    ("" when it wrote none)."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return printable(lines[-1].strip()[:limit]) if lines else ""


def json_safe(value: Any) -> Any:
    """`value` with every string (keys too) through `from_os`: what a report writer may encode as UTF-8."""
    if isinstance(value, str):
        return from_os(value)
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
