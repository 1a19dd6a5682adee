"""`epoch-gate` / `python -m epoch_gate`: the same verdict outside Pants.

Exit codes: 0 eligible, 1 closed, 2 hold (docs/contract.md, Verdict); 64 a usage error; for `pin`,
`sample` and `replay`, 0 done and 1 refused (the reason is printed).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from epoch_gate import __version__

EX_USAGE = 64


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's 2 would read as "hold"
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"{self.prog}: error: {message}\n")


def _print_reason_error(error: Exception) -> int:
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.text import printable

    if isinstance(error, EvidenceError):
        r = error.reason
        print(printable(f"refused [{r.code.value}] {r.path}: {r.message}"), file=sys.stderr)
        if r.expected or r.found:
            print(printable(f"  expected {r.expected or '-'}; found {r.found or '-'}"), file=sys.stderr)
        return 1
    raise error


def _sha_or_none(root: Path, rel: str) -> Optional[str]:
    from epoch_gate.hashing import sha256_file

    path = root / rel
    return sha256_file(path) if path.is_file() and not path.is_symlink() else None


def cmd_pin(args: argparse.Namespace) -> int:
    from epoch_gate.pin import PinnedFile, load_pin, mint_pin, write_pin
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.world import world_sha256

    root = Path(args.root)
    try:
        existing = load_pin(root / args.pin, args.pin) if (root / args.pin).exists() else None
        shas = {}
        for rel in [args.generator, *args.input]:
            sha = _sha_or_none(root, rel)
            if sha is None:
                print(f"refused: {rel} is not a regular file", file=sys.stderr)
                return 1
            shas[rel] = sha
        world = world_sha256(Path(args.world)) if args.world else None
        pin = mint_pin(epoch_id=args.epoch_id, generator=PinnedFile(args.generator, shas[args.generator]),
                       inputs={i: shas[i] for i in args.input}, world_sha256=world, existing=existing,
                       path=args.pin)
    except EvidenceError as error:
        return _print_reason_error(error)
    write_pin(pin, root / args.pin)
    print(f"pinned epoch {pin.epoch_id} (generator sha256 {pin.generator.sha256}) in {args.pin}")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    from epoch_gate.catalog import parse_catalog
    from epoch_gate.manifest import sample, write_manifest
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.strictjson import read_bytes

    try:
        catalog = parse_catalog(read_bytes(Path(args.catalog), args.catalog), args.catalog)
    except EvidenceError as error:
        return _print_reason_error(error)
    try:
        manifest = sample(catalog, args.seed, args.k)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    write_manifest(manifest, Path(args.out))
    names = ", ".join(p.name for p in manifest.properties)
    print(f"drew {manifest.k} of {len(catalog.properties)} properties with seed {manifest.seed}: {names}")
    print(f"manifest sha256 {manifest.manifest_sha256} in {args.out}")
    return 0


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted({name for name in text.split(",") if name}))


def cmd_replay(args: argparse.Namespace) -> int:
    from epoch_gate import replay
    from epoch_gate.manifest import load_manifest
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.requirements import UNPACKED, unpacked
    from epoch_gate.text import printable

    # Nothing of the product is importable here: it runs in the child (epoch_gate.child), the sandbox is
    # the cwd, and only the judges of probe properties import from it, under the oracle's names.
    # Zipped wheels (a packed PEX's .deps) are unpacked first: extension modules cannot import from a zip.
    child_path = tuple(unpacked(args.child_path, Path(args.out).resolve().parent / UNPACKED))
    child = replay.Child(Path.cwd(), _names(args.sandbox_names), child_path, _names(args.oracle_names))
    try:
        manifest = load_manifest(Path(args.manifest), args.manifest)
        result = replay.run(manifest, Path(args.world), Path(args.out), epoch_id=args.epoch_id, child=child,
                            max_witnesses=args.max_witnesses)
    except EvidenceError as error:
        return _print_reason_error(error)
    for prop in result.properties:
        print(printable(f"{prop.summary()} {prop.detail}".rstrip()))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from epoch_gate import check, report
    from epoch_gate.atomic import replace_file
    from epoch_gate.changes import (DEFAULT_TRUSTED_REFS, ChangedPath, ProtectedSet, changed_paths, check_trusted,
                                    default_base, protected_changes, read_at)
    from epoch_gate.oracle import OracleChange, OraclePaths, oracle_changes, read_file
    from epoch_gate.decision import Evidence, Expected, Identities, decide
    from epoch_gate.folders import output_folder_problem, read_folder
    from epoch_gate.freezes import load_freezes
    from epoch_gate.observations import MAX_WITNESS_BYTES, load_observations
    from epoch_gate.reasons import Code, EvidenceError, Reason
    from epoch_gate.strictjson import read_bytes
    from epoch_gate.attestation import STATEMENT_FILE, output_files
    from epoch_gate.text import printable
    from epoch_gate.tree import reviewed_tree
    from epoch_gate.world import world_record_counts, world_sha256

    root = Path(args.root)
    findings: list[Reason] = []
    unreadable: set[str] = set()

    def optional_bytes(rel: str) -> Optional[bytes]:
        """The file's bytes; None when missing (the check says so) or unreadable (said here, once)."""
        try:
            return read_bytes(root / rel, rel)
        except EvidenceError as error:
            if error.reason.code is not Code.ARTIFACT_MISSING:
                findings.append(error.reason)
                unreadable.add(rel)
            return None

    def said_once(reasons: tuple[Reason, ...]) -> list[Reason]:
        return [r for r in reasons if not (r.code is Code.ARTIFACT_MISSING and r.path in unreadable)]

    world, records = None, None
    if args.world:
        try:
            world, records = world_sha256(root / args.world), world_record_counts(root / args.world)
        except (OSError, EvidenceError) as exc:
            findings.append(exc.reason if isinstance(exc, EvidenceError) else Reason(
                Code.ARTIFACT_MISSING, args.world, "a fixture world", type(exc).__name__,
                "the fixture world cannot be read"))
    pin_check = check.check_pin(
        pin_path=args.pin, pin_bytes=optional_bytes(args.pin), generator=args.generator,
        generator_sha256=_sha_or_none(root, args.generator),
        inputs={i: _sha_or_none(root, i) for i in args.input}, world_sha256=world)
    manifest_check = check.check_manifest(
        manifest_path=args.manifest, manifest_bytes=optional_bytes(args.manifest),
        catalog_path=args.catalog, catalog_bytes=optional_bytes(args.catalog))
    findings += said_once(pin_check.reasons) + said_once(manifest_check.reasons)

    replay_files: dict[str, bytes] = {}
    if args.replay:
        summary = optional_bytes(f"{args.replay}/replay.json")  # root / an absolute path is that path
        observations, reasons = read_folder(root / args.replay / "observations", f"{args.replay}/observations",
                                            MAX_WITNESS_BYTES)
        findings.extend(reasons)
        replay_files = {f"observations/{k}": v for k, v in observations.items()}
        if summary is not None:
            replay_files["replay.json"] = summary
    replayed = check.check_replay(replay_files, args.replay or "replay")
    findings.extend(replayed.reasons)
    archive, archive_reasons = load_observations(root / args.observations, args.observations, "archive")
    freezes, freeze_reasons = load_freezes(root / args.freezes, args.freezes)
    findings.extend(archive_reasons + freeze_reasons)

    changed: Optional[tuple[ChangedPath, ...]] = None
    base = None
    try:
        if args.changed_file is not None:
            lines = Path(args.changed_file).read_text(encoding="utf-8").splitlines()
            changed = tuple(ChangedPath(line.strip(), "modified") for line in lines if line.strip())
        else:
            trusted = args.trusted_ref or DEFAULT_TRUSTED_REFS
            base, changed = changed_paths(root, args.base or default_base(root, trusted))
            check_trusted(root, base, () if args.trust_any_base else trusted)
    except EvidenceError as error:
        findings.append(error.reason)
    except (OSError, UnicodeDecodeError) as exc:
        findings.append(Reason(Code.CHANGED_SET_UNAVAILABLE, args.changed_file, "a readable UTF-8 list",
                               type(exc).__name__, "the changed-file list cannot be read"))

    pin, manifest = pin_check.pin, manifest_check.manifest
    identities = Identities(pin.epoch_id if pin else None, pin.generator.sha256 if pin else None,
                            manifest.manifest_sha256 if manifest else None, world)
    expected = None
    if manifest is not None and records is not None:
        expected = Expected(tuple((p.name, p.bound) for p in manifest.properties), records)
    protected = ProtectedSet(frozenset([args.pin, args.generator, *args.input, args.manifest, args.catalog,
                                        *args.predicates]),
                             (f"{args.observations}/", f"{args.freezes}/", *args.protect))
    observations = replayed.observations + tuple(archive)
    out = Path(args.report_dir)
    if not out.is_absolute() and ".." not in out.parts:  # a folder of the checkout, dist/gate by default
        # A committed `dist` file or symlink must not crash or redirect the write: close, and write elsewhere.
        unsafe = output_folder_problem(Path.cwd(), (out / "observations").as_posix())
        if unsafe is not None:
            findings.append(unsafe)
            out = Path(tempfile.mkdtemp(prefix="epoch-gate-report-"))
            print(printable(f"not written to {args.report_dir}: {unsafe.path} is {unsafe.found}; report: {out}"),
                  file=sys.stderr)
    tree = None
    try:
        tree = reviewed_tree(root)
    except EvidenceError as error:
        if base is not None:  # judged from git: a tree that cannot be attested is not a tree to pass
            findings.append(error.reason)
        elif args.mode == "trusted":  # --changed-file outside a checkout: nothing to attest
            print(printable(f"no {STATEMENT_FILE}: {error.reason.message}"), file=sys.stderr)
    evidence = Evidence(identities=identities, changed=changed, protected=protected, replay=replayed.result,
                        observations=observations, freezes=tuple(freezes), today=args.today,
                        findings=tuple(findings), expected=expected,
                        witness_paths={o.id: f"{out}/observations/{o.id}.bin" for o in replayed.observations})
    verdict = decide(evidence)
    oracle: tuple[OracleChange, ...] = ()
    if base and changed and protected_changes(changed, protected):
        paths = OraclePaths(args.pin, args.manifest, args.catalog, tuple(args.predicates), args.freezes,
                            args.observations)
        oracle = oracle_changes(paths, changed, lambda p: read_at(root, base, p), lambda p: read_file(root, p))
    result = report.Report(verdict, identities, base, changed, protected, replayed.result, observations, oracle,
                           args.mode)
    files = output_files(result, dict(replayed.witnesses), tree, time=datetime.datetime.now(datetime.timezone.utc),
                         root=root)
    for rel, data in files.items():
        replace_file(out / rel, data)
    print("\n".join(report.console_lines(result)))
    return verdict.label.exit_code


def cmd_annotations(args: argparse.Namespace) -> int:
    import json

    from epoch_gate.annotations import Style, lines

    try:
        value = json.loads(Path(args.report).read_bytes())
        if not isinstance(value, dict) or not isinstance(value.get("reasons"), list):
            raise ValueError("no reasons list")
    except (OSError, ValueError) as exc:
        print(f"refused [artifact-malformed] {args.report}: not a readable report.json ({exc})", file=sys.stderr)
        return 1
    for line in lines(value, Style(args.format)):
        print(line)
    return 0


def cmd_identities(args: argparse.Namespace) -> int:
    from epoch_gate.manifest import load_manifest
    from epoch_gate.pin import load_pin
    from epoch_gate.reasons import EvidenceError

    try:
        pin = load_pin(Path(args.pin), args.pin)
        manifest = load_manifest(Path(args.manifest), args.manifest)
    except EvidenceError as error:
        return _print_reason_error(error)
    print(f"epoch     {pin.epoch_id} (generator sha256 {pin.generator.sha256})")
    print(f"manifest  sha256 {manifest.manifest_sha256}")
    return 0


def _date(value: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date: {value!r}") from None


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="epoch-gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"epoch-gate {__version__}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pin = sub.add_parser("pin", help="mint the epoch pin from the generator and input bytes")
    pin.add_argument("--root", default=".")
    pin.add_argument("--pin", default="fixtures/EPOCH")
    pin.add_argument("--epoch-id", required=True)
    pin.add_argument("--generator", required=True)
    pin.add_argument("--input", action="append", default=[])
    pin.add_argument("--world", help="a fixture world the generator produced, to pin its digest")
    pin.set_defaults(run=cmd_pin)

    smp = sub.add_parser("sample", help="draw k properties from the catalog with a seed")
    smp.add_argument("--catalog", required=True)
    smp.add_argument("--seed", type=int, required=True)
    smp.add_argument("--k", type=int, required=True)
    smp.add_argument("--out", default="checks/manifest.json")
    smp.set_defaults(run=cmd_sample)

    rep = sub.add_parser("replay", help="evaluate the sampled predicates over a fixture world")
    rep.add_argument("--manifest", required=True)
    rep.add_argument("--world", required=True)
    rep.add_argument("--epoch-id", required=True)
    rep.add_argument("--out", required=True)
    rep.add_argument("--max-witnesses", type=int, default=1)
    rep.add_argument("--sandbox-names", default="",
                     help="comma-separated top-level names the child may import from the cwd (the product)")
    rep.add_argument("--oracle-names", default="",
                     help="comma-separated top-level names of the predicates' packages: the child imports "
                          "them from the cwd, and the judges of probe properties may import only them")
    rep.add_argument("--child-path", action="append", default=[],
                     help="a folder on the child's import path after the standard library (repeatable)")
    rep.set_defaults(run=cmd_replay)

    chk = sub.add_parser("check", help="compute the verdict (exit 0 eligible, 1 closed, 2 hold)")
    chk.add_argument("--root", default=".")
    chk.add_argument("--pin", default="fixtures/EPOCH")
    chk.add_argument("--generator", required=True)
    chk.add_argument("--input", action="append", default=[])
    chk.add_argument("--manifest", default="checks/manifest.json")
    chk.add_argument("--catalog", default="checks/catalog.yaml")
    chk.add_argument("--predicates", action="append", default=[],
                     help="a predicates module's file (repeatable): protected, and diffed per predicate")
    chk.add_argument("--replay", help="the output folder of `epoch-gate replay`")
    chk.add_argument("--world", help="the fixture world the replay ran over: its digest must match the pin, and "
                                     "every record of it must have been evaluated (without it: closed)")
    chk.add_argument("--observations", default="observations")
    chk.add_argument("--freezes", default="freezes")
    changes = chk.add_mutually_exclusive_group()
    changes.add_argument("--base", help="git revision to diff against (default: the merge base of HEAD with "
                                        "the first trusted ref the clone holds)")
    changes.add_argument("--changed-file", help="a file listing changed paths, one per line")
    chk.add_argument("--trusted-ref", action="append", default=[],
                     help="a ref whose history is reviewed; the base must be reachable from one "
                          "(repeatable, a full ref name; default refs/remotes/origin/main)")
    chk.add_argument("--trust-any-base", action="store_true",
                     help="skip the trusted-base check (only where the base is vouched for otherwise)")
    chk.add_argument("--protect", action="append", default=[], help="a protected glob")
    chk.add_argument("--today", type=_date, default=datetime.datetime.now(datetime.timezone.utc).date())
    chk.add_argument("--report-dir", default="dist/gate")
    chk.add_argument("--mode", choices=["local", "trusted"], default="local",
                     help="trusted: the caller vouches that this process runs the trusted base's code with the "
                          "change as data (the CLI does not read a candidate from git itself; `pants gate "
                          "--gate-candidate` does), and the verdict is attested (statement.intoto.json); local "
                          "(default): advisory, no statement")
    chk.set_defaults(run=cmd_check)

    ann = sub.add_parser("annotations", help="print one CI annotation per reason of a report.json")
    ann.add_argument("report", help="the gate's report.json")
    ann.add_argument("--format", choices=["github", "plain"], default="github")
    ann.set_defaults(run=cmd_annotations)

    ids = sub.add_parser("identities", help="print the epoch and manifest identities")
    ids.add_argument("--pin", default="fixtures/EPOCH")
    ids.add_argument("--manifest", default="checks/manifest.json")
    ids.set_defaults(run=cmd_identities)
    return top


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))
