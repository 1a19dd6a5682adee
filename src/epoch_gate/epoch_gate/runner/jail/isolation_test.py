from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from epoch_gate.runner.jail import isolation
from epoch_gate.runner.jail.confine import interpreter_folders
from epoch_gate.runner.jail.isolation import FIXED_CLOCK_SECONDS, judge_probe

PY = ["/opt/py3.9"]
# Set by pants.toml's [test].extra_env_vars to where the launcher provisions bubblewrap.
BWRAP = os.environ.get("EPOCH_GATE_BWRAP", "")
RELEASE = re.match(r"(\d+)\.(\d+)", os.uname().release)
PID_MAX_PER_NAMESPACE = bool(RELEASE) and (int(RELEASE[1]), int(RELEASE[2])) >= (6, 14)
# Forks children that wait, until a fork fails or it has forked `limit`; prints how many it forked (and
# the errno that stopped it), its capability sets, whether its own user namespace owns its PID namespace,
# the errno of a write to two sysctls, the entries of /proc
# (not a process's) on a writable mount, and the environment it was started with.
FORKS = """
import fcntl, json, os, sys, time
forked = 0
try:
    while forked < int(sys.argv[1]):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        forked += 1
except OSError as error:
    print(forked, error.errno)
else:
    print(forked, 0)
status = dict(line.split(":\\t") for line in open("/proc/self/status").read().splitlines() if line.startswith("Cap"))
print(*(int(status[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")))
try:  # NS_GET_USERNS: the user namespace that owns its PID namespace (EPERM if one outside its own)
    owner = fcntl.ioctl(os.open("/proc/self/ns/pid", os.O_RDONLY), 0xB701)
    print("pid namespace owned by its own user namespace:", os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino)
except OSError as error:
    print("pid namespace owned by its own user namespace:", error.errno)
for sysctl in ("kernel/pid_max", "kernel/hostname"):
    try:
        with open("/proc/sys/" + sysctl, "w") as written:
            written.write("4194304")
        print(sysctl, "written")
    except OSError as error:
        print(sysctl, error.errno)
writable = [name for name in sorted(os.listdir("/proc")) if not name.isdigit() and not os.path.islink("/proc/" + name)
            and not os.statvfs("/proc/" + name).f_flag & os.ST_RDONLY]
print("writable", writable)
received = open("/proc/self/environ", "rb").read().decode().split("\\0")  # before this Python's own LC_CTYPE
print(json.dumps(sorted(filter(None, received))))
"""


def binds(args: list[str]) -> list[tuple[str, str]]:
    """(option, path) for every mount bwrap is asked to make, in order."""
    out = []
    for i, arg in enumerate(args):
        if arg in ("--ro-bind", "--ro-bind-try", "--bind"):
            out.append((arg, args[i + 1]))
        elif arg == "--tmpfs":
            out.append((arg, args[i + 1]))
    return out


def test_the_build_root_is_not_mounted_when_no_bound_folder_contains_it() -> None:
    args = isolation.jail_arguments(PY, "/home/dev/repo")
    assert "/home/dev/repo" not in args
    # A user of its own that is not 0, even for root: a bwrap started as uid 0 cannot nest the child's jail.
    assert args[args.index("--uid") + 1] == args[args.index("--gid") + 1] == str(isolation.JAIL_UID) != "0"
    assert ("--ro-bind", "/opt/py3.9") in binds(args)
    assert args[args.index("--chdir") + 1] == "{chroot}"
    for flag in ("--unshare-all", "--die-with-parent", "--clearenv", "--cap-drop"):
        assert flag in args


def test_a_build_root_under_a_system_folder_is_hidden_under_tmpfs() -> None:
    mounts = binds(isolation.jail_arguments(PY, "/usr/src/app"))
    assert mounts.index(("--tmpfs", "/usr/src/app")) > mounts.index(("--ro-bind-try", "/usr"))


def test_a_build_root_under_the_interpreter_prefix_is_hidden_after_it() -> None:
    mounts = binds(isolation.jail_arguments(["/home/dev"], "/home/dev/repo"))
    assert mounts.index(("--tmpfs", "/home/dev/repo")) > mounts.index(("--ro-bind", "/home/dev"))


def test_a_virtualenv_inside_the_build_root_stays_visible_after_the_mask() -> None:
    mounts = binds(isolation.jail_arguments(["/usr", "/usr/src/app/.venv"], "/usr/src/app"))
    assert mounts.index(("--ro-bind", "/usr/src/app/.venv")) > mounts.index(("--tmpfs", "/usr/src/app"))
    assert mounts.count(("--ro-bind", "/usr")) == 0  # already read-only as a system folder


def test_jailed_argv_sets_exactly_the_given_environment_and_the_clock_only_when_asked() -> None:
    argv = isolation.jailed_argv(["python", "gen.py"], {"TZ": "UTC", "LC_ALL": "C"}, PY, "/r", True, "/py", 400)
    assert argv[0] == isolation.BWRAP and "--setenv" not in argv and "--clearenv" in argv
    assert argv[argv.index("--") - 4 :] == [
        *("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--", "/py", "-I", "-S", "-c"),
        *(isolation.CEILING, "400", "5"),
        "DONT_FAKE_MONOTONIC=1",
        f"FAKETIME={isolation.FIXED_CLOCK}",
        "LC_ALL=C",
        f"LD_PRELOAD={{chroot}}/{isolation.FAKETIME}",
        "TZ=UTC",
        *("python", "gen.py"),
    ]
    for_child = isolation.jailed_argv(["python"], {"TZ": "UTC"}, PY, "/r", True, "/py", 400, clock_for_child=True)
    assert for_child[for_child.index("400") :] == [
        *(
            "400",
            "4",
            f"{isolation.CHILD_CLOCK}DONT_FAKE_MONOTONIC=1",
            f"{isolation.CHILD_CLOCK}FAKETIME={isolation.FIXED_CLOCK}",
        ),
        f"{isolation.CHILD_CLOCK}LD_PRELOAD={{chroot}}/{isolation.FAKETIME}",
        *("TZ=UTC", "python"),
    ]
    unclocked = isolation.jailed_argv(["python"], {"TZ": "UTC"}, PY, "/r", False, "/py", 400)
    assert unclocked[unclocked.index("400") :] == ["400", "1", "TZ=UTC", "python"]


@pytest.mark.skipif(not BWRAP, reason="EPOCH_GATE_BWRAP names no bubblewrap ([test].extra_env_vars)")
@pytest.mark.skipif(
    not PID_MAX_PER_NAMESPACE and os.getuid() == 0, reason="before Linux 6.14 nothing bounds root's tasks"
)
def test_the_kernel_refuses_a_fork_past_the_jails_ceiling_and_no_jailed_process_can_raise_it(tmp_path: Path) -> None:
    # The watch alone let a fork bomb outgrow it under CI's load until other jobs' forks failed (EAGAIN).
    (tmp_path / "__isolation").mkdir()
    shutil.copy(BWRAP, tmp_path / isolation.BWRAP)
    tasks = isolation.RESERVED_PIDS + 40
    python = os.path.realpath(sys.executable)  # not a virtualenv's under /tmp, which the jail's /tmp hides
    command = [python, "-I", "-S", "-c", FORKS, str(tasks + 100)]
    argv = isolation.jailed_argv(
        command, {"ONLY": "this"}, interpreter_folders(), "/nonexistent", False, python, tasks, str(tmp_path)
    )
    host_pid_max = Path("/proc/sys/kernel/pid_max").read_text()
    ran = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert Path("/proc/sys/kernel/pid_max").read_text() == host_pid_max
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"{tasks - 2} 11",  # bubblewrap's init and the forking process are the jail's two other tasks
        "0 0 0 0 0",  # no capability, none to gain
        "pid namespace owned by its own user namespace: True",  # where its uid is not root: no write of pid_max
        "kernel/pid_max 30",  # EROFS
        "kernel/hostname 30",
        "writable []",  # nothing of /proc but the processes' own entries (IRQ affinities, PCI config space)
        '["ONLY=this"]',  # exactly the environment given
    ], ran.stderr


def report(
    tree: tuple[str, ...] = (),
    interfaces: tuple[str, ...] = ("lo",),
    clock: float = FIXED_CLOCK_SECONDS,
    child: str = isolation.CHILD_PROBE_ALONE,
) -> bytes:
    return json.dumps({"tree": list(tree), "interfaces": list(interfaces), "clock": clock, "child": child}).encode()


def test_a_probe_that_saw_nothing_and_a_stopped_clock_is_a_full_jail() -> None:
    judged = judge_probe("bubblewrap 0.8.0", 0, report(), b"", True)
    assert judged.jailed and judged.fixed_clock and judged.failure is None
    assert judged.description == (
        "bubblewrap 0.8.0: no working tree, no network, the product in a jail of its "
        "own, clock stopped at 2000-01-01T00:00:00Z"
    )
    assert isolation.is_jailed(judged.description)


def test_a_running_clock_is_reported_not_claimed() -> None:
    judged = judge_probe("bubblewrap 0.8.0", 0, report(clock=1.8e9), b"", True)
    assert judged.jailed and not judged.fixed_clock and "host clock" in judged.description
    # Nor is a stopped clock claimed when libfaketime was not preloaded, whatever the probe read.
    assert not judge_probe("bubblewrap 0.8.0", 0, report(), b"", False).fixed_clock


def test_every_doubtful_probe_means_no_jail() -> None:
    cases = [
        (1, report(), b"bwrap: No permissions to creating new namespace", "would not start"),
        (0, b"", b"", "no report"),
        (0, b'{"tree": []}', b"", "no report"),
        (0, b"\xff", b"", "no report"),
        (0, report(tree=("pants.toml", "src")), b"", "still shows the working tree"),
        (0, report(interfaces=("eth0", "lo")), b"", "network interfaces"),
        (0, report(interfaces=()), b"", "network interfaces"),
        (0, report(child="1 False"), b"", "the product's own jail would not start"),  # no PID namespace
        (0, report(child="2 True"), b"", "the product's own jail would not start"),  # a /proc to look in
        (0, report(child="2 False memfd"), b"", "the product's own jail would not start"),  # no seccomp filter
        (0, report(child="exit 1: bwrap: setting up uid map: Operation not permitted"), b"", "uid map"),
    ]
    for exit_code, stdout, stderr, why in cases:
        judged = judge_probe("bubblewrap 0.8.0", exit_code, stdout, stderr, True)
        assert not judged.jailed and not judged.fixed_clock, (stdout, judged)
        assert judged.failure and why in judged.failure and judged.description.startswith("none ("), judged
        assert not isolation.is_jailed(judged.description)


def test_a_host_restriction_is_named_with_its_fix_when_the_jail_fails() -> None:
    fix = "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): run `sudo sysctl -w x`"
    judged = judge_probe("bubblewrap 0.9.0", 1, b"", b"bwrap: setting up uid map: Permission denied", True, fix)
    assert judged.failure == (
        "bubblewrap would not start a jail here (exit 1: bwrap: setting up uid map: " f"Permission denied); {fix}"
    )


def test_prefixes_must_be_absolute_paths() -> None:
    assert isolation.read_prefixes(b'["/usr", "/opt/py"]') == ["/usr", "/opt/py"]
    for bad in (b'"/usr"', b'["usr"]', b"[1]", b"{}"):
        try:
            isolation.read_prefixes(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
