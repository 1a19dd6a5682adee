"""Benchmarks of the core (not timed tests): file hashing against sha256sum, and the judgement (`judge`,
through `testutil.decide`) + parsing over many observations.
Run: `python bench/core_bench.py [--size-mib 512] [--observations 10000]` with `src/epoch_gate` on PYTHONPATH. Prints medians (min-max) of several runs, ratios measured in the same run."""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from epoch_gate.change.changed import ChangedPath
from epoch_gate.verdict.suite import Expected, Identities
from epoch_gate.evidence.freezes import Freeze
from epoch_gate.evidence.hashing import sha256_file
from epoch_gate.evidence.observations import load_observations, make_observation, write_observation
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.testutil import Evidence, decide


def timed(run: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return samples


def fmt(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} s ({min(samples):.3f}-{max(samples):.3f})"


def bench_hashing(folder: Path, size_mib: int, repeats: int) -> None:
    blob = folder / "blob"
    with open(blob, "wb") as handle:
        chunk = os.urandom(1 << 20)
        for _ in range(size_mib):
            handle.write(chunk)
    ours = timed(lambda: sha256_file(blob), repeats)
    theirs = timed(lambda: subprocess.run(["sha256sum", str(blob)], check=True, capture_output=True), repeats)
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(
        f"sha256_file {size_mib} MiB: {fmt(ours)}; sha256sum: {fmt(theirs)}; "
        f"throughput ratio ours/sha256sum = {ratio:.2f} "
        f"({size_mib / statistics.median(ours):.0f} MiB/s vs {size_mib / statistics.median(theirs):.0f} MiB/s)"
    )


def bench_check(folder: Path, count: int, repeats: int) -> None:
    archive = folder / "observations"
    observations = []
    for i in range(count):
        witness = f'{{"id":{i},"amount":{i % 97}}}'.encode()
        observation = make_observation(
            suite="suite",
            epoch_id="e1",
            prop=f"p{i % 50}",
            status="flake" if i % 2 else "fail",
            rerun_passed=bool(i % 2),
            witness=witness,
            bound="b",
            line=i + 1,
            detail="predicate returned False",
        )
        write_observation(archive, observation, witness)
        observations.append(observation)
    load = timed(lambda: load_observations(archive, "observations", "archive"), repeats)
    loaded, _ = load_observations(archive, "observations", "archive")
    freezes = tuple(
        Freeze(f"freezes/{o.id}.json", o.id, "suite", "e1", datetime.date(2099, 1, 1), "r")
        for o in loaded[: count // 4]
        if o.is_flake
    )
    outcome = PropertyOutcome("p", "b", count, "pass", (), "")
    evidence = Evidence(
        Identities("e1", "g", "m", "w"),
        tuple(ChangedPath(f"src/f{i}.py", "modified") for i in range(500)),
        ProtectedSet(frozenset(f"fixtures/f{i}" for i in range(500)), ("observations/", "freezes/")),
        ReplayResult("suite", "e1", "m", "w", (outcome,)),
        tuple(loaded),
        freezes,
        datetime.date(2026, 12, 2),
        expected=Expected((("p", "b"),), {"b": count}),
    )
    verdicts = timed(lambda: decide(evidence), repeats)
    print(
        f"load+validate {count} archived observations: {fmt(load)}; decide over them "
        f"(+{len(freezes)} freezes, 500 changed paths): {fmt(verdicts)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--observations", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        bench_hashing(Path(tmp), args.size_mib, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        bench_check(Path(tmp), args.observations, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
