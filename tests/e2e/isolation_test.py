"""Isolation through the real ./pants: a generator that reads the working tree is caught by the jail."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.e2e.repo import Repo


def test_a_generator_that_reads_the_working_tree_fails_in_the_jail(tmp_path: Path) -> None:
    """A generator that looks at the code under test by absolute path could tailor the world to it.
    Pinned by someone who ran it unjailed, it passes a plain sandbox; in the jail it cannot see the file."""
    repo = Repo.from_example(Path.cwd(), tmp_path / "repo")
    base = repo.head()
    target = repo.root / "src" / "orders" / "orders" / "payments.py"
    repo.edit("fixtures/generate_orders.py", "ALGORITHM = ",
              f"PEEK = Path({str(target)!r}).read_bytes()  # the code under test\nALGORITHM = ")
    pinned = repo.pants("--gate-isolation=off", "pin-epoch", f"--epoch-id=peek-{uuid.uuid4().hex[:12]}",
                        "fixtures:orders_epoch")
    assert pinned.returncode == 0, pinned.stderr[-2000:]
    repo.commit("a generator that reads the product code")

    jailed = repo.gate(f"--changed-since={base}")
    assert jailed.verdict == "closed" and jailed.exit_code == 1
    assert jailed.report["identities"]["isolation"].startswith("bubblewrap 0.8.0: no working tree, no network")
    (failed,) = jailed.reasons("generator-failed")
    assert failed["path"] == "fixtures/generate_orders.py" and "No such file or directory" in failed["message"]
    assert "isolation bubblewrap 0.8.0" in jailed.stdout

    # Unjailed, the same generator reads the file and its world matches the pin: only the jail caught it.
    plain = repo.gate(f"--changed-since={base}", "--gate-isolation=off")
    assert plain.report["identities"]["isolation"] == "none ([gate].isolation = off)"
    assert "generator-failed" not in plain.codes() and "world-mismatch" not in plain.codes()
    assert plain.codes() == {"protected-path-changed"}  # a generator edit is an oracle change either way
