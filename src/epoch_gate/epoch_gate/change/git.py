"""git, run as a subprocess: the plumbing the changed set, the candidate and the tree are read with."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from epoch_gate.reasons import Code, fail
from epoch_gate.text import last_line


@lru_cache(maxsize=1)
def _git_path() -> str:
    return shutil.which("git") or "git"


def run_git(root: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    # An absolute path and close_fds=False let CPython use posix_spawn rather than fork: forking pantsd
    # (hundreds of MB, many threads) costs tens of milliseconds per git call. Python's own fds are
    # created non-inheritable, so nothing leaks into git.
    try:
        return subprocess.run(
            [_git_path(), "-C", str(root), *args],
            capture_output=True,
            check=False,
            timeout=120,
            close_fds=False,
            input=stdin,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"cannot run git in {root}: {exc}",
            expected="a working git",
            found=type(exc).__name__,
        ) from None


def git_text(root: Path, *args: str, stdin: str | None = None) -> str:
    done = run_git(root, *args, stdin=None if stdin is None else os.fsencode(stdin))
    if done.returncode != 0:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"git {args[0]} failed: {last_line(done.stderr)}",
            expected="exit 0",
            found=f"exit {done.returncode}",
        )
    return done.stdout.decode("utf-8", "surrogateescape")


def commit_of(root: Path, rev: str) -> str | None:
    done = run_git(root, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
    if b"is ambiguous" in done.stderr:
        # `origin/main` is also refs/tags/origin/main (or a branch of that name): git would pick one
        # silently, and a change can push the one it prefers.
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"the revision {rev!r} is ambiguous: more than one ref has "
            "that short name; name it in full (e.g. refs/remotes/origin/main)",
            expected="one ref",
            found="ambiguous",
        )
    return done.stdout.decode().strip() if done.returncode == 0 else None


def read_at(root: Path, commit: str, path: str) -> bytes | None:
    """A file's bytes at a commit, or None where it does not exist there."""
    done = run_git(root, "cat-file", "blob", f"{commit}:{path}")
    return done.stdout if done.returncode == 0 else None


def is_shallow(root: Path) -> bool:
    return run_git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
