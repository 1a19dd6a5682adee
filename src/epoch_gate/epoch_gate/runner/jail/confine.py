"""What bounds the replay's child: its own jail inside the replay's (`ChildJail`), resource limits set before
it starts (`Limits`), and a watch over its whole process tree and its output (`Watch`) that ends the tree
the moment it goes over one."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Optional

from epoch_gate.runner.jail.isolation import CHILD_CLOCK, PID_MAX_LIMIT, RESERVED_PIDS, child_jail_arguments
from epoch_gate.runner.jail.seccomp import child_filter

MiB = 1 << 20
# Set in the child's jail from the runner's CHILD_CLOCK-prefixed variables: the stopped clock
# (epoch_gate.runner.jail.isolation.jailed_argv), nothing else.
CLOCK_ENV = ("LD_PRELOAD", "FAKETIME", "DONT_FAKE_MONOTONIC")
POLL_SECONDS = 0.05
KILL_ROUNDS = 1000
RUNNER_TASKS = 16  # the runner's own threads, with room to spare
CHILD_TASKS = 8  # each child's bubblewrap, its init, the child and the runner's threads for it: 6, and room
# Children a replay may have: a record's answers may take 1/MAX_CHILDREN of `Limits.memory` of the judge,
# whatever the count, so that the count never decides whether a record's answers fit
MAX_CHILDREN = 8
KEPT_OUTPUT = 64 * 1024  # of the child's output, what the runner passes on to its own stderr


@dataclass(frozen=True)
class Limits:
    """What the child's process tree may use. `memory`: bytes of address space per process, of any one file
    it writes, and of the whole tree's resident memory, open memfds, sockets and pipes and jails' /tmp; `processes`: processes
    and threads alive at once; `open_files`: per process; `output`: bytes written to stdout and stderr by
    the whole tree; `cpu_seconds`: per process."""

    memory: int = 4096 * MiB
    processes: int = 256
    open_files: int = 1024
    output: int = 16 * MiB
    cpu_seconds: int = 900
    # Not the product's: the host's available memory (MemAvailable) every replay leaves, whatever runs at
    # once; under it each replay stops, a fault of the run (the product is not alone on the host)
    host_reserve: int = 2048 * MiB

    def apply(self) -> None:
        """In the child before it runs anything (Popen's preexec_fn): the per-process limits, which it and
        everything it starts inherit and, without CAP_SYS_RESOURCE, cannot raise."""
        for limit, soft, hard in (
            (resource.RLIMIT_AS, self.memory, self.memory),
            (resource.RLIMIT_FSIZE, self.memory, self.memory),
            (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
            # SIGXCPU at the soft limit; SIGKILL a second later if it is ignored
            (resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1),
            (resource.RLIMIT_CORE, 0, 0),
        ):
            resource.setrlimit(limit, (soft, hard))

    def tasks(self, children: int) -> int:
        """The kernel's ceiling on the tasks of the replay's jail (`isolation.CEILING`): the runner, its
        `children` and everything they start. The watch polls, and a fork bomb grows between two polls (to
        some 1,900 tasks under a light load, with `processes` 256); the ceiling keeps it off the host's PID
        table, and the watch, which sees the tree over `processes`, still names the limit. Twice
        `processes` and the runner's own once the jail's PIDs wrap, RESERVED_PIDS more before."""
        runner = RUNNER_TASKS + CHILD_TASKS * max(children, 1)
        return min(RESERVED_PIDS + 2 * max(self.processes, 1) + runner, PID_MAX_LIMIT - 1)

    # Each limit as the product is said to have gone over it, naming the option that sets it

    def cpu_limit(self) -> str:
        return f"its CPU time limit ({self.cpu_seconds} s per process, [property-replay].child_cpu_seconds)"

    def address_space_limit(self) -> str:
        return (
            f"its memory limit ({self.memory} bytes of address space per process, "
            "[property-replay].child_memory_bytes)"
        )

    def resident_limit(self) -> str:
        return (
            f"its memory limit ({self.memory} bytes resident, in memfds, sockets and pipes and in /tmp, "
            "[property-replay].child_memory_bytes)"
        )

    def host_limit(self) -> str:
        return (
            f"the host's memory reserve (the replay stops when under {self.host_reserve} bytes are available, "
            "[property-replay].host_memory_reserve_bytes)"
        )

    def process_limit(self) -> str:
        return f"its process limit ({self.processes} processes and threads at once, [property-replay].child_processes)"

    def output_limit(self) -> str:
        return f"its output limit ({self.output} bytes on stdout and stderr, [property-replay].child_output_bytes)"


def interpreter_folders() -> list[str]:
    """The folders this interpreter runs from (as `epoch_gate.runner.jail.isolation.PREFIXES` finds them)."""
    executable = os.path.realpath(sys.executable)
    return sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(executable))})


@dataclass(frozen=True)
class ChildJail:
    """The child's own jail: `bwrap` (the runner's copy of bubblewrap) starts it with the system, this
    interpreter and `read_only` visible, read-only, and nothing else of the replay's jail."""

    bwrap: str

    def sizes_tmpfs(self) -> bool:
        """Whether this bubblewrap can bound a tmpfs (`--size`, 0.7 and later): else /tmp is read-only.
        Asked once per runner, so that every child of a replay gets the same /tmp."""
        return _sizes_tmpfs(self.bwrap)

    @staticmethod
    def filter_fd() -> int:
        """A pipe's read end holding the child's seccomp filter, for bubblewrap to read (the caller passes it
        to the child's process and closes it); OSError on a machine the filter does not know."""
        program = child_filter()
        if program is None:
            raise OSError(f"no seccomp filter for this machine ({os.uname().machine})")
        read, write = os.pipe()
        try:
            os.write(write, program)  # far below a pipe's buffer
        finally:
            os.close(write)
        return read

    def argv(
        self,
        command: list[str],
        sandbox: Path,
        product_names: Iterable[str],
        child_path: Iterable[str],
        limits: Limits,
        filter_fd: int,
    ) -> list[str]:
        root = str(sandbox)
        names = set(product_names)
        # The product's own files only: not the world, the manifest, the predicates or the outputs.
        product = [os.path.join(root, entry) for entry in os.listdir(root) if entry.split(".")[0] in names]
        runner = str(Path(__file__).resolve().parents[2])  # the runner's package and the core it imports
        env = {name: os.environ[CHILD_CLOCK + name] for name in CLOCK_ENV if CHILD_CLOCK + name in os.environ}
        clock = [env["LD_PRELOAD"]] if os.path.isabs(env.get("LD_PRELOAD", "")) else []
        read_only = [runner, *product, *child_path, *clock]
        tmp = limits.memory if self.sizes_tmpfs() else None
        jail = child_jail_arguments(interpreter_folders(), read_only, root, env, str(filter_fd), tmp)
        return [self.bwrap, *jail, *command]


@functools.lru_cache(maxsize=None)
def _sizes_tmpfs(bwrap: str) -> bool:
    try:
        said = subprocess.run([bwrap, "--help"], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return b"--size" in said


def _tree(root: int) -> list[tuple[int, int]]:
    """(pid, threads) of every process below `root`, from /proc's children lists (orphans a subreaper
    adopted included)."""
    found: list[tuple[int, int]] = []
    pending = [root]
    while pending:
        pid = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        if pid != root:
            found.append((pid, len(tasks)))
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as listed:
                    pending += [int(child) for child in listed.read().split()]
            except OSError:
                continue
    return found


def _state(pid: int) -> bytes:
    """The process's state letter (`Z` zombie, `T` stopped), `X` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"X"


def cpu_seconds(pid: int) -> float:
    """The CPU time the process (all its threads) has been charged so far, dead or alive until it is
    reaped, 0 when it is gone: its CPUCLOCK_PROF clock (`clock_getcpuclockid`'s id, clock type 0), the
    tick-sampled user and system time RLIMIT_CPU is checked against. The scheduler's exact runtime, and
    /proc's and rusage's times scaled to it, can be a tenth short of it when short-lived processes run
    between ticks (measured: killed at 2 s charged, 1.8 s run), so none of them can name the limit."""
    try:
        return time.clock_gettime(((~pid) << 3) | 0)
    except (OSError, OverflowError):
        return 0.0


def _tmp_bytes(tree: list[tuple[int, int]], own: int) -> int:
    """What the children's jails hold in their /tmp (each a tmpfs of its own: memory), read through a
    process of each jail; the runner's own /tmp (device `own`) is not theirs."""
    seen, total = {own}, 0
    for pid, _ in tree:
        try:
            device = os.stat(f"/proc/{pid}/root/tmp").st_dev
            if device in seen:
                continue
            found = os.statvfs(f"/proc/{pid}/root/tmp")
        except OSError:  # gone, or not readable: its /tmp is still bounded by its size
            continue
        seen.add(device)
        total += (found.f_blocks - found.f_bfree) * found.f_frsize
    return total


def _available() -> Optional[int]:
    """The host's available memory (MemAvailable), None when it cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _setting(path: str, default: int) -> int:
    try:
        with open(path, "rb") as setting:
            return max(int(setting.read()), default)
    except (OSError, ValueError):
        return default


@functools.lru_cache(maxsize=None)
def kernel_buffers() -> dict[bytes, int]:
    """What the kernel may hold for a process in each kind of descriptor that shows no size, in no memory of
    the process: a socket's queue up to the send buffer it may set (twice `wmem_max`, with the kernel's
    overhead), a pipe's up to `pipe-max-size`. Measured: 500 full Unix socket pairs held 121 MiB of the host's
    memory with 13 MiB resident."""
    buffer = max(_setting("/proc/sys/net/core/wmem_max", 212992), _setting("/proc/sys/net/core/rmem_max", 212992))
    socket = 2 * buffer * 5 // 4
    return {b"socket:[": socket, b"pipe:[": _setting("/proc/sys/fs/pipe-max-size", MiB)}


def _memory(tree: list[tuple[int, int]]) -> Optional[int]:
    """The tree's resident bytes, the bytes of every memfd it holds open (memory no mapping shows) and what
    the kernel may hold in its sockets and pipes (`kernel_buffers`), each counted once however many hold it;
    None when a live process hides its descriptors from the watch (one that made itself not dumpable)."""
    total, held, page, buffers = 0, set(), resource.getpagesize(), kernel_buffers()
    for pid, _ in tree:
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                total += int(statm.read().split()[1]) * page
            try:
                descriptors = os.listdir(f"/proc/{pid}/fd")
            except PermissionError:
                if _state(pid) in (b"Z", b"X"):
                    continue
                return None
            for fd in descriptors:
                target = os.readlink(f"/proc/{pid}/fd/{fd}").encode()
                if target.startswith(b"/memfd:"):
                    total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
                elif target.startswith((b"socket:[", b"pipe:[")) and target not in held:
                    held.add(target)
                    total += buffers[target[: target.index(b"[") + 1]]
        except (OSError, IndexError, ValueError):
            continue
    return total


class Watch:
    """Watches the child's process tree (every process below the runner) and drains its output. The first
    limit it goes over is `exceeded`, and the whole tree is killed at once."""

    def __init__(self, limits: Limits, output: BinaryIO, group: int) -> None:
        self.limits, self.group = limits, group
        self.exceeded: Optional[str] = None
        self.fault = False  # what it saw is the host's, not the product's (`Limits.host_reserve`)
        self.kept = bytearray()
        # The most CPU time one process of the tree was seen charged: RLIMIT_CPU is per process, and a
        # jailed process is reaped in its jail, where its last charge cannot be read
        self.cpu_seen = 0.0
        self._output = output
        self._reaped = False  # the child's group id is free for reuse: never kill by it again
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._drain, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def over(self, why: str, fault: bool = False) -> None:
        with self._lock:
            if self.exceeded is None:
                self.exceeded, self.fault = why, fault
            if not self._reaped:  # the child's group first: atomic against its forks
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.group, signal.SIGKILL)
        self.kill_tree()

    @staticmethod
    def kill_tree(root: Optional[int] = None) -> None:
        """SIGKILLs every process below `root` (the runner by default), again until none is left alive (a
        fork may race the first round). In the child's jail that includes its first process, whose death
        ends every process of its PID namespace at once."""
        for _ in range(KILL_ROUNDS):
            alive = [pid for pid, _ in _tree(os.getpid() if root is None else root) if _state(pid) not in (b"Z", b"X")]
            if not alive:
                return
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def _drain(self) -> None:
        written = 0
        while True:
            try:
                chunk = self._output.read1(MiB)  # type: ignore[attr-defined]
            except (OSError, ValueError):
                return
            if not chunk:
                return
            written += len(chunk)
            if len(self.kept) < KEPT_OUTPUT:
                self.kept += chunk[: KEPT_OUTPUT - len(self.kept)]
            if written > self.limits.output:
                self.over(self.limits.output_limit())
                return

    def _poll(self) -> None:
        me, stopped, own_tmp = os.getpid(), set(), os.stat("/tmp").st_dev
        while not self._done.wait(POLL_SECONDS):
            tree = _tree(me)
            now_stopped = {pid for pid, _ in tree if _state(pid) in (b"T", b"t")}
            self.cpu_seen = max([self.cpu_seen, *(cpu_seconds(pid) for pid, _ in tree)])
            available = _available()
            if sum(threads for _, threads in tree) > self.limits.processes:
                self.over(self.limits.process_limit())
            elif (memory := _memory(tree)) is None:
                self.over("a hiding place: one of its processes hid what it holds from the watch (not dumpable)")
            elif memory + _tmp_bytes(tree, own_tmp) > self.limits.memory:
                self.over(self.limits.resident_limit())
            elif available is not None and available < self.limits.host_reserve:
                self.over(self.limits.host_limit(), fault=True)
            elif now_stopped & stopped:  # stopped for a whole poll: it would hold the replay until its timeout
                self.over("a stop: one of its processes was stopped (SIGSTOP), which would hold the replay")
            stopped = now_stopped

    def stop_polling(self) -> None:
        """Before the child is reaped: from then on its group id may name another process's group."""
        self._done.set()
        self._threads[1].join()
        with self._lock:
            self._reaped = True

    def output_ended(self) -> None:
        """Waits for the end of the output: what the child's processes wrote before they were killed."""
        self._threads[0].join(timeout=5)
