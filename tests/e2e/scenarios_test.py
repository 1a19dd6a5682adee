"""SPEC §4, row by row: the change an agent might make, committed on a branch of a temporary copy of
this repository, judged by the real `./pants --changed-since=<base> gate`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.repo import GateRun, Repo

REFUND_BUG = ("src/orders/orders/payments.py", "    if already + minor > payment.captured.minor:",
              "    if already + minor > payment.authorized.minor:")
# A rare flake: the process's first cache hit answers with a truncated key, so exactly one record fails
# once and passes its rerun (the replay scans on past it).
FLAKY_RETRY = ("src/orders/orders/retries.py", "        return cached\n",
               "        if not getattr(request_key, 'flaked', False):\n"
               "            request_key.flaked = True\n"
               "            return cached[: len(KEY_PREFIX) + 32]\n"
               "        return cached\n")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return Repo.from_example(Path.cwd(), tmp_path_factory.mktemp("example") / "repo")


@pytest.fixture
def repo(example: Repo, tmp_path: Path) -> Repo:
    return example.clone_to(tmp_path / "repo")


def judged(repo: Repo, base: str) -> GateRun:
    return repo.gate(f"--changed-since={base}")


def oracle_kinds(run: GateRun) -> set[tuple[str, str]]:
    return {(c["kind"], c["subject"]) for c in run.report["oracle_changes"]}


def assert_closed_with(run: GateRun, *codes: str) -> None:
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert set(codes) <= run.codes(), (codes, run.codes())


def test_unrelated_change_is_eligible(repo: Repo) -> None:
    base = repo.head()
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("docs")
    run = judged(repo, base)
    assert run.verdict == "eligible" and run.exit_code == 0, run.stdout
    assert run.all_reasons() == [] and run.report["oracle_changes"] == []
    assert "epoch     orders-" in run.stdout and "manifest  sha256 " in run.stdout and "verdict   eligible" in run.stdout


def test_edited_generator(repo: Repo) -> None:
    base = repo.head()
    repo.edit("fixtures/generate_orders.py", "import json\n", "import json  # tuned by the agent\n")
    repo.commit("tweak generator")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", "generator-mismatch")
    # What the reviewer reads: the generator moved under the same epoch id.
    assert oracle_kinds(run) == {("generator-changed", "fixtures/generate_orders.py"),
                                 ("new-epoch-id-required", "fixtures/EPOCH")}
    assert "What this change does to the oracle" in (repo.root / "dist/gate/report.md").read_text()


def test_regenerated_fixture_input(repo: Repo) -> None:
    base = repo.head()
    data = json.loads((repo.root / "fixtures/orders/base.json").read_text())
    data["seed"] = data["seed"] + 1 if isinstance(data.get("seed"), int) else 1
    repo.write("fixtures/orders/base.json", json.dumps(data, indent=2) + "\n")
    repo.commit("regenerate fixtures")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", "input-mismatch", "world-mismatch")


def test_loosened_predicate(repo: Repo) -> None:
    base = repo.head()
    repo.write("checks/orders_properties.py", (repo.root / "checks/orders_properties.py").read_text()
               + "\n\ndef always_true(record: dict) -> bool:\n    return True\n")
    repo.commit("loosen")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert [r["path"] for r in run.reasons("protected-path-changed")] == ["checks/orders_properties.py"]


def test_dropped_property_with_recomputed_digest(repo: Repo) -> None:
    from epoch_gate.hashing import canonical_json, canonical_sha256

    base = repo.head()
    manifest = json.loads((repo.root / "checks/manifest.json").read_text())
    manifest["properties"] = [p for p in manifest["properties"] if p["name"] != "refund_le_captured"]
    manifest["k"] = len(manifest["properties"])
    manifest["manifest_sha256"] = canonical_sha256({"seed": manifest["seed"], "properties": manifest["properties"]})
    repo.write("checks/manifest.json", canonical_json(manifest) + b"\n")
    repo.commit("drop a property")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", "manifest-not-draw")
    assert oracle_kinds(run) == {("k-lowered", "checks/manifest.json"), ("property-dropped", "refund_le_captured")}


def test_edited_catalog_entry(repo: Repo) -> None:
    base = repo.head()
    repo.edit("checks/catalog.yaml", "predicate: checks.orders_properties:refund_le_captured",
              "predicate: checks.orders_properties:refunds_never_negative")
    repo.commit("point a property elsewhere")
    assert_closed_with(judged(repo, base), "protected-path-changed", "property-differs-from-catalog")


def test_edited_build_file_declaring_a_protected_target(repo: Repo) -> None:
    base = repo.head()
    repo.edit("fixtures/BUILD", 'inputs=["orders/base.json"],', 'inputs=["orders/base.json"],  # same')
    repo.commit("touch BUILD")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert "fixtures/BUILD" in [r["path"] for r in run.reasons("protected-path-changed")]


def test_touched_gate_code(repo: Repo) -> None:
    base = repo.head()
    repo.edit("src/epoch_gate/epoch_gate/decision.py", '"""The verdict', '"""The (relaxed) verdict')
    repo.commit("touch the gate")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert "src/epoch_gate/epoch_gate/decision.py" in [r["path"] for r in run.reasons("protected-path-changed")]


def test_refund_bug_fails_a_sampled_property_and_writes_the_witness(repo: Repo, tmp_path: Path) -> None:
    base = repo.head()
    repo.edit(*REFUND_BUG)
    repo.commit("refund against the authorization")
    run = judged(repo, base)
    assert_closed_with(run, "property-failed")
    assert run.codes() == {"property-failed"}
    (reason,) = run.reasons("property-failed")
    witness = (repo.root / reason["path"]).read_bytes()
    (observation,) = [o for o in run.observations() if o["property"] == "refund_le_captured"]
    world = tmp_path / "world"
    import subprocess
    import sys

    subprocess.run([sys.executable, "fixtures/generate_orders.py", "--input", "fixtures/orders/base.json",
                    "--out", str(world)], cwd=repo.root, check=True)
    lines = (world / "payments.jsonl").read_bytes().splitlines()
    assert witness == lines[observation["line"] - 1]  # exactly the offending record
    assert observation["witness_sha256"] in run.stdout


def test_uncommitted_byte_in_the_generator(repo: Repo) -> None:
    base = repo.head()
    with open(repo.root / "fixtures/generate_orders.py", "ab") as handle:
        handle.write(b"\n")
    assert_closed_with(judged(repo, base), "protected-path-changed", "generator-mismatch")


def test_base_that_does_not_resolve(repo: Repo) -> None:
    missing = "0" * 40
    assert_closed_with(repo.gate(f"--gate-base={missing}"), "changed-set-unavailable")
    # Pants resolves --changed-since itself, before any goal runs: it fails the run (never eligible).
    done = repo.pants(f"--changed-since={missing}", "gate")
    assert done.returncode == 1 and "eligible" not in done.stdout


def test_base_inside_the_change_is_untrusted(repo: Repo) -> None:
    repo.edit("checks/catalog.yaml", "An order's total", "Roughly, an order's total")
    repo.commit("loosen the catalog first")
    base = repo.commit("then an innocent-looking commit")
    # Against its own earlier commit the change looks clean; the base is not reviewed history.
    run = judged(repo, base)
    assert_closed_with(run, "base-untrusted")
    (reason,) = run.reasons("base-untrusted")
    assert "origin/main" in reason["expected"] and reason["found"] == base
    assert "protected-path-changed" not in run.codes()
    # Judged against the trusted ref, the catalog edit is seen.
    assert_closed_with(judged(repo, "origin/main"), "protected-path-changed")


def test_missing_manifest_on_the_base(repo: Repo) -> None:
    (repo.root / "checks/manifest.json").unlink()
    base = repo.land("a base without a manifest")
    assert_closed_with(judged(repo, base), "artifact-missing")


# -- flakes and freezes -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def flaky_base(example: Repo, tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict]:
    """A base where the flaky retry landed: its observation archived, a reviewer's freeze beside it."""
    repo = example.clone_to(tmp_path_factory.mktemp("flaky") / "repo")
    repo.edit(*FLAKY_RETRY)
    repo.land("flaky retry lands")
    run = repo.gate()
    (flake,) = [o for o in run.observations() if o["status"] == "flake"]
    folder = run.suite(flake["suite"])["folder"]
    (repo.root / "observations").mkdir()
    for suffix in ("json", "bin"):
        shutil.copy(repo.root / f"dist/gate/{folder}/observations/{flake['id']}.{suffix}",
                    repo.root / f"observations/{flake['id']}.{suffix}")
    return repo, flake


def freeze(flake: dict, **overrides: str) -> str:
    body = {"observation_id": flake["id"], "suite": flake["suite"], "epoch_id": flake["epoch_id"], "expires_on": "2099-01-01",
            "reason": "upstream retry cache is shared across processors; ticket ORD-17"}
    body.update(overrides)
    return json.dumps(body, indent=2) + "\n"


def test_unfrozen_flake_is_closed(example: Repo, tmp_path: Path) -> None:
    repo = example.clone_to(tmp_path / "repo")
    base = repo.head()
    repo.edit(*FLAKY_RETRY)
    repo.commit("flaky retry")
    run = judged(repo, base)
    assert_closed_with(run, "flake-unfrozen")
    (flake,) = [o for o in run.observations() if o["status"] == "flake"]
    assert flake["rerun_passed"] is True


def test_flake_covered_by_a_freeze_on_the_base_is_hold(flaky_base: tuple[Repo, dict], tmp_path: Path) -> None:
    seeded, flake = flaky_base
    repo = seeded.clone_to(tmp_path / "repo")
    repo.write("freezes/retry-flake.json", freeze(flake))
    base = repo.land("reviewer freezes the flake")
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("unrelated")
    run = judged(repo, base)
    assert run.verdict == "hold" and run.exit_code == 2, run.stdout
    assert run.codes() == {"flake-frozen"}
    assert flake["witness_sha256"] in run.stdout


def test_expired_freeze_is_closed(flaky_base: tuple[Repo, dict], tmp_path: Path) -> None:
    seeded, flake = flaky_base
    repo = seeded.clone_to(tmp_path / "repo")
    repo.write("freezes/retry-flake.json", freeze(flake, expires_on="2026-01-01"))
    base = repo.land("a freeze that has since expired")
    assert_closed_with(judged(repo, base), "freeze-expired", "flake-unfrozen")


def test_freeze_naming_a_test_is_closed(flaky_base: tuple[Repo, dict], tmp_path: Path) -> None:
    seeded, flake = flaky_base
    repo = seeded.clone_to(tmp_path / "repo")
    repo.write("freezes/retry-flake.json", freeze(flake, observation_id="src/orders/orders/retries_test.py::test_retry"))
    base = repo.land("a freeze by test name")
    assert_closed_with(judged(repo, base), "freeze-cites-test", "flake-unfrozen")


def test_archived_observation_without_matching_bytes_is_closed(flaky_base: tuple[Repo, dict], tmp_path: Path) -> None:
    seeded, flake = flaky_base
    repo = seeded.clone_to(tmp_path / "repo")
    repo.write(f"observations/{flake['id']}.bin", b'{"id":"edited"}')
    repo.write("freezes/retry-flake.json", freeze(flake))
    base = repo.land("tampered archive")
    assert_closed_with(judged(repo, base), "observation-witness-mismatch")


def test_freeze_from_another_epoch_is_closed(flaky_base: tuple[Repo, dict], tmp_path: Path) -> None:
    seeded, flake = flaky_base
    repo = seeded.clone_to(tmp_path / "repo")
    repo.write("freezes/retry-flake.json", freeze(flake, epoch_id="orders-2026-11-z"))
    base = repo.land("a freeze for an older epoch")
    assert_closed_with(judged(repo, base), "freeze-wrong-epoch", "flake-unfrozen")


@pytest.mark.parametrize(
    "path, content",
    [
        ("fixtures/EPOCH", None),  # the agent re-pins the epoch
        ("freezes/quiet.json", '{"observation_id": "retry_applies_once-000000000000000000000000", '
                               '"epoch_id": "orders-2026-12-a", "expires_on": "2099-01-01", "reason": "quiet"}\n'),
        ("observations/note.json", "{}\n"),
        ("pants.toml", None),
    ],
)
def test_every_other_kind_of_protected_file(repo: Repo, path: str, content: str | None) -> None:
    base = repo.head()
    if content is None:
        repo.write(path, (repo.root / path).read_text() + "\n")
    else:
        repo.write(path, content)
    repo.commit(f"touch {path}")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert path in [r["path"] for r in run.reasons("protected-path-changed")]


def test_hostile_names_and_a_committed_dist_file_end_in_a_report(repo: Repo) -> None:
    base = repo.head()
    repo.write("dist", "a regular file: the `/dist/` ignore pattern matches only a folder\n")
    (repo.root / "freezes").mkdir(exist_ok=True)
    with open(bytes(repo.root / "freezes") + b"/\xff.json", "wb") as handle:  # a name that is not UTF-8
        handle.write(b"{}\n")
    repo.write("freezes/a\n::stop-commands::x.json", "{}\n")
    repo.commit("hostile names")
    done = repo.pants(f"--changed-since={base}", "gate", "--gate-annotations=github")
    fallback = repo.root / ".pants.d" / "epoch_gate" / "gate"
    assert ".pants.d/epoch_gate/gate/report.json" in done.stderr, done.stderr[-3000:]
    report = json.loads((fallback / "report.json").read_bytes())
    assert report["verdict"] == "closed" and done.returncode == 1
    paths = {(r["code"], r["path"]) for r in report["reasons"]}
    assert {("output-folder-unsafe", "dist"), ("protected-path-changed", "freezes/\\xff.json"),
            ("protected-path-changed", "freezes/a\n::stop-commands::x.json")} <= paths, paths
    assert not [line for line in done.stdout.splitlines()
                if line.startswith("::") and not line.startswith(("::error ", "::warning "))], done.stdout
    assert (repo.root / "dist").is_file()
