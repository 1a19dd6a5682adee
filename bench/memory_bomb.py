"""What a product that fills every writable place at import takes of the host, measured: `--replays`
replays at once (a gate's pinned and held-out ones), each with `--children` children in jails of their
own, each child filling its /tmp and then its memory. Prints the host's lowest MemAvailable and highest
Shmem (tmpfs) while they run, against before, and each replay's outcome.
Run: `PYTHONPATH=src/epoch_gate python3.9 bench/memory_bomb.py --bwrap .pants.bootstrap/isolation/bwrap`."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from pathlib import Path

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import sample
from epoch_gate.runner.judge import parent
from epoch_gate.runner.jail.confine import ChildJail, Limits

BOMB = '''
import os
try:
    for number in range(1 << 20):  # /tmp until it is full
        with open(f"/tmp/fill{number}", "wb") as fill:
            for _ in range(64):
                fill.write(b"x" * (1 << 20))
except OSError:
    pass
kept = []
try:
    while True:
        kept.append(bytearray(256 << 20))
except MemoryError:
    pass

def answer(record):
    return 1
'''


def meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as lines:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in lines}


def replay(root: str, bwrap: str, children: int) -> str:
    base = Path(root)
    (base / "bomb.py").write_text(BOMB)
    (base / "bomb_checks.py").write_text("def judged(record, product):\n    return product.bomb.answer(record) == 1\n")
    world = base / "world"
    world.mkdir()
    (world / "orders.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(4)))
    manifest = sample(Catalog((Property("judged", "orders", "bomb_checks:judged", "judged."),)), 1, 1)
    child = parent.Child(
        base, ("bomb",), oracle_names=("bomb_checks",), jail=ChildJail(bwrap), limits=Limits(), children=children
    )
    (outcome,) = parent.run(manifest, world, base / "out", suite="s", epoch_id="e", child=child).properties
    return f"{outcome.outcome} {outcome.error_code} {outcome.detail}"


def main() -> None:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("--bwrap", required=True)
    arguments.add_argument("--replays", type=int, default=2)
    arguments.add_argument("--children", type=int, default=2)
    args = arguments.parse_args()
    before = meminfo()
    lowest, highest, done = [before["MemAvailable"]], [before["Shmem"]], threading.Event()

    def watch() -> None:
        while not done.is_set():
            now = meminfo()
            lowest[0], highest[0] = min(lowest[0], now["MemAvailable"]), max(highest[0], now["Shmem"])
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        roots = [a, b][: args.replays] + [tempfile.mkdtemp() for _ in range(args.replays - 2)]
        with multiprocessing.get_context("spawn").Pool(args.replays) as pool:
            outcomes = pool.starmap(replay, [(root, str(Path(args.bwrap).resolve()), args.children) for root in roots])
    done.set()
    gib = 1 << 30
    print(f"{args.replays} replays x {args.children} children, {time.monotonic() - started:.1f} s")
    print(
        f"MemTotal {before['MemTotal'] / gib:.1f} GiB; MemAvailable before {before['MemAvailable'] / gib:.1f} GiB, "
        f"lowest {lowest[0] / gib:.1f} GiB; Shmem before {before['Shmem'] / gib:.2f} GiB, highest {highest[0] / gib:.2f} GiB"
    )
    for outcome in outcomes:
        print(" ", outcome)


if __name__ == "__main__":
    sys.exit(main())
