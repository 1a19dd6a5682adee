"""The runner's own process as the parent of the product's processes: no process may read its memory,
every process the product leaves behind is reparented to it and ended before any output is written, and
each child and the thread that waits on it share a core."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import time
from typing import Iterable, Optional

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36  # <linux/prctl.h>
MAX_ORPHAN_ROUNDS = 100


class OrphansRemain(Exception):
    """The processes the product left behind kept coming back: a fault of the run."""


def guard_parent() -> None:
    """Before the child starts: no process of the same uid may read or write this one's memory
    (/proc/<pid>/mem, ptrace), and every process the child leaves behind is reparented here, where
    `kill_orphans` ends it before any output is written. Linux only; elsewhere the jail must hold."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for option, value in ((PR_SET_DUMPABLE, 0), (PR_SET_CHILD_SUBREAPER, 1)):
        with contextlib.suppress(AttributeError):
            libc.prctl(option, value, 0, 0, 0)


def cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pin(cpu: Optional[int]) -> None:
    """Keeps the calling thread (and what it starts) on one core. A child and the parent's thread that
    waits on it take turns, one call and one answer at a time: on one core each turn is a switch between
    them (9 us a round trip here), across two a wake-up of another core (55 us)."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {cpu})


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[1].decode() == me:
                found.append(int(entry))
    return found


def kill_orphans(spare: Iterable[int] = ()) -> None:
    """Kills and reaps every child of this process but the `spare` ones (the other children of the replay,
    still answering): the orphans the replay's children left, reparented here, until none is left; raises
    OrphansRemain if they keep coming."""
    if not os.path.isdir("/proc"):
        return
    kept = set(spare)
    for _ in range(MAX_ORPHAN_ROUNDS):
        children = [pid for pid in _children() if pid not in kept]
        if not children:
            return
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    raise OrphansRemain("the processes the child started would not end")


def exits_within(pid: int, seconds: float) -> bool:
    """Whether the child `pid` exits within `seconds` (it is left unreaped either way)."""
    deadline = time.monotonic() + seconds
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def children_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime
