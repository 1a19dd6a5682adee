"""The replay's child: the only process that runs product code. It evaluates batches of records that the
parent streams to it and answers one verdict per record (the protocol is in `epoch_gate.stream`).

Started as `python -I -B -S -c CHILD_BOOT RUNNER_ROOT --call ... ` with the sandbox as its cwd. Before
importing anything of the product it moves the protocol onto private file descriptors and points fd 1 at
stderr (a product that prints breaks nothing) and fd 0 at /dev/null. It writes no file and gets no --out.
Before and after each batch it checks that its protected code is what it loaded (`epoch_gate.integrity`).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Sequence, Union

from epoch_gate import stream
from epoch_gate.finder import SandboxFinder
from epoch_gate.integrity import Predicate, Snapshot, Tampered, protected_predicate, snapshot, verify_modules

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# Stable reason codes (epoch_gate.reasons.Code values), spelled out: the child imports no more than it needs.
PREDICATE_ERROR = "predicate-error"
PREDICATE_REPLACED = "predicate-replaced"
MAX_DEPTH = 100  # plain data nested deeper is refused rather than recursed into
_PLAIN_SCALARS = (str, int, float, bool, type(None))


class NotPlain(Exception):
    """A probe returned something other than plain JSON data."""


def plain_problem(value: object) -> str:
    """Why `value` is not plain JSON data (exact dict/list/str/int/float/bool/None, str keys), or ""."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH}"
        if kind is dict:
            for key, inner in item.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    return f"a {type(key).__name__} key"
                stack.append((inner, depth + 1))
        elif kind is list:
            stack.extend((inner, depth + 1) for inner in item)  # type: ignore[attr-defined]
        elif kind not in _PLAIN_SCALARS:
            return f"a {kind.__name__}"
    return ""


def _raised(what: str, exc: Exception) -> bytes:
    return stream.violated(f"{what}{type(exc).__name__}: {exc}"[:500])


def judge_predicate(function: Callable[[object], object], records: list[bytes]) -> list[bytes]:
    """predicate(record): exactly True holds; False, anything else, or raising is a violation."""
    lines: list[bytes] = []
    append, loads, held = lines.append, json.loads, stream.HELD  # locals: this loop is the replay's hot path
    for raw in records:
        try:
            verdict = function(loads(raw))  # parsed afresh: a predicate may mutate its record
        except Exception as exc:  # noqa: BLE001 - a raising predicate is a violation, reported
            append(_raised(stream.RAISED, exc))
            continue
        if verdict is True:
            append(held)
        else:
            append(stream.violated("predicate returned False" if verdict is False
                                   else f"predicate returned {type(verdict).__name__}, not bool"))
    return lines


def observe(function: Callable[[object], object], records: list[bytes]) -> list[bytes]:
    """probe(record) -> plain data, serialized here; the parent parses it and judges it itself."""
    lines = []
    for raw in records:
        try:
            observed = function(json.loads(raw))
        except Exception as exc:  # noqa: BLE001 - the product failing on a record is a violation
            lines.append(_raised("probe raised ", exc))
            continue
        problem = plain_problem(observed)
        if problem:
            raise NotPlain(f"probe returned {problem}, not plain JSON data")
        lines.append(stream.OBSERVED + json.dumps(observed, allow_nan=False, separators=(",", ":")).encode())
    return lines


@dataclass(frozen=True)
class Call:
    """What the child runs for one property: its predicate (protected) or its probe (product code)."""

    function: Callable[[object], object]
    evaluate: Callable[[Callable[[object], object], list[bytes]], list[bytes]]
    predicate: Optional[Predicate]
    module: Optional[Snapshot]


def load(call: str, sandbox: Path) -> Call:
    kind, _, spec = call.partition("=")
    name, _, attribute = spec.partition(":")
    module = importlib.import_module(name)
    if kind == "probe":
        function = getattr(module, attribute)
        if not callable(function):
            raise TypeError(f"{spec} is not callable")
        return Call(function, observe, None, None)
    predicate = protected_predicate(spec, module, sandbox)
    return Call(predicate.function, judge_predicate, predicate, snapshot(name, module))


def _private_channel() -> tuple[BinaryIO, BinaryIO]:
    """The protocol on fresh descriptors; fd 0 reads /dev/null and fd 1 writes to stderr from here on."""
    channel_in, channel_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return os.fdopen(channel_in, "rb"), os.fdopen(channel_out, "wb")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="epoch_gate.child")
    parser.add_argument("--call", action="append", default=[],
                        help="per property, in order: predicate=module:function or probe=module:function")
    parser.add_argument("--sandbox-names", default="", help="top-level names importable from the cwd")
    parser.add_argument("--child-path", action="append", default=[], help="a folder after the standard library")
    parser.add_argument("--parent", type=int, default=0, help="the runner's pid: the child dies with it")
    return parser


def _is_runner(name: str) -> bool:
    return name == "epoch_gate" or name.startswith("epoch_gate.")


def serve(calls: list[str], sandbox: Path, channel_in: BinaryIO, channel_out: BinaryIO) -> int:
    # Bound once, before any product code runs: rebinding these names later changes nothing here.
    read_frame, parse_request = stream.read_frame, stream.parse_request
    write, flush = channel_out.write, channel_out.flush
    check_modules, is_runner = verify_modules, _is_runner
    runner = tuple(snapshot(n, m) for n, m in sorted(sys.modules.items()) if _is_runner(n))
    runner_names = frozenset(snap.name for snap in runner)
    loaded: dict[int, Union[Call, bytes]] = {}  # a property's call, or the error frame it answers with

    def verify() -> None:
        check_modules(runner)
        added = sorted(n for n in list(sys.modules) if is_runner(n) and n not in runner_names)
        if added:
            raise Tampered(f"module {added[0]} appeared among the runner's")
        for done in loaded.values():
            if isinstance(done, Call) and done.predicate is not None and done.module is not None:
                check_modules((done.module,))
                done.predicate.verify()

    while True:
        got = read_frame(channel_in)
        if got is None:
            return 0
        kind, payload = got
        if kind != stream.REQUEST:
            raise stream.ProtocolError(f"unknown request kind {kind!r}")
        index, records = parse_request(payload)
        if index >= len(calls):
            raise stream.ProtocolError(f"no property {index}")
        try:
            if index not in loaded:
                try:
                    loaded[index] = load(calls[index], sandbox)
                except Tampered:
                    raise
                except Exception as exc:  # noqa: BLE001 - a predicate that cannot load is that property's error
                    detail = f"cannot load {calls[index]}: {type(exc).__name__}: {exc}"[:500]
                    loaded[index] = stream.error(PREDICATE_ERROR, detail)
            verify()
            call = loaded[index]
            if isinstance(call, bytes):
                answer = call
            else:
                try:
                    answer = stream.frame(stream.VERDICTS, b"\n".join(call.evaluate(call.function, records)))
                except NotPlain as exc:
                    loaded[index] = answer = stream.error(PREDICATE_ERROR, str(exc))
                verify()
        except Tampered as exc:
            write(stream.error(PREDICATE_REPLACED, str(exc)[:500]))
            flush()
            return 3
        write(answer)
        flush()


def _die_with(parent: int) -> None:
    """The child runs in its own session (so the runner can kill its whole group), which also puts it out
    of reach of whoever ends the runner: a replay timed out outside a jail would leave a looping predicate
    running forever. Linux's parent-death signal ends it with the runner."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the jail's --die-with-parent and the runner's kill remain
        return
    if parent and os.getppid() != parent:  # the runner was gone before the signal was armed
        os._exit(1)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    _die_with(args.parent)
    channel_in, channel_out = _private_channel()
    sandbox = Path.cwd()
    sys.meta_path.append(SandboxFinder((n for n in args.sandbox_names.split(",") if n), sandbox))
    sys.path.extend(args.child_path)
    return serve(args.call, sandbox, channel_in, channel_out)
