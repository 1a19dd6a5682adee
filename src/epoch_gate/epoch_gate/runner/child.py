"""The replay's child: the only process that runs product code, and no oracle code at all. It serves the
product's callables to the parent's judges and answers every call with data (`epoch_gate.runner.protocol`).

Started as `python -I -B -S -c CHILD_BOOT LOADED_FROM ...` with the sandbox as its cwd. Before importing
anything of the product it moves the protocol onto private file descriptors and points fd 1 at stderr (a
product that prints breaks nothing) and fd 0 at /dev/null. It writes no file and gets no --out. What it
answers is only ever the product's word: product code that takes over this process can answer anything,
but only data, which the parent's judges check.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
import json
import operator
import os
import signal
import sys
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping, Sequence

from epoch_gate.runner import data, protocol
from epoch_gate.runner.finder import SandboxFinder

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
EXIT_MEMORY = 75  # the product ran out of memory (its address-space limit): the runner names the limit
# What the stand-in of a candidate module the replay did not ship exits with, after printing the mark and
# the module's name (`unshipped_stub`): an import by a name built at run time ends the replay.
EXIT_UNSHIPPED, UNSHIPPED_MARK = 86, "epoch_gate-unshipped:"


def unshipped_stub(name: str) -> bytes:
    """The stand-in shipped for the candidate's top-level module `name`, which the suite's imports do not
    reach: importing it ends the child at once (`os._exit`: no `except` can catch it and fall back)."""
    assert all(part.isidentifier() for part in name.split("."))
    return (
        f'"""epoch_gate: the candidate has a module {name}, which the suite\'s imports do not reach, so the\n'
        'replay did not ship it. Importing it (by a name built at run time) ends the replay."""\n'
        f'import os\nos.write(2, b"\\n{UNSHIPPED_MARK} {name}\\n")\nos._exit({EXIT_UNSHIPPED})\n'
    ).encode()


# The folder the runner's package was loaded from (the sandbox's `__epoch_gate`): the child puts it on its path,
# and a product traceback leaves out its frames.
LOADED_FROM = str(Path(__file__).resolve().parent.parent.parent)
_REF_TEXT = json.dumps(protocol.REF).encode()  # how a reference's key reads in a call's JSON
_OPERATORS: dict[str, Callable[..., object]] = {name: getattr(operator, name) for name in protocol.OPERATORS}


class Unresolved(Exception):
    """A call's target or argument does not name anything: the oracle's mistake, not the product's."""


class Server:
    """The product's callables by name, and every value a call returned, kept per scope until dropped."""

    def __init__(self) -> None:
        self.scopes: dict[int, list[object]] = {}
        self.names: dict[str, object] = {}
        self.unresolved = ""  # why the call being read has an argument that names nothing

    def _named(self, name: str) -> object:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = _import(name)
        return found

    def _handle(self, ref: object) -> object:
        if not (
            type(ref) is list and len(ref) == 3 and type(ref[0]) is int and type(ref[1]) is int and type(ref[2]) is list
        ):
            raise Unresolved("a malformed reference")
        scope, handle, path = ref
        kept = self.scopes.get(scope)
        if kept is None or not 0 <= handle < len(kept):
            raise Unresolved(f"no value {handle} in scope {scope}")
        value = kept[handle]
        for step in path:
            try:
                value = value[step] if type(step) is int or isinstance(value, Mapping) else getattr(value, step)
            except Exception as exc:  # noqa: BLE001 - the parent asked for a part the value does not have
                raise Unresolved(f"no part {step!r} of a {type(value).__name__}: {type(exc).__name__}") from None
        return value

    def _argument(self, raw: dict[str, object]) -> object:
        """json.loads' object_hook: a reference becomes the value it names."""
        if len(raw) == 1 and protocol.REF in raw:
            try:
                return self._handle(raw[protocol.REF])
            except Unresolved as exc:
                self.unresolved = self.unresolved or str(exc)
        return raw

    def read_call(self, line: bytes) -> object:
        self.unresolved = ""
        try:
            # The hook runs in Python for every object of the call: only when there is a reference to find.
            call = json.loads(line, object_hook=self._argument) if _REF_TEXT in line else json.loads(line)
        except (ValueError, RecursionError):
            raise protocol.ProtocolError("a call that is not JSON") from None
        if self.unresolved:
            raise Unresolved(self.unresolved)
        return call

    def _target(self, target: object) -> Callable[..., Any]:
        if type(target) is dict and len(target) == 1:
            name = target.get("m")
            if type(name) is str:  # the hot path: a callable the product names
                found = self.names.get(name)
                if found is not None and callable(found):
                    return found  # type: ignore[return-value]
            ((kind, value),) = target.items()
            if kind == "m" and type(value) is str:
                found = self._named(value)
            elif kind == "h":
                found = self._handle(value)
            elif kind == "op" and value in _OPERATORS:
                found = _OPERATORS[value]  # type: ignore[index]
            elif kind == "p":  # the properties of a value the child holds
                held = self._handle(value)
                return lambda: data.properties(held)
            else:
                raise Unresolved(f"an unknown target {kind!r}")
            if not callable(found):
                raise Unresolved(f"{value} is a {type(found).__name__}, not callable")
            return found  # type: ignore[return-value]
        raise Unresolved("a malformed target")

    def read_calls(self, lines: list[bytes]) -> list[object]:
        """A batch's calls, parsed in one go when no call holds a reference (one json.loads per call costs
        more than the call's own parse); otherwise each on its own, a malformed one as its error."""
        if not any(_REF_TEXT in line for line in lines):
            try:
                parsed = json.loads(b"[" + b",".join(lines) + b"]")
            except (ValueError, RecursionError):
                parsed = None
            if type(parsed) is list and len(parsed) == len(lines):
                return parsed
        calls: list[object] = []
        for line in lines:
            try:
                calls.append(self.read_call(line))
            except (protocol.ProtocolError, Unresolved) as exc:
                calls.append(exc)
        return calls

    def answer(self, kept: list[object], call: object, names: protocol.Projection) -> str:
        """One call's answer, encoded as soon as the call returns (a product that hands back one object
        and changes it on its next call is read as it was): a value as data (with only the fields and
        properties `names` names, when set), something that is not data as a handle, what the product
        raised, or why the call names nothing."""
        try:
            if isinstance(call, Exception):
                raise call
            if not (type(call) is list and len(call) == 3 and type(call[1]) is list and type(call[2]) is dict):
                raise Unresolved("a malformed call")
            function = self._target(call[0])  # type: ignore[index]
        except (Unresolved, protocol.ProtocolError) as exc:  # the call names nothing, or is not one: the oracle's
            return json.dumps(["u", str(exc)[:500]])  # ASCII (json.dumps' default): the frame always encodes
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except BaseException as exc:  # noqa: BLE001 - the product's module raised on import: its failure
            return _raised(exc)
        try:
            result = function(*call[1], **call[2])  # type: ignore[index]
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except BaseException as exc:  # noqa: BLE001 - the product failed on this call (SystemExit too): its answer
            return _raised(exc)
        try:
            text, own = data.encode(result, names)
        except data.NotData as exc:
            kept.append(result)
            return json.dumps(["o", len(kept) - 1, type(result).__name__, str(exc)[:500]])
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except BaseException as exc:  # noqa: BLE001 - its property raised while its value was read: its answer
            return _raised(exc)
        if result is None or isinstance(result, (int, float, str)):  # a number or text is its value: no handle
            return '["v",-1,%s,%s,{}]' % (data.type_name(result), text)
        kept.append(result)
        return '["v",%d,%s,%s,%s]' % (len(kept) - 1, data.type_name(result), text, own)

    def answers(self, scope: int, calls: list[object], names: list[protocol.Projection]) -> str:
        """The batch's answers, as the JSON list the parent reads."""
        kept = self.scopes.setdefault(scope, [])
        answer = self.answer
        return "[" + ",".join([answer(kept, call, projection) for call, projection in zip(calls, names)]) + "]"

    def serve(self, channel_in: BinaryIO, channel_out: BinaryIO) -> int:
        # Bound once, before any product code runs: rebinding these names later changes nothing here.
        read_frame, write, flush = protocol.read_frame, channel_out.write, channel_out.flush
        while True:
            got = read_frame(channel_in)
            if got is None:
                return 0
            kind, payload = got
            if kind == protocol.DROP:
                self.scopes.pop(int(payload), None)
                continue
            if kind != protocol.CALLS:
                raise protocol.ProtocolError(f"unknown request kind {kind!r}")
            head, projection, *lines = payload.split(b"\n")
            names = protocol.projections(projection, len(lines))
            write(protocol.frame(protocol.ANSWERS, self.answers(int(head), self.read_calls(lines), names).encode()))
            flush()


def _raised(exc: BaseException) -> str:
    return json.dumps(["x", data.type_names(exc), data.message(exc), data.product_traceback(exc, LOADED_FROM)])


def _import(name: str) -> object:
    """`pkg.module.attr.attr`: the longest prefix that imports as a module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            value: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name) and module_name != exc.name:
                continue  # a parent of the prefix is missing: try a shorter one
            if exc.name == module_name:
                continue
            raise  # the module is there and its own import failed: the product's failure
        for attribute in parts[cut:]:
            try:
                value = getattr(value, attribute)
            except AttributeError:
                raise Unresolved(f"{'.'.join(parts[:cut])} has no {'.'.join(parts[cut:])}") from None
        return value
    raise Unresolved(f"no product module named {parts[0]}")


def _private_channel() -> tuple[BinaryIO, BinaryIO]:
    """The protocol on fresh descriptors; fd 0 reads /dev/null and fd 1 writes to stderr from here on."""
    channel_in, channel_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return os.fdopen(channel_in, "rb"), os.fdopen(channel_out, "wb")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="epoch_gate.runner.child")
    parser.add_argument("--sandbox-names", default="", help="top-level names of the product, importable from the cwd")
    parser.add_argument("--child-path", action="append", default=[], help="a folder after the standard library")
    parser.add_argument("--parent", type=int, default=0, help="the runner's pid: the child dies with it")
    return parser


def _die_with(parent: int) -> None:
    """The child runs in its own session (so the runner can kill its whole group), which also puts it out
    of reach of whoever ends the runner: a replay timed out outside a jail would leave a looping product
    running forever. Linux's parent-death signal ends it with the runner."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the jail's --die-with-parent and the runner's kill remain
        return
    if parent and os.getppid() != parent:  # the runner was gone before the signal was armed
        os._exit(1)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    gc.set_threshold(100_000, 50, 100)  # as the parent's (parent.GC_THRESHOLDS): answers are many small containers
    _die_with(args.parent)
    channel_in, channel_out = _private_channel()
    sys.meta_path.append(SandboxFinder((n for n in args.sandbox_names.split(",") if n), Path.cwd()))
    sys.path.extend(args.child_path)
    return Server().serve(channel_in, channel_out)
