from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from epoch_gate.evidence import held_out
from epoch_gate.evidence.held_out import HeldOut, Key, load_key
from epoch_gate.reasons import Code

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
