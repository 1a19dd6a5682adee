"""`pants gate`: feeds the core's decision the build graph's facts and writes its report."""

from __future__ import annotations

import datetime
import fnmatch
import os
from pathlib import Path, PurePosixPath

from pants.base.build_root import BuildRoot
from pants.core.util_rules.distdir import DistDir
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, Workspace
from pants.engine.goal import Goal
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import AllTargets
from pants.option.global_options import GlobalOptions
from pants.vcs.changed import Changed

from epoch_gate import annotations, attestation, report
from epoch_gate.buildfiles import build_file_problems
from epoch_gate.candidate import open_candidate
from epoch_gate.changes import (
    ChangedPath,
    ProtectedSet,
    changed_paths,
    check_trusted,
    default_base,
    protected_changes,
    read_at,
)
from epoch_gate.check import check_replay
from epoch_gate.decision import Evidence, Expected, Identities, decide
from epoch_gate.folders import output_folder
from epoch_gate.freezes import parse_freeze_files
from epoch_gate.observations import parse_observation_files
from epoch_gate.oracle import OraclePaths, oracle_changes, read_file
from epoch_gate.protection import irregular_paths, pinned_at_base
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.text import printable
from epoch_gate.tree import reviewed_tree
from epoch_gate_pants.candidate import CandidateFiles, candidate_files
from epoch_gate_pants.isolation import Jail
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.selfcheck import shadowing
from epoch_gate_pants.subsystems import GateSubsystem
from epoch_gate_pants.suite import Suite, SuiteRequest
from epoch_gate_pants.target_types import SampledPropertiesTarget


class Gate(Goal):
    subsystem_cls = GateSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def _today(gate: GateSubsystem) -> tuple[datetime.date, list[Reason]]:
    if not gate.today:
        return datetime.datetime.now(datetime.timezone.utc).date(), []
    try:
        return datetime.date.fromisoformat(gate.today), []
    except ValueError:
        return datetime.date.min, [Reason(Code.ARTIFACT_MALFORMED, "pants.toml", "[gate].today as YYYY-MM-DD",
                                          gate.today, "the [gate].today option is not an ISO date")]


def _folder_glob(folder: str) -> PathGlobs:
    return PathGlobs([f"{folder.rstrip('/')}/*"])


def _by_name(contents: DigestContents) -> dict[str, bytes]:
    return {Path(c.path).name: c.content for c in contents}


@goal_rule
async def run_gate(console: Console, workspace: Workspace, gate: GateSubsystem, changed: Changed,
                   all_targets: AllTargets, dist_dir: DistDir, jail: Jail,
                   global_options: GlobalOptions) -> Gate:
    findings: list[Reason] = shadowing()  # the code deciding must be the gate's own
    today, problems = _today(gate)
    findings += problems

    # The changed set: in trusted mode git's merge of the candidate into this checkout's commit, against
    # that commit; else the working tree's against --changed-since, [gate].base, or the trusted ref.
    changed_set: tuple[ChangedPath, ...] | None = None
    merge_base, candidate, candidate_digest = None, None, None
    root = Path(BuildRoot().path)
    try:
        if gate.candidate:
            candidate = open_candidate(root, gate.candidate, gate.trusted_refs)
            merge_base, changed_set = candidate.base, candidate.changed
            # Its BUILD files are never loaded here, but once merged every judge would execute them.
            builds = [c.path for c in candidate.changed if c.status != "deleted" and any(
                fnmatch.fnmatchcase(PurePosixPath(c.path).name, p) for p in global_options.build_patterns)]
            findings += build_file_problems({p: read_at(root, candidate.tree, p) or b"" for p in builds})
            files, irregular = candidate_files(root, candidate)
            candidate_digest = CandidateFiles(await Get(Digest, CreateDigest(files)), tuple(irregular))
        else:
            merge_base, changed_set = changed_paths(
                root, changed.since or gate.base or default_base(root, gate.trusted_refs))
            check_trusted(root, merge_base, gate.trusted_refs)
    except EvidenceError as error:
        findings.append(error.reason)

    suites = [t for t in all_targets if isinstance(t, SampledPropertiesTarget)]
    if len(suites) != 1:
        findings.append(Reason(Code.ARTIFACT_MISSING if not suites else Code.ARTIFACT_MALFORMED, "BUILD",
                               "exactly one sampled_properties target", f"{len(suites)}",
                               "the gate judges one suite of sampled properties"))
    protected = await Get(ProtectedPaths)
    suite = await Get(Suite, SuiteRequest(suites[0].address)) if len(suites) == 1 else None
    if suite is not None and suite.problem is not None:
        findings.append(suite.problem)
        suite = None
    archive_files, freeze_files = await MultiGet(
        Get(DigestContents, PathGlobs, _folder_glob(gate.observations_dir)),
        Get(DigestContents, PathGlobs, _folder_glob(gate.freezes_dir)),
    )
    archive, archive_reasons = parse_observation_files(_by_name(archive_files), gate.observations_dir, "archive")
    freezes, freeze_reasons = parse_freeze_files(_by_name(freeze_files), gate.freezes_dir)
    findings += archive_reasons + freeze_reasons

    identities = Identities(None, None, None, isolation=jail.isolation.description)
    replay_result, replayed, witnesses, expected = None, (), {}, None
    if suite is not None:
        run = await Get(ReplayRun, ReplayRequest(suite.target.address, candidate=candidate_digest))
        findings += run.reasons
        pin, manifest = run.epoch.pin.pin, run.manifest.check.manifest
        identities = Identities(pin.epoch_id if pin else None, pin.generator.sha256 if pin else None,
                                manifest.manifest_sha256 if manifest else None, run.epoch.world.world_sha256,
                                jail.isolation.description)
        if manifest is not None and run.epoch.world.world_sha256 is not None:
            expected = Expected(tuple((p.name, p.bound) for p in manifest.properties), run.epoch.world.records)
        if run.result is not None and run.result.exit_code != 0:
            stderr = run.result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            findings.append(Reason(Code.REPLAY_FAILED, str(run.address), "exit 0", f"exit {run.result.exit_code}",
                                   f"the replay did not evaluate: {stderr[0][:300]}"))
        elif run.result is not None:
            contents = await Get(DigestContents, Digest, run.output)
            evidence = check_replay({c.path: c.content for c in contents}, "replay")
            findings += evidence.reasons
            replay_result, replayed, witnesses = evidence.result, evidence.observations, dict(evidence.witnesses)

    guarded = protected.as_set()
    if suite is not None and merge_base:  # what the base pinned stays protected when the change moves it
        pin_path = run.epoch.files.pin_path
        guarded = ProtectedSet(guarded.paths | pinned_at_base(read_at(root, merge_base, pin_path), pin_path),
                               guarded.globs)
    plain_folders = [g for g in guarded.globs if g.endswith("/") and not any(c in g for c in "*?[")]
    findings += irregular_paths(root, guarded.paths, (gate.observations_dir, gate.freezes_dir), plain_folders)

    oracle = ()
    if suite is not None and merge_base and changed_set and protected_changes(changed_set, guarded):
        oracle = oracle_changes(
            OraclePaths(run.epoch.files.pin_path, run.manifest.manifest_path, run.manifest.catalog_path,
                        run.manifest.predicate_paths, gate.freezes_dir, gate.observations_dir),
            changed_set, lambda path: read_at(root, merge_base, path),
            (lambda path: read_at(root, candidate.tree, path)) if candidate else (lambda path: read_file(root, path)))

    tree = candidate.reviewed_tree() if candidate else None
    if merge_base and not candidate:  # without the changed set the gate is closed already, and git said why
        try:
            tree = reviewed_tree(root)
        except EvidenceError as error:  # a tree that cannot be attested is not a tree to pass
            findings.append(error.reason)

    # A committed `dist` file or symlink must not crash or redirect the write: close, and write elsewhere.
    wanted = os.path.normpath(Path(dist_dir.relpath) / gate.output_dir)
    fallback = os.path.relpath(Path(global_options.pants_workdir, "epoch_gate", "gate"), root)
    out_or_none, unsafe = output_folder(root, wanted, fallback)
    findings += unsafe
    out = out_or_none or wanted
    observations = (*replayed, *archive)
    verdict = decide(Evidence(
        identities=identities, changed=changed_set, protected=guarded, replay=replay_result,
        observations=observations, freezes=tuple(freezes), today=today, findings=tuple(findings), expected=expected,
        witness_paths={o.id: f"{out}/observations/{o.id}.bin" for o in replayed},
    ))
    result = report.Report(verdict, identities, merge_base, changed_set, guarded, replay_result,
                           observations, oracle, mode="trusted" if gate.candidate else "local")
    files = attestation.output_files(result, witnesses, tree, time=datetime.datetime.now(datetime.timezone.utc),
                                     root=root)
    if out_or_none is not None:
        digest = await Get(Digest, CreateDigest([FileContent(f"{out}/{name}", data) for name, data in files.items()]))
        workspace.write_digest(digest, clear_paths=(out,))
    for line in report.console_lines(result):
        console.print_stdout(line)
    for line in annotations.lines(result.to_json(), gate.annotations):
        console.print_stdout(line)
    for reason in unsafe:
        console.print_stderr(printable(f"not written to {wanted}: {reason.path} is {reason.found}"))
    console.print_stderr(printable(f"report: {out}/report.json ({out}/report.md)" if out_or_none is not None
                                   else f"no report written: neither {wanted} nor {fallback} is a safe folder"))
    return Gate(exit_code=verdict.label.exit_code)


def rules() -> list:
    return [*collect_rules()]
