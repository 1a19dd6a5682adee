"""Tests' way into the one judgement (`epoch_gate.judge.judge`): a suite named "suite" and the change,
given as a flat set of facts, judged exactly as the plugin and the CLI have them judged. Test support
only: not shipped."""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass, field
from typing import Mapping, Optional

from epoch_gate.changes import ChangedPath, ProtectedSet
from epoch_gate.check import ReplayEvidence
from epoch_gate.decision import Expected, Identities, Verdict
from epoch_gate.freezes import Freeze
from epoch_gate.judge import ChangeFacts, SuiteFacts, SuiteOracle, judge
from epoch_gate.observations import Observation
from epoch_gate.oracle import OracleChange
from epoch_gate.reasons import Reason
from epoch_gate.replay_result import ReplayResult
from epoch_gate.report import Report, suite_folder

SUITE = "suite"
OUT = "dist/gate"


@dataclass(frozen=True)
class Evidence:
    """One suite and the change. `observations`: the replay's (source "replay") and the archive's;
    `findings`: the repository's reasons; a None changed set means it is unavailable."""

    identities: Identities
    changed: Optional[tuple[ChangedPath, ...]]
    protected: ProtectedSet
    replay: Optional[ReplayResult]
    observations: tuple[Observation, ...]
    freezes: tuple[Freeze, ...]
    today: datetime.date
    findings: tuple[Reason, ...] = ()
    expected: Optional[Expected] = None
    suite_findings: tuple[Reason, ...] = ()
    witnesses: Mapping[str, bytes] = field(default_factory=dict)


def witness_path(observation_id: str) -> str:
    """Where the report says a witness of this run's replay of "suite" is."""
    return f"{OUT}/{suite_folder(SUITE)}/observations/{observation_id}.bin"


def one_suite(evidence: Evidence, base: Optional[str] = "base", oracle: tuple[OracleChange, ...] = ()) -> Report:
    """The report `judge` makes of the suite and the change, with these oracle changes."""
    played = tuple(o for o in evidence.observations if o.source == "replay")
    change = ChangeFacts("local", base, evidence.changed, evidence.protected, (),
                         tuple(o for o in evidence.observations if o.source != "replay"), evidence.freezes,
                         evidence.today, "observations", "freezes", OUT, evidence.findings)
    suite = SuiteFacts(SuiteOracle(SUITE, "fixtures/EPOCH", "checks/manifest.json", "checks/catalog.yaml", ()),
                       evidence.identities, evidence.expected,
                       ReplayEvidence(evidence.replay, played, evidence.witnesses, ()) if evidence.replay else None,
                       evidence.suite_findings)
    judged = judge(change, [suite], read_base=None, read_change=lambda path: None).report
    return dataclasses.replace(judged, oracle_changes=oracle)


def decide(evidence: Evidence) -> Verdict:
    """The verdict on the change judged with the suite: its label, and the repository's reasons followed
    by the suite's."""
    judged = one_suite(evidence)
    (suite,) = judged.suites
    return Verdict(judged.verdict.label, (*judged.verdict.reasons, *suite.verdict.reasons))
