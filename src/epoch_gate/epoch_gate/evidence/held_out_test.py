from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from epoch_gate.evidence import held_out
from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.held_out import HeldOut, Key, load_key
from epoch_gate.evidence.manifest import load_properties, properties_bytes, sample
from epoch_gate.reasons import Code, EvidenceError

KEY = b"k" * 32
TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def test_the_seed_is_an_hmac_of_the_key_over_the_tree_the_suite_and_the_epoch() -> None:
    tree_key = held_out.draw_key(KEY, TREE)
    assert tree_key == hmac.new(KEY, b"epoch-gate-held-out-v1\0tree\0" + TREE.encode(), hashlib.sha256).hexdigest()
    seed = held_out.seed(tree_key, "checks:orders", "orders-1")
    assert (
        seed
        == hmac.new(
            bytes.fromhex(tree_key), b"epoch-gate-held-out-v1\0seed\0checks:orders\0orders-1", hashlib.sha256
        ).hexdigest()
    )
    # The same candidate draws the same world; another tree, suite, epoch or key another one.
    assert held_out.seed(held_out.draw_key(KEY, TREE), "checks:orders", "orders-1") == seed
    others = {
        held_out.seed(held_out.draw_key(KEY, "0" * 40), "checks:orders", "orders-1"),
        held_out.seed(tree_key, "checks:payments", "orders-1"),
        held_out.seed(tree_key, "checks:orders", "orders-2"),
        held_out.seed(held_out.draw_key(b"j" * 32, TREE), "checks:orders", "orders-1"),
    }
    assert seed not in others and len(others) == 4
    assert held_out.seed_sha256(seed) == hashlib.sha256(seed.encode()).hexdigest() != seed


def test_the_key_comes_from_the_variable_or_the_file_and_a_short_one_is_refused(tmp_path: Path) -> None:
    assert load_key(Key("EG_KEY"), {}) == (None, None)
    assert load_key(Key("EG_KEY"), {"EG_KEY": "  "}) == (None, None)
    assert load_key(Key("EG_KEY"), {"EG_KEY": f" {'a' * 32}\n"}) == (b"a" * 32, None)
    key, why = load_key(Key("EG_KEY"), {"EG_KEY": "short"})
    assert key is None and why is not None
    assert (why.code, why.path, why.expected, why.found) == (
        Code.HELD_OUT_UNAVAILABLE,
        "$EG_KEY",
        "at least 16 bytes",
        "5 bytes",
    )
    (tmp_path / "key").write_bytes(b"b" * 32 + b"\n")
    assert load_key(Key("EG_KEY", str(tmp_path / "key")), {"EG_KEY": "a" * 32}) == (b"b" * 32, None)
    key, why = load_key(Key("EG_KEY", str(tmp_path / "absent")), {})
    assert key is None and why is not None
    assert (why.code, why.found) == (Code.HELD_OUT_UNAVAILABLE, "FileNotFoundError")


def test_what_the_report_says_of_a_draw_names_the_seed_by_its_digest_only() -> None:
    drawn = HeldOut(True, seed_sha256="5" * 64, world_sha256="7" * 64, records=(("orders", 10),))
    assert drawn.to_json() == {
        "drawn": True,
        "seed_sha256": "5" * 64,
        "world_sha256": "7" * 64,
        "records": {"orders": 10},
        "cached": None,
    }
    assert drawn.line() == "held-out world 777777777777 from seed 555555555555 (10 orders)"
    assert HeldOut(False, held_out.no_key("K")).to_json() == {
        "drawn": False,
        "why": "no key ($K is unset): the pinned world only",
    }


CATALOG = Catalog(tuple(Property(f"p{i:02}", "orders", f"checks:p{i:02}", "Holds.") for i in range(19)))
MANIFEST = sample(CATALOG, 7, 8)


def test_held_out_properties_are_drawn_outside_the_manifest_by_their_own_seed() -> None:
    tree_key = held_out.draw_key(b"k" * 32, "t" * 40)
    seed = held_out.property_seed(tree_key, "checks:props", "e1")
    assert seed != held_out.seed(tree_key, "checks:props", "e1")  # another label: neither tells the other
    assert held_out.property_seed(held_out.draw_key(b"k" * 32, "u" * 40), "checks:props", "e1") != seed
    drawn = held_out.draw_properties(CATALOG, MANIFEST, seed, 4)
    sampled = {p.name for p in MANIFEST.properties}
    assert len(drawn) == 4 and not sampled & {p.name for p in drawn}
    assert [p.name for p in drawn] == sorted(p.name for p in drawn)
    assert held_out.draw_properties(CATALOG, MANIFEST, seed, 4) == drawn  # reproducible from the key
    everything = held_out.draw_properties(CATALOG, MANIFEST, seed, held_out.ALL)
    assert {p.name for p in everything} == {p.name for p in CATALOG.properties} - sampled
    assert set(drawn) < set(everything) and held_out.draw_properties(CATALOG, MANIFEST, seed, 0) == ()
    # Another seed, another draw (of the 11 outside the manifest, 330 draws of 4)
    others = {
        held_out.draw_properties(CATALOG, MANIFEST, held_out.property_seed(tree_key, s, "e1"), 4) for s in "abcdefgh"
    }
    assert len(others) > 1


def test_the_drawn_properties_cross_to_the_runner_as_they_were_drawn(tmp_path: Path) -> None:
    drawn = CATALOG.properties[:3]
    (tmp_path / "p.json").write_bytes(properties_bytes(drawn))
    assert load_properties(tmp_path / "p.json", "p.json") == drawn
    (tmp_path / "bad.json").write_bytes(b'{"held_out_properties": [{"name": 1}]}')
    with pytest.raises(EvidenceError):
        load_properties(tmp_path / "bad.json", "bad.json")
