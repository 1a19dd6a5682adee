"""A suite's facts as the judge reads them (`epoch_gate.verdict.judge.SuiteFacts`), from its replay runs: what
`pants gate` judges every suite with, and `pants test` one."""

from __future__ import annotations

from typing import Optional

from pants.engine.fs import DigestContents
from pants.engine.internals.session import RunId
from pants.engine.process import ProcessResultMetadata

from epoch_gate.evidence.verify import ReplayEvidence, check_replay
from epoch_gate.verdict.suite import Expected, Identities
from epoch_gate.evidence.held_out import LOCAL, LOCAL_PROPERTIES, HeldOut, PropertyDraw
from epoch_gate.evidence.regressions import RegressionStatus
from epoch_gate.verdict.judge import HeldOutFacts, RegressionFacts, SuiteFacts, SuiteOracle
from epoch_gate.reasons import Code, Reason
from epoch_gate.runner.main import EXIT_FAULT
from epoch_gate.text import last_line
from epoch_gate_pants.fixture import FixtureWorld
from epoch_gate_pants.replay import ReplayRun


def _replayed(
    run: ReplayRun, contents: Optional[DigestContents], run_id: RunId, what: str = "replay"
) -> tuple[Optional[ReplayEvidence], list[Reason], Optional[bool]]:
    """A replay run's checked output, why it has none, and whether it came from a cache."""
    if run.result is None:
        return None, [], None
    # A fault (exit 3) is never cached, so it ran: the engine may hand back an earlier session's equal
    # result, with that session's metadata, to what depends on it
    ran = run.result.exit_code == EXIT_FAULT or run.result.metadata.source(run_id) is ProcessResultMetadata.Source.RAN
    cached = not ran
    if run.result.exit_code not in (0, EXIT_FAULT):  # a fault's: judged, never cached
        return (
            None,
            [
                Reason(
                    Code.REPLAY_FAILED,
                    str(run.address),
                    "exit 0",
                    f"exit {run.result.exit_code}",
                    f"the replay did not evaluate: {last_line(run.result.stderr)}",
                )
            ],
            cached,
        )
    return check_replay({c.path: c.content for c in contents or ()}, f"{run.address} {what}"), [], cached


def replay_line(run: ReplayRun, contents: Optional[DigestContents], run_id: RunId) -> str:
    """A suite's replay in one line, logged as soon as it is done: how many sampled properties passed over
    how many records, and whether a cache answered. (The verdict is the report's: it weighs more.) Empty
    for the regression records of a fixture that keeps none."""
    if run.regressions is not None and run.result is None and not run.reasons:
        return ""
    held = " of a held-out world" if run.held_out else " kept as regression records" if run.regressions else ""
    replay, failed, cached = _replayed(run, contents, run_id)
    reasons = [*run.reasons, *failed, *(replay.reasons if replay else ())]
    if replay is None or replay.result is None:
        return f"{run.address}: no replay{held} to judge ({', '.join(sorted({r.code.value for r in reasons}))})"
    properties = replay.result.properties
    world = _world(run)
    records = sum(world.records.get(bound, 0) for bound in {p.bound for p in properties})
    passed = sum(p.outcome == "pass" for p in properties)
    return (
        f"{run.address}: {passed} of {len(properties)} {'catalog' if run.regressions else 'sampled'} properties "
        f"pass over {records:,} records{held}"
        f"{' (from the cache)' if cached else ''}"
    )


def _world(run: ReplayRun) -> FixtureWorld:
    """The world a run replayed: a held-out one, the regression records', or the pinned one."""
    if run.held_out is not None:
        return run.held_out.world
    return run.regressions.world if run.regressions is not None else run.epoch.world


def _identities(run: ReplayRun, world: FixtureWorld, isolation: str) -> Identities:
    """The suite's identities, with the digest of the world this run replayed."""
    pin, manifest = run.epoch.pin.pin, run.manifest.check.manifest
    return Identities(
        pin.epoch_id if pin else None,
        pin.generator.sha256 if pin else None,
        manifest.manifest_sha256 if manifest else None,
        world.world_sha256,
        isolation,
    )


def replay_facts(
    oracle: SuiteOracle,
    run: ReplayRun,
    contents: Optional[DigestContents],
    isolation: str,
    run_id: RunId,
    held: HeldOutFacts = HeldOutFacts(HeldOut(False, LOCAL)),
    draw: PropertyDraw = PropertyDraw(False, LOCAL_PROPERTIES),
    kept: RegressionFacts = RegressionFacts(),
) -> SuiteFacts:
    """One suite's facts from its replay run: identities, what a complete replay must show, its output."""
    replay, failed, cached = _replayed(run, contents, run_id)
    return SuiteFacts(
        oracle,
        _identities(run, run.epoch.world, isolation),
        _expected(run, run.epoch.world),
        replay,
        (*run.reasons, *failed),
        cached,
        held,
        draw,
        kept,
    )


def _expected(run: ReplayRun, world: FixtureWorld) -> Optional[Expected]:
    """The manifest's properties, then the held-out ones drawn, each over every record of its bound."""
    manifest = run.manifest.check.manifest
    if manifest is None or world.world_sha256 is None:
        return None
    judged = run.drawn if run.regressions is not None else (*manifest.properties, *run.drawn)
    return Expected(tuple((p.name, p.bound) for p in judged), world.records)


def held_out_facts(
    found: Optional[tuple[ReplayRun, DigestContents]], why: str, isolation: str, run_id: RunId
) -> HeldOutFacts:
    """A suite's held-out draw as the judge reads it: its world and replay, or why none was drawn."""
    if found is None:
        return HeldOutFacts(HeldOut(False, why))
    run, contents = found
    if run.held_out is None:  # the pin or the pinned world cannot be read: closed for that already
        return HeldOutFacts(HeldOut(False, "no epoch to draw for: the suite's pin or world cannot be read"))
    seed_digest, world = run.held_out.seed_sha256, run.held_out.world
    identities = _identities(run, world, isolation)
    replay, failed, cached = None, list(run.refusals), None
    if world.failure is None:
        replay, not_run, cached = _replayed(run, contents, run_id, "held-out replay")
        failed += not_run
        if world.world_sha256 == run.epoch.world.world_sha256:
            failed.append(
                Reason(
                    Code.HELD_OUT_UNAVAILABLE,
                    run.epoch.files.generator_path,
                    "a world other than the pinned one from --seed",
                    f"the pinned world {world.world_sha256}",
                    "the generator ignored --seed: its held-out world is the pinned one. Make it draw "
                    "from the seed, or opt the fixture out with `epoch_fixture(held_out=False)`",
                )
            )
    status = HeldOut(
        True,
        seed_sha256=seed_digest,
        world_sha256=world.world_sha256,
        records=tuple(sorted(world.records.items())),
        cached=cached,
    )
    return HeldOutFacts(status, identities, _expected(run, world), replay, tuple(failed))


def regression_facts(
    found: Optional[tuple[ReplayRun, DigestContents]], pinned: Optional[ReplayRun], isolation: str, run_id: RunId
) -> RegressionFacts:
    """A suite's regression records as the judge reads them: their replay, when any over a bound its
    catalog reads are kept, and why the file cannot be read when it cannot (what also refused the pinned
    replay, its sources say, is said once)."""
    if found is None or found[0].regressions is None:  # the pin or the manifest cannot be read: closed for that
        return RegressionFacts()
    run, contents = found
    kept = run.regressions
    assert kept is not None
    replay, not_run, cached = _replayed(run, contents, run_id, "replay of the regression records")
    status = RegressionStatus(kept.file, tuple(sorted(kept.kept.counts().items())), kept.world.world_sha256, cached)
    if run.result is None and not run.refusals:  # none kept, or no property over their bounds
        return RegressionFacts(status)
    return RegressionFacts(
        status,
        _identities(run, kept.world, isolation),
        _expected(run, kept.world),
        replay,
        (*(r for r in run.refusals if pinned is None or r not in pinned.refusals), *not_run),
    )
