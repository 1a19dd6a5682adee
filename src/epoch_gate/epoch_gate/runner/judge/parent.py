"""The replay runner's parent: judges each sampled property over every record of its bound, with the
product's code in child processes it never shares (`epoch_gate.runner.product.child`; `Child.children` of them,
side by side: record n of a bound goes to child n mod children, and each child gets its records in
world order, one at a time).

The parent reads the world and imports the predicates (oracle code, from the sandbox under the oracle's
names only) before it starts the child; then the sandbox leaves its import path (`close_imports`). Each
predicate runs here, on records the parent parsed from its own copy of the bytes, and drives the product
through the child, whose answers are only ever JSON the parent parses itself
(`epoch_gate.runner.judge.judging`). The parent writes the witnesses, the observations and replay.json from
its own copies, and nothing until the child's whole process group is dead (`Channel.close`).

A violated record is judged again once on the same bytes, after its property's scan: violated twice is
a `fail`, holding the second time a `flake`. Every record of a bound is judged (a flake never hides a
later failure, and the count is evidence the gate checks against the world) unless the predicate itself
fails: the property is then an `error`. Stdlib only, so it runs in a bare sandboxed interpreter.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

from epoch_gate.evidence.atomic import replace_file
from epoch_gate.evidence.catalog import Property
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.manifest import Manifest
from epoch_gate.evidence.observations import Observation, make_observation, write_observation
from epoch_gate.reasons import Code, EvidenceError
from epoch_gate.evidence.replay_result import OBSERVATIONS, SUMMARY, PropertyOutcome, ReplayResult
from epoch_gate.runner.judge import judging
from epoch_gate.runner import protocol
from epoch_gate.runner.judge.channel import Channel, ChildFailed, Fate, close_all
from epoch_gate.runner.jail.reaper import cores, guard_parent, pin
from epoch_gate.runner.jail.confine import ChildJail, Limits
from epoch_gate.runner.judge.predicates import Predicate, close_imports, load_predicate, oracle_imports
from epoch_gate.evidence.world import LoadedWorld, load_world, record_batches

Record = tuple[int, int, bytes]  # (index among its bound's records from 1, line number, exact record bytes)
# Each answer is many small containers: at Python's default thresholds the cyclic collector ran every 700
# of them and tripled the cost of reading an answer (bench/replay_split.py). Nothing the runner builds is
# cyclic.
GC_THRESHOLDS = (100_000, 50, 100)
RECURSION_LIMIT = 4000  # an answer nests up to 2 x data.MAX_NESTING JSON levels (a tuple is a tagged object)
THREAD_STACK = 64 << 20


@dataclass(frozen=True)
class Child:
    """Where the child runs and what it may import: the sandbox (its cwd) under the product's
    `sandbox_names`, after the standard library, then `child_path` folders (third-party code). The
    parent's predicates import from the sandbox under `oracle_names` only. `jail`, when set, starts the
    child in a jail of its own; `limits` bound its process tree either way. `children` serve the product
    side by side, each in its own jail: record n of a bound goes to child n mod `children`."""

    sandbox: Path
    sandbox_names: tuple[str, ...] = ()
    child_path: tuple[str, ...] = ()
    oracle_names: tuple[str, ...] = ()
    jail: Optional[ChildJail] = None
    limits: Limits = Limits()
    children: int = 1


def _records(world: LoadedWorld, bound: str, lane: int, lanes: int) -> Iterator[Record]:
    """The bound's records that go to child `lane` of `lanes`, in world order."""
    offset = 0  # records before the batch
    for batch in record_batches(world, bound, 4096):
        for n in range((lane - offset) % lanes, len(batch), lanes):
            line, raw = batch[n]
            yield offset + n + 1, line, raw
        offset += len(batch)


@dataclass
class _Lane:
    """What one child's share of a property's records came to: how many were judged, each violation
    (index, line, witness, why), and the first record on which the predicate itself failed."""

    judged: int = 0
    violations: list[tuple[int, int, bytes, str]] = dataclasses.field(default_factory=list)
    failed: Optional[tuple[int, judging.Judgement]] = None


def _judge_share(channel: Channel, predicate: Predicate, records: Iterable[Record]) -> _Lane:
    """Each record in turn, on one child: a record is judged only once the one before it is (so the child
    receives its records in world order, and each record's calls in the order the predicate makes them).
    The share stops at the first record on which the predicate itself fails: the property is an error."""
    lane = _Lane()
    pin(channel.cpu)  # this thread: the same core as its child
    for index, line, raw in records:
        judged = judging.judge(predicate, raw, channel, channel.take_scope())
        lane.judged += 1
        if judged.error:
            lane.failed = (index, judged)
            break
        if not judged.holds:
            lane.violations.append((index, line, raw, judged.detail))
    return lane


def _side_by_side(work: Sequence[Callable[[], _Lane]]) -> list[_Lane]:
    """Each child's share at once, one thread a child (each waits on its own child, so that the children
    work side by side; one child's too, so that every predicate runs on a stack alike); in order, whatever
    finishes first. A child's failure is raised once all stopped."""
    done: list[Optional[_Lane]] = [None] * len(work)
    raised: list[BaseException] = []

    def run(n: int) -> None:
        try:
            done[n] = work[n]()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the parent's own thread
            raised.append(exc)

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if raised:
        raise next((e for e in raised if isinstance(e, ChildFailed)), raised[0])
    return done  # type: ignore[return-value]


@dataclass(frozen=True)
class _Violation:
    index: int  # among the bound's records, from 1
    line: int
    witness: bytes
    detail: str
    child: int  # which child answered for it: it is judged again there


class _OracleFailed(Exception):
    def __init__(self, verdict: judging.Judgement, index: int) -> None:
        super().__init__(verdict.detail)
        self.code, self.detail = Code(verdict.error), f"record {index}: {verdict.detail}"


def _raise_first_failure(lanes: Sequence[_Lane]) -> None:
    """The predicate's own failure on the first record in world order, if any child's share met one."""
    failures = [lane.failed for lane in lanes if lane.failed is not None]
    if failures:
        index, verdict = min(failures, key=lambda failed: failed[0])
        raise _OracleFailed(verdict, index)


def _scan(
    channels: Sequence[Channel], prop: Property, predicate: Predicate, world: LoadedWorld
) -> tuple[int, list[_Violation], list[bool]]:
    """(records judged, the violations in record order, whether each held when judged again). Each
    violation is judged again by the child that answered for it, once every record has been judged."""
    lanes = len(channels)
    shares = _side_by_side(
        [
            functools.partial(_judge_share, channel, predicate, _records(world, prop.bound, n, lanes))
            for n, channel in enumerate(channels)
        ]
    )
    _raise_first_failure(shares)
    violations = sorted(
        (
            _Violation(index, line, raw, detail, n)
            for n, lane in enumerate(shares)
            for index, line, raw, detail in lane.violations
        ),
        key=lambda v: v.index,
    )
    again = _side_by_side(
        [
            functools.partial(
                _judge_share, channel, predicate, [(v.index, v.line, v.witness) for v in violations if v.child == n]
            )
            for n, channel in enumerate(channels)
        ]
    )
    _raise_first_failure(again)
    violated_again = {index for lane in again for index, _, _, _ in lane.violations}
    return sum(lane.judged for lane in shares), violations, [v.index not in violated_again for v in violations]


def _error(prop: Property, code: Code, detail: str, count: int = 0) -> PropertyOutcome:
    return PropertyOutcome(prop.name, prop.bound, count, "error", (), detail[:500], code.value)


Observed = list[tuple[Observation, bytes]]  # (observation, witness): written only once the child is dead


def replay_property(
    channels: Sequence[Channel],
    prop: Property,
    predicate: Predicate,
    world: LoadedWorld,
    suite: str,
    epoch_id: str,
    max_witnesses: int,
) -> tuple[PropertyOutcome, Observed]:
    try:
        channels[0].check()  # a failure of any child is every child's (`Fate`)
    except ChildFailed as failed:  # before this property: it is not evaluated
        return _error(prop, failed.code, failed.detail), []
    try:
        count, violations, reruns = _scan(channels, prop, predicate, world)
    except ChildFailed as failed:
        # During its scan: the failure as it was first said, whichever child's thread raised first (another
        # child's thread may have met the end it caused)
        cause = channels[0].cause() or failed
        return _error(prop, cause.code, cause.detail), []
    except _OracleFailed as failed:
        return _error(prop, failed.code, failed.detail), []
    except EvidenceError as failed:
        return _error(prop, failed.reason.code, failed.reason.message), []
    if count == 0:
        return _error(prop, Code.BOUND_MISSING, f"bound {prop.bound} has no records"), []
    failures = first_failure = 0
    observed: Observed = []
    try:
        for violation, passed_again in zip(violations, reruns):
            if not passed_again:
                failures += 1
                first_failure = first_failure or violation.index
                if failures > max_witnesses:
                    continue  # counted; the saved witnesses already show that it fails
            observation = make_observation(
                suite=suite,
                epoch_id=epoch_id,
                prop=prop.name,
                status="flake" if passed_again else "fail",
                rerun_passed=passed_again,
                witness=violation.witness,
                bound=prop.bound,
                line=violation.line,
                detail=violation.detail,
            )
            observed.append((observation, violation.witness))
    except EvidenceError as failed:
        return _error(prop, failed.reason.code, failed.reason.message, count), []
    outcome = "fail" if failures else "flake" if observed else "pass"
    first = next((o for o, _ in observed if o.status == "fail"), observed[0][0] if observed else None)
    summary_detail = first.detail.splitlines()[0][:500] if first and first.detail else ""
    return (
        PropertyOutcome(
            prop.name,
            prop.bound,
            count,
            outcome,
            tuple(o.id for o, _ in observed),
            summary_detail,
            failures=failures,
            first_failure=first_failure,
        ),
        observed,
    )


def _write_observations(prop: Property, outcome: PropertyOutcome, observed: Observed, out: Path) -> PropertyOutcome:
    try:
        for observation, witness in observed:
            write_observation(out / OBSERVATIONS, observation, witness)
    except EvidenceError as failed:
        return _error(prop, failed.reason.code, failed.reason.message, outcome.records)
    return outcome


def _set_up_product(channels: Sequence[Channel], setup: str) -> None:
    """The product's own set-up (`module:function`, a framework's: Django's settings and tables), called
    once in each child before any property, as any product call is. It is product code, so its failure is
    the product's: the replay fails, naming it, and no property is judged."""
    call = json.dumps([{"m": setup.replace(":", ".")}, [], {}]).encode()
    for channel in channels:
        try:
            answer = protocol.parse_answer(channel.ask(channel.take_scope(), call), lambda *_: None, dict)
        except protocol.ProtocolError as exc:
            raise channel.broke(str(exc)) from None
        if answer[0] == "x":
            types, message, traceback = answer[1:]
            raised = f"{types[0].rpartition('.')[2]}: {message}" if types else message
            raise channel.fail(Code.REPLAY_FAILED, f"the product's set-up {setup} raised {raised}\n{traceback}")
        if answer[0] == "u":
            raise channel.fail(Code.REPLAY_FAILED, f"the product's set-up {setup} does not resolve: {answer[1]}")


def run(
    manifest: Manifest,
    world: Path,
    out: Path,
    *,
    suite: str,
    epoch_id: str,
    child: Child,
    max_witnesses: int = 1,
    product_setup: str = "",
    fate: Optional[Fate] = None,
) -> ReplayResult:
    # Everything the parent reads from the sandbox is read before the child starts: the world (hashed and
    # streamed from the same bytes) and the predicates; then the sandbox leaves the import path.
    gc.set_threshold(*GC_THRESHOLDS)
    loaded = load_world(world)
    digest = loaded.sha256()
    # The same room for every predicate, whatever the count of children: each runs in a thread of its own,
    # with a stack that holds the deepest answer the protocol allows
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    threading.stack_size(THREAD_STACK)
    with oracle_imports(child.sandbox, child.oracle_names):
        predicates = [load_predicate(prop) for prop in manifest.properties]
    close_imports(child.sandbox)
    product_names = set(child.sandbox_names) - set(child.oracle_names)
    guard_parent()
    fate = fate or Fate()  # the caller's, to learn whether a child's end was a fault
    channels: list[Channel] = []
    try:
        available = cores()
        for n in range(max(1, child.children)):
            cpu = available[n % len(available)] if available else None  # child n and its thread: one core
            channels.append(
                Channel(child.sandbox, product_names, child.child_path, child.jail, child.limits, fate, cpu)
            )
        if product_setup:
            _set_up_product(channels, product_setup)
        results = [
            (_error(prop, Code.PREDICATE_ERROR, predicate), [])
            if type(predicate) is str  # why it cannot judge
            else replay_property(channels, prop, predicate, loaded, suite, epoch_id, max_witnesses)
            for prop, predicate in zip(manifest.properties, predicates)
        ]
    except BaseException:
        for channel in channels:
            channel.fail(Code.RUNNER_PROTOCOL, "the replay stopped")
        close_all(channels)
        raise
    # Every child's whole process group is dead from here on (close_all): nothing they forked can rewrite
    # what is written next.
    ended = close_all(channels)
    # Whatever the child planted in the output folder before that is not evidence: start from nothing.
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    (out / OBSERVATIONS).mkdir(parents=True, exist_ok=True)
    outcomes = [
        _write_observations(prop, outcome, observed, out)
        for prop, (outcome, observed) in zip(manifest.properties, results)
    ]
    if ended is not None:  # the channel carried more than the child's answers: none of them is evidence
        outcomes = [
            o
            if o.outcome == "error"
            else dataclasses.replace(o, outcome="error", detail=ended.detail, error_code=ended.code.value)
            for o in outcomes
        ]
    result = ReplayResult(suite, epoch_id, manifest.manifest_sha256, digest, tuple(outcomes))
    replace_file(out / SUMMARY, canonical_json(result.to_json()) + b"\n")
    return result
