"""The replay runner's parent: evaluates each sampled property over every record of its bound, with the
product's code in a child process it never shares (`epoch_gate.child`).

The parent reads the world itself, streams each bound's records to the child in batches and takes back
exactly one verdict per record (`epoch_gate.stream`); it keeps its own copy of every record's bytes and
writes the witnesses, the observations and replay.json from those, never from what the child says. The
child shares the (writable) sandbox: the parent reads the world and imports its judges before starting
it, then takes the sandbox off its import path (`close_imports`), and writes nothing until the child's
whole process group is dead (`Channel.close`). A
child that breaks the protocol, ends early, or catches product code tampering with protected code makes
the property an `error` (`runner-protocol`, `predicate-replaced`), and so does anything extra on the
channel after the last answer, for every property.

A violation is rerun once on the same bytes, after its property's scan: violated twice is a `fail`,
holding on the rerun a `flake`. Every record of a bound is evaluated: a flake never hides a later
failure, and the record count is evidence the gate checks against the world. Stdlib only, so it runs in
a bare sandboxed interpreter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from epoch_gate import strictjson
from epoch_gate.atomic import replace_file
from epoch_gate.catalog import Property
from epoch_gate.channel import Batch, Channel, ChildFailed
from epoch_gate.hashing import canonical_json
from epoch_gate.judges import Judge, judge, load_judge, oracle_imports
from epoch_gate.manifest import Manifest
from epoch_gate.observations import Observation, make_observation, write_observation
from epoch_gate.reasons import Code, EvidenceError, fail
from epoch_gate.stream import HELD, OBSERVED, VIOLATED, ProtocolError, parse_detail, parse_observed
from epoch_gate.world import LoadedWorld, load_world, record_batches

OUTCOMES = ("pass", "fail", "flake", "error")
SUMMARY = "replay.json"
OBSERVATIONS = "observations"
SCHEMA = 3


@dataclass(frozen=True)
class PropertyOutcome:
    name: str
    bound: str
    records: int
    outcome: str
    observation_ids: tuple[str, ...]
    detail: str
    error_code: str = ""  # a reasons.Code value when outcome is "error"
    failures: int = 0  # records that failed twice; only `max_witnesses` of them are saved as witnesses
    first_failure: int = 0  # the first of them, counted from 1 among the bound's records; 0: none

    def summary(self) -> str:
        """One line for people: a count of records alone would read as a count of failures."""
        if self.outcome == "pass":
            return f"pass  {self.name} (all {self.records} {self.bound} records)"
        if self.outcome == "fail" and self.first_failure:
            return (f"fail  {self.name} (first failed at record {self.first_failure} of {self.records} "
                    f"{self.bound} records; {self.failures} failed)")
        if self.outcome == "fail":
            return f"fail  {self.name} ({self.failures} of {self.records} {self.bound} records failed)"
        if self.outcome == "flake":
            return f"flake {self.name} (flaked over {self.records} {self.bound} records)"
        return f"error {self.name}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "bound": self.bound, "records": self.records, "outcome": self.outcome,
                "observations": list(self.observation_ids), "detail": self.detail,
                "error_code": self.error_code, "failures": self.failures, "first_failure": self.first_failure}


@dataclass(frozen=True)
class ReplayResult:
    suite: str  # the sampled_properties target it replayed: the gate checks it is the one it asked for
    epoch_id: str
    manifest_sha256: str
    world_sha256: str  # the world the replay actually read: the gate compares it with the pin's
    properties: tuple[PropertyOutcome, ...]

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "suite": self.suite, "epoch_id": self.epoch_id, "manifest_sha256": self.manifest_sha256,
                "world_sha256": self.world_sha256, "properties": [p.to_json() for p in self.properties]}


@dataclass(frozen=True)
class Child:
    """Where the child runs and what it may import: the sandbox (its cwd) under `sandbox_names` and the
    oracle's names, after the standard library, then `child_path` folders (third-party code). The
    parent's judges import from the sandbox under `oracle_names` only."""

    sandbox: Path
    sandbox_names: tuple[str, ...] = ()
    child_path: tuple[str, ...] = ()
    oracle_names: tuple[str, ...] = ()
    batch: int = 512  # records per request: few enough to overlap reading and evaluating, many per syscall


@dataclass(frozen=True)
class _Violation:
    index: int  # among the bound's records, from 1
    line: int
    witness: bytes
    detail: str


def _held(verdict: bytes, witness: bytes, judge_with: Optional[Judge]) -> tuple[bool, str]:
    """A verdict line read strictly: a predicate's `1` or `!`, a probe's `=` (judged here) or `!`."""
    tag = verdict[:1]
    if tag == VIOLATED:
        return False, parse_detail(verdict)
    if judge_with is None and verdict == HELD:
        return True, ""
    if judge_with is not None and tag == OBSERVED:
        return judge(judge_with, witness, parse_observed(verdict))
    raise ProtocolError(f"an unexpected verdict {verdict[:40]!r}")


def _evaluate(channel: Channel, index: int, batches: Iterable[Batch],
              judge_with: Optional[Judge]) -> Iterator[tuple[Batch, Optional[list[tuple[bool, str]]]]]:
    """Each batch with (held, why) per record, in order; None when every record held (the common case,
    told without parsing a line)."""
    with contextlib.closing(channel.evaluate(index, batches)) as answers:
        for batch, verdicts in answers:
            if judge_with is None and verdicts.count(HELD) == len(verdicts):
                yield batch, None
                continue
            try:
                yield batch, [_held(verdict, witness, judge_with) for (_, witness), verdict in zip(batch, verdicts)]
            except ProtocolError as exc:
                raise channel.fail(Code.RUNNER_PROTOCOL, f"the child broke the protocol: {exc}") from None


def _scan(channel: Channel, index: int, prop: Property, world: LoadedWorld, judge_with: Optional[Judge],
          size: int) -> tuple[int, list[_Violation], list[bool]]:
    """(records evaluated, the violations, whether each held on its rerun)."""
    count = 0
    violations: list[_Violation] = []
    for batch, results in _evaluate(channel, index, record_batches(world, prop.bound, size), judge_with):
        if results is not None:
            violations.extend(_Violation(count + offset, line, witness, detail)
                              for offset, ((line, witness), (held, detail)) in enumerate(zip(batch, results), 1)
                              if not held)
        count += len(batch)
    if not violations:
        return count, [], []
    reruns: list[bool] = []
    rerun: Batch = [(v.line, v.witness) for v in violations]  # the parent's own copy of the bytes
    for batch, results in _evaluate(channel, index, (rerun[i:i + size] for i in range(0, len(rerun), size)),
                                    judge_with):
        reruns.extend([True] * len(batch) if results is None else [held for held, _ in results])
    return count, violations, reruns


def _error(prop: Property, code: Code, detail: str, count: int = 0) -> PropertyOutcome:
    return PropertyOutcome(prop.name, prop.bound, count, "error", (), detail[:500], code.value)


def _load_judge(prop: Property) -> Union[Judge, None, PropertyOutcome]:
    """The judge of a probe property, None without a probe, or the error when it cannot load."""
    if not prop.probe:
        return None
    try:
        return load_judge(prop.predicate)
    except Exception as exc:  # noqa: BLE001 - a judge that cannot load (say, it imports product code)
        return _error(prop, Code.PREDICATE_ERROR,
                      f"cannot load predicate {prop.predicate}: {type(exc).__name__}: {exc}")


Observed = list[tuple[Observation, bytes]]  # (observation, witness): written only once the child is dead


def replay_property(channel: Channel, index: int, prop: Property, judge_with: Optional[Judge], world: LoadedWorld,
                    suite: str, epoch_id: str, max_witnesses: int, batch: int) -> tuple[PropertyOutcome, Observed]:
    try:
        count, violations, reruns = _scan(channel, index, prop, world, judge_with, batch)
    except ChildFailed as failed:
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
                suite=suite, epoch_id=epoch_id, prop=prop.name, status="flake" if rerun_held else "fail",
                rerun_passed=rerun_held, witness=violation.witness, bound=prop.bound, line=violation.line,
                detail=violation.detail)
            observed.append((observation, violation.witness))
    except EvidenceError as failed:
        return _error(prop, failed.reason.code, failed.reason.message, count), []
    outcome = "fail" if failures else "flake" if observed else "pass"
    first = next((o for o, _ in observed if o.status == "fail"), observed[0][0] if observed else None)
    return (PropertyOutcome(prop.name, prop.bound, count, outcome, tuple(o.id for o, _ in observed),
                            first.detail if first else "", failures=failures, first_failure=first_failure),
            observed)


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
    """Called once the runner and the judges are imported, before the child starts: the child shares the
    sandbox and may write to it, and the runner's own folder (sys.path[0] in the jail), cwd-relative
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


def _calls(properties: Iterable[Property]) -> list[str]:
    """What the child runs per property: the probe when there is one, else the predicate."""
    return [f"probe={p.probe}" if p.probe else f"predicate={p.predicate}" for p in properties]


def run(manifest: Manifest, world: Path, out: Path, *, suite: str, epoch_id: str, child: Child,
        max_witnesses: int = 1) -> ReplayResult:
    # Everything the parent reads from the sandbox is read before the child starts: the world (hashed and
    # streamed from the same bytes) and the judges; then the sandbox leaves the import path.
    loaded = load_world(world)
    digest = loaded.sha256()
    with oracle_imports(child.sandbox, child.oracle_names):
        judges = [_load_judge(prop) for prop in manifest.properties]
    close_imports(child.sandbox)
    channel = Channel(_calls(manifest.properties), child.sandbox, (*child.sandbox_names, *child.oracle_names),
                      child.child_path)
    try:
        results = [(judge_with, []) if isinstance(judge_with, PropertyOutcome) else
                   replay_property(channel, index, prop, judge_with, loaded, suite, epoch_id, max_witnesses,
                                   child.batch)
                   for index, (prop, judge_with) in enumerate(zip(manifest.properties, judges))]
    except BaseException:
        channel.fail(Code.RUNNER_PROTOCOL, "the replay stopped")
        channel.close()
        raise
    # The child's whole process group is dead from here on (Channel.close): nothing it forked can rewrite
    # what is written next.
    ended = channel.close()
    # Whatever the child planted in the output folder before that is not evidence: start from nothing.
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    (out / OBSERVATIONS).mkdir(parents=True, exist_ok=True)
    outcomes = [_write_observations(prop, outcome, observed, out)
                for prop, (outcome, observed) in zip(manifest.properties, results)]
    if ended is not None:  # the channel carried more than the child's answers: none of them is evidence
        outcomes = [o if o.outcome == "error" else dataclasses.replace(
            o, outcome="error", detail=ended.detail, error_code=ended.code.value) for o in outcomes]
    result = ReplayResult(suite, epoch_id, manifest.manifest_sha256, digest, tuple(outcomes))
    replace_file(out / SUMMARY, canonical_json(result.to_json()) + b"\n")
    return result


def parse_result(data: bytes, path: str) -> ReplayResult:
    raw = strictjson.require_object(strictjson.loads(data, path), path,
                                    {"schema": int, "suite": str, "epoch_id": str, "manifest_sha256": str, "world_sha256": str,
                                     "properties": list})
    if raw["schema"] != SCHEMA:
        raise fail(Code.ARTIFACT_MALFORMED, path, "the replay summary has another schema",
                   expected=str(SCHEMA), found=str(raw["schema"]))
    outcomes = []
    for index, item in enumerate(raw["properties"]):
        entry = strictjson.require_object(item, f"{path}#properties[{index}]", {
            "name": str, "bound": str, "records": int, "outcome": str, "observations": list, "detail": str,
            "error_code": str, "failures": int}, optional={"first_failure": int})
        if entry["outcome"] not in OUTCOMES or not all(isinstance(i, str) for i in entry["observations"]):
            raise fail(Code.ARTIFACT_MALFORMED, path, f"property {index} has an unknown outcome",
                       expected="/".join(OUTCOMES), found=str(entry["outcome"])[:80])
        outcomes.append(PropertyOutcome(entry["name"], entry["bound"], entry["records"], entry["outcome"],
                                        tuple(entry["observations"]), entry["detail"], entry["error_code"],
                                        entry["failures"], entry.get("first_failure", 0)))
    return ReplayResult(raw["suite"], raw["epoch_id"], raw["manifest_sha256"], raw["world_sha256"], tuple(outcomes))


def load_result(path: Path, display: str) -> ReplayResult:
    return parse_result(strictjson.read_bytes(path, display), display)
