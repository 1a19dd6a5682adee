"""Isolation through the real ./pants: a generator that reads the working tree is caught by the jail."""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Optional

import pytest

from tests.e2e.repo import Repo

# What the jail needs of the machine: fresh namespaces (a user namespace unless already privileged), a
# private /proc, /dev and /tmp, and no capabilities. The plugin's own mounts are not tried here.
CAN_JAIL = [
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--",
]


def why_the_jail_cannot_run(repo: Repo) -> Optional[str]:
    """Why this machine cannot give the repository's ./pants a jail, or None when it can.

    Only the machine is asked, never the plugin: whether the launcher provisioned bubblewrap where
    pants.toml's [bwrap] url_template points, and whether that bubblewrap can start a jail here. When it
    can, anything short of a working jail in the gate is a failure of the test, not a reason to skip."""
    env = {
        k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "PYENV_ROOT", "XDG_CACHE_HOME", "EPOCH_GATE_CACHE")
    }
    # Bootstraps (or reuses the bootstrap) and installs the provisioned tools into the tree, then stops.
    launched = subprocess.run(
        ["./pants"],
        cwd=repo.root,
        env={**env, "EPOCH_GATE_BOOTSTRAP_ONLY": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert launched.returncode == 0, launched.stderr[-2000:]
    bwrap = repo.root / ".pants.bootstrap" / "isolation" / "bwrap"
    if not bwrap.is_file():
        said = [line for line in launched.stderr.splitlines() if "jail" in line][-1:]
        return f"the launcher provisioned no bubblewrap at {bwrap}" + (f" ({said[0]})" if said else "")
    probe = subprocess.run(
        # A program outside /tmp: the probe's /tmp is a fresh tmpfs, and this test's own interpreter lives
        # under /tmp when HOME does (as in a clean-HOME CI run), which once made this probe skip the test.
        [str(bwrap), *CAN_JAIL, "/bin/sh", "-c", "exit 0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        tail = probe.stderr.strip().splitlines()[-1:] or [""]
        return (
            f"bubblewrap cannot start a jail here, user namespaces may be unavailable "
            f"(exit {probe.returncode}: {tail[0][:300]})"
        )
    return None


def test_a_generator_that_reads_the_working_tree_fails_in_the_jail(repo: Repo) -> None:
    """A generator that looks at the code under test by absolute path could tailor the world to it.
    Pinned by someone who ran it unjailed, it passes a plain sandbox; in the jail it cannot see the file."""
    unavailable = why_the_jail_cannot_run(repo)
    if unavailable is not None:
        pytest.skip(f"no jail on this machine: {unavailable}")
    base = repo.head()
    target = repo.root / "src" / "orders" / "orders" / "payments.py"
    repo.edit(
        "fixtures/generate_orders.py",
        "ALGORITHM = ",
        f"PEEK = Path({str(target)!r}).read_bytes()  # the code under test\nALGORITHM = ",
    )
    pinned = repo.pants(
        "--gate-isolation=off", "pin-epoch", f"--epoch-id=peek-{uuid.uuid4().hex[:12]}", "fixtures:orders_epoch"
    )
    assert pinned.returncode == 0, pinned.stderr[-2000:]
    repo.commit("a generator that reads the product code")

    jailed = repo.gate(f"--changed-since={base}")
    assert jailed.verdict == "closed" and jailed.exit_code == 1
    assert jailed.suites()[0]["identities"]["isolation"].startswith("bubblewrap 0.8.0: no working tree, no network")
    (failed,) = jailed.reasons("generator-failed")
    assert failed["path"] == "fixtures/generate_orders.py" and "No such file or directory" in failed["message"]
    assert "isolation bubblewrap 0.8.0" in jailed.stdout

    # Unjailed, the same generator reads the file and its world matches the pin: only the jail caught it.
    plain = repo.gate(f"--changed-since={base}", "--gate-isolation=off")
    assert plain.suites()[0]["identities"]["isolation"] == "none ([gate].isolation = off)"
    assert "generator-failed" not in plain.codes() and "world-mismatch" not in plain.codes()
    assert plain.codes() == {"protected-path-changed"}  # a generator edit is an oracle change either way
