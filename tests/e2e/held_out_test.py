"""Held-out draws end to end (trusted mode, the real ./pants): a candidate that knows the pinned world is
judged over a world it could not see, drawn from a seed that only the key derives.

The end-to-end repository, with an inventory generator that first refuses `--seed` (a reason), then opts
out (said in the report); the orders suite draws a held-out world on every keyed run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.repo import GateRun, Repo

# What `openssl rand -hex 32` prints; a new one on every run, so that a run's key can be looked for in what
# Pants keeps (an earlier run's failure output, which Pants caches, may show its own).
KEY = secrets.token_hex(32)
KEYED = {"EPOCH_GATE_HELD_OUT_KEY": KEY}
ORDERS, INVENTORY = "checks:orders_properties", "checks/inventory:inventory_properties"
SEEDLESS = (  # the edits that take `--seed` out of the inventory generator
    (
        '    parser.add_argument("--seed", type=held_out_seed,\n'
        '                        help="a held-out seed (64 hex digits): draw from it instead of the input\'s seed")\n',
        '',
    ),
    ('        if args.seed is not None:\n            params.seed = args.seed\n', ''),
)
# Product code that is right on exactly the records of the pinned world (it regenerated the world from
# the repository and remembered a digest of each) and wrong by one minor unit on every other record.
MEMORISING = '''

import dataclasses as _dataclasses
import hashlib as _hashlib
import json as _json

_KNOWN = frozenset({{{known}}})
_honest = totals_from_record


def totals_from_record(record):
    totals = _honest(record)
    if _hashlib.sha256(_json.dumps(record, sort_keys=True).encode()).hexdigest()[:16] in _KNOWN:
        return totals
    return _dataclasses.replace(totals, total=Money(totals.total.minor + 1, totals.total.currency))
'''


def _known_orders(repo: Repo, tmp: Path) -> list[str]:
    subprocess.run(
        [
            sys.executable,
            "-B",
            "fixtures/generate_orders.py",
            "--input",
            "fixtures/orders/base.json",
            "--out",
            str(tmp),
        ],
        cwd=repo.root,
        check=True,
        capture_output=True,
    )
    return sorted(
        hashlib.sha256(json.dumps(json.loads(line), sort_keys=True).encode()).hexdigest()[:16]
        for line in (tmp / "orders.jsonl").read_text().splitlines()
        if line
    )


@pytest.fixture(scope="module")
def seedless(example: Repo) -> Iterator[Repo]:
    """The shared repository with an inventory generator that takes no `--seed`, landed for this module."""
    example.reset()
    for edit in SEEDLESS:
        example.edit("fixtures/inventory/generate_inventory.py", *edit)
    # Every catalog property outside the orders manifest is drawn (a draw the test fixes, whatever the key)
    example.edit(
        "checks/BUILD", '    manifest=":manifest",\n', '    manifest=":manifest",\n    held_out_properties="all",\n'
    )
    minted = example.pants("pin-epoch", "--epoch-id=inventory-seedless", "fixtures/inventory:inventory_epoch")
    assert minted.returncode == 0, minted.stderr[-2000:]
    landed, example.landed = example.landed, example.land("an inventory generator that takes no seed")
    try:
        yield example
    finally:
        example.landed = landed
        example.reset()


def keyed(judge: Repo, *args: str) -> GateRun:
    """The keyed gate as CI runs it: without pantsd (a daemon would keep the key), from a clean checkout of
    origin/main, the candidate as git objects."""
    return judge.gate("--no-pantsd", *args, env=KEYED)


def _drawn(run: GateRun, address: str) -> dict[str, object]:
    held = run.suite(address)["held_out"]
    assert held["drawn"] is True, run.stdout
    return held


def test_held_out_draws(seedless: Repo, tmp_path: Path) -> None:
    judge = seedless
    totals = (judge.root / "src/orders/orders/totals.py").read_text()
    known = _known_orders(judge, tmp_path / "world")
    memorising = judge.candidate(
        "memorising",
        files={"src/orders/orders/totals.py": totals + MEMORISING.format(known=", ".join(map(repr, known)))},
    )
    # With the key, the held-out world finds the candidate that memorised the pinned world, with the record
    # that shows it saved like any witness; a generator that refuses --seed is a reason, never a silent
    # skip. (The run's new processes keep their sandboxes: their arguments, environment and files are
    # looked at below.)
    caught = keyed(judge, "--keep-sandboxes=always", f"--gate-candidate={memorising}")
    assert caught.verdict == "closed", caught.stdout
    assert [(r["code"], r["path"]) for r in caught.suite(INVENTORY)["reasons"]] == [
        ("held-out-unavailable", "fixtures/inventory/generate_inventory.py"),
        ("replay-failed", INVENTORY),
    ]
    # Its error echoes the seed (argparse: "unrecognized arguments: --seed <64 hex>"): shown as <seed>.
    (refused,) = caught.reasons("held-out-unavailable")
    assert "--seed <seed>" in refused["message"] and not re.search(
        r"[0-9a-f]{64}", json.dumps(caught.suite(INVENTORY)["reasons"])
    ), refused
    # The other suite is drawn, and closed for the candidate alone: the refusal adds nothing to it.
    failed = caught.reasons("property-failed")
    # (and over that world, a held-out property it breaks too: drawn outside the manifest, `all` of them here)
    assert [(r["code"], r["path"]) for r in caught.suite(ORDERS)["reasons"]] == [
        ("property-failed", f"{ORDERS}#tax_is_half_even_rounded"),
        ("property-failed", f"{ORDERS}#full_discount_zeroes_total"),
    ]
    assert [r["message"].split(" record at line ")[0] for r in failed] == [
        "held-out world: the orders",
        "held-out world: held-out property: the orders",
    ]
    (witness,) = [o for o in caught.observations() if o["property"] == "tax_is_half_even_rounded"]
    saved = f"dist/gate/{caught.suite(ORDERS)['folder']}/observations/{witness['id']}.bin"
    assert (judge.root / saved).is_file() and f"(saved as {saved})" in failed[0]["message"]
    _the_key_is_not_in_the_sandboxes(caught)

    # A change that breaks only a catalog property outside the manifest (a capture over its authorization):
    # the held-out property closes it, over both worlds
    payments = (judge.root / "src/orders/orders/payments.py").read_text()
    over_capture = judge.candidate(
        "over-capture",
        files={
            "src/orders/orders/payments.py": payments.replace(
                "    if minor > payment.authorized.minor:\n", "    if False:\n"
            )
        },
    )
    captured = keyed(judge, f"--gate-candidate={over_capture}")
    assert captured.verdict == "closed", captured.stdout
    assert [(r["code"], r["path"], r["message"].split(": the ")[0]) for r in captured.suite(ORDERS)["reasons"]] == [
        ("property-failed", f"{ORDERS}#capture_le_authorized", "held-out property"),
        ("property-failed", f"{ORDERS}#capture_le_authorized", "held-out world: held-out property"),
    ], captured.stdout
    assert "(held-out property)" in captured.stdout
    _kept_as_a_regression_record(judge, captured, over_capture)

    # (Without the key, and with `--gate-held-out-required`: gate_test, in one engine.)

    # The fixture opts out: judged over its pinned world only, and the report says so.
    judge.edit(
        "fixtures/inventory/BUILD",
        'generator="generate_inventory.py",',
        'generator="generate_inventory.py",\n    held_out=False,',
    )
    judge.land("the inventory fixture opts out of held-out draws")
    honest = judge.candidate(
        "honest", files={"README.md": (judge.root / "README.md").read_text() + "\nA line of docs.\n"}
    )
    first = keyed(judge, f"--gate-candidate={honest}")
    assert first.verdict == "eligible", first.stdout
    assert first.suite(INVENTORY)["held_out"] == {
        "drawn": False,
        "why": "opted out (`held_out=False` on fixtures/inventory:inventory_epoch)",
    }
    held = _drawn(first, ORDERS)
    assert held["world_sha256"] != first.suite(ORDERS)["identities"]["world_sha256"]
    assert held["seed_sha256"] != _drawn(caught, ORDERS)["seed_sha256"]  # another candidate, another world
    assert held["records"] == {"money": 500, "orders": 300, "payments": 300, "retries": 200}
    drawn = first.suite(ORDERS)["held_out_properties"]
    assert drawn["drawn"] is True and drawn["count"] == "all" and len(drawn["properties"]) == 11, drawn
    assert {p["outcome"] for p in held["properties"]} == {"pass"} and len(held["properties"]) == 19
    assert [p["name"] for p in first.suite(ORDERS)["properties"] if p["held_out"]] == drawn["properties"]
    assert "held-out world" in first.stdout
    statement = json.loads((judge.root / "dist/gate/statement.intoto.json").read_text())
    annotations = statement["predicate"]["policy"]["annotations"]
    assert annotations[f"{ORDERS}.held_out_seed_sha256"] == held["seed_sha256"]
    assert annotations[f"{INVENTORY}.held_out"].startswith("not drawn: opted out")
    # The same candidate again: the same seed, the same world, and nothing replayed.
    again = keyed(judge, f"--gate-candidate={honest}")
    assert _drawn(again, ORDERS) == {**held, "cached": True} and again.suite(ORDERS)["cached"] is True
    assert again.suite(ORDERS)["held_out_properties"] == drawn

    # Passed to a daemon's run, the key is refused (gate_test says how) and, with the rest below, never kept
    under = judge.gate(f"--gate-candidate={honest}", env=KEYED)
    assert under.verdict == "closed" and under.suite(ORDERS)["held_out"]["drawn"] is False, under.stdout

    # The key itself is nowhere: not in what Pants printed or wrote, nor in its caches, nor in what the
    # daemon that refused it logged.
    for run in (caught, first, again, under):
        assert KEY not in run.stdout + run.stderr + json.dumps(run.report)
    places = [
        judge.root / ".pants.d",
        judge.root / "dist",
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pants" / "lmdb_store",
    ]
    found = subprocess.run(
        ["grep", "-rlaF", KEY, *map(str, (p for p in places if p.exists()))], capture_output=True, text=True
    )
    assert found.returncode == 1 and not found.stdout, found.stdout


def _kept_as_a_regression_record(judge: Repo, captured: GateRun, over_capture: str) -> None:
    """The reviewer keeps the over-capture's failure as a regression record (`epoch-gate keep-witness`, from
    the report CI wrote) and lands it. Without the key the manifest alone passes the over-capture; the
    record, replayed under every catalog property over its bound, closes it, and the candidate cannot drop it."""
    failure = sorted(o["id"] for o in captured.observations() if o["property"] == "capture_le_authorized")[0]
    kept = subprocess.run(
        [sys.executable, "-B", "-m", "epoch_gate", "keep-witness", failure],
        cwd=judge.root,
        env={**os.environ, "PYTHONPATH": str(judge.root / "src/epoch_gate")},
        capture_output=True,
        text=True,
    )
    assert kept.returncode == 0 and kept.stdout.endswith("commit fixtures/REGRESSIONS\n"), kept.stdout + kept.stderr
    judge.land("keep the over-capture's failure as a regression record")
    replayed = judge.gate(f"--gate-candidate={over_capture}")
    assert replayed.verdict == "closed", replayed.stdout
    assert [(r["code"], r["path"], r["message"].split(": the ")[0]) for r in replayed.suite(ORDERS)["reasons"]] == [
        ("property-failed", f"{ORDERS}#capture_le_authorized", "regression record")
    ], replayed.stdout
    regressions = replayed.suite(ORDERS)["regressions"]
    assert regressions["records"] == {"payments": 1} and regressions["file"] == "fixtures/REGRESSIONS"
    catalog = (judge.root / "checks/catalog.yaml").read_text()
    assert [p["bound"] for p in regressions["properties"]] == ["payments"] * catalog.count("bound: payments\n")
    assert "kept      fail  capture_le_authorized (first failed at record 1 of 1 payments records; 1 failed)" in (
        replayed.stdout
    )
    dropped = judge.candidate("drop-the-record", files={"fixtures/REGRESSIONS": '{"records":[],"schema":1}\n'})
    unkept = judge.gate(f"--gate-candidate={dropped}")
    assert [(r["code"], r["path"]) for r in unkept.report["reasons"]] == [
        ("protected-path-changed", "fixtures/REGRESSIONS")
    ], unkept.stdout


def _the_key_is_not_in_the_sandboxes(run: GateRun) -> None:
    """Not in the argv, environment (each kept sandbox's __run.sh) or files of any process the keyed run
    started, where the held-out seed is (which shows that the look sees a process's arguments)."""
    kept = [Path(p) for p in re.findall(r"Preserving local process execution dir `?([^`\s]+)", run.stderr)]
    try:
        scripts = "".join((p / "__run.sh").read_text() for p in kept if (p / "__run.sh").is_file())
        assert kept and re.search(r"--seed'? '?[0-9a-f]{64}\b", scripts), run.stderr[-3000:]
        leaked = subprocess.run(["grep", "-rlaF", KEY, *map(str, kept)], capture_output=True, text=True)
        assert leaked.returncode == 1 and not leaked.stdout, leaked.stdout
    finally:
        for path in kept:
            shutil.rmtree(path, ignore_errors=True)
