"""What a held-out world costs (issue 28): one more generator run and one more replay of the suite per new
candidate, nothing when the same candidate is judged again (both are cached processes).

Run: `PYTHONPATH=src/epoch_gate python3.9 bench/held_out.py SITE [--runs 5]` (SITE: a folder holding
attrs, `python3.9 -m pip install --target SITE attrs`). Times, unjailed and in this process's interpreter,
the example's orders generator without and with `--seed`, and the replay of the orders suite's manifest
(its 8 properties) over the pinned world and over the held-out one: medians (min-max) of interleaved runs.

With `--properties`, what held-out properties cost: the replay of the manifest with 0, 4 (the default
`held_out_properties`) and all 11 of the catalog's other properties drawn, over the pinned world.

With `--gate N`, also the real thing: `./pants --no-pantsd gate --gate-candidate=...` in trusted mode from
a worktree of origin/main of a copy of this repository, on N new candidates with the key and N without
(each a new tree, so neither its replays nor its held-out world are cached), interleaved.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from epoch_gate.evidence import held_out
from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.evidence.manifest import Manifest, load_manifest
from epoch_gate.runner.judge import parent

REPO = Path(__file__).resolve().parent.parent


def generate(out: Path, seed: str = "") -> None:
    subprocess.run(
        [
            sys.executable,
            "-B",
            "-S",
            "-s",
            str(REPO / "fixtures/generate_orders.py"),
            "--input",
            str(REPO / "fixtures/orders/base.json"),
            "--out",
            str(out),
            *(["--seed", seed] if seed else []),
        ],
        check=True,
        capture_output=True,
    )


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def fmt(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s ({min(samples):.2f}-{max(samples):.2f})"


def main() -> None:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("site", help="a folder holding attrs (the orders product's requirement)")
    arguments.add_argument("--runs", type=int, default=5)
    arguments.add_argument("--gate", type=int, default=0, metavar="N", help="also time N real trusted gates each way")
    arguments.add_argument("--properties", action="store_true", help="also time held-out properties (k = 0, 4, all)")
    args = arguments.parse_args()
    seed = held_out.seed(held_out.draw_key(b"bench-key-" * 4, "0" * 40), "checks:orders_properties", "bench")
    manifest = load_manifest(REPO / "checks/manifest.json", "checks/manifest.json")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sandbox = root / "sandbox"
        (sandbox / "checks").mkdir(parents=True)
        (sandbox / "checks/__init__.py").write_text("")
        shutil.copy(REPO / "checks/orders_properties.py", sandbox / "checks/orders_properties.py")
        shutil.copytree(REPO / "src/orders/orders", sandbox / "orders")
        child = parent.Child(sandbox, ("orders",), (args.site,), oracle_names=("checks",))
        generated: dict[str, list[float]] = {"pinned": [], "held-out": []}
        replayed: dict[str, list[float]] = {"pinned": [], "held-out": []}
        for run in range(args.runs):
            for name, value in (("pinned", ""), ("held-out", seed)):
                world = root / f"{name}-{run}"
                generated[name].append(timed(lambda: generate(world, value)))
                out = root / f"out-{name}-{run}"
                replayed[name].append(
                    timed(
                        lambda: parent.run(
                            manifest, world, out, suite="checks:orders_properties", epoch_id="bench", child=child
                        )
                    )
                )
        print(f"the orders suite ({len(manifest.properties)} properties), {args.runs} interleaved runs each")
        for name in ("pinned", "held-out"):
            print(f"{name:8}  generator {fmt(generated[name])}; replay {fmt(replayed[name])}")
        extra = statistics.median(generated["held-out"]) + statistics.median(replayed["held-out"])
        base = statistics.median(generated["pinned"]) + statistics.median(replayed["pinned"])
        print(
            f"a new candidate with the key: +{extra:.2f} s over {base:.2f} s of pinned work "
            f"({(base + extra) / base:.2f}x); judged again: +0 (both processes cached)"
        )
        if args.properties:
            drawn_properties(root, child, manifest, args.runs)
        if args.gate:
            gate(root, args.gate)


def drawn_properties(root: Path, child: parent.Child, manifest: Manifest, runs: int) -> None:
    catalog = parse_catalog((REPO / "checks/catalog.yaml").read_bytes(), "checks/catalog.yaml")
    seed = held_out.property_seed(held_out.draw_key(b"bench-key-" * 4, "0" * 40), "checks:orders_properties", "bench")
    world = root / "pinned-0"
    counts: dict[str, list[float]] = {"0": [], "4": [], held_out.ALL: []}
    for run in range(runs):
        for count in counts:
            drawn = held_out.draw_properties(catalog, manifest, seed, count if count == held_out.ALL else int(count))
            judged = dataclasses.replace(manifest, properties=(*manifest.properties, *drawn))
            out = root / f"out-drawn-{count}-{run}"
            counts[count].append(
                timed(
                    lambda: parent.run(
                        judged, world, out, suite="checks:orders_properties", epoch_id="bench", child=child
                    )
                )
            )
    base = statistics.median(counts["0"])
    print(f"held-out properties: the replay of the manifest ({len(manifest.properties)}) and k more, pinned world")
    for count, samples in counts.items():
        print(f"  k = {count:3}: {fmt(samples)} ({statistics.median(samples) / base:.2f}x)")


def gate(root: Path, runs: int) -> None:
    sys.path.insert(0, str(REPO))
    from tests.e2e.repo import Repo

    example = Repo.from_example(REPO, root / "repo")
    judge = root / "judge"
    example.git("worktree", "add", "-q", "--detach", str(judge), "refs/remotes/origin/main")
    key = {"EPOCH_GATE_HELD_OUT_KEY": "b" * 64}
    times: dict[str, list[float]] = {"without the key": [], "with the key": []}
    for run in range(runs + 1):  # the first pair warms the launcher, the pinned worlds and the requirements
        for name, env in (("without the key", {}), ("with the key", key)):
            example.git("checkout", "-q", "-b", f"c{run}{len(env)}", "main")
            example.write(
                "src/orders/orders/__init__.py",
                (example.root / "src/orders/orders/__init__.py").read_text() + f"# candidate {run} {name}\n",
            )
            commit = example.commit("a candidate")
            example.git("checkout", "-q", "main")
            elapsed = timed(lambda: Repo(judge).gate(f"--gate-candidate={commit}", env=env))
            if run:
                times[name].append(elapsed)
    print(f"pants gate in trusted mode, a new candidate each run, {runs} interleaved runs each")
    for name, samples in times.items():
        print(f"  {name}: {fmt(samples)}")
    print(
        f"  with / without: {statistics.median(times['with the key']) / statistics.median(times['without the key']):.2f}x"
    )


if __name__ == "__main__":
    main()
