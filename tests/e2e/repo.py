"""A temporary git repository made from the example, and the real ./pants run inside it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOP_LEVEL = (
    "BUILD",
    "pants",
    "pants.toml",
    "3rdparty",
    "pants-plugins",
    "src",
    "fixtures",
    "checks",
    "observations",
    "freezes",
    "README.md",
    "docs",
)
GITIGNORE = "/dist/\n/.pants.d/\n/.pants.bootstrap/\n/.pids/\n__pycache__/\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "e2e",
    "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
    "GIT_COMMITTER_NAME": "e2e",
    "GIT_COMMITTER_EMAIL": "e2e@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def stop_pantsd(root: Path) -> None:
    """Stops the pantsd a test started in `root`, if any, and waits until it is gone. Only a process that
    is that daemon (`pantsd [<root>]`) is signalled: a pid file can be empty or outlive its process."""
    for pid_file in root.glob(".pids/*/pantsd/pid"):
        text = pid_file.read_text().strip()
        pid = int(text) if text.isdigit() else 0
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if pid <= 0 or not _is_pantsd_of(pid, root):
                break
            os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while _is_pantsd_of(pid, root) and time.monotonic() < deadline:
                time.sleep(0.1)


def _is_pantsd_of(pid: int, root: Path) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(command.startswith(f"pantsd [{path}]".encode()) for path in (root, root.resolve()))


@dataclass(frozen=True)
class GateRun:
    exit_code: int
    stdout: str
    stderr: str
    report: dict[str, Any]

    @property
    def verdict(self) -> str:
        return str(self.report.get("verdict"))

    def all_reasons(self) -> list[dict[str, str]]:
        """The repository's reasons, then every suite's."""
        return [*self.report.get("reasons", []), *(r for s in self.suites() for r in s["reasons"])]

    def codes(self) -> set[str]:
        return {r["code"] for r in self.all_reasons()}

    def reasons(self, code: str) -> list[dict[str, str]]:
        return [r for r in self.all_reasons() if r["code"] == code]

    def suites(self) -> list[dict[str, Any]]:
        return list(self.report.get("suites", []))

    def suite(self, address: str) -> dict[str, Any]:
        (found,) = [s for s in self.suites() if s["address"] == address]
        return found

    def observations(self) -> list[dict[str, Any]]:
        return [o for s in self.suites() for o in s["observations"]]


def pants_env() -> dict[str, str]:
    """The environment every nested ./pants runs with: what it needs, and nothing Pants would pass on to
    its processes (`[subprocess-environment]`'s LANG, SSL_CERT_FILE, ...), which is part of their cache
    keys: two runs judge from the same cache only in the same environment."""
    kept = ("HOME", "PATH", "PYENV_ROOT", "XDG_CACHE_HOME", "EPOCH_GATE_CACHE")
    return {**{k: v for k, v in os.environ.items() if k in kept}, **GIT_ENV}


class Repo:
    def __init__(self, root: Path, daemon: bool = False) -> None:
        self.root = root
        # With pantsd a repository's later runs skip Pants' start-up (~12 s each); whoever turns it on
        # calls `stop_daemon` when done, so no daemon outlives the test.
        self.daemon = daemon
        self.landed = ""  # the commit `reset` goes back to

    @classmethod
    def from_example(cls, source: Path, dest: Path) -> "Repo":
        dest.mkdir(parents=True)
        for name in TOP_LEVEL:
            path = source / name
            if path.is_dir():
                shutil.copytree(path, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif path.exists():
                shutil.copy2(path, dest / name)
        (dest / ".gitignore").write_text(GITIGNORE)
        repo = cls(dest)
        repo.git("init", "-q", "-b", "main")
        repo.landed = repo.land("the example, as landed")
        return repo

    def reset(self) -> None:
        """Back on main at the example as landed, which is origin/main again; nothing on disk but what Pants
        keeps (its workdir, the daemon's pid files, the launcher's copy of pex). A daemon keeps running and
        sees the files change."""
        self.git("checkout", "-q", "-f", "-B", "main", self.landed)
        self.git("clean", "-q", "-ffdx", "-e", "/.pants.d/", "-e", "/.pids/", "-e", "/.pants.bootstrap/")
        self.git("update-ref", "refs/remotes/origin/main", self.landed)

    def stop_daemon(self) -> None:
        stop_pantsd(self.root)

    def git(self, *args: str) -> str:
        return self._git(*args).decode().strip()

    def _git(self, *args: str, stdin: bytes = b"", env: dict[str, str] = {}) -> bytes:  # noqa: B006
        done = subprocess.run(
            ["git", "-C", str(self.root), *args],
            input=stdin,
            capture_output=True,
            check=True,
            env={**os.environ, **GIT_ENV, **env},
        )
        return done.stdout

    def candidate(
        self,
        name: str,
        *edits: tuple[str, str, str],
        files: dict[str, str | bytes] = {},  # noqa: B006
        base: str = "main",
    ) -> str:
        """A commit on `base`, on branch `name`, with `edits` (path, old, new) made and `files` written, built
        from git's objects alone: the working tree, which a running daemon watches, is never touched, so a candidate
        that edits `pants.toml` or the plugin does not restart it."""
        written = dict(files)
        for rel, old, new in edits:
            text = written[rel] if rel in written else self._git("show", f"{base}:{rel}")
            text = text.decode() if isinstance(text, bytes) else text
            assert text.count(old) == 1, f"{old!r} is not exactly once in {rel}"
            written[rel] = text.replace(old, new)
        index = {"GIT_INDEX_FILE": str(self.root.parent / f".index-{uuid.uuid4().hex}")}
        try:
            self._git("read-tree", base, env=index)
            for rel, data in written.items():
                blob = self._git("hash-object", "-w", "--stdin", stdin=data.encode() if isinstance(data, str) else data)
                mode = self.git("ls-tree", base, "--", rel).split(" ", 1)[0] or "100644"  # as landed; new: plain
                assert mode in ("100644", "100755"), f"{rel} is not a regular file on {base} ({mode})"
                self._git("update-index", "--add", "--cacheinfo", f"{mode},{blob.decode().strip()},{rel}", env=index)
            tree = self._git("write-tree", env=index).decode().strip()
        finally:
            Path(index["GIT_INDEX_FILE"]).unlink(missing_ok=True)
        commit = self.git("commit-tree", tree, "-p", base, "-m", name)
        self.git("update-ref", f"refs/heads/{name}", commit)  # reachable, as a pushed branch is: a clone has it
        return commit

    def worktree(self, name: str, ref: str) -> "Repo":
        """A detached checkout of `ref` beside this repository, without a daemon: a run there neither uses
        nor disturbs this repository's daemon (which restarts when the files it was started from change)."""
        path = self.root.parent / f"{name}-{uuid.uuid4().hex[:8]}"
        self.git("worktree", "add", "-q", "--detach", str(path), ref)
        return Repo(path)

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def land(self, message: str) -> str:
        """Commits as reviewed history: origin/main (the default trusted ref) moves to it, as after a merge."""
        commit = self.commit(message)
        self.git("update-ref", "refs/remotes/origin/main", commit)
        return commit

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        text = path.read_text("utf-8")
        assert text.count(old) == 1, f"{old!r} is not exactly once in {rel}"
        path.write_text(text.replace(old, new), "utf-8")

    def write(self, rel: str, data: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, "utf-8")

    def pants(self, *args: str, env: dict[str, str] = {}) -> subprocess.CompletedProcess[str]:  # noqa: B006
        return subprocess.run(
            ["./pants", *(() if self.daemon else ("--no-pantsd",)), *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**pants_env(), **env},
            timeout=900,
        )

    def gate(self, *args: str, specs: tuple[str, ...] = ("::",), env: dict[str, str] = {}) -> GateRun:  # noqa: B006
        """`pants gate SPECS`; with --changed-since (which replaces the specs) every suite."""
        report_path = self.root / "dist" / "gate" / "report.json"
        if report_path.exists():
            report_path.unlink()
        if any(a.startswith("--changed-since") for a in args):
            specs = ()
        done = self.pants(*args, "gate", *specs, env=env)
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        assert report, f"no report; exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
        return GateRun(done.returncode, done.stdout, done.stderr, report)
