"""The line of an engine failure that names its cause, for a reason's `found`."""

from __future__ import annotations

from epoch_gate.text import printable


def failure_line(error: Exception) -> str:
    """The cause of a failed process or rule (pex's last lines of stderr, say), never Pants' advice to
    rerun with `--keep-sandboxes`."""
    stderr = getattr(error, "stderr", b"")
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) and stderr.strip() else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip() and "--keep-sandboxes" not in line]
    return printable(" ".join(lines[-3:])[-300:] if lines else type(error).__name__)
