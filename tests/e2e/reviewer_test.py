"""The reviewer's goals, through the real ./pants: `pin-epoch` and `sample-properties`."""

from __future__ import annotations

import json

import pytest

from tests.e2e.repo import Repo


@pytest.mark.parametrize(
    "folder, seed, k", [("checks", 20261220, 8), ("checks/inventory", 20261203, 4)]  # as the README says
)
def test_sample_properties_reproduces_the_committed_manifest(repo: Repo, folder: str, seed: int, k: int) -> None:
    manifest = repo.root / folder / "manifest.json"
    committed = manifest.read_bytes()
    manifest.unlink()
    done = repo.pants("sample-properties", f"--seed={seed}", f"--k={k}", f"{folder}:manifest")
    assert done.returncode == 0, done.stderr[-2000:]
    assert manifest.read_bytes() == committed  # same draw, byte for byte


def test_pin_epoch_refuses_to_reuse_an_id_for_a_new_generator(repo: Repo) -> None:
    pinned = (repo.root / "fixtures/EPOCH").read_bytes()
    repo.edit("fixtures/generate_orders.py", "import json\n", "import json  # changed\n")
    epoch_id = json.loads(pinned)["epoch_id"]
    refused = repo.pants("pin-epoch", f"--epoch-id={epoch_id}", "fixtures:orders_epoch")
    assert refused.returncode == 1 and "epoch-id-reused" in refused.stderr
    assert (repo.root / "fixtures/EPOCH").read_bytes() == pinned  # never rewritten

    minted = repo.pants("pin-epoch", "--epoch-id=orders-2026-12-b", "fixtures:orders_epoch")
    assert minted.returncode == 0, minted.stderr[-2000:]
    pin = json.loads((repo.root / "fixtures/EPOCH").read_text())
    assert pin["epoch_id"] == "orders-2026-12-b" and pin["world_sha256"] == json.loads(pinned)["world_sha256"]


def test_pin_epoch_refuses_a_generator_black_would_rewrite_and_names_the_command(repo: Repo) -> None:
    # Black stops excluding the fixtures, as in a repository that formats everything; the example's generator
    # is not in Black's style. (An option on the command line, not an edit of pants.toml, which would restart
    # the daemon: Black takes the last `--force-exclude` it is given.)
    everything = '--black-args=+["--force-exclude=(^|/)(src/orders|src/inventory|checks)/"]'
    pinned = (repo.root / "fixtures/EPOCH").read_bytes()
    refused = repo.pants(everything, "pin-epoch", "--epoch-id=orders-2026-12-f", "fixtures:orders_epoch")
    assert refused.returncode == 1, refused.stderr[-2000:]
    lines = refused.stderr.splitlines()
    assert lines[next(i for i, line in enumerate(lines) if line.startswith("pin-epoch")) :] == [
        "pin-epoch: refused: the repository's formatters would rewrite files that the pin records by sha256 or "
        "the gate protects: black (fixtures/generate_orders.py).",
        "  A formatter run after this goal would move the epoch or edit the oracle.",
        "  Run `pants fmt fixtures/generate_orders.py`, review the change, and run pin-epoch again.",
    ]
    assert (repo.root / "fixtures/EPOCH").read_bytes() == pinned

    formatted = repo.pants(everything, "fmt", "fixtures/generate_orders.py")
    assert formatted.returncode == 0, formatted.stderr[-2000:]
    minted = repo.pants(everything, "pin-epoch", "--epoch-id=orders-2026-12-f", "fixtures:orders_epoch")
    assert minted.returncode == 0, minted.stderr[-2000:]
    linted = repo.pants(everything, "lint", "--only=black", "fixtures/generate_orders.py")  # Black's lint agrees
    assert linted.returncode == 0, linted.stderr[-2000:]
