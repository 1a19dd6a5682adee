"""JSON reading that refuses anything a second parser might read differently."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NoReturn

from epoch_gate.reasons import Code, fail

MAX_BYTES = 16 * 1024 * 1024


def _refuse_constant(token: str) -> NoReturn:
    raise ValueError(f"{token} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def loads(data: bytes, path: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """Parses UTF-8 JSON bytes; raises EvidenceError(ARTIFACT_MALFORMED) for anything ambiguous."""
    if len(data) > max_bytes:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "file is larger than the size cap",
            expected=f"<= {max_bytes} bytes",
            found=f"{len(data)} bytes",
        )
    if data.startswith(b"\xef\xbb\xbf"):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "file starts with a byte-order mark",
            expected="UTF-8 without BOM",
            found="BOM",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "file is not UTF-8",
            expected="UTF-8",
            found=f"invalid byte at offset {exc.start}",
        ) from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            f"file is not strict JSON: {exc}",
            expected="strict JSON",
            found=type(exc).__name__,
        ) from None
    if _LONE_SURROGATE.search(text) and _has_lone_surrogate(value):
        # `"\ud800"` is valid JSON but no Unicode text: other parsers replace or refuse it, UTF-8 cannot hold it.
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "a string holds a lone surrogate (a \\uD800-\\uDFFF escape)",
            expected="Unicode strings",
            found="a lone surrogate",
        )
    return value


# A `\uD800`-`\uDFFF` escape in the text: only then can a parsed string hold a lone surrogate.
_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def read_bytes(path: Path, display: str, *, max_bytes: int = MAX_BYTES) -> bytes:
    """Reads a regular file (never through a symlink), within the size cap."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise fail(Code.ARTIFACT_MISSING, display, "file is missing", expected="a file", found="nothing") from None
    except OSError as exc:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            display,
            f"file is unreadable: {exc.strerror}",
            expected="a readable file",
            found="OSError",
        ) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise fail(Code.ARTIFACT_MALFORMED, display, f"path is {kind}", expected="a regular file", found=kind)
    if info.st_size > max_bytes:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            display,
            "file is larger than the size cap",
            expected=f"<= {max_bytes} bytes",
            found=f"{info.st_size} bytes",
        )
    try:
        with open(path, "rb") as handle:
            return handle.read(max_bytes + 1)
    except OSError as exc:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            display,
            f"file is unreadable: {exc.strerror}",
            expected="a readable file",
            found="OSError",
        ) from None


def require_object(
    value: Any,
    path: str,
    fields: dict[str, type | tuple[type, ...]],
    *,
    optional: dict[str, type | tuple[type, ...]] | None = None,
) -> dict[str, Any]:
    """Checks that value is an object with exactly these fields (plus optional ones), of these types."""
    if not isinstance(value, dict):
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "expected a JSON object", expected="object", found=type(value).__name__
        )
    allowed = {**fields, **(optional or {})}
    missing = sorted(set(fields) - set(value))
    if missing:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            f"missing field(s) {', '.join(missing)}",
            expected=", ".join(sorted(fields)),
            found=", ".join(sorted(value)),
        )
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            f"unknown field(s) {', '.join(unknown)}",
            expected=", ".join(sorted(allowed)),
            found=", ".join(sorted(value)),
        )
    for name, kinds in allowed.items():
        if name not in value:
            continue
        field = value[name]
        # bool is an int in Python; a JSON true is never a number here.
        wrong_bool = isinstance(field, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,))
        if wrong_bool or not isinstance(field, kinds):
            expected = kinds.__name__ if isinstance(kinds, type) else "/".join(k.__name__ for k in kinds)
            raise fail(
                Code.ARTIFACT_MALFORMED,
                path,
                f"field {name!r} has the wrong type",
                expected=expected,
                found=type(field).__name__,
            )
    return value
