"""Rule tests of `formatting.py` through the reviewer's goals: `pin-epoch` and `sample-properties` refuse files
that the repository's formatters would rewrite. The formatter here is a small one of the test's own,
registered through Pants' `fmt` union exactly as Black is."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pants.backend.python.target_types import PythonSourceField, PythonSourcesGeneratorTarget, PythonSourceTarget
from pants.core.goals.fmt import FmtResult, FmtTargetsRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, Snapshot
from pants.engine.rules import Get, QueryRule, collect_rules, rule
from pants.engine.target import BoolField, FieldSet, Target
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.testutil.rule_runner import GoalRuleResult, RuleRunner

from epoch_gate_pants import fixture, formatting, isolation, reviewer, suite
from epoch_gate_pants.formatting import Formatting, FormattingRequest, Rewrite
from epoch_gate_pants.gate_harness import CONFIGURED_ENV, ENV_INHERIT, runner_options
from epoch_gate_pants.reviewer import RECORDS, PinEpoch, SampleProperties
from epoch_gate_pants.rule_harness import fresh, write_repo

MODULES = (fixture, formatting, isolation, reviewer, suite)


class Untab(Subsystem):
    options_scope = "untab"
    name = "untab"
    help = "A formatter for tests: four spaces for every tab."
    skip = SkipOption("fmt", "lint")


class SkipUntabField(BoolField):
    alias = "skip_untab"
    default = False
    help = "Leave this target's files alone."


@dataclass(frozen=True)
class UntabFieldSet(FieldSet):
    required_fields = (PythonSourceField,)
    source: PythonSourceField

    @classmethod
    def opt_out(cls, tgt: Target) -> bool:
        return tgt.get(SkipUntabField).value


class UntabRequest(FmtTargetsRequest):
    field_set_type = UntabFieldSet
    tool_subsystem = Untab
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION


@rule
async def untab(request: UntabRequest.Batch) -> FmtResult:
    contents = await Get(DigestContents, Digest, request.snapshot.digest)
    if any(b"UNFORMATTABLE" in c.content for c in contents):  # as Black fails on a file it cannot parse
        raise ValueError(f"untab cannot format {contents[0].path}")
    untabbed = [FileContent(c.path, c.content.replace(b"\t", b"    ")) for c in contents]
    return FmtResult(request.snapshot, await Get(Snapshot, CreateDigest(untabbed)), "", "", tool_name="untab")


FORMATTER = (
    *collect_rules(),
    *UntabRequest.rules(),
    PythonSourceTarget.register_plugin_field(SkipUntabField),
    PythonSourcesGeneratorTarget.register_plugin_field(SkipUntabField),
)


QUERIES = (QueryRule(Formatting, [FormattingRequest]),)
EXTRA_RULES = FORMATTER


@pytest.fixture
def rule_runner(module_rule_runner: RuleRunner) -> RuleRunner:
    runner = fresh(module_rule_runner)
    write_repo(runner)
    runner.write_files({"fixtures/BUILD": runner.read_file("fixtures/BUILD") + '\npython_sources(name="gen")\n'})
    return runner


def _pin(runner: RuleRunner) -> GoalRuleResult:
    return runner.run_goal_rule(
        PinEpoch,
        args=["fixtures:epoch"],
        global_args=runner_options("--pin-epoch-epoch-id=e2"),
        env=CONFIGURED_ENV,
        env_inherit=ENV_INHERIT,
    )


def _refusal(goal: str, *paths: str) -> list[str]:
    return [
        f"{goal}: refused: the repository's formatters would rewrite files that {RECORDS}: untab ({', '.join(paths)}).",
        "  A formatter run after this goal would move the epoch or edit the oracle.",
        f"  Run `pants fmt {' '.join(paths)}`, review the change, and run {goal} again.",
    ]


def _tabbed(runner: RuleRunner, path: str) -> None:
    runner.write_files({path: runner.read_file(path) + "\n_TABBED = 1\t# what the formatter rewrites\n"})


def test_pin_epoch_refuses_a_generator_the_formatter_would_rewrite(rule_runner: RuleRunner) -> None:
    _tabbed(rule_runner, "fixtures/gen.py")
    pinned = rule_runner.read_file("fixtures/EPOCH")
    refused = _pin(rule_runner)
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == _refusal("pin-epoch", "fixtures/gen.py")
    assert rule_runner.read_file("fixtures/EPOCH") == pinned  # nothing written

    # What the printed command does; then the pin goes ahead.
    rule_runner.write_files({"fixtures/gen.py": rule_runner.read_file("fixtures/gen.py").replace("\t", "    ")})
    minted = _pin(rule_runner)
    assert minted.exit_code == 0, minted.stderr
    assert '"epoch_id":"e2"' in rule_runner.read_file("fixtures/EPOCH")


def test_a_target_the_formatter_skips_is_not_asked(rule_runner: RuleRunner) -> None:
    _tabbed(rule_runner, "fixtures/gen.py")
    build = rule_runner.read_file("fixtures/BUILD").replace('name="gen")', 'name="gen", skip_untab=True)')
    rule_runner.write_files({"fixtures/BUILD": build})
    asked = ("fixtures/gen.py", "fixtures/base.json")
    assert rule_runner.request(Formatting, [FormattingRequest(asked)]) == Formatting((), asked)
    assert _pin(rule_runner).exit_code == 0


def test_sample_properties_refuses_predicates_the_formatter_would_rewrite(rule_runner: RuleRunner) -> None:
    _tabbed(rule_runner, "checks/props.py")
    manifest = rule_runner.read_file("checks/manifest.json")
    refused = rule_runner.run_goal_rule(
        SampleProperties, args=["--sample-properties-seed=4", "--sample-properties-k=1", "checks:props"]
    )
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == _refusal("sample-properties", "checks/props.py")
    assert rule_runner.read_file("checks/manifest.json") == manifest


def test_the_guides_one_command_for_both_goals_refuses_once_naming_every_file(rule_runner: RuleRunner) -> None:
    """`pants pin-epoch … sample-properties … <suite>` stops at its first refusing goal: that refusal names
    the suite's whole oracle, so one `pants fmt` clears both (it took two rounds)."""
    _tabbed(rule_runner, "fixtures/gen.py")
    _tabbed(rule_runner, "checks/props.py")
    refused = rule_runner.run_goal_rule(
        PinEpoch,
        args=["checks:props"],
        global_args=runner_options("--pin-epoch-epoch-id=e2"),
        env=CONFIGURED_ENV,
        env_inherit=ENV_INHERIT,
    )
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == _refusal("pin-epoch", "checks/props.py", "fixtures/gen.py")


def test_only_the_files_asked_about_and_the_tools_that_would_change_them_are_named(rule_runner: RuleRunner) -> None:
    _tabbed(rule_runner, "fixtures/gen.py")
    _tabbed(rule_runner, "checks/props.py")
    found = rule_runner.request(Formatting, [FormattingRequest(("checks/catalog.yaml", "checks/props.py"))])
    assert found == Formatting(
        (Rewrite("untab", True, ("checks/props.py",)),), ("checks/catalog.yaml", "checks/props.py")
    )
    assert rule_runner.request(Formatting, [FormattingRequest(("fixtures/base.json",))]) == Formatting(
        (), ("fixtures/base.json",)
    )


def test_a_formatter_that_fails_refuses_the_goal_naming_the_failure(rule_runner: RuleRunner) -> None:
    rule_runner.write_files({"fixtures/gen.py": rule_runner.read_file("fixtures/gen.py") + "# UNFORMATTABLE\n"})
    refused = _pin(rule_runner)
    assert refused.exit_code == 1
    first, command = refused.stderr.splitlines()
    assert first.startswith(
        f"pin-epoch: refused: the repository's formatters could not be asked about files that {RECORDS}: "
    ) and first.endswith("untab cannot format fixtures/gen.py"), first
    assert (
        command == "  Run `pants fmt fixtures/base.json fixtures/gen.py` to see why, fix it, and run pin-epoch again."
    )


def test_the_command_is_fix_when_a_fixer_would_rewrite_and_reads_as_the_shell_reads_it() -> None:
    both = Formatting((Rewrite("black", True, ("b.py",)), Rewrite("pyupgrade", False, ("a.py", "b.py"))))
    assert both.command() == "pants fix a.py b.py"
    assert Formatting((Rewrite("black", True, ("b.py",)),)).command() == "pants fmt b.py"
    odd = Formatting((Rewrite("black", True, ("a b.py", "$(touch x).py", "c\nd.py")),))
    assert odd.command() == "pants fmt '$(touch x).py' 'a b.py' 'c\\nd.py'"  # the newline shown, never run
