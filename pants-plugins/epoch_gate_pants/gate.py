"""`pants gate`: feeds the core's decision the build graph's facts and writes its report."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping, Optional

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.subsystems.setup import PythonSetup
from pants.base.build_root import BuildRoot
from pants.build_graph.address import Address
from pants.core.util_rules.distdir import DistDir
from pants.engine.console import Console
from pants.engine.env_vars import CompleteEnvironmentVars
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, Workspace
from pants.engine.goal import Goal
from pants.engine.internals.session import RunId
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.engine.target import AllTargets, Targets
from pants.util.logging import LogLevel
from pants.option.global_options import GlobalOptions
from pants.vcs.changed import Changed

from epoch_gate.evidence import held_out
from epoch_gate.verdict import annotations, attestation, dsse, report
from epoch_gate.change.buildfiles import build_file_problems
from epoch_gate.change.candidate import REGULAR_MODES, Candidate, files_at
from epoch_gate.verdict.suite import Identities
from epoch_gate.evidence.folders import output_folder
from epoch_gate.evidence.freezes import Freeze, parse_freeze_files
from epoch_gate.change.gather import Change, candidate_change, local_change, reviewed
from epoch_gate.change.changed import ChangedPath
from epoch_gate.change.git import read_at
from epoch_gate.evidence.held_out import LOCAL, Key, PropertyDraw
from epoch_gate.verdict.judge import ChangeFacts, HeldOutFacts, RegressionFacts, SuiteFacts, SuiteOracle, judge
from epoch_gate.evidence.observations import Observation, parse_observation_files
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.verdict.report import LOCAL_SIGNING, Report, Signing
from epoch_gate.text import printable
from epoch_gate_pants.candidate import CandidateFiles, candidate_files
from epoch_gate_pants.facts import held_out_facts, regression_facts, replay_facts, replay_line
from epoch_gate_pants.isolation import Jail, JailTools
from epoch_gate_pants.protected import ORACLE_TARGETS, ProtectedPaths
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.selfcheck import gate_code_shadowed
from epoch_gate_pants.subsystems import GateSubsystem
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest, Suite, SuiteRequest
from epoch_gate_pants.target_types import EpochFixtureHeldOutField, EpochFixturePinField, SampledPropertiesTarget

logger = logging.getLogger(__name__)


class Gate(Goal):
    subsystem_cls = GateSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def _today(gate: GateSubsystem) -> tuple[datetime.date, list[Reason]]:
    if not gate.today:
        return datetime.datetime.now(datetime.timezone.utc).date(), []
    try:
        return datetime.date.fromisoformat(gate.today), []
    except ValueError:
        return datetime.date.min, [
            Reason(
                Code.ARTIFACT_MALFORMED,
                "pants.toml",
                "[gate].today as YYYY-MM-DD",
                gate.today,
                "the [gate].today option is not an ISO date",
            )
        ]


def _folder_glob(folder: str) -> PathGlobs:
    return PathGlobs([f"{folder.rstrip('/')}/*"])


def _by_name(contents: DigestContents) -> dict[str, bytes]:
    return {Path(c.path).name: c.content for c in contents}


@dataclass(frozen=True)
class _Suite:
    """A suite of the repository as the gate sees it: its oracle files, and why it cannot be replayed."""

    address: Address
    oracle: Optional[SuiteOracle]
    problem: Optional[Reason]


@dataclass(frozen=True)
class _RunsRequest:
    whole: bool  # every suite is in scope, whatever the specs
    candidate: Optional[CandidateFiles]
    tree_key: Optional[str] = field(default=None, repr=False)  # held_out.draw_key: held-out draws when set


@dataclass(frozen=True)
class _Runs:
    """Every suite of the repository, and the replay run and output of each suite in scope that has one,
    and of its held-out world when one was drawn (else why not, by address)."""

    suites: tuple[_Suite, ...]
    in_scope: tuple[_Suite, ...]
    runs: tuple[tuple[ReplayRun, DigestContents], ...]
    held_out: tuple[tuple[ReplayRun, DigestContents], ...] = ()
    not_drawn: tuple[tuple[Address, str], ...] = ()
    regressions: tuple[tuple[ReplayRun, DigestContents], ...] = ()  # each replayed suite's regression records


def _held_out(request: _RunsRequest, suites: list[Suite]) -> tuple[list[Address], list[tuple[Address, str]]]:
    """The suites to replay over a held-out world too, and why each other one is not."""
    if request.tree_key is None:
        return [], []
    drawn = [s.target.address for s in suites if s.fixture[EpochFixtureHeldOutField].value]  # type: ignore[index]
    return drawn, [
        (s.target.address, f"opted out (`held_out=False` on {s.fixture.address})")  # type: ignore[union-attr]
        for s in suites
        if s.target.address not in drawn
    ]


@dataclass(frozen=True)
class _Announced:
    """A suite's replay run and its output, said in one line as soon as that suite's replay is done."""

    run: ReplayRun
    contents: DigestContents


@rule(desc="Replay a suite", level=LogLevel.DEBUG)
async def announce_replay(request: ReplayRequest, run_id: RunId) -> _Announced:
    # RunId makes this rule run in every session, so the line is said in each run, pantsd or not.
    run = await Get(ReplayRun, ReplayRequest, request)
    contents = await Get(DigestContents, Digest, run.output)
    line = replay_line(run, contents, run_id)
    if line:
        logger.info(line)
    return _Announced(run, contents)


@rule(desc="Replay the suites in scope", level=LogLevel.DEBUG)
async def replay_suites_in_scope(request: _RunsRequest, specified: Targets, all_targets: AllTargets) -> _Runs:
    everything = [t for t in all_targets if isinstance(t, SampledPropertiesTarget)]
    chosen = {t.address for t in (everything if request.whole else specified) if isinstance(t, SampledPropertiesTarget)}
    resolved = await MultiGet(Get(Suite, SuiteRequest(t.address)) for t in everything)
    usable = [s for s in resolved if s.problem is None and s.fixture is not None and s.manifest is not None]
    replayed = [s.target.address for s in usable if s.target.address in chosen]
    held, not_drawn = _held_out(request, [s for s in usable if s.target.address in chosen])
    # The replays start with the manifests' checks, not after them (each replay reads its own manifest),
    # and the held-out ones beside the pinned ones.
    checked = await MultiGet(
        [
            *(Get(ManifestFiles, ManifestFilesRequest(s.manifest.address)) for s in usable),
            *(
                Get(_Announced, ReplayRequest(address, candidate=request.candidate, property_key=request.tree_key))
                for address in replayed
            ),
            *(
                Get(
                    _Announced,
                    ReplayRequest(
                        address,
                        candidate=request.candidate,
                        held_out_key=request.tree_key,
                        property_key=request.tree_key,
                    ),
                )
                for address in held
            ),
            *(
                Get(_Announced, ReplayRequest(address, candidate=request.candidate, regressions=True))
                for address in replayed
            ),
        ]
    )
    manifests, runs = checked[: len(usable)], checked[len(usable) : len(usable) + len(replayed)]
    held_runs = checked[len(usable) + len(replayed) : len(usable) + len(replayed) + len(held)]
    kept_runs = checked[len(usable) + len(replayed) + len(held) :]
    oracles = {
        s.target.address: SuiteOracle(
            str(s.target.address),
            s.fixture[EpochFixturePinField].file_path,
            m.manifest_path,
            m.catalog_path,
            m.predicate_paths,
        )
        for s, m in zip(usable, manifests)
    }
    suites = tuple(_Suite(s.target.address, oracles.get(s.target.address), s.problem) for s in resolved)
    return _Runs(
        suites,
        tuple(s for s in suites if s.address in chosen),
        tuple((r.run, r.contents) for r in runs),
        tuple((r.run, r.contents) for r in held_runs),
        tuple(not_drawn),
        tuple((r.run, r.contents) for r in kept_runs),
    )


def _facts(
    suite: _Suite,
    run: Optional[ReplayRun],
    contents: Optional[DigestContents],
    isolation: str,
    run_id: RunId,
    held: HeldOutFacts,
    draw: PropertyDraw,
    kept: RegressionFacts,
) -> SuiteFacts:
    """One suite's facts: from its replay run, or the reason it has none."""
    if run is None or suite.oracle is None:
        oracle = suite.oracle or SuiteOracle(str(suite.address), "", "", "", ())
        return SuiteFacts(
            oracle,
            Identities(None, None, None, isolation=isolation),
            None,
            None,
            (suite.problem,) if suite.problem else (),
            held_out=held,
            property_draw=draw,
            regressions=kept,
        )
    return replay_facts(suite.oracle, run, contents, isolation, run_id, held, draw, kept)


def _held_out_key(
    gate: GateSubsystem, environment: CompleteEnvironmentVars
) -> tuple[Optional[bytes], Optional[Reason]]:
    """The held-out key, read before the gate starts any process of its own, and taken out of this
    process's environment (without pantsd it is the client's): git and the parsers the gate runs do not
    inherit it."""
    found = held_out.load_key(Key(gate.held_out_key_env, gate.held_out_key_file), environment)
    os.environ.pop(gate.held_out_key_env, None)
    return found


def _signing_key(
    gate: GateSubsystem, environment: CompleteEnvironmentVars, trusted: bool, pantsd: bool
) -> tuple[Optional[Ed25519PrivateKey], Signing, list[Reason]]:
    """The statement's signing key, read with the held-out key and taken out of this process's environment
    likewise; what the report says of the statement; and what closes the gate: a key that cannot be read,
    or one that reached a daemon (which keeps its environment for later runs)."""
    key, why = dsse.signing_key(gate.statement_key_env, gate.statement_key_file, environment)
    os.environ.pop(gate.statement_key_env, None)
    source = gate.statement_key_file or f"${gate.statement_key_env}"
    found = why
    if key is not None and pantsd:
        key, found = None, "pantsd"
        why = "the signing key reached a Pants daemon, which would keep it for later runs: sign without pantsd"
    if not trusted:
        return None, LOCAL_SIGNING, []
    if key is not None:
        return key, Signing(True, dsse.key_id(key.public_key())), []
    if not why:
        return None, Signing(False, why=f"no key ({source} is unset): the statement is unsigned"), []
    refusal = Reason(Code.STATEMENT_KEY_UNUSABLE, source, "an Ed25519 signing key, without pantsd", found, why)
    return None, Signing(False, why=why), [refusal]


def _jailed_key(
    gate: GateSubsystem, setup: _SetUp, jail: Jail
) -> tuple[Optional[Ed25519PrivateKey], Signing, list[Reason]]:
    """The signing key only for a run whose replays were jailed: unjailed (`unsafe_allow_unjailed_verdict`),
    the candidate's code ran beside the gate, where it could read the gate's environment and files."""
    if setup.signing_key is None or jail.isolation.jailed:
        return setup.signing_key, setup.signing, []
    why = "the replays ran outside the jail, where the candidate's code could read the key: rotate it, and sign only jailed runs"
    source = gate.statement_key_file or f"${gate.statement_key_env}"
    return None, Signing(False, why=why), [Reason(Code.STATEMENT_KEY_UNUSABLE, source, "a jailed run", "unjailed", why)]


def _base_reader(root: Path, base: Optional[str], pins: set[str]) -> Optional[Callable[[str], Optional[bytes]]]:
    """Files at the base: every suite's pin read in one batch up front (the judge reads them all on every
    run, and a git process per suite would dominate a no-op gate over hundreds of suites), others one by one."""
    if not base:
        return None
    try:
        known = files_at(root, base, pins)
    except EvidenceError:
        known = {}  # then each is read alone, and a failure there is the judge's to report
    return lambda path: known[path] if path in known else read_at(root, base, path)


def _build_files(changed: tuple[ChangedPath, ...], build_patterns: tuple[str, ...], deleted: bool = False) -> list[str]:
    """The changed BUILD files, or the deleted ones."""
    return [
        c.path
        for c in changed
        if (c.status == "deleted") == deleted
        and any(fnmatch.fnmatchcase(PurePosixPath(c.path).name, p) for p in build_patterns)
    ]


async def _candidate_files(
    root: Path, change: Change, build_patterns: tuple[str, ...], python_setup: PythonSetup
) -> tuple[Change, Optional[CandidateFiles]]:
    """Trusted mode: the candidate's BUILD files checked (never loaded here, but once merged every judge
    would execute them; and against the base's, so that no target's code is installed otherwise), and its
    files as a digest for the replays."""
    candidate = change.candidate
    if candidate is None:
        return change, None
    builds = _build_files(candidate.changed, build_patterns)
    deleted = _build_files(candidate.changed, build_patterns, deleted=True)  # compared as empty
    modes = {p: candidate.entries.get(p, ("", ""))[0] for p in builds}  # none: a name that is not UTF-8
    linked = [p for p in builds if modes[p] not in REGULAR_MODES]
    findings = [
        *change.findings,
        *(
            Reason(
                Code.PATH_NOT_REGULAR,
                path,
                "a regular file",
                f"git mode {modes[path]}" if modes[path] else "a name that is not UTF-8",
                "a BUILD file of this change is not a regular file: Pants would read what it points to, the "
                "gate only git's link text",
            )
            for path in linked
        ),
        *build_file_problems(
            {
                **{p: read_at(root, candidate.tree, p) or b"" for p in builds if p not in linked},
                **{p: b"" for p in deleted},
            },
            [t.alias for t in ORACLE_TARGETS],
            {p: read_at(root, candidate.base, p) for p in (*builds, *deleted)},
            python_setup.default_resolve,
        ),
    ]
    try:
        files, irregular = candidate_files(root, candidate)
    except EvidenceError as error:
        return dataclasses.replace(change, findings=(*findings, error.reason)), None
    digest = CandidateFiles(await Get(Digest, CreateDigest(files)), tuple(irregular))
    return dataclasses.replace(change, findings=tuple(findings)), digest


def _key_under_pantsd(gate: GateSubsystem) -> Reason:
    """A daemon keeps the environment it was started with and serves later runs: the key must not reach one."""
    return Reason(
        Code.HELD_OUT_UNAVAILABLE,
        gate.held_out_key_file or f"${gate.held_out_key_env}",
        "a run without pantsd (`--no-pantsd`)",
        "pantsd",
        "the held-out key reached a Pants daemon, which would keep it for later runs: judge with the key "
        "only as the CI recipes do, `pants --no-pantsd --no-pantsrc gate --gate-candidate=...`",
        "Pass the key only to a gate run without pantsd, as the CI recipes do.",
    )


def _draw(
    gate: GateSubsystem, candidate: Optional[Candidate], key: Optional[bytes], unusable: Optional[Reason]
) -> tuple[Optional[str], tuple[str, str], list[Reason]]:
    """Held-out draws (trusted mode with the key): the merged tree's draw key, from which each suite's
    seeds are derived (the key itself goes no further), or why no world and why no property is drawn;
    and what that closes."""
    if candidate is None:
        return None, (LOCAL, held_out.LOCAL_PROPERTIES), []
    if unusable is not None:
        return None, (unusable.message, unusable.message), [unusable]
    if key is None:
        required = (
            [
                Reason(
                    Code.HELD_OUT_UNAVAILABLE,
                    f"${gate.held_out_key_env}",
                    "the held-out key",
                    "unset",
                    "[gate].held_out_required: trusted mode judges held-out worlds too, and the key is not "
                    "set: pass the CI secret to the gate step",
                    "Pass the held-out key (the CI secret) to the gate step.",
                )
            ]
            if gate.held_out_required
            else []
        )
        env = gate.held_out_key_env
        return None, (held_out.no_key(env), held_out.no_key_properties(env)), required
    not_replayed = "the suite was not replayed"
    return held_out.draw_key(key, candidate.tree), (not_replayed, not_replayed), []


async def _evidence_files(gate: GateSubsystem) -> tuple[list[Observation], list[Freeze], list[Reason]]:
    """The archived observations and the freezes, and what is wrong with them."""
    archive_files, freeze_files = await MultiGet(
        Get(DigestContents, PathGlobs, _folder_glob(gate.observations_dir)),
        Get(DigestContents, PathGlobs, _folder_glob(gate.freezes_dir)),
    )
    archive, archive_reasons = parse_observation_files(_by_name(archive_files), gate.observations_dir, "archive")
    freezes, freeze_reasons = parse_freeze_files(_by_name(freeze_files), gate.freezes_dir)
    return archive, freezes, [*archive_reasons, *freeze_reasons]


def _print(
    console: Console,
    gate: GateSubsystem,
    result: Report,
    wanted: str,
    out: Optional[str],
    fallback: str,
    unsafe: list[Reason],
) -> None:
    for line in report.console_lines(result):
        console.print_stdout(line)
    for line in annotations.lines(result.to_json(), gate.annotations):
        console.print_stdout(line)
    for reason in unsafe:
        console.print_stderr(printable(f"not written to {wanted}: {reason.path} is {reason.found}"))
    console.print_stderr(
        printable(
            f"report: {out}/report.json ({out}/report.md)"
            if out is not None
            else f"no report written: neither {wanted} nor {fallback} is a safe folder"
        )
    )


def _suite_facts(
    repository: _Runs, isolation: str, held_out_why: str, properties_why: str, run_id: RunId
) -> list[SuiteFacts]:
    """Each suite in scope's facts: its replay run and its held-out run, or why it has none."""
    by_address = {r.address: (r, c) for r, c in repository.runs}
    held_by_address = {r.address: (r, c) for r, c in repository.held_out}
    kept_by_address = {r.address: (r, c) for r, c in repository.regressions}
    not_drawn = dict(repository.not_drawn)
    facts = []
    for s in repository.in_scope:
        run, contents = by_address.get(s.address, (None, None))
        held = held_out_facts(held_by_address.get(s.address), not_drawn.get(s.address, held_out_why), isolation, run_id)
        draw = run.draw if run is not None and run.draw is not None else PropertyDraw(False, properties_why)
        kept = regression_facts(kept_by_address.get(s.address), run, isolation, run_id)
        facts.append(_facts(s, run, contents, isolation, run_id, held, draw, kept))
    return facts


def _output_paths(root: Path, gate: GateSubsystem, dist_dir: DistDir, global_options: GlobalOptions) -> tuple[str, str]:
    """Where the report goes, and where it goes instead when a committed `dist` file or symlink would make
    that write crash or redirect it."""
    wanted = os.path.normpath(Path(dist_dir.relpath) / gate.output_dir)
    return wanted, os.path.relpath(Path(global_options.pants_workdir, "epoch_gate", "gate"), root)


async def _write(workspace: Workspace, out: str, files: Mapping[str, bytes]) -> None:
    digest = await Get(Digest, CreateDigest([FileContent(f"{out}/{name}", data) for name, data in files.items()]))
    workspace.write_digest(digest, clear_paths=(out,))


@dataclass(frozen=True)
class _SetUp:
    """The change as gathered, before any replay: the mode's facts, the candidate's files in trusted mode,
    the held-out draw's key (never the key itself) or why none, and what already closes the gate."""

    root: Path
    change: Change
    candidate_files: Optional[CandidateFiles]
    tree_key: Optional[str]
    held_out_why: str
    properties_why: str
    today: datetime.date
    findings: tuple[Reason, ...]
    signing_key: Optional[Ed25519PrivateKey] = field(default=None, repr=False)
    signing: Signing = LOCAL_SIGNING


async def _set_up(
    gate: GateSubsystem,
    changed: Changed,
    global_options: GlobalOptions,
    environment: CompleteEnvironmentVars,
    python_setup: PythonSetup,
) -> _SetUp:
    shadowed = gate_code_shadowed()  # the code deciding must be the gate's own
    key, unusable = _held_out_key(gate, environment)  # read before this run starts any process of its own
    if key is not None and global_options.pantsd:
        key, unusable = None, _key_under_pantsd(gate)
    signing_key, signing, unsigned = _signing_key(gate, environment, bool(gate.candidate), global_options.pantsd)
    today, problems = _today(gate)
    root = Path(BuildRoot().path)
    gathered = (
        candidate_change(root, gate.candidate, gate.trusted_refs)
        if gate.candidate
        else local_change(root, changed.since or gate.base, gate.trusted_refs)
    )
    build_patterns = tuple(global_options.build_patterns)
    change, candidate_files = await _candidate_files(root, gathered, build_patterns, python_setup)
    tree_key, (held_out_why, properties_why), refused = _draw(gate, change.candidate, key, unusable)
    findings = (*shadowed, *problems, *change.findings, *refused, *unsigned)
    return _SetUp(
        root, change, candidate_files, tree_key, held_out_why, properties_why, today, findings, signing_key, signing
    )


def _change_facts(
    gate: GateSubsystem,
    setup: _SetUp,
    protected: ProtectedPaths,
    repository: _Runs,
    out: str,
    archive: tuple[Observation, ...],
    freezes: tuple[Freeze, ...],
    found: tuple[Reason, ...],
    statement: Signing,
) -> ChangeFacts:
    return ChangeFacts(
        mode="trusted" if gate.candidate else "local",
        base=setup.change.base,
        changed=setup.change.changed,
        protected=protected.as_set(),
        oracles=tuple(s.oracle for s in repository.suites if s.oracle is not None),
        archive=archive,
        freezes=freezes,
        today=setup.today,
        observations_dir=gate.observations_dir,
        freezes_dir=gate.freezes_dir,
        out=out,
        findings=(*setup.findings, *found),
        statement=statement,
    )


@goal_rule
async def run_gate(
    console: Console,
    workspace: Workspace,
    gate: GateSubsystem,
    changed: Changed,
    dist_dir: DistDir,
    global_options: GlobalOptions,
    run_id: RunId,
    environment: CompleteEnvironmentVars,
    python_setup: PythonSetup,
) -> Gate:
    # Said at once, and when the change is read: what follows (the protected set, the replays) names its
    # own work as it runs, and nobody waits on a silent log.
    judged = f"the candidate {gate.candidate} (trusted mode)" if gate.candidate else "the working tree (local mode)"
    logger.info(f"gate: judging {judged}: reading the change")
    setup = await _set_up(gate, changed, global_options, environment, python_setup)
    found = setup.change.changed
    logger.info(
        f"gate: {len(found)} changed path{'' if len(found) == 1 else 's'} since {setup.change.base}; deriving the "
        "protected set and replaying the suites in scope"
        if found is not None
        else "gate: the changed set is unavailable (the report says why); replaying the suites in scope"
    )

    # In scope: the suites the specs select; with --changed-since (which replaces the specs) every suite,
    # since an unaffected suite's replay is a cache hit and no hand-kept selection can miss an input. In
    # trusted mode every suite too: an attested verdict speaks for the repository, whatever specs CI gave.
    # The jail's tools (and pex) first and alone: they are downloads, which wait behind every file read
    # of the graph's work (`fetch_jail_tools` says why). The jail's probe (an interpreter search, seconds
    # in a cold run) then overlaps that work: the replays ask for the jail when their processes are built.
    await Get(JailTools)
    jail, protected, repository = await MultiGet(
        Get(Jail, InterpreterConstraints, InterpreterConstraints(python_setup.interpreter_constraints)),
        Get(ProtectedPaths),
        Get(_Runs, _RunsRequest(bool(changed.since or gate.candidate), setup.candidate_files, setup.tree_key)),
    )
    archive, freezes, evidence_reasons = await _evidence_files(gate)
    tree, tree_reasons = reviewed(setup.root, setup.change)
    wanted, fallback = _output_paths(setup.root, gate, dist_dir, global_options)
    out_or_none, unsafe = output_folder(setup.root, wanted, fallback)
    out = out_or_none or wanted
    key, signing, exposed = _jailed_key(gate, setup, jail)
    found = (*evidence_reasons, *tree_reasons, *unsafe, *exposed)
    judgement = judge(
        _change_facts(gate, setup, protected, repository, out, tuple(archive), tuple(freezes), found, signing),
        _suite_facts(repository, jail.description, setup.held_out_why, setup.properties_why, run_id),
        read_base=_base_reader(setup.root, setup.change.base, {s.oracle.pin for s in repository.suites if s.oracle}),
        read_change=setup.change.reader(setup.root),
        root=setup.root,
    )
    files = attestation.output_files(
        judgement.report,
        judgement.witnesses,
        tree,
        time=datetime.datetime.now(datetime.timezone.utc),
        root=setup.root,
        key=key,
    )
    if out_or_none is not None:
        await _write(workspace, out, files)
    _print(console, gate, judgement.report, wanted, out_or_none, fallback, unsafe)
    return Gate(exit_code=judgement.report.verdict.label.exit_code)


def rules() -> list:
    return [*collect_rules()]
