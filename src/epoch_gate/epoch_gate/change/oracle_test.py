from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from typing import Optional

import pytest

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.manifest import sample
from epoch_gate.change.oracle import MAX_AST_DEPTH, OracleChange, OraclePaths, oracle_changes
from epoch_gate.evidence.pin import Pin, PinnedFile

PATHS = OraclePaths(
    "fixtures/EPOCH", "checks/manifest.json", "checks/catalog.yaml", ("checks/mod.py",), "freezes", "observations"
)
CATALOG = "properties:\n" + "".join(
    f"  - name: p{i}\n    bound: b\n    predicate: checks.mod:p{i}\n    description: Property {i}.\n" for i in range(6)
)
PREDICATES = "LIMIT = 10\n\n" + "".join(f"def p{i}(record):\n    return record['x'] < LIMIT\n\n" for i in range(6))
GENERATOR = b"print('world')\n"
INPUT = b'{"seed": 1}\n'


def base_files() -> dict[str, bytes]:
    catalog = parse_catalog(CATALOG.encode(), PATHS.catalog)
    pin = Pin(
        "e-1",
        PinnedFile("fixtures/gen.py", sha256_bytes(GENERATOR)),
        (PinnedFile("fixtures/base.json", sha256_bytes(INPUT)),),
        None,
    )
    return {
        PATHS.pin: pin.to_bytes(),
        PATHS.manifest: sample(catalog, 7, 4).to_bytes(),
        PATHS.catalog: CATALOG.encode(),
        "checks/mod.py": PREDICATES.encode(),
        "fixtures/gen.py": GENERATOR,
        "fixtures/base.json": INPUT,
    }


def diff(new: dict[str, Optional[bytes]], changed: tuple[ChangedPath, ...] = ()) -> list[OracleChange]:
    old = base_files()
    after = {**old, **new}
    return list(oracle_changes(PATHS, changed, old.get, after.get))


def kinds(changes: list[OracleChange]) -> list[tuple[str, str]]:
    return [(c.kind, c.subject) for c in changes]


def sampled() -> list[str]:
    catalog = parse_catalog(CATALOG.encode(), PATHS.catalog)
    return [p.name for p in sample(catalog, 7, 4).properties]


def test_identical_oracle_has_no_changes() -> None:
    assert diff({}) == []


def test_lowered_k_and_a_new_seed_show_the_dropped_properties() -> None:
    catalog = parse_catalog(CATALOG.encode(), PATHS.catalog)
    smaller = sample(catalog, 8, 2)
    changes = diff({PATHS.manifest: smaller.to_bytes()})
    found = kinds(changes)
    assert ("k-lowered", PATHS.manifest) in found and ("seed-changed", PATHS.manifest) in found
    (lowered,) = [c for c in changes if c.kind == "k-lowered"]
    assert (lowered.before, lowered.after) == ("4", "2")
    dropped = {s for k, s in found if k == "property-dropped"}
    added = {s for k, s in found if k == "property-added"}
    assert dropped == set(sampled()) - {p.name for p in smaller.properties}
    assert added == {p.name for p in smaller.properties} - set(sampled())


def test_a_loosened_sampled_predicate_is_named_and_formatting_is_not_a_change() -> None:
    target = sampled()[0]
    loosened = PREDICATES.replace(
        f"def {target}(record):\n    return record['x'] < LIMIT", f"def {target}(record):\n    return True"
    )
    assert kinds(diff({"checks/mod.py": loosened.encode()})) == [("predicate-changed", target)]
    reformatted = PREDICATES.replace("LIMIT = 10\n", "LIMIT = 10  # the cap\n\n")
    assert diff({"checks/mod.py": reformatted.encode()}) == []


def test_a_changed_helper_or_constant_flags_the_whole_module() -> None:
    assert kinds(diff({"checks/mod.py": PREDICATES.replace("LIMIT = 10", "LIMIT = 10**9").encode()})) == [
        ("predicate-module-changed", "checks/mod.py")
    ]


def test_catalog_loosened_by_removal_and_by_repointing() -> None:
    unsampled = sorted({f"p{i}" for i in range(6)} - set(sampled()))
    removed = CATALOG.replace(
        f"  - name: {unsampled[0]}\n    bound: b\n    predicate: checks.mod:{unsampled[0]}\n"
        f"    description: Property {unsampled[0][1:]}.\n",
        "",
    )
    repointed = removed.replace(f"predicate: checks.mod:{unsampled[1]}\n", "predicate: checks.mod:p_true\n")
    assert kinds(diff({PATHS.catalog: repointed.encode()})) == [
        ("catalog-entry-removed", unsampled[0]),
        ("catalog-entry-changed", unsampled[1]),
    ]


def test_generator_edit_under_the_same_epoch_id_requires_a_new_id() -> None:
    found = kinds(diff({"fixtures/gen.py": GENERATOR + b"# tuned\n"}))
    assert found == [("generator-changed", "fixtures/gen.py"), ("new-epoch-id-required", PATHS.pin)]


def test_every_field_of_the_pin_that_changed_is_an_oracle_change() -> None:
    """A hand edit of the world's digest alone is named, and asks for a new epoch id like any other."""
    pin = Pin(
        "e-1",
        PinnedFile("fixtures/gen.py", sha256_bytes(GENERATOR)),
        (PinnedFile("fixtures/base.json", sha256_bytes(INPUT)),),
        "d" * 64,
    )
    changes = diff({PATHS.pin: pin.to_bytes()})
    assert kinds(changes) == [("world-changed", PATHS.pin), ("new-epoch-id-required", PATHS.pin)]
    assert (changes[0].before, changes[0].after) == ("unrecorded", "d" * 64)


def test_re_pinned_inputs_under_a_new_epoch_id() -> None:
    old = base_files()
    pin = Pin(
        "e-2",
        PinnedFile("fixtures/gen.py", sha256_bytes(GENERATOR)),
        (PinnedFile("fixtures/base.json", sha256_bytes(b"{}")), PinnedFile("fixtures/extra.json", "c" * 64)),
        None,
    )
    found = kinds(diff({PATHS.pin: pin.to_bytes(), "fixtures/base.json": b"{}", "fixtures/extra.json": b"x"}))
    assert found == [
        ("input-changed", "fixtures/base.json"),
        ("input-added", "fixtures/extra.json"),
        ("epoch-id-changed", PATHS.pin),
    ]
    assert old[PATHS.pin] != pin.to_bytes()


def test_freezes_and_archive_edits_and_unreadable_files() -> None:
    changed = (
        ChangedPath("freezes/quiet.json", "added"),
        ChangedPath("observations/x.bin", "modified"),
        ChangedPath("src/app.py", "modified"),
    )
    found = kinds(diff({PATHS.manifest: b"{not json"}, changed))
    assert found == [
        ("unreadable", PATHS.manifest),
        ("freeze-added", "freezes/quiet.json"),
        ("observation-changed", "observations/x.bin"),
    ]


def test_a_removed_pin_is_reported() -> None:
    assert kinds(diff({PATHS.pin: None})) == [("pin-removed", PATHS.pin)]


def test_changes_are_plain_json() -> None:
    (change,) = diff({PATHS.pin: None})
    assert change.to_json() == dataclasses.asdict(change)


# The issue's predicate edit: a 12,000-term sum. ast.parse builds a 12,000-deep tree and ast.dump recursed
# through it; inside Pants (recursion limit 10,000, 2 MiB rule threads) that was SIGSEGV for the whole run.
DEEP_SUM = "\nX = 1" + "+1" * 12000 + "\n"


def unreadable(changes: list[OracleChange]) -> list[OracleChange]:
    return [c for c in changes if c.kind == "unreadable"]


# 3.9 builds these trees and the note gives the depth measured (12,003 levels for the sum); 3.11+ refuse to
# build a tree that deep (RecursionError) and the note says so. Both notes state the limit crossed.
OVER_DEEP = f"nests more than {MAX_AST_DEPTH} levels deep"


@pytest.mark.parametrize(
    "tail, found",
    [
        (DEEP_SUM, OVER_DEEP),
        ("\nX = a" + ".b" * 12000 + "\n", OVER_DEEP),  # an attribute chain
        ("\nX = f" + "()" * 12000 + "\n", OVER_DEEP),  # a call chain
        ("\nX = " + "lambda: " * 5000 + "1\n", "MemoryError"),  # past CPython's own parser stack
        ("\nX = 1" + "+1" * 250 + "\n", f"{OVER_DEEP}: 253 levels"),
    ],
    ids=["sum", "attributes", "calls", "lambdas", "just-past-the-limit"],
)
def test_an_over_deep_predicate_module_is_malformed_and_still_reads_as_changed(tail: str, found: str) -> None:
    changes = diff({"checks/mod.py": (PREDICATES + tail).encode()})
    (bad,) = unreadable(changes)
    assert (bad.kind, bad.subject, bad.before, bad.after) == (
        "unreadable",
        "checks/mod.py",
        "change",
        "artifact-malformed",
    )
    assert found in bad.note
    # Not comparable, so everything in it reads as changed: never as unchanged.
    assert ("predicate-module-changed", "checks/mod.py") in kinds(changes)
    assert {s for k, s in kinds(changes) if k == "predicate-changed"} == set(sampled())


def test_nesting_within_the_limit_is_compared_as_code() -> None:
    within = PREDICATES + "\nX = 1" + "+1" * 150 + "\n"
    assert kinds(diff({"checks/mod.py": within.encode()})) == [("predicate-module-changed", "checks/mod.py")]


def test_an_over_large_predicate_module_is_malformed() -> None:
    (bad,) = unreadable(diff({"checks/mod.py": PREDICATES.encode() + b"#" * (1024 * 1024)}))
    assert bad.after == "artifact-malformed" and "size cap" in bad.note


def test_a_syntax_error_still_reads_as_an_unparsable_change() -> None:
    found = kinds(diff({"checks/mod.py": PREDICATES.encode() + b"\ndef (:\n"}))
    assert ("predicate-module-changed", "checks/mod.py") in found and not any(k == "unreadable" for k, _ in found)


def test_issue_predicates_inside_pants_like_limits_are_malformed_not_a_crash() -> None:
    # Where Pants runs the gate's rule: recursion limit 10,000 on a 2 MiB thread. Before the parse moved
    # to a child interpreter, this process died with SIGSEGV in ast.dump.
    code = textwrap.dedent(
        """
        import sys, threading
        from epoch_gate.change.oracle_test import DEEP_SUM, PREDICATES, diff

        sys.setrecursionlimit(10000)
        threading.stack_size(2 * 1024 * 1024)

        def run():
            for change in diff({"checks/mod.py": (PREDICATES + DEEP_SUM).encode()}):
                print(change.kind, change.after)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "unreadable artifact-malformed" in done.stdout.splitlines()
