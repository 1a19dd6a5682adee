"""Rule tests: each rule of the backend in a RuleRunner, over small in-memory repositories."""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path

import pytest
from pants.backend.python import register as python_backend
from pants.build_graph.address import Address
from pants.core import register as core_backend
from pants.core.goals.test import TestResult
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.hashing import canonical_json, sha256_bytes
from epoch_gate.reasons import Code
from epoch_gate_pants import register
from epoch_gate_pants.fixture import EpochCheck, EpochCheckRequest, FixtureWorld, FixtureWorldRequest
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.replay import (
    ReplayRequest,
    ReplayRun,
    SampledPropertiesFieldSet,
    SampledPropertiesTestRequest,
)
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest

PEX_SHA = "2917b29129a5865346d87f2b2c7a50670e7abc416429c6b1c8e6c8f45f82871d"
PEX_SIZE = 3563513

GENERATOR = """
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--input", action="append")
args = parser.parse_args()
base = json.load(open(args.input[0]))
os.makedirs(args.out)
with open(os.path.join(args.out, "payments.jsonl"), "w") as out:
    for i in range(base["count"]):
        out.write(json.dumps({"id": i, "captured": 100, "refunded": i % 7 * 10}, sort_keys=True) + "\\n")
"""

PREDICATES = """
from payments_lib import refundable

def refund_le_captured(record: dict) -> bool:
    return refundable(record["captured"], record["refunded"])
"""

CATALOG = """properties:
  - name: refund_le_captured
    bound: payments
    predicate: checks.props:refund_le_captured
    description: A refund never exceeds the captured amount.
"""


def local_pex() -> str:
    """The pex tool the launcher built (GitHub, Pants' default source, is unreachable here)."""
    roots = [os.environ.get("EPOCH_GATE_CACHE", ""), os.path.expanduser("~/.cache/epoch_gate/bootstrap")]
    for root in roots:
        for candidate in sorted(glob.glob(os.path.join(root, "*", "pex-v2.1.137"))):
            if hashlib.sha256(Path(candidate).read_bytes()).hexdigest() == PEX_SHA:
                return candidate
    pytest.skip("no bootstrapped pex tool (run ./pants once)")


@pytest.fixture
def rule_runner(tmp_path: Path) -> RuleRunner:
    runner = RuleRunner(
        rules=[
            *register.rules(), *python_backend.rules(), *core_backend.rules(),
            QueryRule(EpochCheck, [EpochCheckRequest]), QueryRule(FixtureWorld, [FixtureWorldRequest]),
            QueryRule(ManifestFiles, [ManifestFilesRequest]), QueryRule(ProtectedPaths, []),
            QueryRule(ReplayRun, [ReplayRequest]), QueryRule(TestResult, [SampledPropertiesTestRequest.Batch]),
        ],
        target_types=[*register.target_types(), *python_backend.target_types(), *core_backend.target_types()],
        bootstrap_args=[f"--local-store-dir={tmp_path / 'store'}", f"--named-caches-dir={tmp_path / 'named'}"],
    )
    runner.set_options(
        ["--pex-cli-version=v2.1.137", f"--pex-cli-url-template=file://{local_pex()}",
         f"--pex-cli-known-versions=['v2.1.137|linux_x86_64|{PEX_SHA}|{PEX_SIZE}']",
         "--python-interpreter-constraints=['CPython==3.9.*']", "--source-root-patterns=['/', '/src']",
         "--python-bootstrap-search-path=['<PYENV>', '<PATH>']"],
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )
    return runner


def write_repo(runner: RuleRunner, *, pinned_generator: str = GENERATOR, refund_ok: str = "refunded <= captured",
               seed: int = 3) -> None:
    from epoch_gate.catalog import parse_catalog
    from epoch_gate.manifest import sample

    base = b'{"count": 50}\n'
    pin = {"schema": 1, "epoch_id": "e1", "generator": "fixtures/gen.py",
           "generator_sha256": sha256_bytes(pinned_generator.encode()),
           "inputs": [{"path": "fixtures/base.json", "sha256": sha256_bytes(base)}]}
    manifest = sample(parse_catalog(CATALOG.encode(), "c"), seed, 1)
    runner.write_files({
        "fixtures/BUILD": 'epoch_fixture(name="epoch", generator="gen.py", inputs=["base.json"])',
        "fixtures/gen.py": GENERATOR,
        "fixtures/base.json": base.decode(),
        "fixtures/EPOCH": canonical_json(pin).decode(),
        "checks/BUILD": ('python_sources(name="preds", sources=["props.py"])\n'
                         'property_manifest(name="manifest", predicates=["props.py"])\n'
                         'sampled_properties(name="props", fixture="fixtures:epoch", manifest=":manifest", '
                         'dependencies=[":preds", "src:lib"])'),
        "checks/props.py": PREDICATES,
        "checks/catalog.yaml": CATALOG,
        "checks/manifest.json": manifest.to_bytes().decode(),
        "src/BUILD": 'python_sources(name="lib")',
        "src/payments_lib.py": f"def refundable(captured: int, refunded: int) -> bool:\n    return {refund_ok}\n",
    })


def test_epoch_check_agrees_and_runs_the_generator_hermetically(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    check = rule_runner.request(EpochCheck, [EpochCheckRequest(Address("fixtures", target_name="epoch"))])
    assert check.pin.reasons == ()
    assert check.pin.pin is not None and check.pin.pin.epoch_id == "e1"
    assert check.world.failure is None and check.world.world_sha256


def test_epoch_check_hashes_the_loaded_generator_bytes(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, pinned_generator=GENERATOR + "# the pinned version\n")
    check = rule_runner.request(EpochCheck, [EpochCheckRequest(Address("fixtures", target_name="epoch"))])
    assert [r.code for r in check.pin.reasons] == [Code.GENERATOR_MISMATCH]
    assert check.pin.reasons[0].found == sha256_bytes(GENERATOR.encode())


def test_world_is_the_same_digest_on_a_rerun(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    request = FixtureWorldRequest(Address("fixtures", target_name="epoch"))
    assert rule_runner.request(FixtureWorld, [request]) == rule_runner.request(FixtureWorld, [request])


def test_generator_failure_is_a_reason(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"fixtures/gen.py": "raise SystemExit('no world today')\n"})
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED


def test_manifest_check_catches_a_resealed_manifest(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"checks/manifest.json": rule_runner.read_file("checks/manifest.json")
                             .replace("A refund never exceeds", "A refund rarely exceeds")})
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert {r.code for r in files.check.reasons} == {Code.MANIFEST_DIGEST_MISMATCH,
                                                     Code.PROPERTY_DIFFERS_FROM_CATALOG}


def test_missing_manifest_is_a_reason_not_a_crash(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    os.unlink(os.path.join(rule_runner.build_root, "checks/manifest.json"))
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert [r.code for r in files.check.reasons] == [Code.ARTIFACT_MISSING]


def test_protected_set_comes_from_the_build_graph(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    protected = rule_runner.request(ProtectedPaths, [])
    assert {"fixtures/EPOCH", "fixtures/gen.py", "fixtures/base.json", "fixtures/BUILD", "checks/BUILD",
            "checks/manifest.json", "checks/catalog.yaml", "checks/props.py", "pants.toml"} <= set(protected.paths)
    assert "src/payments_lib.py" not in protected.paths  # the code under test is not the oracle
    assert {"observations/", "freezes/"} <= set(protected.globs)
    assert not set(protected.globs) & set(protected.paths)


def test_replay_passes_and_is_reported_by_pants_test(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(TestResult, [SampledPropertiesTestRequest.Batch(
        "", (SampledPropertiesFieldSet.create(target),), None)])
    assert result.exit_code == 0, result.stdout
    assert "pass  refund_le_captured (50 payments records)" in result.stdout


def test_a_product_bug_fails_the_replay_with_a_witness(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, refund_ok="refunded < 50")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code == 0  # evaluated: cached whatever it found
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(TestResult, [SampledPropertiesTestRequest.Batch(
        "", (SampledPropertiesFieldSet.create(target),), None)])
    assert result.exit_code == 1 and "fail  refund_le_captured" in result.stdout
