"""The gate at monorepo scale: a generator of synthetic monorepos and a runner that times the real ./pants.

    python3 bench/monorepo.py --targets 500 5000 --runs 5 [--write docs/benchmarks.md]

Each repository is this one's example (its launcher, in-repo plugin, one epoch, one manifest and one
suite of sampled properties) plus N synthetic product packages under src/synth/ (two modules each, a
test in every 25th, imports forming a tree), committed, with origin/main on it. The gate judges exactly
one `sampled_properties` suite, so a repository has one epoch (M = 1) and the example's property targets.

What it reports, as medians with min–max, ratios taken within the same run:
- warm no-op `gate ::` against warm `list ::` and warm `test ::` (pantsd on, interleaved);
- a one-file change outside the suite's closure (replays executed must be 0) and an epoch change;
- a cold local cache with a warm BuildGrid remote cache against a fully cold local cache (pantsd off);
- pantsd's peak resident memory (VmHWM).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SOURCE = Path(__file__).resolve().parent.parent
# Not the root BUILD: its `files` targets exist for this repository's end-to-end tests (one target per file).
COPIED = ("pants", "pants.toml", "3rdparty", "pants-plugins", "src", "fixtures", "checks")
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
TESTS_EVERY = 25
TARGETS_PER_PACKAGE = 3  # the python_sources generator and its two files
TARGETS_PER_TEST = 2  # the python_tests generator and its file


def _skip(folder: str, names: list[str]) -> set[str]:
    # Not the core's and plugin's own unit tests: they are this repository's suite, not the monorepo's.
    in_tooling = "epoch_gate" in folder or "pants-plugins" in folder
    return {n for n in names if n == "__pycache__" or (in_tooling and n.endswith("_test.py"))}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def generate(root: Path, packages: int) -> None:
    root.mkdir(parents=True)
    for name in COPIED:
        path = SOURCE / name
        if path.is_dir():
            shutil.copytree(path, root / name, ignore=_skip)
        else:
            shutil.copy2(path, root / name)
    (root / "BUILD").write_text("# The monorepo's root.\n")
    (root / ".gitignore").write_text("/dist/\n/.pants.d/\n/.pants.bootstrap/\n/.pids/\n__pycache__/\n")
    synth = root / "src" / "synth"
    for i in range(packages):
        package = synth / f"pkg{i:05d}"
        package.mkdir(parents=True)
        parent = f"from src.synth.pkg{(i - 1) // 2:05d}.core import value as parent\n" if i else "parent = 0\n"
        (package / "core.py").write_text(f"{parent}\n\ndef value() -> int:\n    return {i} + (parent() if callable(parent) else 0)\n")
        (package / "util.py").write_text(f"from src.synth.pkg{i:05d}.core import value\n\nDOUBLE = 2 * value()\n")
        build = "python_sources()\n"
        if i % TESTS_EVERY == 0:
            (package / "core_test.py").write_text(
                f"from src.synth.pkg{i:05d}.core import value\n\n\ndef test_value() -> None:\n    assert value() >= {i}\n")
            build += 'python_tests(name="tests")\n'
        (package / "BUILD").write_text(build)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"a monorepo of {packages} synthetic packages")
    git(root, "update-ref", "refs/remotes/origin/main", "HEAD")


def packages_for(targets: int, example_targets: int) -> int:
    per_package = TARGETS_PER_PACKAGE + TARGETS_PER_TEST / TESTS_EVERY
    return max(1, round((targets - example_targets) / per_package))


@dataclass
class Run:
    seconds: float
    done: subprocess.CompletedProcess[str]

    def stats(self) -> dict[str, int]:
        found = {}
        for line in self.done.stderr.splitlines():
            name, sep, value = line.strip().partition(": ")
            if sep and value.isdigit() and re.fullmatch(r"[a-z_]+", name):
                found[name] = int(value)
        return found


@dataclass
class Bench:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def pants(self, *args: str, check: bool = True) -> Run:
        started = time.monotonic()
        done = subprocess.run(["./pants", *args], cwd=self.root, capture_output=True, text=True,
                              env={**os.environ, **GIT_ENV, **self.env}, timeout=3600)
        seconds = time.monotonic() - started
        if check and done.returncode not in (0, 1, 2):
            raise RuntimeError(f"./pants {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
        return Run(seconds, done)

    def gate_verdict(self) -> str:
        return json.loads((self.root / "dist/gate/report.json").read_text())["verdict"]

    def pantsd_pids(self) -> list[int]:
        pids = []
        for pid_file in glob.glob(str(self.root / ".pids" / "**" / "pantsd" / "pid"), recursive=True):
            try:
                pids.append(int(Path(pid_file).read_text().strip()))
            except (OSError, ValueError):
                continue
        return pids

    def pantsd_peak_mib(self) -> float:
        for pid in self.pantsd_pids():
            try:
                match = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
            except OSError:
                continue
            if match:
                return int(match.group(1)) / 1024
        return float("nan")

    def stop_pantsd(self) -> None:
        # Pants 2.17 has no kill-pantsd goal: the daemon's pid file under .pids/ is the handle.
        for pid in self.pantsd_pids():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def summary(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s ({min(samples):.2f}–{max(samples):.2f})"


def interleaved(runs: int, commands: dict[str, Callable[[], Run]]) -> dict[str, list[float]]:
    """Round-robin, so the machine's noise falls on every command alike."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            samples[name].append(command().seconds)
    return samples


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def remote(port: int, write: bool) -> list[str]:
    return ["--remote-cache-read", f"--remote-cache-write={str(write).lower()}",
            f"--remote-store-address=grpc://127.0.0.1:{port}", "--remote-instance-name=epoch-gate",
            "--remote-cache-warnings=backoff"]


def measure(root: Path, runs: int) -> dict[str, object]:
    bench = Bench(root)
    row: dict[str, object] = {}
    row["targets"] = len(bench.pants("--no-pantsd", "list", "::").done.stdout.splitlines())

    # Fully cold against remote-warm: pantsd off, a new local store each run (named caches stay warm).
    port = free_port()
    server = subprocess.Popen(["bash", str(root / "3rdparty/buildgrid/serve"), str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        store = Path(tempfile.mkdtemp(prefix="store-", dir=root.parent))
        bench.pants("--no-pantsd", f"--local-store-dir={store}/ci", *remote(port, True), "gate", "::")
        cold, warm_remote, cold_ms, hits = [], [], [], []
        for i in range(runs):
            run = bench.pants("--no-pantsd", "--stats-log", f"--local-store-dir={store}/cold{i}", "gate", "::")
            cold.append(run.seconds)
            cold_ms.append(run.stats().get("local_process_total_time_run_ms", 0))
            run = bench.pants("--no-pantsd", "--stats-log", f"--local-store-dir={store}/remote{i}",
                              *remote(port, False), "gate", "::")
            warm_remote.append(run.seconds)
            hits.append(run.stats().get("remote_cache_requests_cached", 0))
        row["fully cold"], row["remote warm"] = cold, warm_remote
        row["cold process ms"], row["remote hits"] = cold_ms, hits
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()

    # Warm, pantsd on.
    for warm_up in (("list", "::"), ("test", "::"), ("gate", "::")):
        bench.pants(*warm_up)
    samples = interleaved(runs, {
        "list": lambda: bench.pants("list", "::"),
        "gate": lambda: bench.pants("gate", "::"),
        "test": lambda: bench.pants("test", "::"),
    })
    row.update(samples)
    row["verdict"] = bench.gate_verdict()
    baseline = bench.pants("--stats-log", "gate", "::").stats().get("local_execution_requests", 0)

    # A one-file change outside the suite's closure: nothing to replay.
    leaf = root / "src" / "synth" / f"pkg{row_packages(root) - 1:05d}" / "util.py"
    unrelated, executed = [], []
    for i in range(runs):
        leaf.write_text(leaf.read_text() + f"\nEDIT_{i} = {i}\n")
        run = bench.pants("--stats-log", "gate", "::")
        unrelated.append(run.seconds)
        executed.append(run.stats().get("local_execution_requests", 0) - baseline)
    row["unrelated change"], row["unrelated executed"] = unrelated, executed
    git(root, "checkout", "-q", "--", ".")

    # An epoch change: new generator input, a new epoch id; the generator and the replay run again.
    epoch, epoch_executed = [], []
    base_json = root / "fixtures" / "orders" / "base.json"
    for i in range(runs):
        data = json.loads(base_json.read_text())
        data["bench_epoch"] = i
        base_json.write_text(json.dumps(data, indent=2) + "\n")
        bench.pants("pin-epoch", f"--epoch-id=bench-{i}", "fixtures:orders_epoch")
        run = bench.pants("--stats-log", "gate", "::")
        epoch.append(run.seconds)
        epoch_executed.append(run.stats().get("local_execution_requests", 0) - baseline)
    row["epoch change"], row["epoch executed"] = epoch, epoch_executed
    git(root, "checkout", "-q", "--", ".")
    row["pantsd peak MiB"] = bench.pantsd_peak_mib()
    bench.stop_pantsd()
    return row


def row_packages(root: Path) -> int:
    return len(list((root / "src" / "synth").iterdir()))


def table(rows: list[dict[str, object]], cores: int) -> str:
    out = [f"## The gate at monorepo scale (`bench/monorepo.py`, {cores} cores)", "",
           "`python3 bench/monorepo.py --targets 500 5000 --runs 5 --write docs/benchmarks.md`", ""]
    header = "| what | " + " | ".join(f"{r['targets']} targets" for r in rows) + " |"
    out += [header, "|---|" + "---|" * len(rows)]

    def line(label: str, cell: Callable[[dict[str, object]], str]) -> None:
        out.append(f"| {label} | " + " | ".join(cell(r) for r in rows) + " |")

    med = statistics.median
    line("warm `list ::`, pantsd on", lambda r: summary(r["list"]))
    line("warm no-op `gate ::`, pantsd on", lambda r: summary(r["gate"]))
    line("warm `test ::`, pantsd on", lambda r: summary(r["test"]))
    line("gate / list (goal ≤ 1.3)", lambda r: f"**{med(r['gate']) / med(r['list']):.2f}×**")
    line("gate / test", lambda r: f"{med(r['gate']) / med(r['test']):.2f}×")
    line("`gate ::` after a one-file change outside the suite", lambda r: summary(r["unrelated change"]))
    line("processes executed beyond a no-op gate (goal: 0 replays)", lambda r: ", ".join(map(str, r["unrelated executed"])))
    line("`gate ::` after a new epoch (pin-epoch, then gate)", lambda r: summary(r["epoch change"]))
    line("processes executed beyond a no-op gate (the replay; pin-epoch ran the generator)",
         lambda r: ", ".join(map(str, r["epoch executed"])))
    line("`gate ::`, pantsd off, fully cold local cache", lambda r: summary(r["fully cold"]))
    line("`gate ::`, pantsd off, cold local cache, warm remote cache", lambda r: summary(r["remote warm"]))
    line("remote-warm / fully cold (goal ≤ 0.3)", lambda r: f"**{med(r['remote warm']) / med(r['fully cold']):.2f}×**")
    line("fully cold: time inside processes (`local_process_total_time_run_ms`)",
         lambda r: f"{med(r['cold process ms']) / 1000:.2f} s")
    line("remote-warm: processes served by the remote cache", lambda r: ", ".join(map(str, r["remote hits"])))
    line("pantsd peak resident memory", lambda r: f"{r['pantsd peak MiB']:.0f} MiB")
    line("verdict", lambda r: str(r["verdict"]))
    return "\n".join(out) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text()
    start = text.find("## The gate at monorepo scale")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end != -1 else "")
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", type=Path, help="replace the monorepo section of this Markdown file")
    parser.add_argument("--keep", type=Path, help="build the repositories here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="epoch-gate-bench-"))
    rows = []
    try:
        probe = work / "probe"
        generate(probe, 1)
        probe_targets = len(Bench(probe).pants("--no-pantsd", "list", "::").done.stdout.splitlines())
        example_targets = probe_targets - TARGETS_PER_PACKAGE - TARGETS_PER_TEST  # package 0 has a test
        for targets in args.targets:
            root = work / f"repo-{targets}"
            generate(root, packages_for(targets, example_targets))
            print(f"measuring {root} ...", file=sys.stderr)
            rows.append(measure(root, args.runs))
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    section = table(rows, os.cpu_count() or 0)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
