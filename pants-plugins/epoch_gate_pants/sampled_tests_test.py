"""Rule tests of `sampled_tests.py`: a suite's replay as a `pants test` result."""

from __future__ import annotations

from pants.build_graph.address import Address
from pants.core.goals.test import TestResult
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants import candidate, fixture, isolation, replay, runner, sampled_tests, suite
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.gate_harness import FLAKY_PRODUCT
from epoch_gate_pants.rule_harness import write_repo
from epoch_gate_pants.sampled_tests import SampledPropertiesFieldSet, SampledPropertiesTestRequest

MODULES = (candidate, fixture, isolation, replay, runner, suite, sampled_tests)
QUERIES = (QueryRule(ReplayRun, [ReplayRequest]), QueryRule(TestResult, [SampledPropertiesTestRequest.Batch]))


def test_replay_passes_and_is_reported_by_pants_test(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(
        TestResult, [SampledPropertiesTestRequest.Batch("", (SampledPropertiesFieldSet.create(target),), None)]
    )
    assert result.exit_code == 0, result.stdout
    assert "pass  refund_le_captured (all 50 payments records)" in result.stdout


def test_a_product_bug_fails_the_replay_with_a_witness(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, refund_ok="refunded < 50")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code == 0  # evaluated: cached whatever it found
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(
        TestResult, [SampledPropertiesTestRequest.Batch("", (SampledPropertiesFieldSet.create(target),), None)]
    )
    assert result.exit_code == 1 and "fail  refund_le_captured" in result.stdout
    assert (
        "\nclosed    [property-failed] checks:props#refund_le_captured: the payments record at line " in result.stdout
    ), result.stdout


def test_a_flake_fails_the_test_as_it_holds_the_gate(rule_runner: RuleRunner) -> None:
    """`pants test` passes only when the suite would be eligible: an unfrozen flake fails it, by its property."""
    write_repo(rule_runner)
    rule_runner.write_files({"src/payments_lib.py": FLAKY_PRODUCT})
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(
        TestResult, [SampledPropertiesTestRequest.Batch("", (SampledPropertiesFieldSet.create(target),), None)]
    )
    assert result.exit_code == 1 and "flake refund_le_captured" in result.stdout, result.stdout
    assert "\nclosed    [flake-unfrozen] checks:props#refund_le_captured: the payments record at line " in result.stdout
