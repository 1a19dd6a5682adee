"""A jail for the generator and the replays: bubblewrap with no working tree, no network, a stopped clock.

A build tool's sandbox is a working directory, not a jail: a process in it can still open the working
tree by absolute path, reach the network or read the clock. bubblewrap (`bwrap`) runs it in fresh
namespaces over an empty root that holds only the system's read-only programs and libraries, the Python
installation and the sandbox itself; libfaketime, preloaded, stops the wall clock at FIXED_CLOCK.

Whether the jail holds is not assumed: a probe runs inside it and reports what it can see (`PROBE`),
and `judge_probe` turns that report into the isolation a run may claim.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from typing import Iterable, Optional

from epoch_gate.text import last_line

# The tools, as the caller places them in the sandbox.
TOOLS_DIR = "__isolation"
BWRAP = f"{TOOLS_DIR}/bwrap"
FAKETIME = f"{TOOLS_DIR}/libfaketime.so.1"

# libfaketime's absolute form: the wall clock reads this instant, and stays there.
FIXED_CLOCK = "2000-01-01 00:00:00"
# The prefix under which the replay's runner gets the stopped clock's variables, to set for its child only:
# the judge keeps the host's clock, and never forks under libfaketime (whose fork in a process with threads
# can deadlock), nor pays its cost on each of its own clock reads.
CHILD_CLOCK = "EPOCH_GATE_CHILD_"
FIXED_CLOCK_SECONDS = 946684800
FIXED_CLOCK_ISO = "2000-01-01T00:00:00Z"

# Read-only views of the host's programs and libraries; a missing one is skipped (`-try`).
SYSTEM_PATHS = ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives")

# The oldest bubblewrap with every option the jails use (--clearenv came in 0.5.0): Ubuntu 22.04 has 0.6.1.
MIN_BWRAP = (0, 5, 0)


def bwrap_version(said: str) -> Optional[tuple[int, ...]]:
    """The version in `bwrap --version`'s output (`bubblewrap 0.8.0`), or None."""
    words = said.split()
    if len(words) != 2 or words[0] != "bubblewrap":
        return None
    try:
        return tuple(int(part) for part in words[1].split("."))
    except ValueError:
        return None


# The jail's user. Not 0: a bwrap started as uid 0 takes itself for a privileged one and cannot start the
# product's own jail inside this one (`child_jail_arguments`).
JAIL_UID = 1000


class Mode(enum.Enum):
    AUTO = "auto"  # jail when the probe shows it holds, else run unjailed and say so
    REQUIRED = "required"  # jail or close the gate
    OFF = "off"  # never jail


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_PATHS:
        args += ["--ro-bind-try", path, path]
    return args


def child_jail_arguments(
    python_prefixes: Iterable[str],
    read_only: Iterable[str],
    cwd: str,
    env: dict[str, str],
    seccomp_fd: str,
    tmp_bytes: Optional[int] = None,
) -> list[str]:
    """bwrap's arguments, up to and including `--`, for the replay's child: a jail inside the replay's own,
    which sees the system, the interpreter and `read_only` (the product's files), all read-only, and an
    empty /tmp of its own, of `tmp_bytes` (bubblewrap 0.7 and later), or read-only when None. Nothing
    else is writable: its root and /dev are remounted read-only. It has its own user, PID, network, IPC
    and UTS namespaces and no /proc, so the runner that started it is not there to see, signal or trace;
    when its first process exits, the kernel ends every process it started. The system calls that would
    hold memory out of the watch's sight are refused (`seccomp.child_filter`, read from `seccomp_fd`)."""
    tmp = ["--size", str(tmp_bytes), "--tmpfs", "/tmp"] if tmp_bytes is not None else ["--tmpfs", "/tmp"]
    args = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "child",
        "--clearenv",
        "--seccomp",
        seccomp_fd,
        *_system_binds(),
        "--dev",
        "/dev",
        *tmp,
    ]
    # After /tmp's tmpfs: a Pants sandbox is usually under /tmp.
    for path in sorted(set(python_prefixes)):
        if not any(_under(path, s) for s in SYSTEM_PATHS):
            args += ["--ro-bind", path, path]
    for path in sorted(set(read_only)):
        args += ["--ro-bind", path, path]
    args += ["--chdir", cwd, "--remount-ro", "/dev", "--remount-ro", "/"]
    if tmp_bytes is None:
        args += ["--remount-ro", "/tmp"]
    for name in sorted(env):
        args += ["--setenv", name, env[name]]
    return [*args, "--"]


def jail_arguments(python_prefixes: Iterable[str], build_root: str, sandbox: str = "{chroot}") -> list[str]:
    """bwrap's arguments, up to and including `--`. `sandbox` is the process's working directory (Pants
    substitutes `{chroot}`, which keeps the argv, and so the cache key, independent of where it runs).
    The build root appears only when a bound folder contains it, and is then hidden under an empty tmpfs."""
    args = [
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(JAIL_UID),
        "--gid",
        str(JAIL_UID),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "jail",
        "--clearenv",
    ]
    args += _system_binds()
    wanted = sorted(set(python_prefixes))
    prefixes = [p for p in wanted if not any(_under(p, s) for s in SYSTEM_PATHS)]
    for prefix in prefixes:
        args += ["--ro-bind", prefix, prefix]
    if any(_under(build_root, b) for b in [*SYSTEM_PATHS, *prefixes]):
        args += ["--tmpfs", build_root]
        # An interpreter inside the build root (a virtualenv) stays visible; nothing else of the tree does.
        for prefix in wanted:
            if _under(prefix, build_root):
                args += ["--ro-bind", prefix, prefix]
    args += ["--proc", "/proc", *_devices(), "--tmpfs", "/tmp", "--bind", sandbox, sandbox, "--chdir", sandbox]
    return args


def _devices() -> list[str]:
    """The jail's /dev: bubblewrap's `--dev` but for its devpts, for which bubblewrap would start the jail
    in a second user namespace, inside one where the jail's uid is root; that one would own the jail's PID
    namespace, and any jailed process could then raise its pid_max (`CEILING`)."""
    args = ["--tmpfs", "/dev"]
    for name in ("null", "zero", "full", "random", "urandom", "tty"):
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (("fd", ""), ("stdin", "/0"), ("stdout", "/1"), ("stderr", "/2")):
        args += ["--symlink", f"/proc/self/fd{target}", f"/dev/{name}"]
    return [*args, "--dir", "/dev/shm"]


# The jail's first process, run as `python -I -S -c CEILING <tasks> <n> <NAME=VALUE>×n <argv>...` with
# CAP_SYS_ADMIN and CAP_SETPCAP in the jail's user namespace alone, bounds the tasks of the jail's PID
# namespace, makes /proc read-only but for the processes' entries, empties every capability set (the
# bounding one too, so that no file capability gives one back) and execs `argv` with exactly those n
# variables (`os.execve`: the step's own interpreter added LC_CTYPE to its environment, PEP 538).
# - Why: the watch over the replay's child (`epoch_gate.runner.jail.confine.Watch`) polls, and under CI's load
#   a fork bomb outgrew it between two polls by thousands of processes, until another job's fork on the
#   host failed with EAGAIN.
# - pid_max: per PID namespace since Linux 6.14, and /proc/sys/kernel/pid_max is the writer's own; the
#   kernel then refuses any fork in the jail past the ceiling. Writing it takes CAP_SYS_ADMIN in the user
#   namespace that owns the jail's PID namespace, or being that namespace's root: so the jail has one user
#   namespace, in which its uid is not root (`_devices`). Before 6.14 the file is the host's and is never
#   written (the jail's uid may be root's).
# - RLIMIT_NPROC: counted per user namespace since Linux 5.14 (per host uid before, which would count the
#   user's every process), so set only there; the kernel does not apply it to root's uid.
# - /proc: every entry that is not a process's is made read-only. The kernel checks writes to many of them
#   by uid alone (sysctls such as core_pattern, and pid_max before 6.14; IRQ affinities; PCI config
#   space), and the jail's uid is root's when Pants runs as root. bubblewrap's --proc covers a few of them
#   only when its own setup runs as root in the jail's user namespace, which `_devices` no longer asks.
RESERVED_PIDS = 300  # PIDs a namespace does not reuse once its PIDs wrap (the kernel's RESERVED_PIDS)
PID_MAX_LIMIT = 1 << 22  # the largest pid_max the kernel accepts (64-bit)
CEILING = """
import ctypes, os, resource, sys
tasks, count = int(sys.argv[1]), int(sys.argv[2])
env = dict(entry.split("=", 1) for entry in sys.argv[3 : 3 + count])
argv = sys.argv[3 + count :]
libc = ctypes.CDLL(None, use_errno=True)


def refuse(what, why):
    sys.exit("the jail's first process could not %s: %s" % (what, why))


release = os.uname().release.replace("-", ".").split(".")  # 6.18.44-fc, 6.14-rc1, 5.15.0-91-generic
try:
    kernel = (int(release[0]), int(release[1]))
except (IndexError, ValueError):
    kernel = (0, 0)  # unknown: the host's pid_max is never written
try:
    if kernel >= (6, 14):
        with open("/proc/sys/kernel/pid_max", "w") as pid_max:
            pid_max.write(str(tasks + 1))
    if kernel >= (5, 14):
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        bound = tasks if hard == resource.RLIM_INFINITY else min(tasks, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (bound, bound))
except (OSError, ValueError) as error:
    refuse("bound its tasks", error)
for name in sorted(os.listdir("/proc")):  # a process's own entries stay: bubblewrap writes their uid_map
    path = ("/proc/" + name).encode()
    if name.isdigit() or os.path.islink(path):
        continue
    # MS_BIND (not MS_REC: a mount below would stay writable), then MS_REMOUNT | MS_BIND | MS_RDONLY |
    # MS_NOSUID | MS_NODEV | MS_NOEXEC. An entry gone since the listing (a module unloaded) is not written.
    if libc.mount(path, path, None, 4096, None):
        if ctypes.get_errno() == 2:
            continue
        refuse("make /proc/%s read-only" % name, os.strerror(ctypes.get_errno()))
    if libc.mount(None, path, None, 32 | 4096 | 15, None):
        refuse("make /proc/%s read-only" % name, os.strerror(ctypes.get_errno()))
# PR_CAPBSET_DROP every capability (EINVAL past the kernel's last), CAP_SETPCAP (which a drop takes) last;
# then capset (version 3) to nothing
for capability in [*range(8), *range(9, 64), 8]:
    if libc.prctl(24, capability, 0, 0, 0) and ctypes.get_errno() != 22:
        refuse("drop its capabilities", os.strerror(ctypes.get_errno()))
header, empty = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
if libc.capset(header, empty):
    refuse("drop its capabilities", os.strerror(ctypes.get_errno()))
try:
    os.execve(argv[0], argv, env)
except OSError as error:
    refuse("run " + argv[0], error)
"""


def jailed_argv(
    argv: list[str],
    env: dict[str, str],
    python_prefixes: Iterable[str],
    build_root: str,
    fixed_clock: bool,
    python: str,
    tasks: int,
    sandbox: str = "{chroot}",
    clock_for_child: bool = False,
) -> list[str]:
    """`argv` run inside the jail with exactly `env`, the clock stopped when `fixed_clock` (libfaketime at
    FAKETIME in the sandbox), and at most `tasks` processes and threads (`CEILING`, run by `python`; past
    RESERVED_PIDS, so that pid_max is one the kernel accepts). With `clock_for_child` (the replay's runner)
    the clock stops for the runner's child alone, which runs the product (`CHILD_CLOCK`)."""
    assert RESERVED_PIDS < tasks < PID_MAX_LIMIT
    jail_env = dict(env)
    if fixed_clock:
        # Only the wall clock stops: monotonic time keeps running, so timeouts still expire.
        clock = {"LD_PRELOAD": f"{sandbox}/{FAKETIME}", "FAKETIME": FIXED_CLOCK, "DONT_FAKE_MONOTONIC": "1"}
        jail_env.update({f"{CHILD_CLOCK if clock_for_child else ''}{name}": value for name, value in clock.items()})
    step = [python, "-I", "-S", "-c", CEILING, str(tasks), str(len(jail_env))]
    step += [f"{name}={jail_env[name]}" for name in sorted(jail_env)]
    capabilities = ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    return [BWRAP, *jail_arguments(python_prefixes, build_root, sandbox), *capabilities, "--", *step, *argv]


# Run as `python -S -s -c PROBE <build root> <the child's jail argv, JSON> <its seccomp filter, hex>` inside
# the jail; prints one JSON object. The child's jail runs CHILD_PROBE, which reports its own pid (2 in a PID
# namespace of its own, after bwrap's init), whether it can see a /proc and whether a memfd is refused.
PROBE = """
import json, os, socket, subprocess, sys, time
root = sys.argv[1]
try:
    tree = sorted(os.listdir(root))[:5]
except OSError:
    tree = []
try:
    read, write = os.pipe()
    os.write(write, bytes.fromhex(sys.argv[3]))
    os.close(write)
    argv = [str(read) if part == "{seccomp}" else part for part in json.loads(sys.argv[2])]
    ran = subprocess.run(argv, capture_output=True, timeout=60, pass_fds=(read,))
    child = ran.stdout.decode("utf-8", "replace").strip() if ran.returncode == 0 else \
        "exit %d: %s" % (ran.returncode, (ran.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1])
except (OSError, ValueError, IndexError, subprocess.SubprocessError) as error:
    child = "%s: %s" % (type(error).__name__, error)
print(json.dumps({"tree": tree, "interfaces": sorted(n for _, n in socket.if_nameindex()),
                  "clock": time.time(), "child": child[:300]}))
"""
CHILD_PROBE = """
import os
try:
    os.memfd_create("probe")
    memfd = "memfd"
except OSError:
    memfd = "refused"
print(os.getpid(), os.path.exists("/proc/1"), memfd)
"""
CHILD_PROBE_ALONE = "2 False refused"  # what CHILD_PROBE prints in a jail of its own
SECCOMP_FD = "{seccomp}"  # in the child's probe argv, what PROBE replaces with its filter's descriptor


def child_probe_argv(python: str, python_prefixes: Iterable[str], cwd: str) -> list[str]:
    """The command PROBE runs to check that the product's own jail starts inside the jail."""
    jail = child_jail_arguments(python_prefixes, [], cwd, {}, SECCOMP_FD)
    return [BWRAP, *jail, python, "-S", "-s", "-c", CHILD_PROBE]


def host_restriction() -> Optional[str]:
    """What on this host stops unprivileged user namespaces (which bwrap needs), with the fix; read from
    /proc/sys outside any jail."""

    def read(path: str) -> Optional[str]:
        try:
            with open(path) as file:
                return file.read().strip()
        except OSError:
            return None

    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): run "
            "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` before the gate"
        )
    if read("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are disabled: run `sudo sysctl -w user.max_user_namespaces=15000` before the gate"
    if read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are disabled: run "
            "`sudo sysctl -w kernel.unprivileged_userns_clone=1` before the gate"
        )
    return None


# Run as `python -S -s -c PREFIXES` outside the jail: the folders the interpreter needs.
PREFIXES = """
import json, os, sys
exe = os.path.realpath(sys.executable)
print(json.dumps(sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(exe))})))
"""


@dataclass(frozen=True)
class Isolation:
    """The isolation a run used. `jailed` false means the processes ran in a plain sandbox; `failure`,
    when set, is why the jail could not be used (the gate closes on it when isolation is required)."""

    jailed: bool
    fixed_clock: bool
    description: str
    failure: Optional[str] = None

    @staticmethod
    def none(why: str) -> Isolation:
        return Isolation(False, False, f"none ({why})", why)


def read_prefixes(stdout: bytes) -> list[str]:
    """The interpreter's folders from PREFIXES' output; ValueError when it is not a list of absolute paths."""
    value = json.loads(stdout.decode("utf-8"))
    if not isinstance(value, list) or not all(isinstance(p, str) and os.path.isabs(p) for p in value):
        raise ValueError(f"expected a list of absolute paths, found {value!r}")
    return value


def is_jailed(description: str) -> bool:
    """Whether an isolation description (`Isolation.description`, as reports carry it) names the jail."""
    return description.startswith("bubblewrap") and CHILD_JAIL in description


CHILD_JAIL = "the product in a jail of its own"


def judge_probe(
    version: str, exit_code: int, stdout: bytes, stderr: bytes, clock_wanted: bool, restriction: Optional[str] = None
) -> Isolation:
    """What the probe's report lets a run claim: a jail only if the working tree was invisible, the only
    network interface was loopback and the product's own jail started with a PID namespace of its own and
    no /proc; a stopped clock only if the probe read FIXED_CLOCK. `restriction` (`host_restriction`) is
    added to a failure: it is usually the cause."""
    cause = f"; {restriction}" if restriction else ""
    if exit_code != 0:
        return Isolation.none(
            f"bubblewrap would not start a jail here (exit {exit_code}: " f"{last_line(stderr, 200)}){cause}"
        )
    try:
        report = json.loads(stdout.decode("utf-8"))
        tree, interfaces, clock, child = report["tree"], report["interfaces"], report["clock"], report["child"]
    except (ValueError, KeyError, TypeError):
        return Isolation.none(f"the jail probe printed no report: {stdout[:200]!r}")
    if tree:
        return Isolation.none(f"the jail still shows the working tree ({', '.join(map(str, tree))})")
    if interfaces != ["lo"]:
        return Isolation.none(f"the jail still has network interfaces {interfaces}")
    if child != CHILD_PROBE_ALONE:
        return Isolation.none(
            f"the product's own jail would not start inside the jail ({child!r}, expected "
            f"{CHILD_PROBE_ALONE!r}: its pid in a PID namespace of its own, no /proc, no memfd){cause}"
        )
    fixed = clock_wanted and isinstance(clock, (int, float)) and abs(clock - FIXED_CLOCK_SECONDS) < 1
    clock_text = f"clock stopped at {FIXED_CLOCK_ISO}" if fixed else "host clock (libfaketime unavailable)"
    return Isolation(True, fixed, f"{version}: no working tree, no network, {CHILD_JAIL}, {clock_text}")
