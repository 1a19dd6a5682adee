"""The judgement of a repository: the change's facts and each suite's evidence, to verdicts and a report.

The plugin's `pants gate` and the CLI's `epoch-gate check` gather facts their own way (the build graph,
command-line paths) and both call `judge`: the checks, the binding of evidence to suites, the verdict and
the report are assembled here once, so the two cannot drift.
"""

from __future__ import annotations

import datetime
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from epoch_gate.change.changed import ChangedPath
from epoch_gate.change.protection import ProtectedSet, irregular_paths, pinned_at_base, protected_changes
from epoch_gate.evidence.verify import ReplayEvidence
from epoch_gate.verdict.suite import (
    Expected,
    Identities,
    by_id,
    worst_by_id,
    SuiteEvidence,
    Verdict,
    changed_reasons,
    judge_suite,
    label_of,
    WorldEvidence,
)
from epoch_gate.evidence.freezes import Freeze
from epoch_gate.evidence.held_out import LOCAL, LOCAL_PROPERTIES, HeldOut, PropertyDraw
from epoch_gate.evidence.observations import Observation
from epoch_gate.evidence.regressions import RegressionStatus
from epoch_gate.change.oracle import OracleChange, OraclePaths, Reader, evidence_changes, oracle_changes
from epoch_gate.reasons import Code, Reason
from epoch_gate.verdict.report import LOCAL_SIGNING, Mode, Report, Signing, SuiteReport, suite_folder


@dataclass(frozen=True)
class SuiteOracle:
    """A suite's oracle files, by build-root path."""

    address: str
    pin: str
    manifest: str
    catalog: str
    predicates: tuple[str, ...]


@dataclass(frozen=True)
class HeldOutFacts:
    """A suite's held-out draw: what the report says of it and, when drawn, its replay's checked output,
    what a complete replay of that world must show, and what reading that world found."""

    status: HeldOut
    identities: Optional[Identities] = None  # the suite's, with the held-out world's digest
    expected: Optional[Expected] = None
    replay: Optional[ReplayEvidence] = None
    findings: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class RegressionFacts:
    """A suite's regression records: what the report says of them and, when any are kept, their replay's
    checked output (every catalog property over their bounds), what it must show, and what reading them
    found."""

    status: RegressionStatus = RegressionStatus()
    identities: Optional[Identities] = None  # the suite's, with the digest of the world the records make
    expected: Optional[Expected] = None
    replay: Optional[ReplayEvidence] = None
    findings: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class SuiteFacts:
    """What the caller found for one suite in scope. `replay` is its checked output (None: it did not
    run, and `findings` say why); `findings` are the reasons reading its pin, manifest and world gave."""

    oracle: SuiteOracle
    identities: Identities
    expected: Optional[Expected]
    replay: Optional[ReplayEvidence]
    findings: tuple[Reason, ...] = ()
    cached: Optional[bool] = None
    held_out: HeldOutFacts = HeldOutFacts(HeldOut(False, LOCAL))
    property_draw: PropertyDraw = PropertyDraw(False, LOCAL_PROPERTIES)  # judged in both replays when drawn
    regressions: RegressionFacts = RegressionFacts()

    @property
    def address(self) -> str:
        return self.oracle.address


@dataclass(frozen=True)
class ChangeFacts:
    """What the caller found for the repository and the change. `oracles` are every suite's oracle files
    the caller knows (in scope or not: the protected set is the repository's); `changed` None means the
    changed set is unavailable."""

    mode: Mode
    base: Optional[str]
    changed: Optional[tuple[ChangedPath, ...]]
    protected: ProtectedSet
    oracles: tuple[SuiteOracle, ...]
    archive: tuple[Observation, ...]
    freezes: tuple[Freeze, ...]
    today: datetime.date
    observations_dir: str
    freezes_dir: str
    out: str  # the output folder, as the report names witnesses
    findings: tuple[Reason, ...] = ()
    statement: Signing = LOCAL_SIGNING  # whether trusted mode signs its statement, or why not


@dataclass(frozen=True)
class Judgement:
    report: Report
    witnesses: Mapping[str, bytes]  # observation id -> the witness bytes this run's replays wrote


def guarded(protected: ProtectedSet, oracles: Sequence[SuiteOracle], read_base: Optional[Reader]) -> ProtectedSet:
    """The protected set, plus what each base pin names: a change that moves a pin to other files does
    not unprotect the files it pinned."""
    if read_base is None:
        return protected
    pinned = {path for pin in sorted({o.pin for o in oracles}) for path in pinned_at_base(read_base(pin), pin)}
    return ProtectedSet(protected.paths | pinned, protected.globs, protected.requirements)


def _duplicate_epochs(suites: Sequence[SuiteFacts]) -> list[Reason]:
    """Two fixtures pinning one epoch id would let evidence keyed on the epoch cross between suites."""
    pins: dict[str, set[str]] = defaultdict(set)
    for suite in suites:
        if suite.identities.epoch_id is not None:
            pins[suite.identities.epoch_id].add(suite.oracle.pin)
    return [
        Reason(
            Code.EPOCH_ID_DUPLICATE,
            sorted(paths)[1],
            "one fixture per epoch id",
            ", ".join(sorted(paths)),
            f"epoch id {epoch} is pinned by {len(paths)} fixtures: give each its own",
        )
        for epoch, paths in sorted(pins.items())
        if len(paths) > 1
    ]


def _stray_freezes(freezes: Sequence[Freeze], known: set[str]) -> list[Reason]:
    """A freeze naming no suite of the repository covers nothing: it holds until deleted."""
    return [
        Reason(
            Code.FREEZE_UNUSED,
            f.path,
            "the address of a sampled_properties target",
            f.suite,
            "the freeze names no suite of this repository: delete it",
        )
        for f in freezes
        if f.suite not in known
    ]


def _touches(oracle: SuiteOracle, changed: Sequence[ChangedPath]) -> bool:
    """Whether the change touches this suite's oracle files or their folders (a generator or input kept
    elsewhere is still caught by the protected set; only the reviewer's reading of it is skipped)."""
    folders = {os.path.dirname(p) for p in (oracle.pin, oracle.manifest, oracle.catalog)}
    files = {oracle.pin, oracle.manifest, oracle.catalog, *oracle.predicates}
    return any(c.path in files or os.path.dirname(c.path) in folders for c in changed)


def _oracle_changes(
    change: ChangeFacts,
    oracles: Sequence[SuiteOracle],
    read_base: Optional[Reader],
    read_change: Reader,
    protected: ProtectedSet,
) -> tuple[OracleChange, ...]:
    if read_base is None or not change.changed or not protected_changes(change.changed, protected):
        return ()
    found: dict[OracleChange, None] = dict.fromkeys(
        evidence_changes(change.changed, change.freezes_dir, change.observations_dir)
    )
    # Only the suites whose oracle the change touches are read: at hundreds of suites, reading every
    # oracle from git on each protected change costs more than the judgement.
    for oracle in (o for o in oracles if _touches(o, change.changed)):
        paths = OraclePaths(
            oracle.pin, oracle.manifest, oracle.catalog, oracle.predicates, change.freezes_dir, change.observations_dir
        )
        found.update(dict.fromkeys(oracle_changes(paths, change.changed, read_base, read_change)))
    return tuple(found)


def judge_one(suite: SuiteFacts, change: ChangeFacts) -> tuple[SuiteReport, Mapping[str, bytes]]:
    """One suite's verdict and report, and the witnesses its replays wrote (`judge` over each suite; `pants
    test` over the one it runs). Witnesses are named by their path under `change.out`, or by their id when
    there is none."""
    replay, held, kept = suite.replay, suite.held_out, suite.regressions
    replays = [r for r in (replay, held.replay, kept.replay) if r is not None]
    archived = tuple(o for o in change.archive if o.suite == suite.address)
    pinned = (*(replay.observations if replay else ()), *archived)
    folder = f"{change.out}/{suite_folder(suite.address)}/observations"
    held_evidence = _world_evidence(held) if held.status.drawn else None
    kept_evidence = _world_evidence(kept) if kept.replay or kept.findings else None
    witness_ids = {o.id for r in replays for o in r.observations}
    verdict = judge_suite(
        SuiteEvidence(
            address=suite.address,
            identities=suite.identities,
            replay=replay.result if replay else None,
            observations=pinned,
            freezes=tuple(f for f in change.freezes if f.suite == suite.address),
            today=change.today,
            findings=(
                *suite.findings,
                *held.findings,
                *kept.findings,
                *(reason for r in replays for reason in r.reasons),
            ),
            witness_paths={oid: f"{folder}/{oid}.bin" for oid in witness_ids} if change.out else {},
            expected=suite.expected,
            held_out=held_evidence,
            held_out_properties=suite.property_draw.names,
            regressions=kept_evidence,
        )
    )
    shown = worst_by_id(
        by_id(pinned), *(by_id(e.observations) for e in (held_evidence, kept_evidence) if e is not None)
    )
    return (
        SuiteReport(
            suite.address,
            verdict,
            suite.identities,
            replay.result if replay else None,
            tuple(shown.values()),
            suite.cached,
            held.status,
            held.replay.result if held.replay else None,
            suite.property_draw,
            kept.status,
            kept.replay.result if kept.replay else None,
        ),
        {oid: data for r in replays for oid, data in r.witnesses.items()},
    )


def _world_evidence(facts: Union[HeldOutFacts, RegressionFacts]) -> WorldEvidence:
    """Another world's replay (held-out, or the regression records'), as the suite's judgement reads it."""
    return WorldEvidence(
        facts.identities or Identities(None, None, None),
        facts.replay.result if facts.replay else None,
        facts.expected,
        facts.replay.observations if facts.replay else (),
    )


def judge(
    change: ChangeFacts,
    suites: Sequence[SuiteFacts],
    *,
    read_base: Optional[Reader],
    read_change: Reader,
    root: Optional[Path] = None,
) -> Judgement:
    """Every suite in scope judged on its own evidence, the change judged against the repository's
    protected set; the verdict is the worst of them, and no suite in scope is `closed`.

    `read_base` reads a path at the base (None without one), `read_change` in what is judged; `root`, when
    given, is the checkout whose protected paths must be regular files.
    """
    protected = guarded(change.protected, change.oracles, read_base)
    reasons = list(change.findings)
    if root is not None:
        plain = [g for g in protected.globs if g.endswith("/") and not any(c in g for c in "*?[")]
        reasons += irregular_paths(root, protected.paths, (change.observations_dir, change.freezes_dir), plain)
    reasons += changed_reasons(change.changed, protected, reasons)
    if not suites:
        reasons.append(
            Reason(
                Code.ARTIFACT_MISSING,
                ".",
                "at least one sampled_properties target in scope",
                "none",
                "no suite in scope: nothing was judged",
            )
        )
    reasons += _duplicate_epochs(suites)
    reasons += _stray_freezes(change.freezes, {o.address for o in change.oracles} | {s.address for s in suites})

    judged = [judge_one(suite, change) for suite in sorted(suites, key=lambda s: s.address)]
    reports = tuple(r for r, _ in judged)
    labels = [label_of(reasons), *(r.verdict.label for r in reports)]
    verdict = Verdict(min(labels, key=lambda label: label.rank), tuple(reasons))
    oracles = {o.address: o for o in (*change.oracles, *(s.oracle for s in suites))}
    report = Report(
        verdict,
        reports,
        change.base,
        change.changed,
        protected,
        _oracle_changes(change, list(oracles.values()), read_base, read_change, protected),
        change.mode,
        change.statement,
    )
    return Judgement(report, {oid: data for _, witnesses in judged for oid, data in witnesses.items()})
