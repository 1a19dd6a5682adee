"""CI annotations: one per reason, on the file concerned, from a report.json (so any CI can make them).

`github` prints GitHub Actions workflow commands (`::error file=…,title=…::…`), which the runner turns
into annotations on the pull request; `plain` prints `path: severity [code] message` lines that other CIs
and editors link to the file.
"""

from __future__ import annotations

import enum
from typing import Any, Mapping

from epoch_gate.text import printable

GITHUB_LEVELS = {"closed": "error", "hold": "warning"}


class Style(enum.Enum):
    NONE = "none"
    GITHUB = "github"
    PLAIN = "plain"


def _is_file(path: str) -> bool:
    # Reasons about the whole change say "."; a target address (`checks:suite`) or a suite's property
    # (`checks:suite#name`; an address can leave out `:name`) is not a file either.
    return bool(path) and path != "." and ":" not in path and "#" not in path


def _text(reason: Mapping[str, Any]) -> str:
    text = str(reason.get("message", ""))
    if reason.get("expected") or reason.get("found"):
        text += f" (expected {reason.get('expected') or '-'}; found {reason.get('found') or '-'})"
    if reason.get("advice"):
        text += f" To do: {reason.get('advice')}"
    return text


def _escape_data(text: str) -> str:
    # The change's text as one visible line first; then GitHub's own escapes (no CR or LF is left by then).
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(reason: Mapping[str, Any]) -> str:
    level = GITHUB_LEVELS.get(str(reason.get("severity")), "error")
    path = str(reason.get("path", ""))
    props = [f"file={_escape_property(path)}"] if _is_file(path) else []
    props.append(f"title={_escape_property('epoch_gate ' + str(reason.get('code', '?')))}")
    return f"::{level} {','.join(props)}::{_escape_data(_text(reason))}"


def plain_line(reason: Mapping[str, Any]) -> str:
    path = str(reason.get("path", "")) or "."
    return printable(f"{path}: {reason.get('severity', 'closed')} [{reason.get('code', '?')}] {_text(reason)}")


def _all_reasons(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The repository's reasons, then each suite's (report v2)."""
    found = [report.get("reasons")]
    suites = report.get("suites")
    found += [s.get("reasons") for s in suites if isinstance(s, Mapping)] if isinstance(suites, list) else []
    return [r for reasons in found if isinstance(reasons, list) for r in reasons if isinstance(r, Mapping)]


def lines(report: Mapping[str, Any], style: Style) -> list[str]:
    if style is Style.NONE:
        return []
    render = github_line if style is Style.GITHUB else plain_line
    return [render(r) for r in _all_reasons(report)]
