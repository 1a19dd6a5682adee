"""Rule tests of `suite.py`: a suite's manifest files and their check."""

from __future__ import annotations

import os

from pants.build_graph.address import Address
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.reasons import Code
from epoch_gate_pants import suite
from epoch_gate_pants.rule_harness import write_repo
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest

MODULES = (suite,)
QUERIES = (QueryRule(ManifestFiles, [ManifestFilesRequest]),)


def test_manifest_check_catches_a_resealed_manifest(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "checks/manifest.json": rule_runner.read_file("checks/manifest.json").replace(
                "A refund never exceeds", "A refund rarely exceeds"
            )
        }
    )
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert {r.code for r in files.check.reasons} == {Code.MANIFEST_DIGEST_MISMATCH, Code.PROPERTY_DIFFERS_FROM_CATALOG}


def test_missing_manifest_is_a_reason_not_a_crash(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    os.unlink(os.path.join(rule_runner.build_root, "checks/manifest.json"))
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert [r.code for r in files.check.reasons] == [Code.ARTIFACT_MISSING]
