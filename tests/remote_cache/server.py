"""A BuildGrid server of the project's own (3rdparty/buildgrid/serve) on a free loopback port."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

INSTANCE = "epoch-gate"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def buildgrid(repo_root: Path, log: Path, disk: Optional[Path] = None) -> Iterator[int]:
    port = free_port()
    argv = ["bash", str(repo_root / "3rdparty/buildgrid/serve"), str(port), *(["--disk", str(disk)] if disk else [])]
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # the first start installs BuildGrid from PyPI
        while not _accepting(port):
            assert server.poll() is None, f"BuildGrid exited {server.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"BuildGrid is not listening:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield port
    finally:
        _stop(server)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """The whole process group (the script and bgd), whether or not it is still running."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, None)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def interpreter(log: Path) -> Path:
    """The Python of the BuildGrid that `serve` started, from the line it logs first."""
    found = re.search(r"^buildgrid: serving \S+ on \S+ from (\S+)$", log.read_text(), re.MULTILINE)
    assert found, log.read_text()[-3000:]
    return Path(found.group(1)) / "bin" / "python"


def remote_options(port: int, *, write: bool) -> list[str]:
    return [
        "--remote-cache-read",
        f"--remote-cache-write={'true' if write else 'false'}",
        f"--remote-store-address=grpc://127.0.0.1:{port}",
        f"--remote-instance-name={INSTANCE}",
        "--remote-cache-warnings=backoff",
    ]


def stats(stderr: str) -> dict[str, int]:
    """The counters `--stats-log` prints (`  name: value`)."""
    counters = {}
    for line in stderr.splitlines():
        name, sep, value = line.strip().partition(": ")
        if sep and value.isdigit() and name.replace("_", "").isalnum():
            counters[name] = int(value)
    return counters
