"""The replay runner's entry point, run inside the replay sandbox: `python -c BOOT replay ...`.

Only the runner package and the core modules it imports are shipped into the sandbox (the plugin's
runner rule derives them), so editing the report, the CLI or the gate's judgement leaves every cached
replay valid.
Exit 0 done (each property's outcome is in the summary), 3 done but a child's end was a fault of the run
(`channel.ChildFailed.fault`: never a verdict to cache, and Pants caches only exit 0), 1 refused (the
reason is printed), 64 usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from epoch_gate.evidence.catalog import MODULE_FUNCTION
from epoch_gate.evidence.manifest import load_manifest, load_properties
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.runner.requirements import UNPACKED, unpacked
from epoch_gate.runner.judge import parent
from epoch_gate.runner.judge.channel import ChildFailed, Fate
from epoch_gate.runner.jail.confine import MAX_CHILDREN, ChildJail, Limits
from epoch_gate.text import printable

EX_USAGE = 64
EXIT_FAULT = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's 2 would read as "hold"
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"{self.prog}: error: {message}\n")


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted({name for name in text.split(",") if name}))


def _product_setup(text: str) -> str:
    if not MODULE_FUNCTION.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not module:function")
    return text


def _children(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_CHILDREN:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to {MAX_CHILDREN}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", required=True)
    parser.add_argument(
        "--held-out-properties", help="a file of properties drawn outside the manifest, judged after its own"
    )
    parser.add_argument(
        "--properties", help="a file of the properties to judge instead of the manifest's (its identity stays)"
    )
    parser.add_argument("--world", required=True)
    parser.add_argument(
        "--suite", required=True, help="the suite's address: it names the summary and every observation id"
    )
    parser.add_argument("--epoch-id", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-witnesses", type=int, default=1)
    parser.add_argument(
        "--product-setup",
        type=_product_setup,
        metavar="MODULE:FUNCTION",
        help="a function of the product the child calls once before any property (a framework's set-up)",
    )
    parser.add_argument(
        "--sandbox-names",
        default="",
        help="comma-separated top-level names importable from the cwd: the product's, and the oracle's",
    )
    parser.add_argument(
        "--oracle-names",
        default="",
        help="comma-separated top-level names of the predicates' packages: the parent imports "
        "only them from the cwd, and the child never does",
    )
    parser.add_argument(
        "--child-path",
        action="append",
        default=[],
        help="a folder on the child's import path after the standard library (repeatable)",
    )
    parser.add_argument(
        "--child-jail",
        metavar="BWRAP",
        help="start the child in a jail of its own with this bubblewrap (epoch_gate.runner.jail.isolation)",
    )
    parser.add_argument(
        "--children",
        type=_children,
        default=1,
        help="children that serve the product side by side, each in its own jail (the cores the replay may use)",
    )
    defaults = Limits()
    for name, default in vars(defaults).items():
        parser.add_argument(
            f"--child-{name.replace('_', '-')}",
            type=int,
            default=default,
            dest=f"limit_{name}",
            help=f"the child's {name.replace('_', ' ')} limit (confine.Limits)",
        )


def run_replay(args: argparse.Namespace) -> int:
    # Nothing of the product is importable here: it runs in the child (epoch_gate.runner.product.child), the
    # sandbox is the cwd, and only the predicates import from it, under the oracle's names.
    # Zipped wheels (a packed PEX's .deps) are unpacked first: extension modules cannot import from a zip.
    child_path = tuple(unpacked(args.child_path, Path(args.out).resolve().parent / UNPACKED))
    limits = Limits(**{name: getattr(args, f"limit_{name}") for name in vars(Limits())})
    jail = ChildJail(str(Path(args.child_jail).resolve())) if args.child_jail else None
    child = parent.Child(
        Path.cwd(),
        _names(args.sandbox_names),
        child_path,
        _names(args.oracle_names),
        jail,
        limits,
        children=args.children,
    )
    fate = Fate()
    try:
        manifest = load_manifest(Path(args.manifest), args.manifest)
        if args.properties:  # the regression records': every catalog property over their bounds, instead
            manifest = dataclasses.replace(manifest, properties=load_properties(Path(args.properties), args.properties))
        if args.held_out_properties:  # judged as the manifest's are; the manifest's identity stays its own
            drawn = load_properties(Path(args.held_out_properties), args.held_out_properties)
            manifest = dataclasses.replace(manifest, properties=(*manifest.properties, *drawn))
        result = parent.run(
            manifest,
            Path(args.world),
            Path(args.out),
            suite=args.suite,
            epoch_id=args.epoch_id,
            child=child,
            max_witnesses=args.max_witnesses,
            product_setup=args.product_setup or "",
            fate=fate,
        )
    except EvidenceError as error:
        r = error.reason
        print(f"refused {r.line()}\n  {r.comparison()}", file=sys.stderr)
        return 1
    except ChildFailed as failed:  # the child failed (its set-up, its protocol, its exit): no output is written
        # On a line of its own: the product's output, passed on before it, may end without a newline.
        print(f"\nrefused {Reason(failed.code, args.suite, '', '', failed.detail).line()}", file=sys.stderr)
        return 1
    except OSError as error:  # the child (or its jail's bubblewrap) could not be started at all
        why = Reason(Code.REPLAY_FAILED, args.suite, "", "", f"the replay's child could not start: {error}")
        print(f"refused {why.line()}", file=sys.stderr)
        return 1
    for prop in result.properties:
        print(printable(f"{prop.summary()} {prop.detail}".rstrip()))
    return EXIT_FAULT if fate.first is not None and fate.first.fault else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _Parser(
        prog="epoch-gate-replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_arguments(sub.add_parser("replay", help="judge the sampled properties over a fixture world"))
    return run_replay(parser.parse_args(argv))
