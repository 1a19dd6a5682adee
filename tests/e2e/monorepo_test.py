"""Two suites in one repository (the example's orders and inventory), judged by the real ./pants: each
on its own evidence, the protected set the repository's, and Pants' own change detection seeing a suite's
oracle through its dependency edges."""

from __future__ import annotations

import json
import shutil

from tests.e2e.repo import Repo

ORDERS = "checks:orders_properties"
INVENTORY = "checks/inventory:inventory_properties"
# Units appear at the destination: `transfer_conserves_stock`, sampled by inventory's manifest, fails.
TRANSFER_BUG = (
    "src/inventory/inventory/transfer.py",
    "destination.on_hand + quantity)",
    "destination.on_hand + quantity + 1)",
)
# A rare flake of orders' retry cache (as in scenarios_test).
FLAKY_RETRY = (
    "src/orders/orders/retries.py",
    "        return cached\n",
    "        if not getattr(request_key, 'flaked', False):\n"
    "            request_key.flaked = True\n"
    "            return cached[: len(KEY_PREFIX) + 32]\n"
    "        return cached\n",
)


def test_a_broken_property_closes_its_suite_only(repo: Repo) -> None:
    base = repo.head()
    assert repo.gate(f"--changed-since={base}").verdict == "eligible"  # both replays are in the cache now
    repo.edit(*TRANSFER_BUG)
    repo.commit("transfers make stock")
    run = repo.gate(f"--changed-since={base}")
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert run.report["reasons"] == [] and run.report["summary"] == {"suites": 2, "closed": 1, "hold": 0, "eligible": 1}
    assert run.suite(ORDERS)["verdict"] == "eligible" and run.suite(ORDERS)["reasons"] == []
    inventory = run.suite(INVENTORY)
    assert inventory["verdict"] == "closed"
    # Every suite is judged; the one the change does not reach comes from the cache (inventory's may too,
    # when an earlier run judged the same bug).
    assert run.suite(ORDERS)["cached"] is True, run.report
    assert {r["code"] for r in inventory["reasons"]} == {"property-failed"}
    assert f"{INVENTORY}#transfer_conserves_stock" in {r["path"] for r in inventory["reasons"]}
    (witness,) = inventory["identities"]["witnesses"]
    assert (
        repo.root / "dist/gate" / inventory["folder"] / "observations" / f"{witness['observation_id']}.bin"
    ).is_file()
    assert f"suite     {INVENTORY}" in run.stdout and f"suite     {ORDERS}" in run.stdout


def test_judging_one_suite_still_protects_the_other_suites_oracle(repo: Repo) -> None:
    base = repo.head()
    repo.edit("checks/inventory/catalog.yaml", "Every request for zero", "Most requests for zero")
    repo.commit("loosen an inventory catalog entry")
    run = repo.gate(f"--gate-base={base}", specs=("checks:",))
    assert [s["address"] for s in run.suites()] == [ORDERS]
    assert run.suite(ORDERS)["verdict"] == "eligible"
    assert run.verdict == "closed", run.stdout
    assert ("protected-path-changed", "checks/inventory/catalog.yaml") in {
        (r["code"], r["path"]) for r in run.report["reasons"]
    }
    assert ("catalog-entry-changed", "invalid_quantities_refused") in {
        (c["kind"], c["subject"]) for c in run.report["oracle_changes"]
    }


def test_a_freeze_of_one_suite_does_not_touch_the_other(repo: Repo) -> None:
    repo.edit(*FLAKY_RETRY)
    repo.land("flaky retry lands")
    first = repo.gate()
    # The cache flakes once per process: once in each of the replay's two children ([property-replay].children).
    flakes = [o for o in first.observations() if o["status"] == "flake"]
    assert len(flakes) == 2 and {flake["suite"] for flake in flakes} == {ORDERS}, first.stdout
    folder = repo.root / "dist/gate" / first.suite(ORDERS)["folder"]
    (repo.root / "observations").mkdir()
    for number, flake in enumerate(flakes):
        for suffix in ("json", "bin"):
            shutil.copy(folder / "observations" / f"{flake['id']}.{suffix}", repo.root / "observations")
        repo.write(
            f"freezes/retry-{number}.json",
            json.dumps(
                {
                    "observation_id": flake["id"],
                    "suite": ORDERS,
                    "epoch_id": flake["epoch_id"],
                    "expires_on": "2099-01-01",
                    "reason": "upstream retry cache is shared across processors; ticket ORD-17",
                }
            )
            + "\n",
        )
    base = repo.land("the reviewer freezes orders' flake")
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("unrelated")

    everything = repo.gate(f"--changed-since={base}")
    assert everything.verdict == "hold" and everything.exit_code == 2, everything.stdout
    assert {r["code"] for r in everything.suite(ORDERS)["reasons"]} == {"flake-frozen"}
    assert everything.suite(INVENTORY)["verdict"] == "eligible"
    inventory_only = repo.gate(f"--gate-base={base}", specs=("checks/inventory::",))
    assert inventory_only.verdict == "eligible", inventory_only.stdout  # orders' freeze is not judged here
    assert [s["address"] for s in inventory_only.suites()] == [INVENTORY]


def test_pants_change_detection_runs_a_suite_whose_pin_changed(repo: Repo) -> None:
    base = repo.head()
    minted = repo.pants("pin-epoch", "--epoch-id=inventory-2026-12-c", INVENTORY)
    assert minted.returncode == 0, minted.stderr[-3000:]
    repo.commit("a new inventory epoch")
    dependents = repo.pants(f"--changed-since={base}", "--changed-dependents=transitive", "list")
    assert INVENTORY in dependents.stdout.split() and ORDERS not in dependents.stdout.split(), dependents.stdout
    tested = repo.pants(f"--changed-since={base}", "--changed-dependents=transitive", "test")
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert f"✓ {INVENTORY} succeeded" in tested.stderr and ORDERS not in tested.stderr, tested.stderr[-3000:]
