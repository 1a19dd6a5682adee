"""Benchmark of the split replay runner (the product's code in a child process, records streamed to it in
batches) against an in-process loop over the same predicates and world, as the runner did before.
Run: `PYTHONPATH=src/epoch_gate python3.9 bench/replay_split.py [--records 1000000] [--runs 5]`.
Prints medians (min-max) of interleaved runs and the throughput ratio split / in-process (goal >= 0.8)."""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from epoch_gate import replay
from epoch_gate.catalog import Catalog, Property
from epoch_gate.manifest import sample
from epoch_gate.world import records, world_sha256

PREDICATES = '''
def trivial(record):
    return record["amount"] >= 0


def realistic(record):
    """An order's lines, discount and half-even tax add up to its total, in minor units."""
    subtotal = 0
    for line in record["lines"]:
        if line["qty"] <= 0 or line["unit_minor"] < 0:
            return False
        subtotal += line["qty"] * line["unit_minor"]
    discount = min(record["discount_minor"], subtotal)
    taxable = subtotal - discount
    quotient, remainder = divmod(taxable * record["tax_bp"], 10_000)
    tax = quotient + (remainder > 5_000 or (remainder == 5_000 and quotient % 2 == 1))
    return (record["currency"] in ("EUR", "USD", "JPY") and record["subtotal_minor"] == subtotal
            and record["total_minor"] == taxable + tax)
'''


def order(rng: random.Random, number: int) -> dict[str, object]:
    lines = [{"sku": f"sku-{rng.randrange(10_000)}", "qty": rng.randrange(1, 5),
              "unit_minor": rng.randrange(100, 10_000)} for _ in range(rng.randrange(1, 4))]
    subtotal = sum(line["qty"] * line["unit_minor"] for line in lines)  # type: ignore[operator]
    discount = rng.choice([0, 0, 500, subtotal // 10])
    taxable = subtotal - min(discount, subtotal)
    tax_bp = rng.choice([0, 700, 1900, 2000])
    quotient, remainder = divmod(taxable * tax_bp, 10_000)
    tax = quotient + (remainder > 5_000 or (remainder == 5_000 and quotient % 2 == 1))
    return {"id": f"ord-{number:07d}", "currency": rng.choice(["EUR", "USD", "JPY"]), "lines": lines,
            "discount_minor": discount, "tax_bp": tax_bp, "subtotal_minor": subtotal, "amount": subtotal,
            "total_minor": taxable + tax}


def in_process(world: Path, predicate: Callable[[dict], object]) -> int:
    """The loop the runner ran before the split: parse each record afresh, evaluate, demand a bool."""
    held = 0
    world_sha256(world)
    for _, witness in records(world, "orders"):
        verdict = predicate(json.loads(witness))
        held += isinstance(verdict, bool) and verdict
    return held


def split(world: Path, sandbox: Path, out: Path, name: str) -> int:
    manifest = sample(Catalog((Property(name, "orders", f"bench_preds:{name}", f"{name}."),)), 1, 1)
    child = replay.Child(sandbox, oracle_names=("bench_preds",))
    result = replay.run(manifest, world, out, suite="suite", epoch_id="bench", child=child)
    (outcome,) = result.properties
    assert outcome.outcome == "pass", outcome
    return outcome.records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sandbox, world = root / "sandbox", root / "world"
        sandbox.mkdir()
        world.mkdir()
        (sandbox / "bench_preds.py").write_text(PREDICATES)
        rng = random.Random(0)
        with open(world / "orders.jsonl", "w") as handle:
            for number in range(args.records):
                handle.write(json.dumps(order(rng, number), separators=(",", ":")) + "\n")
        sys.path.insert(0, str(sandbox))
        preds = importlib.import_module("bench_preds")
        size = (world / "orders.jsonl").stat().st_size
        print(f"{args.records} records, {size / 2**20:.0f} MiB, {args.runs} interleaved runs each")
        for name in ("trivial", "realistic"):
            ours: list[float] = []
            theirs: list[float] = []
            for run in range(args.runs):
                start = time.perf_counter()
                assert in_process(world, getattr(preds, name)) == args.records
                theirs.append(time.perf_counter() - start)
                start = time.perf_counter()
                assert split(world, sandbox, root / f"out-{name}-{run}", name) == args.records
                ours.append(time.perf_counter() - start)
            ratio = statistics.median(theirs) / statistics.median(ours)
            print(f"{name}: split {fmt(ours, args.records)}; in-process {fmt(theirs, args.records)}; "
                  f"throughput ratio split / in-process = {ratio:.2f}")


def fmt(samples: list[float], count: int) -> str:
    median = statistics.median(samples)
    return f"{median:.2f} s ({min(samples):.2f}-{max(samples):.2f}), {count / median / 1000:.0f}k records/s"


if __name__ == "__main__":
    main()
