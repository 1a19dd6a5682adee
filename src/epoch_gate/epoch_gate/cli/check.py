"""`epoch-gate check`: the verdict outside Pants, from paths on the command line or a suites file.

It gathers the change as `pants gate` does (`epoch_gate.change.gather`), reads its suites from paths where the
gate reads the build graph, and hands both to the same `epoch_gate.verdict.judge`. What it cannot do is build
and jail the replay: the replay folders it is given are checked (suite, epoch, manifest, world,
completeness, witnesses), but nothing ties them to the code judged, and a product that outlived an
unjailed runner could have rewritten them. So its verdict is always advisory (`local`) and never
attested, `--candidate` included; only `pants gate --gate-candidate` attests. Its protected set is
the files and globs it is given, not a build graph's.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.atomic import replace_file
from epoch_gate.verdict.attestation import output_files
from epoch_gate.change.changed import ChangedPath, DEFAULT_TRUSTED_REFS
from epoch_gate.evidence.verify import ReplayEvidence, check_manifest, check_pin, check_replay
from epoch_gate.verdict.suite import Expected, Identities
from epoch_gate.evidence.folders import output_folder_problem, read_folder
from epoch_gate.evidence.freezes import load_freezes
from epoch_gate.change.gather import Change, candidate_change, local_change, reviewed
from epoch_gate.change.git import read_at
from epoch_gate.evidence.hashing import sha256_file
from epoch_gate.verdict.judge import ChangeFacts, SuiteFacts, SuiteOracle, judge
from epoch_gate.evidence.observations import MAX_WITNESS_BYTES, load_observations
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.verdict.report import console_lines
from epoch_gate.text import printable
from epoch_gate.evidence.world import world_record_counts, world_sha256

DEFAULT_SUITE = "suite"


@dataclass(frozen=True)
class SuiteSpec:
    """One suite's files, relative to the root; `replay` and `world` are folders (absolute or relative)."""

    address: str
    pin: str
    generator: str
    inputs: tuple[str, ...]
    manifest: str
    catalog: str
    predicates: tuple[str, ...]
    replay: Optional[str]
    world: Optional[str]

    @property
    def oracle(self) -> SuiteOracle:
        return SuiteOracle(self.address, self.pin, self.manifest, self.catalog, self.predicates)

    def files(self) -> set[str]:
        return {self.pin, self.generator, *self.inputs, self.manifest, self.catalog, *self.predicates}


_FIELDS = {"address": str, "pin": str, "generator": str, "manifest": str, "catalog": str}
_OPTIONAL = {"inputs": list, "predicates": list, "replay": str, "world": str}


def _strings(value: list, path: str, key: str) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in value):
        raise EvidenceError(
            Reason(
                Code.ARTIFACT_MALFORMED,
                path,
                f"`{key}` as a list of paths",
                "another value",
                "the suites file is malformed",
            )
        )
    return tuple(value)


def load_suites(path: Path, display: str) -> list[SuiteSpec]:
    """`[{"address", "pin", "generator", "manifest", "catalog", "inputs"?, "predicates"?, "replay"?,
    "world"?}, ...]`, addresses unique."""
    raw = strictjson.loads(strictjson.read_bytes(path, display), display)
    if not isinstance(raw, list):
        raise EvidenceError(
            Reason(
                Code.ARTIFACT_MALFORMED,
                display,
                "a JSON list of suites",
                type(raw).__name__,
                "the suites file is malformed",
            )
        )
    specs = []
    for index, item in enumerate(raw):
        where = f"{display}#{index}"
        entry = strictjson.require_object(item, where, _FIELDS, optional=_OPTIONAL)
        specs.append(
            SuiteSpec(
                entry["address"],
                entry["pin"],
                entry["generator"],
                _strings(entry.get("inputs", []), where, "inputs"),
                entry["manifest"],
                entry["catalog"],
                _strings(entry.get("predicates", []), where, "predicates"),
                entry.get("replay"),
                entry.get("world"),
            )
        )
    addresses = [s.address for s in specs]
    if len(set(addresses)) != len(addresses):
        raise EvidenceError(
            Reason(
                Code.ARTIFACT_MALFORMED,
                display,
                "unique suite addresses",
                ", ".join(sorted({a for a in addresses if addresses.count(a) > 1}))[:200],
                "two suites share an address",
            )
        )
    return specs


class _Reader:
    """Bytes of files under the root; a missing file is None (the checks say so), an unreadable one is
    said here, once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.findings: list[Reason] = []
        self.unreadable: set[str] = set()

    def optional(self, rel: str) -> Optional[bytes]:
        try:
            return strictjson.read_bytes(self.root / rel, rel)
        except EvidenceError as error:
            if error.reason.code is not Code.ARTIFACT_MISSING and rel not in self.unreadable:
                self.findings.append(error.reason)
                self.unreadable.add(rel)
            return None

    def said_once(self, reasons: tuple[Reason, ...]) -> list[Reason]:
        return [r for r in reasons if not (r.code is Code.ARTIFACT_MISSING and r.path in self.unreadable)]

    def sha(self, rel: str) -> Optional[str]:
        path = self.root / rel
        return sha256_file(path) if path.is_file() and not path.is_symlink() else None


def _replay_evidence(reader: _Reader, spec: SuiteSpec) -> tuple[ReplayEvidence, list[Reason]]:
    files: dict[str, bytes] = {}
    reasons: list[Reason] = []
    if spec.replay:
        summary = reader.optional(f"{spec.replay}/replay.json")  # root / an absolute path is that path
        observations, reasons = read_folder(
            reader.root / spec.replay / "observations", f"{spec.replay}/observations", MAX_WITNESS_BYTES
        )
        files = {f"observations/{k}": v for k, v in observations.items()}
        if summary is not None:
            files["replay.json"] = summary
    return check_replay(files, spec.replay or "replay"), reasons


def suite_facts(reader: _Reader, spec: SuiteSpec) -> SuiteFacts:
    findings: list[Reason] = []
    world, records = None, None
    if spec.world:
        try:
            world, records = world_sha256(reader.root / spec.world), world_record_counts(reader.root / spec.world)
        except (OSError, EvidenceError) as exc:
            findings.append(
                exc.reason
                if isinstance(exc, EvidenceError)
                else Reason(
                    Code.ARTIFACT_MISSING,
                    spec.world,
                    "a fixture world",
                    type(exc).__name__,
                    "the fixture world cannot be read",
                )
            )
    pin_check = check_pin(
        pin_path=spec.pin,
        pin_bytes=reader.optional(spec.pin),
        generator=spec.generator,
        generator_sha256=reader.sha(spec.generator),
        inputs={i: reader.sha(i) for i in spec.inputs},
        world_sha256=world,
    )
    manifest_check = check_manifest(
        manifest_path=spec.manifest,
        manifest_bytes=reader.optional(spec.manifest),
        catalog_path=spec.catalog,
        catalog_bytes=reader.optional(spec.catalog),
    )
    findings += reader.said_once(pin_check.reasons) + reader.said_once(manifest_check.reasons)
    replay, folder_reasons = _replay_evidence(reader, spec)
    findings += folder_reasons
    pin, manifest = pin_check.pin, manifest_check.manifest
    identities = Identities(
        pin.epoch_id if pin else None,
        pin.generator.sha256 if pin else None,
        manifest.manifest_sha256 if manifest else None,
        world,
    )
    expected = None
    if manifest is not None and records is not None:
        expected = Expected(tuple((p.name, p.bound) for p in manifest.properties), records)
    return SuiteFacts(spec.oracle, identities, expected, replay, tuple(findings))


def _change(args: argparse.Namespace, root: Path) -> Change:
    trusted = tuple(args.trusted_ref or DEFAULT_TRUSTED_REFS)
    if args.candidate:  # trusted mode: this checkout judges git's merge of the candidate, read as data
        return candidate_change(root, args.candidate, trusted)
    if args.changed_file is None:
        return local_change(root, args.base, trusted, check_base=not args.trust_any_base)
    try:
        lines = Path(args.changed_file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        unreadable = Reason(
            Code.CHANGED_SET_UNAVAILABLE,
            args.changed_file,
            "a readable UTF-8 list",
            type(exc).__name__,
            "the changed-file list cannot be read",
        )
        return Change(None, None, None, (unreadable,))
    return Change(None, tuple(ChangedPath(line.strip(), "modified") for line in lines if line.strip()), None, ())


def _suite_specs(args: argparse.Namespace, findings: list[Reason]) -> list[SuiteSpec]:
    if args.suites:
        try:
            return load_suites(Path(args.suites), args.suites)
        except EvidenceError as error:
            findings.append(error.reason)
            return []
    if not args.generator:
        return []  # no suite named: judged as nothing in scope, which closes
    return [
        SuiteSpec(
            args.address,
            args.pin,
            args.generator,
            tuple(args.input),
            args.manifest,
            args.catalog,
            tuple(args.predicates),
            args.replay,
            args.world,
        )
    ]


def _output_folder(args: argparse.Namespace, findings: list[Reason]) -> Path:
    out = Path(args.report_dir)
    if not out.is_absolute() and ".." not in out.parts:  # a folder of the checkout, dist/gate by default
        # A committed `dist` file or symlink must not crash or redirect the write: close, and write elsewhere.
        unsafe = output_folder_problem(Path.cwd(), (out / "observations").as_posix())
        if unsafe is not None:
            findings.append(unsafe)
            out = Path(tempfile.mkdtemp(prefix="epoch-gate-report-"))
            print(
                printable(f"not written to {args.report_dir}: {unsafe.path} is {unsafe.found}; report: {out}"),
                file=sys.stderr,
            )
    return out


def run_check(args: argparse.Namespace) -> int:
    root = Path(args.root)
    findings: list[Reason] = []
    reader = _Reader(root)
    specs = _suite_specs(args, findings)
    suites = [suite_facts(reader, spec) for spec in specs]
    findings += reader.findings
    archive, archive_reasons = load_observations(root / args.observations, args.observations, "archive")
    freezes, freeze_reasons = load_freezes(root / args.freezes, args.freezes)
    findings += archive_reasons + freeze_reasons
    change = _change(args, root)
    _, unnamed = reviewed(root, change)  # judged from git: a tree git cannot name is not a tree to pass
    findings += [*change.findings, *unnamed]
    out = _output_folder(args, findings)
    protected = ProtectedSet(
        frozenset(path for spec in specs for path in spec.files()),
        (f"{args.observations}/", f"{args.freezes}/", *args.protect),
    )
    judgement = judge(
        ChangeFacts(
            mode="local",
            base=change.base,
            changed=change.changed,
            protected=protected,
            oracles=tuple(s.oracle for s in specs),
            archive=tuple(archive),
            freezes=tuple(freezes),
            today=args.today,
            observations_dir=args.observations,
            freezes_dir=args.freezes,
            out=str(out),
            findings=tuple(findings),
        ),
        suites,
        read_base=(lambda p: read_at(root, change.base, p)) if change.base else None,
        read_change=change.reader(root),
        root=root,
    )
    files = output_files(
        judgement.report, judgement.witnesses, None, time=datetime.datetime.now(datetime.timezone.utc), root=root
    )
    for rel, data in files.items():
        replace_file(out / rel, data)
    print("\n".join(console_lines(judgement.report)))
    return judgement.report.verdict.label.exit_code


def add_arguments(chk: argparse.ArgumentParser, parse_date: Callable[[str], datetime.date]) -> None:
    chk.add_argument("--root", default=".")
    chk.add_argument(
        "--suites",
        help="a JSON file listing the suites to judge (see epoch_gate.cli.check."
        "load_suites); instead of the one suite the flags below describe",
    )
    chk.add_argument(
        "--address", default=DEFAULT_SUITE, help="the suite's name: the one its replay was run with (`replay --suite`)"
    )
    chk.add_argument("--pin", default="fixtures/EPOCH")
    chk.add_argument("--generator", help="the fixture generator (required unless --suites)")
    chk.add_argument("--input", action="append", default=[])
    chk.add_argument("--manifest", default="checks/manifest.json")
    chk.add_argument("--catalog", default="checks/catalog.yaml")
    chk.add_argument(
        "--predicates",
        action="append",
        default=[],
        help="a predicates module's file (repeatable): protected, and diffed per predicate",
    )
    chk.add_argument("--replay", help="the output folder of `epoch-gate replay`")
    chk.add_argument(
        "--world",
        help="the fixture world the replay ran over: its digest must match the pin, and "
        "every record of it must have been evaluated (without it: closed)",
    )
    chk.add_argument("--observations", default="observations")
    chk.add_argument("--freezes", default="freezes")
    changes = chk.add_mutually_exclusive_group()
    changes.add_argument(
        "--base",
        help="git revision to diff against (default: the merge base of HEAD with "
        "the first trusted ref the clone holds)",
    )
    changes.add_argument("--changed-file", help="a file listing changed paths, one per line")
    changes.add_argument(
        "--candidate",
        help="judge git's merge of this revision into the checkout, which must be a clean "
        "checkout of a trusted ref, read from git objects (as `pants gate --gate-candidate`); "
        "still advisory: the CLI does not build or jail the replay, so it never attests",
    )
    chk.add_argument(
        "--trusted-ref",
        action="append",
        default=[],
        help="a ref whose history is reviewed; the base must be reachable from one "
        "(repeatable, a full ref name; default refs/remotes/origin/main)",
    )
    chk.add_argument(
        "--trust-any-base",
        action="store_true",
        help="skip the trusted-base check (only where the base is vouched for otherwise)",
    )
    chk.add_argument("--protect", action="append", default=[], help="a protected glob")
    chk.add_argument("--today", type=parse_date, default=datetime.datetime.now(datetime.timezone.utc).date())
    chk.add_argument("--report-dir", default="dist/gate")
