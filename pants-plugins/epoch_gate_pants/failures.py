"""The line of an engine failure that names its cause, for a reason's `found`."""

from __future__ import annotations

import re

from epoch_gate.text import printable

# pip's and pex's word for the cause, above the lines that list what they tried (a download, a wheel)
_CAUSE = re.compile(r"\bERROR\b|\berror:")


def failure_line(error: Exception) -> str:
    """The cause of a failed process or rule: the lines of its stderr that say ERROR (pip's, pex's), else
    its last lines; never Pants' advice to rerun with `--keep-sandboxes`."""
    stderr = getattr(error, "stderr", b"")
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) and stderr.strip() else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip() and "--keep-sandboxes" not in line]
    said = [line for line in lines if _CAUSE.search(line)]
    return printable(" ".join(said[-2:] or lines[-3:])[-300:] if lines else type(error).__name__)
