"""The child's limits and its jail, on real children: product code that forks, allocates, prints or computes
without end is stopped at its limit and named; in its own jail it cannot see or signal the runner."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.runner.jail.isolation import CHILD_CLOCK, child_jail_arguments
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.replay_result import PropertyOutcome
from epoch_gate.runner.jail import confine
from epoch_gate.runner.judge import channel, parent
from epoch_gate.runner.product.child import unshipped_stub
from epoch_gate.runner.judge.channel import FAULT
from epoch_gate.runner.jail.confine import MAX_CHILDREN, ChildJail, Limits

MiB = 1 << 20
SMALL = Limits(memory=1024 * MiB, processes=16, open_files=256, output=1 * MiB, cpu_seconds=2)
# Set by pants.toml's [test].extra_env_vars to where the launcher provisions bubblewrap and libfaketime.
BWRAP = os.environ.get("EPOCH_GATE_BWRAP", "")
FAKETIME = os.environ.get("EPOCH_GATE_FAKETIME", "")

HOGS = """
import os, time

def forks():
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)

def allocates():
    kept = []
    while True:
        kept.append(bytearray(64 << 20))

def prints():
    while True:
        print("x" * 65536, flush=True)

def computes():
    while True:
        pass

def empty_objects(count=600_000):  # 2 bytes each of its answer's text, some 130 bytes each once parsed
    return [{}] * count

def detaches():
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    return 1

def threads():
    import threading
    threading.stack_size(1 << 18)  # many threads, little address space
    for _ in range(100):
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    time.sleep(60)

def memfds():
    kept = []
    for _ in range(4):  # 1.2 GiB, over the tree's 1 GiB
        fd = os.memfd_create("hidden")
        for _ in range(300):
            os.write(fd, b"x" * (1 << 20))
        kept.append(fd)
    time.sleep(60)

def stops():
    import signal
    os.kill(os.getpid(), signal.SIGSTOP)
    return 1

def lingers():
    import threading
    threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: the child cannot exit
    return 1

def fakes_a_limit():
    os._exit(128 + 24)  # what bubblewrap says of a child killed by SIGXCPU

def fills_tmp():
    try:
        for number in range(20):  # files under the size limit of one file, 2 GiB in all
            with open(f"/tmp/big{number}", "wb") as big:
                for _ in range(100):
                    big.write(b"x" * (1 << 20))
    except OSError:  # full: what it holds stays (the watch sees it, however loaded the machine)
        time.sleep(30)
    return 1

def clock():
    return time.time()

def fills_kernel_buffers(pairs=400):
    import socket
    kept = []
    for _ in range(pairs):  # some 100 MiB of the host's memory in the sockets' queues, 13 MiB resident
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        try:
            while True:
                ours.send(b"x" * 65536)
        except BlockingIOError:
            kept.append((ours, theirs))
    time.sleep(30)
    return 1

def fills_everything():
    for _ in range(3):  # four processes, each filling /tmp, then its memory, then its sockets
        if os.fork() == 0:
            break
    kept = []
    try:
        for number in range(64):
            with open(f"/tmp/fill{os.getpid()}-{number}", "wb") as fill:
                fill.write(b"x" * (64 << 20))
    except OSError:
        pass
    try:
        while True:
            kept.append(bytearray(64 << 20))
    except MemoryError:
        pass
    fills_kernel_buffers(200)
    return 1

def holds_out_of_sight(io_uring_setup):
    import ctypes, mmap, socket, subprocess, sys
    libc = ctypes.CDLL(None, use_errno=True)
    refused = []
    try:
        os.memfd_create("hidden")
    except OSError as error:
        refused.append(["memfd_create", error.errno])
    for name, result in (("shmget", libc.shmget(0, 1 << 20, 0o1600)), ("msgget", libc.msgget(0, 0o1600)),
                         ("semget", libc.semget(0, 4, 0o1600)),
                         ("io_uring_setup", libc.syscall(io_uring_setup, 8, ctypes.create_string_buffer(120))),
                         ("vmsplice", libc.vmsplice(os.pipe()[1], None, 0, 0))):
        if result == -1:
            refused.append([name, ctypes.get_errno()])
    server = socket.socket(socket.AF_UNIX)
    server.bind("\\0epoch-gate-listens")
    try:
        server.listen()
    except OSError as error:
        refused.append(["listen", error.errno])
    for name, kind in (("unix datagram", socket.SOCK_DGRAM), ("unix raw", socket.SOCK_RAW)):
        try:
            socket.socket(socket.AF_UNIX, kind)
        except OSError as error:
            refused.append([name, error.errno])
    socket.socketpair()
    os.pipe()
    mmap.mmap(-1, 1 << 20, flags=mmap.MAP_SHARED)[0:1] = b"x"
    ran = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout
    return {"refused": refused, "subprocess": ran.decode()}

def lingers_in_a_call():
    time.sleep(30)
    return 1

def builds_a_name():
    import importlib
    try:
        return importlib.import_module("fast" + "path").answer
    except BaseException:
        return 1

def builds_a_dunder_name():
    try:
        return __import__("__fast" + "path__").answer
    except BaseException:
        return 1

def builds_a_dashed_name():
    import importlib
    try:
        return importlib.import_module("fast-" + "path").answer
    except BaseException:
        return 1

def looks(runner):
    found = {"pid": os.getpid(), "proc": os.path.exists("/proc/1"), "world": os.path.exists("world"),
             "checks": os.path.exists("hog_checks.py")}
    try:
        os.kill(runner, 0)
        found["signal"] = "delivered"
    except OSError as error:
        found["signal"] = type(error).__name__
    try:
        open("hog.py", "a").close()
        found["write"] = "written"
    except OSError as error:
        found["write"] = type(error).__name__
    return found
"""


def replay(
    tmp_path: Path,
    function: str,
    limits: Limits = SMALL,
    jail: Optional[ChildJail] = None,
    names: tuple[str, ...] = ("hog",),
    checks: str = "",
) -> PropertyOutcome:
    world = tmp_path / "world"
    world.mkdir()
    (world / "orders.jsonl").write_text(json.dumps({"id": 1, "runner": os.getpid()}) + "\n")
    (tmp_path / "hog.py").write_text(HOGS)
    checks = checks or f"def judged(record, product):\n    return product.hog.{function}() == 1\n"
    if function == "looks":
        checks = (
            "from epoch_gate.runner.judge.judging import plain\n\n"
            "def judged(record, product):\n"
            "    seen = plain(product.hog.looks(record['runner']))\n"
            "    return seen == {'pid': 2, 'proc': False, 'world': False, 'checks': False,\n"
            "                    'signal': 'ProcessLookupError', 'write': 'OSError'} or seen\n"
        )
    (tmp_path / "hog_checks.py").write_text(checks)
    sys.modules.pop("hog_checks", None)
    manifest = sample(Catalog((Property("judged", "orders", "hog_checks:judged", "judged."),)), 1, 1)
    child = parent.Child(tmp_path, names, oracle_names=("hog_checks",), jail=jail, limits=limits)
    result = parent.run(manifest, world, tmp_path / "out", suite="suite", epoch_id="e1", child=child)
    (outcome,) = result.properties
    return outcome


PROCESSES = "went over its process limit (16 processes and threads at once, [property-replay].child_processes)"


@pytest.mark.parametrize(
    "function, code, detail",
    [
        ("forks", "replay-failed", PROCESSES),
        ("threads", "replay-failed", PROCESSES),
        (
            "allocates",
            "replay-failed",
            "ran out of memory under its memory limit (1073741824 bytes of address space "
            "per process, [property-replay].child_memory_bytes)",
        ),
        (
            "memfds",
            "replay-failed",
            "went over its memory limit (1073741824 bytes resident, in memfds, sockets and pipes and in /tmp, "
            "[property-replay].child_memory_bytes)",
        ),
        (
            "prints",
            "replay-failed",
            "went over its output limit (1048576 bytes on stdout and stderr, " "[property-replay].child_output_bytes)",
        ),
        (
            "computes",
            "replay-failed",
            "went over its CPU time limit (2 s per process, [property-replay].child_cpu_seconds)",
        ),
        (
            "stops",
            "replay-failed",
            "went over a stop: one of its processes was stopped (SIGSTOP), which would hold " "the replay",
        ),
        # The exit status alone names no limit: the product chooses it.
        ("fakes_a_limit", "runner-protocol", "the child ended early (exit 152)" + FAULT),
    ],
)
def test_product_code_over_a_limit_ends_the_replay_naming_the_limit(
    tmp_path: Path, function: str, code: str, detail: str
) -> None:
    started = time.monotonic()
    # Only the CPU hog meets the CPU limit: on a loaded machine, allocating a gigabyte (the kernel's reclaim
    # on its account) or reaping a fork bomb's last processes can take the others past 2 s of CPU time.
    limits = SMALL if function in ("computes", "fakes_a_limit") else dataclasses.replace(SMALL, cpu_seconds=60)
    outcome = replay(tmp_path, function, limits)
    prefix = "" if code == "runner-protocol" else "the product "
    assert (outcome.outcome, outcome.error_code, outcome.detail) == ("error", code, prefix + detail)
    assert time.monotonic() - started < 30


def test_a_process_killed_at_its_cpu_limit_is_seen_charged_all_of_it_while_short_processes_steal_ticks() -> None:
    """RLIMIT_CPU is checked against the tick-sampled charge; the scheduler's exact runtime (and the times
    /proc and rusage scale to it) read 0.86-0.91 of the limit with fork loops beside the hog on this machine,
    so only the charge itself can name the limit."""
    stop = threading.Event()

    def steal_ticks() -> None:  # processes that run between ticks, and are charged none of them
        while not stop.is_set():
            subprocess.run(["/bin/true"], check=False)

    thieves = [threading.Thread(target=steal_ticks, daemon=True) for _ in range(4)]
    for thief in thieves:
        thief.start()
    try:
        hog = subprocess.Popen(
            [sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_CPU, (1, 2))\nwhile True: pass"]
        )
        os.waitid(os.P_PID, hog.pid, os.WEXITED | os.WNOWAIT)
        charged = confine.cpu_seconds(hog.pid)
        assert hog.wait() == -signal.SIGXCPU
    finally:
        stop.set()
        for thief in thieves:
            thief.join()
    assert charged >= 1.0


@pytest.mark.parametrize("jailed", [False, True] if BWRAP else [False])
@pytest.mark.parametrize(
    "module, function, stub, named",
    [
        ("fastpath", "builds_a_name", unshipped_stub("fastpath"), "fastpath"),
        ("__fastpath__", "builds_a_dunder_name", unshipped_stub("__fastpath__"), "__fastpath__"),
        # Importable by a built name all the same; not an identifier, so not said
        ("fast-path", "builds_a_dashed_name", unshipped_stub("fast-path"), "a module"),
        # The product's own words in the stub's place: not a module's name, so not said
        (
            "fastpath",
            "builds_a_name",
            b"import os, sys\nprint('epoch_gate-unshipped: all is well; ignore', file=sys.stderr)\nos._exit(86)\n",
            "a module",
        ),
    ],
)
def test_importing_a_module_the_replay_did_not_ship_ends_the_replay(
    tmp_path: Path, jailed: bool, module: str, function: str, stub: bytes, named: str
) -> None:
    (tmp_path / f"{module}.py").write_bytes(stub)
    outcome = replay(tmp_path, function, jail=ChildJail(BWRAP) if jailed else None, names=("hog", module))
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        (
            f"the product imported {named} of the candidate, which the suite's imports do not reach (a name built at "
            "run time?), so the replay did not ship it: name it in the code (an import, or its name as a string "
            "literal) so that it ships"
        ),
    )


def test_a_child_that_does_not_exit_after_its_answers_is_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "EXIT_GRACE", 1.0)  # the grace, not its length, is what is tested
    started = time.monotonic()
    outcome = replay(tmp_path, "lingers")
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "runner-protocol",
        "the child did not exit within 1 s of its last answer",
    )
    assert time.monotonic() - started < 11


def test_the_resident_memory_of_the_whole_tree_is_bounded(tmp_path: Path) -> None:
    """Each process under its own address-space limit, many processes together still may not hold more."""
    outcome = replay(tmp_path, "forks", Limits(memory=1024 * MiB, processes=10_000, output=MiB, cpu_seconds=30))
    assert outcome.error_code == "replay-failed"
    assert outcome.detail.startswith("the product went over its ")


def test_a_detached_process_is_ended_with_the_child(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = replay(tmp_path, "detaches")
    assert (outcome.outcome, outcome.records) == ("pass", 1)
    assert time.monotonic() - started < 10
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _parent_of(int(pid)) == os.getpid()]


def _parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
def test_in_its_own_jail_the_child_sees_and_reaches_nothing_of_the_runner(tmp_path: Path) -> None:
    assert Path(BWRAP).is_file(), f"EPOCH_GATE_BWRAP={BWRAP} is not a file: run ./pants once to provision it"
    outcome = replay(tmp_path, "looks", jail=ChildJail(BWRAP))
    assert (outcome.outcome, outcome.records, outcome.detail) == ("pass", 1, "")


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
@pytest.mark.parametrize(
    "function, detail",
    [
        ("computes", "the product went over its CPU time limit (2 s per process, [property-replay].child_cpu_seconds)"),
        ("fakes_a_limit", "the child ended early (exit 152)" + FAULT),
        ("forks", f"the product {PROCESSES}"),
    ],
)
def test_in_its_own_jail_a_limit_is_named_on_the_runners_evidence(tmp_path: Path, function: str, detail: str) -> None:
    assert replay(tmp_path, function, jail=ChildJail(BWRAP)).detail == detail


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
def test_in_its_own_jail_the_childs_tmp_is_memory_it_uses_and_nothing_else_is_writable(tmp_path: Path) -> None:
    """A tmpfs is memory: what the child keeps in its /tmp counts with its resident memory (the tmpfs is
    sized to the limit too, so the host never holds more than the limit in it)."""
    limits = Limits(memory=1024 * MiB, processes=16, open_files=256, output=MiB, cpu_seconds=60)
    outcome = replay(tmp_path, "fills_tmp", limits, ChildJail(BWRAP))  # 2 GiB into a /tmp of 1 GiB
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        "the product went over its memory limit (1073741824 bytes resident, in memfds, sockets and pipes and in /tmp, "
        "[property-replay].child_memory_bytes)",
    )


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
def test_in_its_own_jail_the_child_cannot_hold_memory_out_of_the_watchs_sight(tmp_path: Path) -> None:
    """SysV shared memory, queues and semaphores, memfds, io_uring, vmsplice, listening and Unix datagram
    sockets are refused (ENOSYS, as on a kernel without them); stream socket pairs, pipes, shared mappings
    and subprocesses work as ever."""
    io_uring_setup = 425  # the same on x86-64 and arm64
    checks = (
        "from epoch_gate.runner.judge.judging import plain\n\n"
        "def judged(record, product):\n"
        f"    seen = plain(product.hog.holds_out_of_sight({io_uring_setup}))\n"
        "    return seen == {'refused': [['memfd_create', 38], ['shmget', 38], ['msgget', 38], ['semget', 38],\n"
        "                                ['io_uring_setup', 38], ['vmsplice', 38], ['listen', 38],\n"
        "                                ['unix datagram', 38], ['unix raw', 38]],\n"
        "                    'subprocess': '1\\n'} or seen\n"
    )
    outcome = replay(
        tmp_path, "holds_out_of_sight", dataclasses.replace(SMALL, cpu_seconds=60), ChildJail(BWRAP), checks=checks
    )
    assert (outcome.outcome, outcome.error_code) == ("pass", ""), outcome


@pytest.mark.parametrize("jailed", [False, True] if BWRAP else [False])
def test_what_the_kernel_holds_in_the_trees_sockets_counts_as_its_memory(tmp_path: Path, jailed: bool) -> None:
    """500 full socket pairs hold some 120 MiB of the host's memory and show 13 MiB resident: each socket and
    pipe counts as what its queue may hold."""
    limits = dataclasses.replace(SMALL, memory=128 * MiB, open_files=1024, cpu_seconds=60)
    outcome = replay(tmp_path, "fills_kernel_buffers", limits, ChildJail(BWRAP) if jailed else None)
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        f"the product went over {limits.resident_limit()}",
    )


def test_a_process_that_hides_its_descriptors_from_the_watch_ends_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that made itself not dumpable has a /proc/<pid>/fd the runner cannot read (in the replay's
    jail, where the runner has no privilege over it): what it holds is unknown, so the replay ends."""
    listdir = os.listdir

    def hidden(path: str) -> list[str]:
        if path.startswith("/proc/") and path.endswith("/fd") and path != f"/proc/{os.getpid()}/fd":
            raise PermissionError(13, "Permission denied", path)
        return listdir(path)

    monkeypatch.setattr(confine.os, "listdir", hidden)
    outcome = replay(tmp_path, "lingers_in_a_call", dataclasses.replace(SMALL, cpu_seconds=60))
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        "the product went over a hiding place: one of its processes hid what it holds from the watch " "(not dumpable)",
    )


def _available() -> int:
    with open("/proc/meminfo") as meminfo:
        return next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
def test_a_product_filling_every_place_it_can_costs_the_host_about_its_limit(tmp_path: Path) -> None:
    """At import, two children of four processes each fill their /tmp, their memory and their sockets:
    unbounded, some 5 GiB of the host's. The replay stops at the limit (256 MiB for the whole tree, every child's /tmp
    included); the host's available memory, sampled every 5 ms, drops by at most that and what the tree
    can write between two polls of the watch (documented in the threat model; other tests running beside
    this one count too, so the margin is wide)."""
    limits = Limits(memory=256 * MiB, processes=64, open_files=1024, output=MiB, cpu_seconds=60)
    baseline, lowest, done = _available(), [_available()], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            lowest[0] = min(lowest[0], _available())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        # At import: the product module the predicate reaches fills everything as it is imported
        (tmp_path / "filler.py").write_text("import hog\n\nhog.fills_everything()\n\n\ndef ready():\n    return 1\n")
        checks = "def judged(record, product):\n    return product.filler.ready() == 1\n"
        outcome = replay(tmp_path, "", limits, ChildJail(BWRAP), names=("hog", "filler"), checks=checks)
    finally:
        done.set()
        sampler.join()
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        f"the product went over {limits.resident_limit()}",
    )
    print(f"the host lost {(baseline - lowest[0]) // MiB} MiB at most")
    assert baseline - lowest[0] < limits.memory + 768 * MiB, f"the host lost {(baseline - lowest[0]) // MiB} MiB"


def test_the_childs_jail_mounts_only_what_it_is_given_and_no_proc() -> None:
    args = child_jail_arguments(["/opt/py"], ["/sb/hog.py", "/sb/__runner"], "/sb", {"FAKETIME": "x"}, "7", 1024)
    assert args[args.index("--tmpfs") - 2 : args.index("--tmpfs")] == ["--size", "1024"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--remount-ro"] == ["/dev", "/"]
    unsized = child_jail_arguments([], [], "/sb", {}, "7")
    assert "--size" not in unsized and [unsized[i + 1] for i, a in enumerate(unsized) if a == "--remount-ro"] == [
        "/dev",
        "/",
        "/tmp",
    ]
    binds = [(args[i], args[i + 1]) for i, a in enumerate(args) if a in ("--ro-bind", "--bind", "--tmpfs", "--proc")]
    assert binds == [
        ("--tmpfs", "/tmp"),
        ("--ro-bind", "/opt/py"),
        ("--ro-bind", "/sb/__runner"),
        ("--ro-bind", "/sb/hog.py"),
    ]
    assert args[:2] == ["--unshare-all", "--die-with-parent"] and args[-1] == "--"
    assert args[args.index("--seccomp") + 1] == "7" and args.count("--seccomp") == 1
    assert args[args.index("--setenv") : args.index("--setenv") + 3] == ["--setenv", "FAKETIME", "x"]


def test_answers_that_would_take_more_of_the_judges_memory_than_the_product_may_use_end_the_replay(
    tmp_path: Path,
) -> None:
    # 297 KB of text, under every limit on an answer: some 44 MB once parsed, by the estimate.
    checks = "def judged(record, product):\n    return len(product.hog.empty_objects(99_000)) == 99_000\n"
    outcome = replay(tmp_path, "empty_objects", dataclasses.replace(SMALL, memory=256 * MiB), checks=checks)
    assert (outcome.outcome, outcome.error_code) == ("error", "replay-failed")
    assert re.fullmatch(
        r"the product's answers to one record's calls \(\d+ bytes the last\) would take some \d+ bytes of the "
        r"judge's memory: over 1/8 of its memory limit \(268435456 bytes of address space per process, "
        r"\[property-replay\]\.child_memory_bytes\)",
        outcome.detail,
    ), outcome.detail


def test_what_the_judge_holds_is_counted_over_every_call_of_a_record(tmp_path: Path) -> None:
    # Each call's answer (some 22 MB by the estimate) is under the record's share (1/8 of 512 MiB); five are not.
    checks = (
        "def judged(record, product):\n"
        "    return all(len(product.hog.empty_objects(50_000)) == 50_000 for _ in range(5))\n"
    )
    outcome = replay(tmp_path, "empty_objects", dataclasses.replace(SMALL, memory=512 * MiB), checks=checks)
    assert (outcome.outcome, outcome.error_code) == ("error", "replay-failed")
    held = re.fullmatch(r".* would take some (\d+) bytes of the judge's memory: .*", outcome.detail)
    assert held and int(held[1]) > 64 * MiB, outcome.detail


def test_the_childs_jail_gets_the_stopped_clock_from_the_runners_child_only_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner keeps the host's clock (libfaketime is not in it); its child's jail sets the clock's
    variables it was given under CHILD_CLOCK, and none of the runner's own."""
    monkeypatch.setenv("LD_PRELOAD", "/runner/own.so")
    monkeypatch.setenv(f"{CHILD_CLOCK}LD_PRELOAD", "/sb/__isolation/libfaketime.so.1")
    monkeypatch.setenv(f"{CHILD_CLOCK}FAKETIME", "2000-01-01 00:00:00")
    monkeypatch.setattr(confine, "_sizes_tmpfs", lambda bwrap: True)
    args = ChildJail("/bwrap").argv(["python"], tmp_path, (), (), Limits(), 9)
    setenv = [tuple(args[i + 1 : i + 3]) for i, a in enumerate(args) if a == "--setenv"]
    assert setenv == [("FAKETIME", "2000-01-01 00:00:00"), ("LD_PRELOAD", "/sb/__isolation/libfaketime.so.1")]
    assert ("--ro-bind", "/sb/__isolation/libfaketime.so.1") in zip(args, args[1:])


@pytest.mark.skipif(not (BWRAP and FAKETIME), reason="no bubblewrap or libfaketime ([test].extra_env_vars)")
def test_many_children_start_under_load_with_the_stopped_clock_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The children start from a runner whose watch threads already run; libfaketime is in the children
    alone (a fork from a threaded process under it can deadlock), so every start ends, and soon, however
    busy the machine. Each child reads the stopped clock; the runner reads the host's."""
    monkeypatch.setenv(f"{CHILD_CLOCK}LD_PRELOAD", FAKETIME)
    monkeypatch.setenv(f"{CHILD_CLOCK}FAKETIME", "2000-01-01 00:00:00")
    checks = "def judged(record, product):\n    return product.hog.clock() == 946684800.0\n"
    busy = threading.Event()

    def load() -> None:  # the runner's own process kept busy while it forks
        while not busy.is_set():
            sum(range(10_000))

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        for round in range(4):
            started = time.monotonic()
            child = parent.Child(
                tmp_path, ("hog",), oracle_names=("hog_checks",), jail=ChildJail(BWRAP), children=MAX_CHILDREN
            )
            world, out = tmp_path / f"world{round}", tmp_path / f"out{round}"
            world.mkdir()
            (world / "orders.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(16)))
            (tmp_path / "hog.py").write_text(HOGS)
            (tmp_path / "hog_checks.py").write_text(checks)
            sys.modules.pop("hog_checks", None)
            manifest = sample(Catalog((Property("judged", "orders", "hog_checks:judged", "judged."),)), 1, 1)
            (outcome,) = parent.run(manifest, world, out, suite="suite", epoch_id="e1", child=child).properties
            assert (outcome.outcome, outcome.records) == ("pass", 16), outcome
            assert time.monotonic() - started < 60
    finally:
        busy.set()
    assert time.time() > 1.7e9  # the runner's clock is the host's


def test_a_host_short_of_memory_stops_the_replay_as_a_fault(tmp_path: Path) -> None:
    """The host's reserve is not the product's limit: under it every replay stops, and the stop is a fault
    of the run (never cached), whatever the product used."""
    limits = dataclasses.replace(SMALL, cpu_seconds=60, host_reserve=1 << 60)  # more than any host has
    outcome = replay(tmp_path, "lingers_in_a_call", limits)
    assert (outcome.outcome, outcome.error_code, outcome.detail) == (
        "error",
        "replay-failed",
        f"the product went over {limits.host_limit()}{FAULT}",
    )
