from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import pytest

import epoch_gate
from checks import orders_properties as props
from epoch_gate.local_product import holds, verdict
from orders import currency, money, payments, retries, totals

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "fixtures" / "generate_orders.py"
BASE = ROOT / "fixtures" / "orders" / "base.json"
CATALOG = ROOT / "checks" / "catalog.yaml"
BOUNDS = ("orders", "payments", "retries", "money")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
ENTRY = re.compile(r"^  - name: (?P<name>.+)\n    bound: (?P<bound>.+)\n    predicate: (?P<predicate>.+)\n"
                   r"    description: (?P<description>.+)\n", re.M)
Record = dict[str, Any]


def generate(out: Path) -> None:
    # A relative --input from the repo root, as the gate runs it; nothing host-specific may leak out.
    subprocess.run([sys.executable, str(GENERATOR.relative_to(ROOT)), "--input", str(BASE.relative_to(ROOT)),
                    "--out", str(out)], cwd=ROOT, check=True, capture_output=True)


def read_world(world: Path) -> dict[str, list[Record]]:
    return {b: [json.loads(line) for line in (world / f"{b}.jsonl").read_text("utf-8").splitlines()]
            for b in BOUNDS}


def catalog_entries() -> list[dict[str, str]]:
    """The catalog in its fixed shape, read without PyYAML (the test must run on the stdlib alone)."""
    text = CATALOG.read_text("utf-8")
    entries = [m.groupdict() for m in ENTRY.finditer(text)]
    assert text.startswith("properties:\n") and text.count("  - ") == len(entries), "catalog shape drifted"
    return entries


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate(out)
    return out


@pytest.fixture(scope="module")
def records(world: Path) -> dict[str, list[Record]]:
    return read_world(world)


def _first(records: dict[str, list[Record]], bound: str, accept: Callable[[Record], bool]) -> Record:
    return next(r for r in records[bound] if accept(r))


# --- the catalog ------------------------------------------------------------------------------------------


def test_catalog_entries_are_well_formed() -> None:
    entries = catalog_entries()
    assert len(entries) >= 12
    names = [e["name"] for e in entries]
    assert len(set(names)) == len(names)
    for entry in entries:
        assert NAME.match(entry["name"]) and entry["bound"] in BOUNDS
        assert entry["predicate"] == f"checks.orders_properties:{entry['name']}"
        description = entry["description"]
        assert description.endswith(".") and ". " not in description and ": " not in description
    public = {n for n, f in vars(props).items() if callable(f) and not n.startswith("_")
              and getattr(f, "__module__", "") == props.__name__}
    assert public == set(names), "every predicate is catalogued and every entry has a predicate"
    assert {e["bound"] for e in entries} == set(BOUNDS)


# --- every predicate holds on every generated record ------------------------------------------------------


@pytest.mark.parametrize("entry", catalog_entries(), ids=lambda e: e["name"])
def test_property_holds_on_every_record(entry: dict[str, str], records: dict[str, list[Record]]) -> None:
    predicate = getattr(props, entry["name"])
    failing = []
    for record in records[entry["bound"]]:
        found = verdict(predicate, record)  # served and answered as the replay's child does
        assert not found.error, f"{entry['name']} on {record['id']}: [{found.error}] {found.detail}"
        if not found.holds:
            failing.append((record["id"], found.detail))
    assert not failing, f"{entry['name']} fails on {failing[:5]}"


# --- the generator ----------------------------------------------------------------------------------------


def test_generator_is_deterministic_and_host_free(world: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "again"
    generate(other)
    names = sorted(p.name for p in world.iterdir())
    assert names == sorted(f"{b}.jsonl" for b in BOUNDS) == sorted(p.name for p in other.iterdir())
    for name in names:
        data = (world / name).read_bytes()
        assert data == (other / name).read_bytes(), f"{name} differs between runs"
        text = data.decode("utf-8")
        for host in (str(world), str(other), str(ROOT), str(Path.home()), "/tmp/", "\\"):
            assert host not in text, f"{name} mentions {host!r}"
        assert not re.search(r'"/', text), f"{name} holds an absolute path"


def test_records_are_canonical_lines_with_unique_ids(world: Path) -> None:
    expected = json.loads(BASE.read_text("utf-8"))["counts"]
    for bound in BOUNDS:
        data = (world / f"{bound}.jsonl").read_bytes()
        assert data.endswith(b"\n") and b"\r" not in data
        lines = data.decode("utf-8").split("\n")[:-1]
        assert len(lines) == expected[bound]
        ids = []
        for line in lines:
            record = json.loads(line)
            assert line == json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            assert "." not in re.sub(r'"(?:[^"\\]|\\.)*"', "", line), "no floats, ever"
            ids.append(record["id"])
        assert len(set(ids)) == len(ids)


def test_world_covers_the_edge_cases(records: dict[str, list[Record]]) -> None:
    cases = {b: {r["case"] for r in rs} for b, rs in records.items()}
    assert {"full_order_discount", "all_lines_free", "fixed_discount_exceeds_subtotal",
            "line_fixed_discount_exceeds_gross", "tax_half_even_tie", "huge_amounts"} <= cases["orders"]
    assert {"authorized_only", "capture_partial", "full_refund_single", "partial_refunds",
            "refunds_to_zero"} <= cases["payments"]
    assert {"single_attempt", "storm", "duplicate_request", "capped_early"} <= cases["retries"]
    assert {"half_even_tie", "zero_weights", "negative", "huge"} <= cases["money"]
    assert {r["currency"] for rs in records.values() for r in rs} >= {"JPY", "KWD", "USD"}
    assert all(line["quantity"] >= 1 for r in records["orders"] for line in r["lines"])
    ties = [r for r in records["money"] if r["case"] == "half_even_tie"]
    assert all((r["a_minor"] * Fraction(r["factor"]["num"], r["factor"]["den"])).denominator == 2 for r in ties)
    seen: dict[tuple[Any, ...], int] = {}
    for r in records["retries"]:
        request = (r["merchant_id"], r["order_id"], r["amount_minor"], r["currency"])
        seen[request] = seen.get(request, 0) + 1
    assert max(seen.values()) >= 2, "some request is retried under more than one record"


def test_generator_refuses_a_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"seed": 1}), "utf-8")
    run = subprocess.run([sys.executable, str(GENERATOR), "--input", str(bad), "--out", str(tmp_path / "w")],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "refused" in run.stderr and not (tmp_path / "w").exists()


# --- each predicate can fail: broken product functions, monkeypatched in --------------------------------


def _half_up(value: Fraction) -> int:
    return int((value + Fraction(1, 2)).__floor__())


def test_order_predicates_catch_an_uncapped_discount(monkeypatch: pytest.MonkeyPatch,
                                                     records: dict[str, list[Record]]) -> None:
    record = _first(records, "orders", lambda r: r["case"] == "fixed_discount_exceeds_subtotal")
    monkeypatch.setattr(totals, "_discount", lambda amount, bp, fixed: totals._percent_of(amount, bp) + fixed)
    assert holds(props.order_total_non_negative, record) is False
    assert holds(props.discount_never_exceeds_subtotal, record) is False
    assert holds(props.full_discount_zeroes_total, record) is False


def test_tax_predicate_catches_half_up_rounding(monkeypatch: pytest.MonkeyPatch,
                                                records: dict[str, list[Record]]) -> None:
    record = _first(records, "orders", lambda r: r["case"] == "tax_half_even_tie"
                    and (r["lines"][0]["unit_price_minor"] * r["tax_bp"] // 10_000) % 2 == 0)  # half-up differs
    assert holds(props.tax_is_half_even_rounded, record) is True
    monkeypatch.setattr(totals, "round_half_even", _half_up)
    assert holds(props.tax_is_half_even_rounded, record) is False


def test_line_and_scale_predicates_catch_wrong_lines(monkeypatch: pytest.MonkeyPatch,
                                                     records: dict[str, list[Record]]) -> None:
    record = _first(records, "orders", lambda r: len(r["lines"]) > 1 and r["currency"] == "KWD")
    real = totals.compute_totals

    def drop_last_line(order: totals.Order) -> totals.Totals:
        t = real(order)
        return totals.Totals(t.currency, t.lines[:-1], t.gross, t.subtotal, t.order_discount, t.taxable, t.tax,
                             t.total)

    monkeypatch.setattr(totals, "compute_totals", drop_last_line)
    assert holds(props.line_sum_matches_subtotal, record) is False
    monkeypatch.setattr(currency, "scale_of", lambda code: 2)
    assert holds(props.currency_scale_matches_catalog, record) is False


def test_payment_predicates_catch_missing_guards(monkeypatch: pytest.MonkeyPatch,
                                                 records: dict[str, list[Record]]) -> None:
    record = _first(records, "payments", lambda r: r["case"] == "capture_partial")

    def loose_refund(p: payments.Payment, amount: money.Money) -> payments.Payment:
        return payments.replace(p, refunds=p.refunds + (amount,))

    def loose_capture(p: payments.Payment, amount: money.Money) -> payments.Payment:
        return payments.replace(p, captured=amount)

    monkeypatch.setattr(payments, "refund", loose_refund)
    assert holds(props.refund_le_captured, record) is False
    assert holds(props.refunds_never_negative, record) is False
    assert holds(props.refund_before_capture_refused, record) is False
    monkeypatch.setattr(payments, "capture", loose_capture)
    assert holds(props.capture_le_authorized, record) is False


def test_status_predicate_catches_a_wrong_status(monkeypatch: pytest.MonkeyPatch,
                                                 records: dict[str, list[Record]]) -> None:
    record = _first(records, "payments", lambda r: r["case"] == "partial_refunds")
    monkeypatch.setattr(payments.Payment, "status", property(lambda self: payments.Status.REFUNDED))
    assert holds(props.payment_status_consistent, record) is False


def test_retry_predicates_catch_broken_idempotency(monkeypatch: pytest.MonkeyPatch,
                                                   records: dict[str, list[Record]]) -> None:
    record = _first(records, "retries", lambda r: r["attempts"] >= 2 and r["backoff"]["multiplier"] >= 2)
    real_key = retries.idempotency_key
    monkeypatch.setattr(retries, "idempotency_key", lambda m, o, a: real_key(m, o, money.Money(1, a.currency)))
    assert holds(props.idempotency_key_stable, record) is False
    monkeypatch.undo()

    def apply_every_time(self: retries.IdempotentProcessor, request: retries.ChargeRequest,
                         key: str | None = None) -> retries.ChargeResult:
        return self._apply(request, key or retries.request_key(request))

    monkeypatch.setattr(retries.IdempotentProcessor, "submit", apply_every_time)
    assert holds(props.retry_applies_once, record) is False
    monkeypatch.setattr(retries, "backoff_schedule",
                        lambda p, n: tuple(p.base_ms * p.multiplier ** i for i in range(n - 1)))
    assert holds(props.backoff_monotonic_and_capped, _first(records, "retries", lambda r: r["case"] == "capped_early"))\
        is False


def test_money_predicates_catch_broken_arithmetic(monkeypatch: pytest.MonkeyPatch,
                                                  records: dict[str, list[Record]]) -> None:
    tie = _first(records, "money", lambda r: r["case"] == "half_even_tie" and r["a_minor"] > 0
                 and (r["a_minor"] * r["factor"]["num"] // r["factor"]["den"]) % 2 == 0)
    monkeypatch.setattr(money, "round_half_even", _half_up)
    assert holds(props.money_rounding_half_even, tie) is False
    monkeypatch.undo()

    uneven = _first(records, "money", lambda r: any(r["a_minor"] * w % sum(r["weights"]) for w in r["weights"]))
    monkeypatch.setattr(money.Money, "allocate", lambda self, ws: [
        money.Money(self.minor * w // sum(ws), self.currency) for w in ws])
    assert holds(props.money_allocate_conserves_total, uneven) is False

    record = _first(records, "money", lambda r: r["b_minor"] != 0)
    monkeypatch.setattr(money.Money, "_same", lambda self, other: None)
    assert holds(props.money_refuses_mixed_currencies, record) is False
    monkeypatch.setattr(money.Money, "__add__", lambda self, other: money.Money(self.minor, self.currency))
    assert holds(props.money_add_commutative, record) is False
    assert holds(props.money_sub_inverts_add, record) is False


# --- the two reported product edits behave as reported ---------------------------------------------------

EDITS = {
    "refund_bug": ("payments.py", "    if already + minor > payment.captured.minor:",
                   "    if already + minor > payment.authorized.minor:"),
    "flaky_retry": ("retries.py", "        return cached", "        return cached[: len(KEY_PREFIX) + 32]"),
}
PROBE = """
import json, sys
from checks import orders_properties as props
from epoch_gate.local_product import holds
name, path = sys.argv[1], sys.argv[2]
predicate = getattr(props, name)
outcomes = []
for line in open(path, encoding="utf-8"):
    first = holds(predicate, json.loads(line))
    outcomes.append([first, first or holds(predicate, json.loads(line))])  # the replay judges a violation again
print(json.dumps(outcomes))
"""


def _edited_package(tmp_path: Path, edit: str) -> Path:
    """A copy of the product package with one reported edit applied; the real sources stay untouched."""
    module, old, new = EDITS[edit]
    copy = tmp_path / edit
    shutil.copytree(Path(payments.__file__).parent, copy / "orders",
                    ignore=shutil.ignore_patterns("__pycache__", "*_test.py"))
    source = copy / "orders" / module
    text = source.read_text("utf-8")
    assert text.count(old) == 1
    source.write_text(text.replace(old, new), "utf-8")
    return copy


def _probe(package: Path, name: str, world: Path, bound: str) -> list[list[bool]]:
    core = Path(epoch_gate.__file__).resolve().parents[1]
    env = {"PYTHONPATH": os.pathsep.join([str(package), str(ROOT), str(core)]), "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run([sys.executable, "-c", PROBE, name, str(world / f"{bound}.jsonl")], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def test_refund_edit_fails_refund_le_captured(tmp_path: Path, world: Path) -> None:
    package = _edited_package(tmp_path, "refund_bug")
    outcomes = _probe(package, "refund_le_captured", world, "payments")
    assert [False, False] in outcomes and all(o in ([True, True], [False, False]) for o in outcomes)


def test_flaky_edit_makes_retry_applies_once_flake(tmp_path: Path, world: Path) -> None:
    package = _edited_package(tmp_path, "flaky_retry")
    outcomes = _probe(package, "retry_applies_once", world, "retries")
    assert [False, True] in outcomes and [False, False] not in outcomes
