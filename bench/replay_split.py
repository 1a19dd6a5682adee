"""Benchmark of the replay's data boundary (the predicate in the parent, the product in a child that answers
each call with data) against an in-process loop that calls the product and checks its objects directly,
as a predicate did before the boundary. Same properties, same world.
Run: `PYTHONPATH=src/epoch_gate python3.9 bench/replay_split.py [--records 1000000] [--runs 3] [--example SITE]
[--children 2]`. Prints medians (min-max) of interleaved runs and the throughput ratio boundary / in-process
(goal >= 0.8 for single-call properties). `--children` is the replay's default (`[property-replay].children`):
the in-process loop runs on one core, the boundary on as many as the judges and the children can use.

Two workloads: a synthetic product that does almost nothing per record (4 us: the boundary's own cost,
worst case), and with `--example` the example's own orders product, world (its generator, scaled) and
properties: the predicates as they are against the same laws as they were written beside the product
(`checks/orders_properties.py` at OLD_PREDICATES, read from git)."""

from __future__ import annotations

import argparse
import importlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import sample
from epoch_gate.runner.judge import parent
from epoch_gate.runner.jail.confine import ChildJail
from epoch_gate.evidence.world import records, world_sha256

# The product: an order's totals as a dataclass of dataclasses, as real product code returns them.
PRODUCT = '''
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    sku: str
    quantity: int
    gross: int


@dataclass(frozen=True)
class Totals:
    currency: str
    lines: tuple
    subtotal: int
    discount: int
    taxable: int
    tax: int
    total: int


def half_even_tax(taxable, tax_bp):
    quotient, remainder = divmod(taxable * tax_bp, 10_000)
    return quotient + (remainder > 5_000 or (remainder == 5_000 and quotient % 2 == 1))


def totals(record):
    lines = tuple(Line(l["sku"], l["qty"], l["qty"] * l["unit_minor"]) for l in record["lines"])
    subtotal = sum(line.gross for line in lines)
    discount = min(record["discount_minor"], subtotal)
    taxable = subtotal - discount
    tax = half_even_tax(taxable, record["tax_bp"])
    return Totals(record["currency"], lines, subtotal, discount, taxable, tax, taxable + tax)
'''

# Both shapes check the same laws; only how they reach the product differs.
BOUNDARY = '''
def single(record, product):
    """One call: the totals add up, recomputed independently."""
    t = product.bench_app.totals(record)
    subtotal = sum(l["qty"] * l["unit_minor"] for l in record["lines"])
    quotient, remainder = divmod(t.taxable * record["tax_bp"], 10_000)
    tax = quotient + (remainder > 5_000 or (remainder == 5_000 and quotient % 2 == 1))
    return (t.subtotal == subtotal and 0 <= t.discount <= subtotal and t.taxable == subtotal - t.discount
            and t.tax == tax and t.total == t.taxable + t.tax and len(t.lines) == len(record["lines"]))


def multi(record, product):
    """Three calls: the totals twice (the same answer: idempotent), and the tax function on its own."""
    first = product.bench_app.totals(record)
    again = product.bench_app.totals(record)
    return (first.total == again.total and first.tax == again.tax
            and product.bench_app.half_even_tax(first.taxable, record["tax_bp"]) == first.tax)
'''

IN_PROCESS = '''
import bench_app


def single(record):
    t = bench_app.totals(record)
    subtotal = sum(l["qty"] * l["unit_minor"] for l in record["lines"])
    quotient, remainder = divmod(t.taxable * record["tax_bp"], 10_000)
    tax = quotient + (remainder > 5_000 or (remainder == 5_000 and quotient % 2 == 1))
    return (t.subtotal == subtotal and 0 <= t.discount <= subtotal and t.taxable == subtotal - t.discount
            and t.tax == tax and t.total == t.taxable + t.tax and len(t.lines) == len(record["lines"]))


def multi(record):
    first = bench_app.totals(record)
    again = bench_app.totals(record)
    return (first.total == again.total and first.tax == again.tax
            and bench_app.half_even_tax(first.taxable, record["tax_bp"]) == first.tax)
'''


def order(rng: random.Random, number: int) -> dict[str, object]:
    lines = [
        {"sku": f"sku-{rng.randrange(10_000)}", "qty": rng.randrange(1, 5), "unit_minor": rng.randrange(100, 10_000)}
        for _ in range(rng.randrange(1, 4))
    ]
    subtotal = sum(line["qty"] * line["unit_minor"] for line in lines)  # type: ignore[operator]
    return {
        "id": f"ord-{number:07d}",
        "currency": rng.choice(["EUR", "USD", "JPY"]),
        "lines": lines,
        "discount_minor": rng.choice([0, 0, 500, subtotal // 10]),
        "tax_bp": rng.choice([0, 700, 1900, 2000]),
    }


def in_process(world: Path, predicate: Callable[[dict], object], bound: str = "orders") -> int:
    """The loop a predicate beside the product ran: parse each record afresh, evaluate, demand a bool."""
    held = 0
    world_sha256(world)
    for _, witness in records(world, bound):
        verdict = predicate(json.loads(witness))
        held += verdict is True
    return held


def boundary(world: Path, sandbox: Path, out: Path, name: str, children: int, jail: Optional[ChildJail] = None) -> int:
    manifest = sample(Catalog((Property(name, "orders", f"bench_preds:{name}", f"{name}."),)), 1, 1)
    child = parent.Child(sandbox, ("bench_app",), oracle_names=("bench_preds",), jail=jail, children=children)
    result = parent.run(manifest, world, out, suite="suite", epoch_id="bench", child=child)
    (outcome,) = result.properties
    assert outcome.outcome == "pass", outcome
    return outcome.records


OLD_PREDICATES = "54bd105"  # the last commit whose predicates ran beside the product
EXAMPLE = {
    "orders": ("tax_is_half_even_rounded", "discount_never_exceeds_subtotal"),  # one call
    "payments": ("refund_le_captured",),
    "money": ("money_add_commutative",),
}  # several calls


def example(root: Path, count: int, runs: int, site: str, children: int, only: list[str]) -> None:
    repo = Path(__file__).resolve().parent.parent
    sandbox, here, world = root / "sandbox", root / "here", root / "world"
    base = json.loads((repo / "fixtures/orders/base.json").read_text())
    base["counts"] = {bound: count for bound in base["counts"]}
    (root / "base.json").write_text(json.dumps(base))
    subprocess.run(
        [
            sys.executable,
            "-B",
            str(repo / "fixtures/generate_orders.py"),
            "--input",
            str(root / "base.json"),
            "--out",
            str(world),
        ],
        check=True,
    )
    for folder in (sandbox / "checks", here / "old_checks"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    shutil.copytree(repo / "src/orders/orders", sandbox / "orders")
    (sandbox / "checks" / "orders_properties.py").write_bytes((repo / "checks/orders_properties.py").read_bytes())
    old = subprocess.run(
        ["git", "show", f"{OLD_PREDICATES}:checks/orders_properties.py"], cwd=repo, check=True, capture_output=True
    ).stdout
    (here / "old_checks" / "orders_properties.py").write_bytes(old)  # its own name: the parent imports `checks`
    sys.path[:0] = [str(here), str(repo / "src/orders"), site]
    baseline = importlib.import_module("old_checks.orders_properties")
    print(f"the example: {count} records per bound, {runs} interleaved runs each")
    for bound, names in EXAMPLE.items():
        for name in (name for name in names if not only or name in only):
            ours: list[float] = []
            theirs: list[float] = []
            for run in range(runs):
                start = time.perf_counter()
                assert in_process(world, getattr(baseline, name), bound) == count
                theirs.append(time.perf_counter() - start)
                start = time.perf_counter()
                manifest = sample(Catalog((Property(name, bound, f"checks.orders_properties:{name}", "p."),)), 1, 1)
                child = parent.Child(sandbox, ("orders",), (site,), oracle_names=("checks",), children=children)
                result = parent.run(manifest, world, root / f"out-{name}-{run}", suite="s", epoch_id="b", child=child)
                assert result.properties[0].outcome == "pass" and result.properties[0].records == count, result
                ours.append(time.perf_counter() - start)
            ratio = statistics.median(theirs) / statistics.median(ours)
            print(
                f"{name}: boundary {fmt(ours, count)}; in-process {fmt(theirs, count)}; "
                f"throughput ratio boundary / in-process = {ratio:.2f}"
            )


def main() -> None:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("--records", type=int, default=1_000_000)
    arguments.add_argument("--runs", type=int, default=3)
    arguments.add_argument(
        "--children", type=int, default=2, help="children serving the product side by side (the replay's default)"
    )
    arguments.add_argument(
        "--only", action="append", default=[], help="with --example: this property only (repeatable)"
    )
    arguments.add_argument(
        "--jail",
        metavar="BWRAP",
        help="also time the boundary with the child in its own jail, started by this bubblewrap",
    )
    arguments.add_argument(
        "--example",
        metavar="SITE",
        help="the example's product, world and properties; SITE: a folder holding attrs "
        "(`python3.9 -m pip install --target SITE attrs`)",
    )
    args = arguments.parse_args()
    if args.example:
        with tempfile.TemporaryDirectory() as tmp:
            example(Path(tmp), args.records, args.runs, args.example, args.children, args.only)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sandbox, here, world = root / "sandbox", root / "here", root / "world"
        for folder in (sandbox, here, world):
            folder.mkdir()
        (sandbox / "bench_preds.py").write_text(BOUNDARY)
        (sandbox / "bench_app.py").write_text(PRODUCT)
        (here / "bench_app.py").write_text(PRODUCT)
        (here / "bench_inprocess.py").write_text(IN_PROCESS)
        rng = random.Random(0)
        with open(world / "orders.jsonl", "w") as handle:
            for number in range(args.records):
                handle.write(json.dumps(order(rng, number), separators=(",", ":")) + "\n")
        sys.path.insert(0, str(here))
        baseline = importlib.import_module("bench_inprocess")
        size = (world / "orders.jsonl").stat().st_size
        print(f"{args.records} records, {size / 2**20:.0f} MiB, {args.runs} interleaved runs each")
        jail = ChildJail(str(Path(args.jail).resolve())) if args.jail else None
        for name in ("single", "multi"):
            ours: list[float] = []
            theirs: list[float] = []
            jailed: list[float] = []
            for run in range(args.runs):
                start = time.perf_counter()
                assert in_process(world, getattr(baseline, name)) == args.records
                theirs.append(time.perf_counter() - start)
                start = time.perf_counter()
                assert boundary(world, sandbox, root / f"out-{name}-{run}", name, args.children) == args.records
                ours.append(time.perf_counter() - start)
                if jail is not None:
                    start = time.perf_counter()
                    assert (
                        boundary(world, sandbox, root / f"jailed-{name}-{run}", name, args.children, jail)
                        == args.records
                    )
                    jailed.append(time.perf_counter() - start)
            ratio = statistics.median(theirs) / statistics.median(ours)
            print(
                f"{name}: boundary {fmt(ours, args.records)}; in-process {fmt(theirs, args.records)}; "
                f"throughput ratio boundary / in-process = {ratio:.2f}"
            )
            if jailed:
                print(
                    f"{name}, the child in its own jail: {fmt(jailed, args.records)}; "
                    f"jailed / unjailed time = {statistics.median(jailed) / statistics.median(ours):.3f}"
                )


def fmt(samples: list[float], count: int) -> str:
    median = statistics.median(samples)
    return f"{median:.2f} s ({min(samples):.2f}-{max(samples):.2f}), {count / median / 1000:.0f}k records/s"


if __name__ == "__main__":
    main()
