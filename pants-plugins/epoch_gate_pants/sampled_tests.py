"""`pants test` on a `sampled_properties` target: its replay, judged by the gate's own rules (`judge_one`)."""

from __future__ import annotations

import datetime
from typing import Any

from pants.core.goals.test import TestFieldSet, TestRequest, TestResult, TestSubsystem
from pants.engine.fs import EMPTY_FILE_DIGEST, Digest, DigestContents
from pants.engine.internals.session import RunId
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from epoch_gate.verdict.suite import Label
from epoch_gate.verdict.judge import ChangeFacts, SuiteOracle, judge_one
from epoch_gate.verdict.report import reason_lines
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.text import printable
from epoch_gate_pants.facts import replay_facts
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.subsystems import SampledPropertiesSubsystem
from epoch_gate_pants.target_types import SampledPropertiesFixtureField, SampledPropertiesManifestField


class SampledPropertiesFieldSet(TestFieldSet):
    required_fields = (SampledPropertiesFixtureField, SampledPropertiesManifestField)


class SampledPropertiesTestRequest(TestRequest):
    tool_subsystem = SampledPropertiesSubsystem
    field_set_type = SampledPropertiesFieldSet


def _no_change(today: datetime.date) -> ChangeFacts:
    """The change's facts for a test of one suite: none. No archive and no freeze counts, and the
    witnesses stay in the test's sandbox, so reasons name each record by its line, with no saved file."""
    return ChangeFacts("local", None, (), ProtectedSet(frozenset(), ()), (), (), (), today, "", "", "")


def judged_test(run: ReplayRun, contents: DigestContents, run_id: RunId) -> tuple[int, str]:
    """(exit code, lines): a line per property, then the suite's reasons as the gate prints them; the test
    passes only when the suite is eligible as the gate would judge it without a freeze."""
    facts = replay_facts(SuiteOracle(str(run.address), "", "", "", ()), run, contents, "", run_id)
    report, _ = judge_one(facts, _no_change(datetime.datetime.now(datetime.timezone.utc).date()))
    lines = [
        printable(p.summary() + (f": {p.detail}" if p.detail else ""))
        for p in (report.replay.properties if report.replay else ())
    ]
    lines += reason_lines(report.verdict.reasons, "")
    return (0 if report.verdict.label is Label.ELIGIBLE else 1), "".join(f"{line}\n" for line in lines)


@rule(desc="Test sampled properties", level=LogLevel.DEBUG)
async def run_sampled_properties(
    batch: SampledPropertiesTestRequest.Batch[SampledPropertiesFieldSet, Any],
    test_subsystem: TestSubsystem,
    run_id: RunId,
) -> TestResult:
    field_set = batch.single_element
    run = await Get(ReplayRun, ReplayRequest(field_set.address, force=test_subsystem.force))
    contents = await Get(DigestContents, Digest, run.output)
    exit_code, stdout = judged_test(run, contents, run_id)
    result = run.result
    return TestResult(
        exit_code=exit_code,
        stdout=stdout,
        stdout_digest=result.stdout_digest if result else EMPTY_FILE_DIGEST,
        stderr=result.stderr.decode("utf-8", "replace") if result else "",
        stderr_digest=result.stderr_digest if result else EMPTY_FILE_DIGEST,
        addresses=(field_set.address,),
        output_setting=test_subsystem.output,
        result_metadata=result.metadata if result else None,
    )


def rules() -> list:
    return [*collect_rules(), *SampledPropertiesTestRequest.rules()]
