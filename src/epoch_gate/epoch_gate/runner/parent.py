"""The replay runner's parent: judges each sampled property over every record of its bound, with the
product's code in child processes it never shares (`epoch_gate.runner.child`; `Child.children` of them,
side by side, which take the batches in turn).

The parent reads the world and imports the predicates (oracle code, from the sandbox under the oracle's
names only) before it starts the child; then the sandbox leaves its import path (`close_imports`). Each
predicate runs here, on records the parent parsed from its own copy of the bytes, and drives the product
through the child, whose answers are only ever JSON the parent parses itself
(`epoch_gate.runner.judging`). The parent writes the witnesses, the observations and replay.json from
its own copies, and nothing until the child's whole process group is dead (`Channel.close`).

A violated record is judged again once on the same bytes, after its property's scan: violated twice is
a `fail`, holding the second time a `flake`. Every record of a bound is judged (a flake never hides a
later failure, and the count is evidence the gate checks against the world) unless the predicate itself
fails: the property is then an `error`. Stdlib only, so it runs in a bare sandboxed interpreter.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import importlib
import inspect
import itertools
import json
import shutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

from epoch_gate.evidence.atomic import replace_file
from epoch_gate.evidence.catalog import Property
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.manifest import Manifest
from epoch_gate.evidence.observations import Observation, make_observation, write_observation
from epoch_gate.reasons import Code, EvidenceError
from epoch_gate.evidence.replay_result import OBSERVATIONS, SUMMARY, PropertyOutcome, ReplayResult
from epoch_gate.runner import judging, protocol
from epoch_gate.runner.channel import Channel, ChildFailed, Fate, Holding, close_all, guard_parent
from epoch_gate.runner.confine import ChildJail, Limits
from epoch_gate.runner.finder import SandboxFinder
from epoch_gate.evidence.world import LoadedWorld, load_world, record_batches

Predicate = Callable[[object, judging.Product], object]
Batch = list[tuple[int, bytes]]  # (line number, exact record bytes)
IN_FLIGHT = 2  # batches sent and not yet answered: the child always has the next one to work on
# Each batch's answers are thousands of small containers that live until the batch is judged: at
# Python's default thresholds the cyclic collector ran every 700 of them and tripled the cost of
# reading an answer (bench/replay_split.py). Nothing the runner builds is cyclic.
GC_THRESHOLDS = (100_000, 50, 100)


@dataclass(frozen=True)
class Child:
    """Where the child runs and what it may import: the sandbox (its cwd) under the product's
    `sandbox_names`, after the standard library, then `child_path` folders (third-party code). The
    parent's predicates import from the sandbox under `oracle_names` only. `jail`, when set, starts the
    child in a jail of its own; `limits` bound its process tree either way."""

    sandbox: Path
    sandbox_names: tuple[str, ...] = ()
    child_path: tuple[str, ...] = ()
    oracle_names: tuple[str, ...] = ()
    jail: Optional[ChildJail] = None
    limits: Limits = Limits()
    batch: int = 512  # records per batch of calls: few enough to overlap the two processes, many per syscall
    # Children that serve the product side by side, each in its own jail (a product slower than its judge
    # then takes more cores than one); `limits` bound each, and its resident memory and processes count
    # all of them together.
    children: int = 1


class _Speculation:
    """A property's first call, when its predicate has opened with the same callable on the record alone on
    every record so far (`f(record)`, the common shape): later batches send it before the predicate runs,
    so that the predicate runs once per record instead of twice."""

    def __init__(self) -> None:
        self.head: Optional[bytes] = None  # the call's target, encoded: a callable the product names
        self.off = False

    def calls(self, batch: Batch, exact: list[bool]) -> Optional[list[bytes]]:
        """The batch's calls sent ahead, or None. Only a record that may cross as its own bytes has one,
        so a batch holding another is run first (its bytes never reach the child: a record with a byte
        order mark, or the reference key)."""
        if self.off or self.head is None or not all(exact):
            return None
        head = b"[" + self.head + b",["
        return [head + raw + b"],{}]" for _, raw in batch]

    def learn(self, run: _BatchRun) -> None:
        if self.head is not None and all(session.speculative for session in run.sessions):
            return  # every record's first call was the one sent ahead (or it made none)
        for (_, raw), session, exact in zip(run.batch, run.sessions, run.exact):
            if not exact:
                continue  # its call is encoded, whatever the predicate's shape: it says nothing of it
            first = session.log[0][0] if session.log else b""
            suffix = b",[" + raw + b"],{}]"
            head = first[1 : len(first) - len(suffix)] if first.startswith(b"[") and first.endswith(suffix) else None
            if head is None or (self.head is not None and head != self.head):
                self.off = True
                return
            if self.head is None:
                try:
                    target = json.loads(head)
                except ValueError:
                    target = None
                if type(target) is not dict or type(target.get("m")) is not str:
                    self.off = True
                    return
                self.head = head


MAX_NAMES_TEXT = 1 << 16  # characters of the names a property's answers cross with (each batch sends them)


class _Projection:
    """The names a property's answers cross with (`protocol.calls`): those its predicate has read on its
    records so far (`judging.reads`), once it has judged a batch on whole answers: every field, but only
    the properties read, once a predicate reads a whole value (`plain`, `vars`). Whole answers before
    that, and for good when a run on the names read does not judge a record as its run on whole answers
    did. A record that reads a name they lack runs again on whole answers (`judging.run`), and the names
    are learned from every record judged on whole answers."""

    def __init__(self) -> None:
        self.names: protocol.Projection = None
        self.learned: frozenset[str] = frozenset()
        self.whole = False

    def learn(self, run: _BatchRun) -> None:
        if self.whole:
            return
        found = self.learned
        for (_, raw), session, verdict, exact in zip(run.batch, run.sessions, run.verdicts, run.exact):
            if session.projection is not None:
                continue  # what it read, its answers held
            # Judged on whole answers (its batch went before the names were learned, or it read more)
            names = judging.reads(run.predicate, raw, session, verdict, run.opening if exact else None, found)
            if names is None or sum(map(len, names)) > MAX_NAMES_TEXT:  # (reads bounds their number)
                self.whole, self.names = True, None
                return
            found = names
        self.learned, self.names = found, found | judging.SHADOWED


# Strict: a record with NaN, Infinity or a number no float holds is parsed by its run instead (json.loads,
# as before), so that it never crosses as its own bytes (`_exactly`).
_SCAN = json.JSONDecoder(parse_constant=protocol.refuse_constant, parse_float=protocol.finite).scan_once


def _exactly(line: str) -> bool:
    """Whether a record's text may cross as its own bytes: the child, which parses its calls as UTF-8
    JSON, then reads the very value the parent parsed, one the parent could encode itself (no lone
    surrogate) and in which no object is a reference (the protocol's "\\u0000ref" key)."""
    return "\\u0000" not in line and "\\ud" not in line and "\\uD" not in line


def _parsed(batch: Batch) -> list[object]:
    """Each record parsed for its first run, from one decoding of the whole batch (json.loads per record
    costs more than the parse itself): the value that spans exactly the record's UTF-8 text, which may
    then cross as its bytes, else UNPARSED (its run parses it with json.loads, which says why)."""
    try:
        lines = [b"\n".join([raw for _, raw in batch]).decode("utf-8")]
    except UnicodeDecodeError:  # each record on its own: whether one is exact never depends on its batch
        lines = [_text(raw) for _, raw in batch]
    parsed: list[object] = []
    for text in lines:
        start = 0
        for line in text.split("\n"):
            end = start + len(line)
            try:
                value, stop = _SCAN(text, start)
            except (StopIteration, ValueError, RecursionError):
                value, stop = judging.UNPARSED, -1
            # a record too deep never reaches the child
            exact = stop == end and _exactly(line) and not judging.text_too_deep(line)
            parsed.append(value if exact else judging.UNPARSED)
            start = end + 1
    return parsed


def _text(raw: bytes) -> str:
    """The record's UTF-8 text, or a text that parses as nothing."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd"


class _BatchRun:
    """A batch of records judged by one predicate: run, send the calls it waits on, take the answers, run
    again, until every record has its verdict."""

    def __init__(
        self,
        predicate: Predicate,
        opening: Optional[judging.Opening],
        batch: Batch,
        first: int,
        scope: int,
        channel: Channel,
        names: protocol.Projection,
    ) -> None:
        self.predicate, self.opening, self.batch, self.first, self.scope = predicate, opening, batch, first, scope
        self.channel = channel  # the child that holds the batch's answers: every call of the batch goes there
        self.names = names  # what its answers cross with (a record that reads more runs on whole ones)
        self.sessions = [judging.Session() for _ in batch]
        for session in self.sessions:
            session.projection = names
        self.verdicts: list[Optional[judging.Verdict]] = [None] * len(batch)
        self.waiting: list[int] = list(range(len(batch)))
        self.parsed: Optional[list[object]] = _parsed(batch)  # each record for its first run; None once used
        self.exact = [value is not judging.UNPARSED for value in self.parsed]  # may cross as its bytes
        self.held = 0  # what its answers so far take of the judge's memory (`Holding`)

    def start(self, speculation: _Speculation) -> list[bytes]:
        """The first calls: the speculated ones, or those the predicate makes when run."""
        calls = speculation.calls(self.batch, self.exact)
        if calls is None:
            return self.step()
        for session, call in zip(self.sessions, calls):
            session.pending, session.speculative = call, True
        return calls

    def step(self) -> list[bytes]:
        """Runs every record still waiting; returns the calls they now wait on, in order."""
        waiting, calls = [], []
        run, predicate, batch, sessions, parsed = judging.run, self.predicate, self.batch, self.sessions, self.parsed
        opening, exact = self.opening, self.exact
        for index in self.waiting:
            session = sessions[index]
            record = judging.UNPARSED if parsed is None else parsed[index]
            verdict = run(predicate, batch[index][1], session, record, opening if exact[index] else None)
            if verdict is None:
                waiting.append(index)
                calls.append(session.pending)
            else:
                self.verdicts[index] = verdict
        self.waiting, self.parsed = waiting, None
        return calls  # type: ignore[return-value]

    def send(self, calls: list[bytes]) -> None:
        """The calls the waiting records wait on, to the batch's child (whole answers to those that read
        more than the names)."""
        sessions = self.sessions
        whole = [] if self.names is None else [n for n, i in enumerate(self.waiting) if sessions[i].projection is None]
        self.channel.send(self.scope, calls, self.names, whole)

    def answer(self, answers: list[list[object]]) -> None:
        for index, raw in zip(self.waiting, answers):
            session = self.sessions[index]
            session.log.append((session.pending, judging.decode(self.scope, raw)))  # type: ignore[arg-type]


class _Scopes:
    """Numbers the batches' scopes: each batch's product values live in the child until it is judged."""

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        self.next += 1
        return self.next


def _judge_batches(
    channels: Sequence[Channel], predicate: Predicate, batches: Iterable[Batch], scopes: _Scopes
) -> Iterator[_BatchRun]:
    """Each batch's run once every record has its verdict, in no particular order. The batches go to the
    children in turn (the same child for the same batch, whatever the timing), up to IN_FLIGHT each at a
    time; answers are read in the order the batches went, which is the order each child answers its own."""
    pending: collections.deque[_BatchRun] = collections.deque()
    holding = Holding()  # every round's answers of every batch not yet judged
    turn = itertools.cycle(channels)
    speculation = _Speculation()
    projection = _Projection()
    opening = judging.opening(predicate)
    first = 0
    source = iter(batches)
    exhausted = False
    try:
        while True:
            while not exhausted and len(pending) < IN_FLIGHT * len(channels):
                batch = next(source, None)
                if batch is None:
                    exhausted = True
                    break
                run = _BatchRun(predicate, opening, batch, first, scopes.take(), next(turn), projection.names)
                first += len(batch)
                calls = run.start(speculation)
                if calls:
                    run.send(calls)
                    pending.append(run)
                else:
                    yield run
            if not pending:
                return
            run = pending.popleft()
            before = holding.held
            run.answer(run.channel.receive(len(run.waiting), holding))
            run.held += holding.held - before
            calls = run.step()
            if calls:
                run.send(calls)
                pending.append(run)
            else:
                run.channel.drop(run.scope)
                speculation.learn(run)
                projection.learn(run)
                holding.held -= run.held  # its answers go with it: the caller keeps only its verdicts
                yield run
    finally:
        # Stopped early (the predicate failed): the answers still owed are read, so that the channels
        # stay in step for the next property.
        while pending and channels[0].healthy():
            run = pending.popleft()
            run.channel.receive(len(run.waiting))
            run.channel.drop(run.scope)


@dataclass(frozen=True)
class _Violation:
    index: int  # among the bound's records, from 1
    line: int
    witness: bytes
    detail: str
    child: int  # which child answered for it: it is judged again there


class _OracleFailed(Exception):
    def __init__(self, verdict: judging.Verdict, index: int) -> None:
        super().__init__(verdict.detail)
        self.code, self.detail = Code(verdict.error), f"record {index}: {verdict.detail}"


def _violations(runs: Iterator[_BatchRun], channels: Sequence[Channel]) -> Iterator[_Violation]:
    for run in runs:
        if run.verdicts.count(judging.HELD) == len(run.verdicts):  # by identity first: the common case
            continue
        for offset, ((line, witness), verdict) in enumerate(zip(run.batch, run.verdicts), 1):
            assert verdict is not None
            if verdict.error:
                raise _OracleFailed(verdict, run.first + offset)
            if not verdict.held:
                yield _Violation(run.first + offset, line, witness, verdict.detail, channels.index(run.channel))


def _scan(
    channels: Sequence[Channel], prop: Property, predicate: Predicate, world: LoadedWorld, size: int, scopes: _Scopes
) -> tuple[int, list[_Violation], list[bool]]:
    """(records judged, the violations in record order, whether each held when judged again)."""
    counted: list[int] = []

    def counting() -> Iterator[Batch]:
        for batch in record_batches(world, prop.bound, size):
            counted.append(len(batch))
            yield batch

    runs = _judge_batches(channels, predicate, counting(), scopes)
    with contextlib.closing(runs):
        violations = sorted(_violations(runs, channels), key=lambda v: v.index)
    if not violations:
        return sum(counted), [], []
    held: dict[int, bool] = {}
    for child, channel in enumerate(channels):  # each violation again in the child that answered for it
        again = [(n, v) for n, v in enumerate(violations) if v.child == child]
        batches = [[(v.line, v.witness) for _, v in again[i : i + size]] for i in range(0, len(again), size)]
        reruns = _judge_batches([channel], predicate, batches, scopes)  # the parent's own copy of the bytes
        with contextlib.closing(reruns):
            for run in reruns:
                for offset, verdict in enumerate(run.verdicts):
                    assert verdict is not None
                    number = again[run.first + offset][0]
                    if verdict.error:
                        raise _OracleFailed(verdict, violations[number].index)
                    held[number] = verdict.held
    return sum(counted), violations, [held[i] for i in range(len(violations))]


def _error(prop: Property, code: Code, detail: str, count: int = 0) -> PropertyOutcome:
    return PropertyOutcome(prop.name, prop.bound, count, "error", (), detail[:500], code.value)


def _load_predicate(prop: Property) -> Union[Predicate, PropertyOutcome]:
    """The property's predicate, imported here under the oracle's names only, or why it cannot judge."""
    module, _, function = prop.predicate.partition(":")
    try:
        found = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:
        return _error(
            prop,
            Code.PREDICATE_ERROR,
            (
                f"cannot load predicate {prop.predicate}: it imports {exc.name}, which is not the oracle's. A "
                "predicate runs outside the product: take `product` as its second parameter and call the product "
                "through it (`product.pkg.module.function(...)`, docs/adopting.md) instead of importing it"
            ),
        )
    except Exception as exc:  # noqa: BLE001 - a predicate that cannot load is that property's error
        return _error(
            prop, Code.PREDICATE_ERROR, f"cannot load predicate {prop.predicate}: {type(exc).__name__}: {exc}"
        )
    try:
        parameters = len(inspect.signature(found).parameters)
    except (TypeError, ValueError):
        parameters = -1
    if parameters != 2:
        return _error(
            prop,
            Code.PREDICATE_ERROR,
            (
                f"predicate {prop.predicate} takes "
                f"{'no readable' if parameters < 0 else parameters} parameter{'' if parameters == 1 else 's'}, "
                "not (record, product): a predicate runs outside the product and calls it through `product` "
                "(docs/adopting.md)"
            ),
        )
    return found  # type: ignore[no-any-return]


Observed = list[tuple[Observation, bytes]]  # (observation, witness): written only once the child is dead


def replay_property(
    channels: Sequence[Channel],
    prop: Property,
    predicate: Predicate,
    world: LoadedWorld,
    suite: str,
    epoch_id: str,
    max_witnesses: int,
    batch: int,
    scopes: _Scopes,
) -> tuple[PropertyOutcome, Observed]:
    try:
        channels[0].check()  # a failure of any child is every child's (`Fate`)
        count, violations, reruns = _scan(channels, prop, predicate, world, batch, scopes)
    except ChildFailed as failed:
        return _error(prop, failed.code, failed.detail), []
    except _OracleFailed as failed:
        return _error(prop, failed.code, failed.detail), []
    except EvidenceError as failed:
        return _error(prop, failed.reason.code, failed.reason.message), []
    if count == 0:
        return _error(prop, Code.BOUND_MISSING, f"bound {prop.bound} has no records"), []
    failures = first_failure = 0
    observed: Observed = []
    try:
        for violation, rerun_held in zip(violations, reruns):
            if not rerun_held:
                failures += 1
                first_failure = first_failure or violation.index
                if failures > max_witnesses:
                    continue  # counted; the saved witnesses already show that it fails
            observation = make_observation(
                suite=suite,
                epoch_id=epoch_id,
                prop=prop.name,
                status="flake" if rerun_held else "fail",
                rerun_passed=rerun_held,
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


def _inside(entry: object, root: Path) -> bool:
    """Whether an import path entry is in `root` ('' and other relative entries: from the cwd)."""
    return isinstance(entry, str) and Path(entry).resolve().is_relative_to(root)


def close_imports(sandbox: Path) -> None:
    """Called once the runner and the predicates are imported, before the child starts: the child shares
    the sandbox and may write to it, and the runner's own folder (sys.path[0] in the jail), cwd-relative
    entries and the packages imported from it (epoch_gate, the oracle's) are all in it. Any later import
    of the parent (a lazy one of the standard library, say) can then only come from the standard library,
    never from a module the product planted."""
    root = sandbox.resolve()
    sys.path[:] = [entry for entry in sys.path if not _inside(entry, root)]
    for entry in [entry for entry in sys.path_importer_cache if _inside(entry, root)]:
        del sys.path_importer_cache[entry]
    for module in list(sys.modules.values()):
        # vars(), not getattr: a module's __getattr__ could import (or run) anything
        folders = vars(module).get("__path__") if isinstance(module, types.ModuleType) else None
        if any(_inside(folder, root) for folder in folders or ()):
            module.__path__ = []  # no new submodule from the sandbox either


@contextlib.contextmanager
def oracle_imports(sandbox: Path, names: Iterable[str]) -> Iterator[None]:
    finder = SandboxFinder(names, sandbox)
    sys.meta_path.append(finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _set_up_product(channels: Sequence[Channel], scopes: _Scopes, setup: str) -> None:
    """The product's own set-up (`module:function`, a framework's: Django's settings and tables), called
    once in each child before any property, as any product call is. It is product code, so its failure is
    the product's: the replay fails, naming it, and no property is judged."""
    scope = scopes.take()
    call = json.dumps([{"m": setup.replace(":", ".")}, [], {}]).encode()
    for channel in channels:
        channel.send(scope, [call])
    for channel in channels:
        (answer,) = channel.receive(1)
        channel.drop(scope)
        if answer[0] == "x":
            types, message, traceback = answer[1:]
            raised = f"{types[0]}: {message}" if types else message  # type: ignore[index]
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
) -> ReplayResult:
    # Everything the parent reads from the sandbox is read before the child starts: the world (hashed and
    # streamed from the same bytes) and the predicates; then the sandbox leaves the import path.
    gc.set_threshold(*GC_THRESHOLDS)
    loaded = load_world(world)
    digest = loaded.sha256()
    with oracle_imports(child.sandbox, child.oracle_names):
        predicates = [_load_predicate(prop) for prop in manifest.properties]
    close_imports(child.sandbox)
    product_names = set(child.sandbox_names) - set(child.oracle_names)
    guard_parent()
    fate = Fate()
    channels: list[Channel] = []
    scopes = _Scopes()
    try:
        for _ in range(max(1, child.children)):
            channels.append(Channel(child.sandbox, product_names, child.child_path, child.jail, child.limits, fate))
        if product_setup:
            _set_up_product(channels, scopes, product_setup)
        results = [
            (predicate, [])
            if isinstance(predicate, PropertyOutcome)
            else replay_property(channels, prop, predicate, loaded, suite, epoch_id, max_witnesses, child.batch, scopes)
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
