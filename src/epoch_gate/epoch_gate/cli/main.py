"""`epoch-gate` / `python -m epoch_gate`: the same verdict outside Pants.

Exit codes: 0 eligible, 1 closed, 2 hold (docs/contract.md, Verdict); 64 a usage error; for `pin`,
`sample`, `replay`, `keep-witness` and `launcher`, 0 done and 1 refused (the reason is printed); for
`verify-statement`, 0 verified and 1 refused (each failed check is printed).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence, Union

from epoch_gate import __version__

EX_USAGE = 64


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's 2 would read as "hold"
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"{self.prog}: error: {message}\n")


def _print_reason_error(error: Exception) -> int:
    from epoch_gate.reasons import EvidenceError

    if isinstance(error, EvidenceError):
        print("\n".join(error.reason.refusal()), file=sys.stderr)
        return 1
    raise error


def _sha_or_none(root: Path, rel: str) -> Optional[str]:
    from epoch_gate.evidence.hashing import sha256_file

    path = root / rel
    return sha256_file(path) if path.is_file() and not path.is_symlink() else None


def cmd_pin(args: argparse.Namespace) -> int:
    from epoch_gate.evidence.pin import PinnedFile, load_pin, mint_pin, write_pin
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.evidence.world import world_sha256

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
        pin = mint_pin(
            epoch_id=args.epoch_id,
            generator=PinnedFile(args.generator, shas[args.generator]),
            inputs={i: shas[i] for i in args.input},
            world_sha256=world,
            existing=existing,
            path=args.pin,
        )
    except EvidenceError as error:
        return _print_reason_error(error)
    write_pin(pin, root / args.pin)
    print(f"pinned epoch {pin.epoch_id} (generator sha256 {pin.generator.sha256}) in {args.pin}")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    from epoch_gate.evidence.catalog import parse_catalog
    from epoch_gate.evidence.manifest import sample, write_manifest
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.evidence.strictjson import read_bytes

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


def cmd_annotations(args: argparse.Namespace) -> int:
    import json

    from epoch_gate.verdict.annotations import Style, lines
    from epoch_gate.reasons import Code, Reason

    try:
        value = json.loads(Path(args.report).read_bytes())
        if not isinstance(value, dict) or not isinstance(value.get("reasons"), list):
            raise ValueError("no reasons list")
    except (OSError, ValueError) as exc:
        unreadable = Reason(Code.ARTIFACT_MALFORMED, args.report, "", "", f"not a readable report.json ({exc})")
        print("\n".join(unreadable.refusal()), file=sys.stderr)
        return 1
    for line in lines(value, Style(args.format)):
        print(line)
    return 0


def cmd_identities(args: argparse.Namespace) -> int:
    from epoch_gate.evidence.manifest import load_manifest
    from epoch_gate.evidence.pin import load_pin
    from epoch_gate.reasons import EvidenceError

    try:
        pin = load_pin(Path(args.pin), args.pin)
        manifest = load_manifest(Path(args.manifest), args.manifest)
    except EvidenceError as error:
        return _print_reason_error(error)
    print(f"epoch     {pin.epoch_id} (generator sha256 {pin.generator.sha256})")
    print(f"manifest  sha256 {manifest.manifest_sha256}")
    return 0


def _tree_key(args: argparse.Namespace) -> Optional[str]:
    """The judged tree's draw key from the held-out key (None, said, when there is no usable key)."""
    import os

    from epoch_gate.evidence import held_out
    from epoch_gate.reasons import EvidenceError

    key, unusable = held_out.load_key(held_out.Key(args.key_env, args.key_file), os.environ)
    if unusable is not None:
        _print_reason_error(EvidenceError(unusable))
        return None
    if key is None:
        print(f"refused: no key: set ${args.key_env} or pass --key-file", file=sys.stderr)
        return None
    return held_out.draw_key(key, args.tree)


def _expected_seed(seed: str, expected: Optional[str]) -> bool:
    from epoch_gate.evidence import held_out

    digest = held_out.seed_sha256(seed)
    if expected and digest != expected:
        print(
            f"refused: the seed's sha256 is {digest}, not {expected}: another key, tree, suite or epoch",
            file=sys.stderr,
        )
        return False
    return True


def cmd_held_out_seed(args: argparse.Namespace) -> int:
    """Re-derives a suite's held-out seed from the key (as `pants gate --gate-candidate` did) and prints it:
    the generator's `--seed`, for `epoch-gate replay` over the world it draws."""
    from epoch_gate.evidence import held_out

    tree_key = _tree_key(args)
    if tree_key is None:
        return 1
    seed = held_out.seed(tree_key, args.suite, args.epoch_id)
    if not _expected_seed(seed, args.expect_sha256):
        return 1
    print(seed)
    return 0


def cmd_held_out_properties(args: argparse.Namespace) -> int:
    """Re-derives a suite's held-out properties from the key (as `pants gate --gate-candidate` did) and
    prints their names, one a line: the draw from the catalog outside the manifest."""
    from epoch_gate.evidence import held_out
    from epoch_gate.evidence.catalog import parse_catalog
    from epoch_gate.evidence.manifest import load_manifest
    from epoch_gate.evidence.strictjson import read_bytes
    from epoch_gate.reasons import EvidenceError

    tree_key = _tree_key(args)
    if tree_key is None:
        return 1
    try:
        catalog = parse_catalog(read_bytes(Path(args.catalog), args.catalog), args.catalog)
        manifest = load_manifest(Path(args.manifest), args.manifest)
    except EvidenceError as error:
        return _print_reason_error(error)
    seed = held_out.property_seed(tree_key, args.suite, args.epoch_id)
    if not _expected_seed(seed, args.expect_sha256):
        return 1
    for prop in held_out.draw_properties(catalog, manifest, seed, args.count):
        print(prop.name)
    return 0


def cmd_keep_witness(args: argparse.Namespace) -> int:
    """Keeps a failure of a gate's report as a regression record of its suite's fixture (the reviewer's act)."""
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.verdict.keep import keep_witness

    try:
        kept = keep_witness(Path(args.out), args.observation_id, Path(args.root))
    except EvidenceError as error:
        return _print_reason_error(error)
    record = kept.regression
    done = "already kept in" if kept.already else "kept in"
    print(f"{record.bound} record {record.sha256} ({record.property} failed it) {done} {kept.file}")
    if not kept.already:
        print(f"every judgement now replays it under every property over {record.bound}: commit {kept.file}")
    return 0


def cmd_verify_statement(args: argparse.Namespace) -> int:
    """Exit 0 only when the signed statement says what the caller requires; each refusal names its check."""
    from epoch_gate.evidence.strictjson import read_bytes
    from epoch_gate.reasons import EvidenceError
    from epoch_gate.verdict.dsse import MAX_ENVELOPE_BYTES, KeyUnusable, load_public_key
    from epoch_gate.verdict.verify_statement import Expected, verify

    try:
        envelope = read_bytes(Path(args.envelope), args.envelope, max_bytes=MAX_ENVELOPE_BYTES)
        public = load_public_key(read_bytes(Path(args.public_key), args.public_key))
    except EvidenceError as error:
        return _print_reason_error(error)
    except KeyUnusable as error:
        print(f"refused   key: expected an Ed25519 public key; found {error} ({args.public_key})", file=sys.stderr)
        return 1
    given: dict = {"verifier_id": args.verifier_id} if args.verifier_id else {}
    if args.require_level:
        given["levels"] = tuple(args.require_level)
    expected = Expected(
        repository=args.repository,
        commit=args.commit,
        now=datetime.datetime.now(datetime.timezone.utc),
        tree=args.tree,
        policy_uri=args.policy_uri,
        max_age=datetime.timedelta(hours=args.max_age_hours),
        **given,
    )
    refusals, keyid = verify(envelope, public, expected)
    for refusal in refusals:
        print(refusal.line(), file=sys.stderr)
    if refusals:
        return 1
    print(f"verified  PASSED for {args.commit} at {', '.join(expected.levels)}, signed by the key {keyid}")
    return 0


def _hours(value: str) -> float:
    try:
        hours = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of hours: {value!r}") from None
    if not 0 < hours < 1e6:
        raise argparse.ArgumentTypeError(f"not a positive number of hours: {value!r}")
    return hours


def _count(value: str) -> Union[int, str]:
    if value == "all":
        return value
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"not a whole number or `all`: {value!r}")
    return int(value)


def _object_id(value: str) -> str:
    if len(value) not in (40, 64) or any(c not in "0123456789abcdef" for c in value):
        raise argparse.ArgumentTypeError(f"not a git object id (40 or 64 lower-case hex digits): {value!r}")
    return value


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

    from epoch_gate.runner.main import add_arguments, run_replay

    rep = sub.add_parser("replay", help="evaluate the sampled predicates over a fixture world")
    add_arguments(rep)
    rep.set_defaults(run=run_replay)

    from epoch_gate.cli.check import add_arguments as add_check_arguments, run_check

    chk = sub.add_parser("check", help="compute the verdict (exit 0 eligible, 1 closed, 2 hold)")
    add_check_arguments(chk, _date)
    chk.set_defaults(run=run_check)

    ann = sub.add_parser("annotations", help="print one CI annotation per reason of a report.json")
    ann.add_argument("report", help="the gate's report.json")
    ann.add_argument("--format", choices=["github", "plain"], default="github")
    ann.set_defaults(run=cmd_annotations)

    held = sub.add_parser(
        "held-out-seed", help="re-derive a suite's held-out seed from the key (the generator's --seed)"
    )
    held.add_argument("--tree", required=True, type=_object_id, help="the judged tree (the statement's gitTree)")
    held.add_argument("--suite", required=True, help="the sampled_properties address")
    held.add_argument("--epoch-id", required=True)
    held.add_argument("--key-env", default="EPOCH_GATE_HELD_OUT_KEY", help="the variable holding the key")
    held.add_argument("--key-file", help="a file holding the key, instead of the variable")
    held.add_argument("--expect-sha256", help="the report's held_out.seed_sha256: refuse any other seed")
    held.set_defaults(run=cmd_held_out_seed)

    drawn = sub.add_parser(
        "held-out-properties", help="re-derive a suite's held-out properties from the key (drawn outside its manifest)"
    )
    drawn.add_argument("--tree", required=True, type=_object_id, help="the judged tree (the statement's gitTree)")
    drawn.add_argument("--suite", required=True, help="the sampled_properties address")
    drawn.add_argument("--epoch-id", required=True)
    drawn.add_argument("--count", required=True, type=_count, help="the suite's held_out_properties (a number or all)")
    drawn.add_argument("--manifest", default="checks/manifest.json")
    drawn.add_argument("--catalog", default="checks/catalog.yaml")
    drawn.add_argument("--key-env", default="EPOCH_GATE_HELD_OUT_KEY", help="the variable holding the key")
    drawn.add_argument("--key-file", help="a file holding the key, instead of the variable")
    drawn.add_argument("--expect-sha256", help="the report's held_out_properties.seed_sha256: refuse any other seed")
    drawn.set_defaults(run=cmd_held_out_properties)

    keep = sub.add_parser(
        "keep-witness",
        help="keep a failure's witness from a gate's report as a regression record of its suite's fixture",
    )
    keep.add_argument("observation_id", help="the failure's observation id, as the report lists it")
    keep.add_argument("--out", default="dist/gate", help="the gate's output folder (report.json and the witnesses)")
    keep.add_argument("--root", default=".", help="the repository, where the report's regression file is")
    keep.set_defaults(run=cmd_keep_witness)

    check = sub.add_parser(
        "verify-statement", help="verify a signed statement: key, commit, verifier, policy, PASSED, levels, age"
    )
    check.add_argument("envelope", help="the DSSE envelope (statement.intoto.dsse.json)")
    check.add_argument("--public-key", required=True, help="the signer's Ed25519 public key (PEM, or 64 hex digits)")
    check.add_argument(
        "--repository", required=True, help="the repository as the statement names it (git+<repository>@<commit>)"
    )
    check.add_argument("--commit", required=True, type=_object_id, help="the commit the verdict must be about")
    check.add_argument("--tree", type=_object_id, help="the tree the subject must name (gitTree)")
    check.add_argument("--verifier-id", help="the verifier's id to require (the gate's own: pkg:generic/epoch-gate)")
    check.add_argument("--policy-uri", help="the policy (git+<repository>@<oracle commit>) to require")
    check.add_argument(
        "--require-level",
        action="append",
        help="a verifiedLevels entry to require (repeat; EPOCH_GATE_ELIGIBLE and EPOCH_GATE_JAILED by default)",
    )
    check.add_argument("--max-age-hours", type=_hours, default=24.0, help="how old timeVerified may be (24)")
    check.set_defaults(run=cmd_verify_statement)

    launch = sub.add_parser(
        "launcher",
        help="copy the ./pants launcher this wheel was built with, its pins and configuration, into a repository "
        "(Pants on a machine without scie-pants)",
    )
    launch.add_argument("--root", default=".", help="the repository's root (default: here)")
    launch.add_argument("--replace", action="store_true", help="overwrite launcher files that hold other bytes")
    launch.set_defaults(run=cmd_launcher)

    ids = sub.add_parser("identities", help="print the epoch and manifest identities")
    ids.add_argument("--pin", default="fixtures/EPOCH")
    ids.add_argument("--manifest", default="checks/manifest.json")
    ids.set_defaults(run=cmd_identities)
    return top


def cmd_launcher(args: argparse.Namespace) -> int:
    from epoch_gate.cli.launcher import install, packaged

    done, refused = install(Path(args.root), packaged(), replace=args.replace)
    for line in refused:
        print(f"refused: {line}", file=sys.stderr)
    if refused:
        return 1
    print("\n".join(done))
    print("launcher: run `./pants --version` once to bootstrap Pants (under a minute), then commit what was written")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))
