from __future__ import annotations

import re
import unicodedata

import pytest

from epoch_gate.text import from_os, json_safe, printable

BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def test_a_name_that_is_not_utf8_reads_as_its_bytes_decoded_with_backslashreplace() -> None:
    raw = b"freezes/\xff\xc3(-\xed\xa0\x80.json"  # a stray byte, a cut sequence, an encoded surrogate
    expected = raw.decode("utf-8", "backslashreplace")
    assert expected == "freezes/\\xff\\xc3(-\\xed\\xa0\\x80.json"
    assert from_os(raw.decode("utf-8", "surrogateescape")) == from_os(raw) == expected
    assert from_os(expected) == expected  # already text: unchanged
    assert from_os("caf\u00e9/\U0001f600.json") == "caf\u00e9/\U0001f600.json"


def test_any_lone_surrogate_becomes_encodable_text() -> None:
    assert from_os("a\ud800b\udfffc") == "a\\ud800b\\udfffc"
    assert json_safe({"k\udcff": ["v\udcfe", ("\ud800",), 3, None]}) == {"k\\xff": ["v\\xfe", ["\\ud800"], 3, None]}


@pytest.mark.parametrize(
    "char, shown",
    [
        ("\n", "\\n"),
        ("\r", "\\r"),
        ("\t", "\\t"),
        ("\x00", "\\x00"),
        ("\x1b", "\\x1b"),
        ("\x7f", "\\x7f"),
        ("\x85", "\\x85"),
        ("\x9b", "\\x9b"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
        ("\u202e", "\\u202e"),
        ("\u2066", "\\u2066"),
        ("\u2069", "\\u2069"),
        ("\u200f", "\\u200f"),
        ("\udcff", "\\xff"),
    ],
)
def test_controls_separators_bidi_controls_and_stray_bytes_become_visible(char: str, shown: str) -> None:
    assert printable(f"a{char}b") == f"a{shown}b"


def test_no_code_point_survives_printable_as_a_line_break_or_a_control() -> None:
    every = "".join(chr(c) for c in range(0x110000))
    shown = printable(every)
    assert len(shown.splitlines()) == 1
    assert not [c for c in set(shown) if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI_CONTROLS]
    shown.encode("utf-8")


def test_ordinary_text_is_left_alone() -> None:
    text = "checks/catalog.yaml: 50% done, caf\u00e9 \u65e5\u672c `x` | \\n"
    assert printable(text) == text
    assert re.fullmatch(r"[ -~]*", printable("\x1b[31mred\x1b[0m"))
