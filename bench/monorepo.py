"""The gate at monorepo scale: a generator of synthetic monorepos with many suites, and a runner that times
the real ./pants.

    python3 bench/monorepo.py --suites 200 --targets 5000 --runs 3 [--write docs/benchmarks.md]

Each repository is this one's example (its launcher, in-repo plugin and the orders suite) plus N synthetic
product packages under src/synth/ (two modules each, a test in every 25th; each package's `core` imports
its parent's, pkg i under pkg (i-1)//2: a binary tree) and S synthetic suites under suites/sNNN/. A suite
is an `epoch_fixture` (a generator writing 20 records of one bound from a one-line input), a
`property_manifest` (2 of 3 properties) and a `sampled_properties` target whose predicates call one
package's `core` through `product`, each suite a different package of the tree's lower half. Pins and manifests are minted
with the core's own API (the generator run as the plugin runs it). Committed, with origin/main on it, so
`gate ::` is eligible.

What it records in one run, medians with min–max, ratios within the run:
- warm no-op `gate ::` against warm `list ::` (pantsd on, interleaved);
- a one-file change to a package K suites reach: the suites replayed (report.json `cached: false`)
  against K, in local mode (pantsd on) and, once, in trusted mode (`--no-pantsd gate
  --gate-candidate=SHA ::` from a clean main, after judging main itself);
- a new epoch in one suite (new input, re-minted pin): the suites replayed, against 1;
- pantsd off, a cold local store reading a warm BuildGrid remote cache against a fully cold store;
- pantsd's peak resident memory (VmHWM), and where the time goes (`--stats-log` counters).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
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
from typing import Any, Callable, Iterator

SOURCE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE / "src" / "epoch_gate"))
from epoch_gate.evidence.catalog import Catalog, Property  # noqa: E402
from epoch_gate.evidence.hashing import sha256_file  # noqa: E402
from epoch_gate.evidence.manifest import sample, write_manifest  # noqa: E402
from epoch_gate.evidence.pin import PinnedFile, mint_pin, write_pin  # noqa: E402
from epoch_gate.evidence.world import world_sha256  # noqa: E402

# Not the root BUILD: its `files` targets exist for this repository's end-to-end tests (one target per file).
COPIED = ("pants", "pants.toml", "3rdparty", "pants-plugins", "src", "fixtures", "checks")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
TESTS_EVERY = 25
TARGETS_PER_PACKAGE = 3  # the python_sources generator and its two files
TARGETS_PER_TEST = 2  # the python_tests generator and its file
TARGETS_PER_SUITE = 5  # epoch_fixture, property_manifest, sampled_properties, python_sources and its file
RECORDS = 20
# As the plugin runs a generator (pants-plugins/epoch_gate_pants/fixture.py, HERMETIC_ENV): the world
# minted here must be the one the gate regenerates, or the baseline is `world-mismatch`.
HERMETIC_ENV = {
    "PYTHONHASHSEED": "0",
    "LC_ALL": "C",
    "LANG": "C",
    "TZ": "UTC",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
}
MARKER = "<!-- bench:monorepo -->"

SUITE_GENERATOR = '''"""Writes items.jsonl: `records` records drawn from sha256(seed, index). Stdlib only, deterministic."""

import argparse
import hashlib
import json
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--input", action="append", required=True)
args = parser.parse_args()
spec = json.loads(Path(args.input[0]).read_text(encoding="utf-8"))
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
rows = []
for index in range(spec["records"]):
    n = int(hashlib.sha256(f"{spec['seed']}/{index}".encode()).hexdigest()[:8], 16)
    rows.append(json.dumps({"id": index, "n": n}, sort_keys=True))
(out / "items.jsonl").write_text("\\n".join(rows) + "\\n", encoding="utf-8")
'''

SUITE_PREDICATES = '''"""Suite {suite}: predicates over its items, through the product package src.synth.{package}."""


def value_offset_cancels(record: dict, product) -> bool:
    value = product.src.synth.{package}.core.value
    return record["n"] + value() - value() == record["n"]


def id_in_range(record: dict, product) -> bool:
    return type(record["id"]) is int and 0 <= record["id"] < {records}


def n_is_32_bit(record: dict, product) -> bool:
    return type(record["n"]) is int and 0 <= record["n"] < 2 ** 32
'''

SUITE_PROPERTIES = (
    ("value_offset_cancels", "Adding and then subtracting the product's value leaves a record's n unchanged."),
    ("id_in_range", "Every record's id is an integer within the fixture's record count."),
    ("n_is_32_bit", "Every record's n is a non-negative integer of at most 32 bits."),
)

SUITE_BUILD = """epoch_fixture(name="epoch", generator="generate.py", inputs=["input.json"])

python_sources(name="oracle", sources=["suite_properties.py"])

property_manifest(name="manifest", predicates=["suite_properties.py"])

sampled_properties(name="suite", fixture=":epoch", manifest=":manifest", dependencies=[":oracle"])
"""


def _skip(folder: str, names: list[str]) -> set[str]:
    # Not the core's and plugin's own unit tests: they are this repository's suite, not the monorepo's.
    in_tooling = "epoch_gate" in folder or "pants-plugins" in folder
    return {n for n in names if n == "__pycache__" or (in_tooling and n.endswith("_test.py"))}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    ).stdout.strip()


def parent(package: int) -> int:
    return (package - 1) // 2


def closure(package: int) -> set[int]:
    """The packages whose `core` a predicate importing `package`'s reaches: it and its ancestors."""
    reached = {package}
    while package:
        package = parent(package)
        reached.add(package)
    return reached


def suite_package(suite: int, suites: int, packages: int) -> int:
    """Suites spread over the tree's lower half (its leaves and near-leaves), a different package each."""
    return packages // 2 + suite * (packages - packages // 2) // suites


@dataclass(frozen=True)
class Monorepo:
    root: Path
    packages: int
    suites: dict[str, int]  # sampled_properties address -> the package its predicates import

    def folder(self, address: str) -> Path:
        return self.root / address.split(":")[0]

    def reaching(self, package: int) -> set[str]:
        """The synthetic suites whose replay's code under test includes `package` (by import closure)."""
        return {address for address, imported in self.suites.items() if package in closure(imported)}

    def changed_package(self) -> int:
        """A package near the root that several suites reach, about an eighth of them: K is known and > 1."""
        reach = collections.Counter(p for imported in self.suites.values() for p in closure(imported))
        wanted = max(2, len(self.suites) // 8)
        candidates = [p for p in range(1, self.packages) if reach[p] >= 2]
        if not candidates:
            raise SystemExit("no package other than the root is reached by two suites: add suites")
        return min(candidates, key=lambda p: (abs(reach[p] - wanted), p))


def mint_epoch(root: Path, folder: Path, epoch_id: str) -> None:
    """Runs the suite's generator as the plugin does and writes its pin: `pants pin-epoch` without Pants."""
    generator, data = folder / "generate.py", folder / "input.json"
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [
                sys.executable,
                "-B",
                "-S",
                "-s",
                str(generator.relative_to(root)),
                "--out",
                out,
                "--input",
                str(data.relative_to(root)),
            ],
            cwd=root,
            env=HERMETIC_ENV,
            check=True,
        )
        world = world_sha256(Path(out))
    pin_path = (folder / "EPOCH").relative_to(root).as_posix()
    pin = mint_pin(
        epoch_id=epoch_id,
        generator=PinnedFile(generator.relative_to(root).as_posix(), sha256_file(generator)),
        inputs={data.relative_to(root).as_posix(): sha256_file(data)},
        world_sha256=world,
        existing=None,
        path=pin_path,
    )
    write_pin(pin, folder / "EPOCH")


def write_suite(root: Path, index: int, package: int) -> str:
    name = f"s{index:03d}"
    folder = root / "suites" / name
    folder.mkdir(parents=True)
    (folder / "BUILD").write_text(SUITE_BUILD)
    (folder / "generate.py").write_text(SUITE_GENERATOR)
    (folder / "input.json").write_text(json.dumps({"records": RECORDS, "seed": index}) + "\n")
    (folder / "suite_properties.py").write_text(
        SUITE_PREDICATES.format(suite=name, package=f"pkg{package:05d}", records=RECORDS)
    )
    module = f"suites.{name}.suite_properties"
    catalog = Catalog(tuple(Property(prop, "items", f"{module}:{prop}", text) for prop, text in SUITE_PROPERTIES))
    (folder / "catalog.yaml").write_text(
        "properties:\n"
        + "".join(
            f"  - name: {p.name}\n    bound: {p.bound}\n    predicate: {p.predicate}\n    description: {p.description}\n"
            for p in catalog.properties
        )
    )
    write_manifest(sample(catalog, index, 2), folder / "manifest.json")
    mint_epoch(root, folder, f"{name}-e1")
    return f"suites/{name}:suite"


def generate(root: Path, packages: int, suites: int = 0) -> Monorepo:
    if suites > packages - packages // 2:
        raise SystemExit(f"{suites} suites need at least {2 * suites} packages, not {packages}")
    root.mkdir(parents=True)
    for name in COPIED:
        path = SOURCE / name
        if path.is_dir():
            shutil.copytree(path, root / name, ignore=_skip)
        else:
            shutil.copy2(path, root / name)
    (root / "BUILD").write_text("# The monorepo's root.\n")
    # Trusted mode runs only from a clean checkout: everything Pants leaves behind is ignored.
    (root / ".gitignore").write_text(
        "/dist/\n/.pants.d/\n/.pants.bootstrap/\n/.pids/\n/.pants.workdir.file_lock*\n" "__pycache__/\n*.pyc\n"
    )
    synth = root / "src" / "synth"
    for i in range(packages):
        package = synth / f"pkg{i:05d}"
        package.mkdir(parents=True)
        above = f"from src.synth.pkg{parent(i):05d}.core import value as parent\n" if i else "parent = 0\n"
        (package / "core.py").write_text(
            f"{above}\n\ndef value() -> int:\n    return {i} + (parent() if callable(parent) else 0)\n"
        )
        (package / "util.py").write_text(f"from src.synth.pkg{i:05d}.core import value\n\nDOUBLE = 2 * value()\n")
        build = "python_sources()\n"
        if i % TESTS_EVERY == 0:
            (package / "core_test.py").write_text(
                f"from src.synth.pkg{i:05d}.core import value\n\n\ndef test_value() -> None:\n    assert value() >= {i}\n"
            )
            build += 'python_tests(name="tests")\n'
        (package / "BUILD").write_text(build)
    imported = [suite_package(j, suites, packages) for j in range(suites)]
    addresses = {write_suite(root, j, package): package for j, package in enumerate(imported)}
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"a monorepo of {packages} synthetic packages and {suites} synthetic suites")
    git(root, "update-ref", "refs/remotes/origin/main", "HEAD")
    return Monorepo(root, packages, addresses)


def packages_for(targets: int, example_targets: int, suites: int) -> int:
    per_package = TARGETS_PER_PACKAGE + TARGETS_PER_TEST / TESTS_EVERY
    return max(1, round((targets - example_targets - suites * TARGETS_PER_SUITE) / per_package))


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

    def stat(self, name: str) -> int:
        return self.stats().get(name, 0)


@dataclass
class Bench:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def pants(self, *args: str, check: bool = True) -> Run:
        started = time.monotonic()
        done = subprocess.run(
            ["./pants", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV, **self.env},
            timeout=3600,
        )
        seconds = time.monotonic() - started
        if check and done.returncode not in (0, 1, 2):
            raise RuntimeError(f"./pants {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
        return Run(seconds, done)

    def report(self) -> dict[str, Any]:
        return json.loads((self.root / "dist/gate/report.json").read_text())

    def gate_verdict(self) -> str:
        return str(self.report()["verdict"])

    def replayed(self) -> set[str]:
        """The suites whose replay ran in the last gate (`cached` false; null means not replayed)."""
        return {s["address"] for s in self.report()["suites"] if s["cached"] is False}

    def require_eligible(self, what: str) -> None:
        report = self.report()
        if report["verdict"] == "eligible":
            return
        reasons = [("repository", r) for r in report["reasons"]]
        reasons += [(s["address"], r) for s in report["suites"] for r in s["reasons"]]
        for where, r in reasons[:40]:
            print(f"  {where}: [{r['code']}] {r['path']}: {r['message']}", file=sys.stderr)
        raise SystemExit(f"{what}: the baseline is {report['verdict']}, not eligible (reasons above)")

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
    return [
        "--remote-cache-read",
        f"--remote-cache-write={str(write).lower()}",
        f"--remote-store-address=grpc://127.0.0.1:{port}",
        "--remote-instance-name=epoch-gate",
        "--remote-cache-warnings=backoff",
    ]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def buildgrid(root: Path) -> Iterator[int]:
    """The repository's BuildGrid helper as the remote cache, in memory, on a free port; stopped after."""
    port = free_port()
    server = subprocess.Popen(
        ["bash", str(root / "3rdparty/buildgrid/serve"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()


def seed(bench: Bench, port: int, store: Path) -> None:
    """A CI run: pantsd off, fills the remote cache and `store`, which every later warm run uses, so nothing
    is executed a second time just to warm up."""
    log("seeding the remote cache (a CI run)")
    bench.pants("--no-pantsd", f"--local-store-dir={store}", *remote(port, True), "gate", "::")
    bench.require_eligible("the seeding run")
    bench.env["PANTS_LOCAL_STORE_DIR"] = str(store)


def measure_cold(bench: Bench, port: int, stores: Path, runs: int, row: dict[str, Any]) -> None:
    """Pantsd off, a new local store each run (named caches stay warm: pip, pex, interpreters)."""
    for key in (
        "fully cold",
        "cold process s",
        "cold processes",
        "remote warm",
        "remote hits",
        "remote read errors",
        "remote processes",
        "remote process s",
    ):
        row[key] = []
    for i in range(runs):
        log(f"cold round {i + 1}/{runs}")
        run = bench.pants("--no-pantsd", "--stats-log", f"--local-store-dir={stores}/cold{i}", "gate", "::")
        row["fully cold"].append(run.seconds)
        row["cold process s"].append(run.stat("local_process_total_time_run_ms") / 1000)
        row["cold processes"].append(run.stat("local_execution_requests"))
        run = bench.pants(
            "--no-pantsd", "--stats-log", f"--local-store-dir={stores}/remote{i}", *remote(port, False), "gate", "::"
        )
        row["remote warm"].append(run.seconds)
        row["remote hits"].append(run.stat("remote_cache_requests_cached"))
        row["remote read errors"].append(run.stat("remote_cache_read_errors"))
        row["remote processes"].append(run.stat("local_execution_requests"))
        row["remote process s"].append(run.stat("local_process_total_time_run_ms") / 1000)
        for used in (f"cold{i}", f"remote{i}"):
            shutil.rmtree(stores / used, ignore_errors=True)
        log(json.dumps(row))


def measure_warm(repo: Monorepo, bench: Bench, runs: int, row: dict[str, Any]) -> None:
    """Pantsd on: a no-op gate against `list ::`, then a product change and a new epoch."""
    root = repo.root
    log("warm: no-op gate against list")
    for warm_up in (("list", "::"), ("gate", "::"), ("gate", "::")):
        bench.pants(*warm_up)
    row.update(
        interleaved(runs, {"list": lambda: bench.pants("list", "::"), "gate": lambda: bench.pants("gate", "::")})
    )
    bench.require_eligible("the warm no-op gate")
    row["verdict"] = bench.gate_verdict()
    row["no-op processes"] = bench.pants("--stats-log", "gate", "::").stat("local_execution_requests")

    changed = repo.changed_package()
    expected = repo.reaching(changed)
    core = root / "src" / "synth" / f"pkg{changed:05d}" / "core.py"
    row["changed package"], row["expected"] = f"pkg{changed:05d}", len(expected)
    for key in ("local change", "local found", "local exact", "local processes", "local verdict"):
        row[key] = []
    for i in range(runs):
        log(f"local product change {i + 1}/{runs}: {core.relative_to(root)}, {len(expected)} suites expected")
        core.write_text(core.read_text() + f"\nEDIT_{i} = {i}\n")
        run = bench.pants("--stats-log", "gate", "::")
        found = bench.replayed()
        row["local change"].append(run.seconds)
        row["local found"].append(len(found))
        row["local exact"].append(found == expected)
        row["local processes"].append(run.stat("local_execution_requests"))
        row["local verdict"].append(bench.gate_verdict())
    git(root, "checkout", "-q", "--", ".")

    address = sorted(repo.suites)[len(repo.suites) // 2]
    folder = repo.folder(address)
    row["epoch suite"] = address
    for key in ("epoch change", "epoch found", "epoch exact", "epoch processes", "epoch verdict"):
        row[key] = []
    for i in range(runs):
        log(f"new epoch {i + 1}/{runs} in {address}")
        (folder / "input.json").write_text(json.dumps({"records": RECORDS, "seed": 10_000 + i}) + "\n")
        mint_epoch(root, folder, f"{folder.name}-e{i + 2}")
        run = bench.pants("--stats-log", "gate", "::")
        found = bench.replayed()
        row["epoch change"].append(run.seconds)
        row["epoch found"].append(len(found))
        row["epoch exact"].append(found == {address})
        row["epoch processes"].append(run.stat("local_execution_requests"))
        row["epoch verdict"].append(bench.gate_verdict())
    git(root, "checkout", "-q", "--", ".")
    row["pantsd peak MiB"] = bench.pantsd_peak_mib()


def measure_trusted(repo: Monorepo, bench: Bench, row: dict[str, Any]) -> None:
    """From a clean main, judge a candidate commit that changes the same product file, as CI does. Once:
    each trusted judgement is a cold Pants (pantsd off, as in CI) and, at 200 suites, minutes long."""
    root = repo.root
    changed = repo.changed_package()
    expected = repo.reaching(changed)
    core = root / "src" / "synth" / f"pkg{changed:05d}" / "core.py"
    main = git(root, "rev-parse", "HEAD")
    log("trusted: judging main itself first (the cache of trusted-mode replays)")
    warm_up = bench.pants("--no-pantsd", "gate", f"--gate-candidate={main}", "::")
    bench.require_eligible("trusted mode on main")
    row["trusted warm-up"], row["trusted warm-up found"] = warm_up.seconds, len(bench.replayed())
    git(root, "checkout", "-q", "-b", "candidate")
    core.write_text(core.read_text() + "\nTRUSTED = 1\n")
    git(root, "commit", "-qam", "the candidate: one product module")
    candidate = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    log(f"trusted product change: {len(expected)} suites expected by import closure")
    run = bench.pants("--no-pantsd", "--stats-log", "gate", f"--gate-candidate={candidate}", "::")
    found = bench.replayed()
    row["trusted change"], row["trusted found"], row["trusted exact"] = run.seconds, len(found), found == expected
    row["trusted processes"] = run.stat("local_execution_requests")
    row["trusted process s"] = run.stat("local_process_total_time_run_ms") / 1000
    row["trusted verdict"] = bench.gate_verdict()


PARTS = ("warm", "trusted", "cold")


def measure(repo: Monorepo, runs: int, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The cold rounds come last: if the run must be cut short, the counts are already recorded."""
    started = time.monotonic()
    bench = Bench(repo.root)
    row: dict[str, Any] = {"packages": repo.packages, "parts": parts}
    # Pants' start, plugin and build graph with no process to run: the floor of any cold run.
    listing = bench.pants("--no-pantsd", "list", "::")
    row["targets"], row["startup"] = len(listing.done.stdout.splitlines()), listing.seconds
    stores = Path(tempfile.mkdtemp(prefix="stores-", dir=repo.root.parent))
    try:
        with buildgrid(repo.root) as port:
            seed(bench, port, stores / "main")
            row["suites"] = len(bench.report()["suites"])  # the synthetic ones and the example's
            if "warm" in parts:
                try:
                    measure_warm(repo, bench, runs, row)
                finally:
                    bench.stop_pantsd()
                log(json.dumps(row))
            if "trusted" in parts:
                measure_trusted(repo, bench, row)
                log(json.dumps(row))
            if "cold" in parts:
                measure_cold(bench, port, stores, runs, row)
    finally:
        shutil.rmtree(stores, ignore_errors=True)
    row["minutes"] = (time.monotonic() - started) / 60
    return row


def table(rows: list[dict[str, Any]], command: str) -> str:
    out = [
        MARKER,
        f"`{command}`",
        "",
        "| what | " + " | ".join(f"{r['suites']} suites, {r['targets']} targets" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        try:
            out.append(f"| {label} | " + " | ".join(cell(r) for r in rows) + " |")
        except KeyError:  # a round not measured (--parts)
            pass

    def each(values: list[object]) -> str:
        return ", ".join(map(str, values))

    med = statistics.median
    line("synthetic product packages", lambda r: str(r["packages"]))
    line("warm `list ::`, pantsd on", lambda r: summary(r["list"]))
    line("warm no-op `gate ::`, pantsd on", lambda r: summary(r["gate"]))
    line("gate / list (goal ≤ 1.3)", lambda r: f"**{med(r['gate']) / med(r['list']):.2f}×**")
    line("processes executed by a warm no-op gate", lambda r: str(r["no-op processes"]))
    line("changed file (one product module)", lambda r: f"`src/synth/{r['changed package']}/core.py`")
    line("suites whose import closure holds it (expected replays)", lambda r: str(r["expected"]))
    line("local mode: `gate ::` after the change, pantsd on", lambda r: summary(r["local change"]))
    line(
        "local mode: suites replayed (`cached: false`), per run",
        lambda r: each(r["local found"]) + (" = expected" if all(r["local exact"]) else " **≠ expected**"),
    )
    line(
        "local mode: processes executed, per run; verdict",
        lambda r: f"{each(r['local processes'])}; " f"{each(sorted(set(r['local verdict'])))}",
    )
    if all("trusted change" in r for r in rows):
        line(
            "trusted mode: first judgement of main itself (fills the trusted replays' cache), pantsd off",
            lambda r: f"{r['trusted warm-up']:.1f} s, {r['trusted warm-up found']} suites replayed",
        )
        line(
            "trusted mode: `gate --gate-candidate=SHA ::` from main, the same change, pantsd off, 1 run",
            lambda r: f"{r['trusted change']:.1f} s",
        )
        line(
            "trusted mode: suites replayed (`cached: false`)",
            lambda r: f"{r['trusted found']}" + (" = expected" if r["trusted exact"] else " **≠ expected**"),
        )
        line(
            "trusted mode: processes executed; time inside them; verdict",
            lambda r: f"{r['trusted processes']}; {r['trusted process s']:.1f} s; {r['trusted verdict']}",
        )
    elif all("trusted" in r["parts"] for r in rows):  # stopped at its deadline: what was seen is in the prose
        line("trusted mode", lambda r: "stopped before it finished: see below")
    line(
        "new epoch in one suite (new input, re-minted pin): `gate ::`, pantsd on", lambda r: summary(r["epoch change"])
    )
    line(
        "new epoch: suites replayed, per run (expected 1)",
        lambda r: each(r["epoch found"]) + (" = expected" if all(r["epoch exact"]) else " **≠ expected**"),
    )
    line(
        "new epoch: processes executed, per run; verdict (its input is protected)",
        lambda r: f"{each(r['epoch processes'])}; {each(sorted(set(r['epoch verdict'])))}",
    )
    line("`list ::`, pantsd off (Pants' start and build graph, no process), 1 run", lambda r: f"{r['startup']:.2f} s")
    line("`gate ::`, pantsd off, fully cold local store", lambda r: summary(r["fully cold"]))
    line(
        "fully cold: processes executed; time inside them (`local_process_total_time_run_ms`)",
        lambda r: f"{med(r['cold processes']):.0f}; {med(r['cold process s']):.1f} s",
    )
    line("`gate ::`, pantsd off, cold local store, warm remote cache", lambda r: summary(r["remote warm"]))
    line(
        "remote-warm: processes served remotely; read errors; executed locally; time inside them",
        lambda r: f"{med(r['remote hits']):.0f}; {med(r['remote read errors']):.0f}; "
        f"{med(r['remote processes']):.0f}; {med(r['remote process s']):.1f} s",
    )
    line("remote-warm / fully cold (goal ≤ 0.3)", lambda r: f"**{med(r['remote warm']) / med(r['fully cold']):.2f}×**")
    line("pantsd peak resident memory (VmHWM)", lambda r: f"{r['pantsd peak MiB']:.0f} MiB")
    line("baseline verdict", lambda r: str(r["verdict"]))
    line("the whole benchmark", lambda r: f"{r['minutes']:.0f} min")
    return "\n".join([*out, MARKER]) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replaces the table between the markers; the prose around it is written by hand."""
    text = path.read_text()
    start, end = text.find(MARKER), text.rfind(MARKER)
    if start == -1 or start == end:
        raise SystemExit(f"{path} has no pair of {MARKER} markers")
    path.write_text(text[:start] + section.rstrip("\n") + text[end + len(MARKER) :])


def _interrupt(signum: int, frame: object) -> None:
    # A SIGTERM (a run stopped at its deadline) unwinds like ^C: the finally blocks stop pantsd and
    # BuildGrid. A background job cannot be sent ^C: its shell starts it with SIGINT ignored.
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", type=int, default=200, help="synthetic suites (the example's is one more)")
    parser.add_argument("--targets", type=int, nargs="+", default=[5000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", type=Path, help="replace the monorepo table of this Markdown file")
    parser.add_argument("--keep", type=Path, help="build the repositories here and keep them")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="measure only these rounds (the table then shows only their rows)",
    )
    args = parser.parse_args()
    command = "python3 bench/monorepo.py " + " ".join(sys.argv[1:])
    work = args.keep or Path(tempfile.mkdtemp(prefix="epoch-gate-bench-"))
    rows = []
    try:
        probe = work / "probe"
        generate(probe, 1)
        probe_targets = len(Bench(probe).pants("--no-pantsd", "list", "::").done.stdout.splitlines())
        example_targets = probe_targets - TARGETS_PER_PACKAGE - TARGETS_PER_TEST  # package 0 has a test
        for targets in args.targets:
            root = work / f"repo-{targets}"
            log(f"generating {root}: {args.suites} suites, about {targets} targets")
            repo = generate(root, packages_for(targets, example_targets, args.suites), args.suites)
            rows.append(measure(repo, args.runs, tuple(args.parts)))
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    section = table(rows, command)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
