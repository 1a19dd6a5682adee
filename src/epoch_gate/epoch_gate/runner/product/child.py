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
from typing import Any, BinaryIO, Callable, Optional, Sequence

from epoch_gate.runner.product import data
from epoch_gate.runner import protocol
from epoch_gate.runner.finder import SandboxFinder

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
EXIT_MEMORY = 75  # the product ran out of memory (its address-space limit): the runner names the limit
# What the stand-in of a candidate module the replay did not ship exits with, after printing the mark and
# the module's name (`unshipped_stub`): an import by a name built at run time ends the replay.
EXIT_UNSHIPPED, UNSHIPPED_MARK = 86, "epoch_gate-unshipped:"


def unshipped_stub(name: str) -> bytes:
    """The stand-in shipped for the candidate's module `name` (any name an import by a built name could
    ask for: a dunder, one that is not an identifier), which the suite's imports do not reach: importing
    it ends the child at once (`os._exit`: no `except` can catch it and fall back)."""
    said = f"\n{UNSHIPPED_MARK} {name}\n".encode()
    return (
        '"""epoch_gate: a module of the candidate that the suite\'s imports do not reach, so the replay did\n'
        'not ship it. Importing it (by a name built at run time) ends the replay."""\n'
        f"import os\nos.write(2, {said!r})\nos._exit({EXIT_UNSHIPPED})\n"
    ).encode()


# The folder the runner's package was loaded from (the sandbox's `__epoch_gate`): the child puts it on its path,
# and a product traceback leaves out its frames.
LOADED_FROM = str(Path(__file__).resolve().parents[3])
_OPERATORS: dict[str, Callable[..., object]] = {name: getattr(operator, name) for name in protocol.OPERATORS}


class Unresolved(Exception):
    """A call's target or argument does not name anything: the oracle's mistake, not the product's."""


class Server:
    """The product's callables by name, and the values the current scope's calls returned (`kept`: the
    objects of each answer as it was written, then a handle's value), dropped when the scope changes."""

    def __init__(self) -> None:
        self.scope = -1
        self.kept: list[object] = []
        self.names: dict[str, object] = {}
        self.unresolved = ""  # why the call being read has an argument that names nothing

    def _named(self, name: str) -> object:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = _import(name)
        return found

    def _handle(self, ref: object) -> object:
        """The value a reference ([scope, handle]) names."""
        if not (type(ref) is list and len(ref) == 2 and type(ref[0]) is int and type(ref[1]) is int):
            raise Unresolved("a malformed reference")
        if ref[0] != self.scope or not 0 <= ref[1] < len(self.kept):
            raise Unresolved(f"no value {ref[1]} in scope {ref[0]}")
        return self.kept[ref[1]]

    def _argument(self, raw: dict[str, object]) -> object:
        """json.loads' object_hook: a reference becomes the value it names, a Decimal or a Fraction itself."""
        if len(raw) == 1:
            try:
                if protocol.REF in raw:
                    return self._handle(raw[protocol.REF])
                if protocol.DECIMAL in raw or protocol.FRACTION in raw:
                    return protocol.tagged(*next(iter(raw.items())))
            except (Unresolved, protocol.ProtocolError) as exc:
                self.unresolved = self.unresolved or str(exc)
        return raw

    def read_call(self, line: bytes) -> object:
        self.unresolved = ""
        try:
            # The hook runs in Python for every object of the call: only when there is a reference to find.
            call = json.loads(line, object_hook=self._argument) if b'"\\u0000' in line else json.loads(line)
        except (ValueError, RecursionError):
            raise Unresolved("a call that is not JSON") from None
        if self.unresolved:
            raise Unresolved(self.unresolved)
        if not (type(call) is list and len(call) == 3 and type(call[1]) is list and type(call[2]) is dict):
            raise Unresolved("a malformed call")
        return call

    def _target(self, target: object) -> tuple[Callable[..., Any], bool, Optional[bool]]:
        """What the call runs, whether it is a read (of an attribute, or a value again as data), which
        takes no arguments, and for a read again (`"r"`) whether it runs none of the product's code (the
        value's own fields, read in `encode`, may yet). An attribute is looked up when the call runs, by
        ordinary attribute access: product code."""
        if not (type(target) is dict and len(target) == 1):
            raise Unresolved("a malformed target")
        ((kind, value),) = target.items()
        if kind not in ("m", "h", "r", "a", "op"):
            raise Unresolved(f"an unknown target {kind!r}")
        if kind in ("h", "r") and type(value) is list and len(value) == 2:
            kept = self._handle(value)
            if kind == "r":
                return (lambda: kept), True, True
            found = kept
        elif kind == "r" and type(value) is list and len(value) == 3 and type(value[2]) is str:
            kept, name = self._handle(value[:2]), value[2]
            if name not in data.field_names(kept):  # a field only, never a method or a property's name
                raise Unresolved(f"{name} is not a field of the {data.type_name(kept)}")
            return (lambda: getattr(kept, name)), True, data.reads_plainly(kept, name)
        elif kind == "a" and type(value) is list and len(value) == 3 and type(value[2]) is str:
            kept, name = self._handle(value[:2]), value[2]
            return (lambda: getattr(kept, name)), True, None
        elif kind == "m" and type(value) is str:
            found = self._named(value)
        elif kind == "op" and value in _OPERATORS:
            found = _OPERATORS[value]  # type: ignore[index]
        else:
            raise Unresolved("a malformed target")
        if not callable(found):
            raise Unresolved(f"{value} is a {type(found).__name__}, not callable")
        return found, False, None  # type: ignore[return-value]

    def answer(self, scope: int, line: bytes) -> str:
        """One call's answer, encoded as soon as the call returns (a product that hands back one object and
        changes it on its next call is read as it was): a value as data, something that is not data as a
        handle, what the product raised, or why the call names nothing."""
        if scope != self.scope:
            self.scope, self.kept = scope, []
        try:
            call = self.read_call(line)
            function, read, plainly = self._target(call[0])  # type: ignore[index]
            if read and (call[1] or call[2]):  # type: ignore[index]
                raise Unresolved("a read takes no arguments")
        except Unresolved as exc:  # the call names nothing, or is not one: the oracle's
            return json.dumps(["u", str(exc)[:500]])
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
        first, walked = len(self.kept), [bool(plainly)]
        try:
            text = data.encode(result, self.kept, walked if plainly is not None else None)
            if len(text) > protocol.MAX_ANSWER - 1024:
                del self.kept[first:]
                raise data.NotData(f"over {protocol.MAX_ANSWER >> 20} MiB of JSON")
        except data.NotData as exc:
            self.kept.append(result)
            return json.dumps(["o", first, data.type_name(result), str(exc)[:500]])
        except MemoryError:
            os._exit(EXIT_MEMORY)
        # A read again that ran product code: the judge no longer holds any other value's fields as they were
        kind = "w" if plainly is not None and not all(walked) else "v"
        return '["%s",%s,%s]' % (kind, json.dumps(data.type_name(result)), text)

    def serve(self, channel_in: BinaryIO, channel_out: BinaryIO) -> int:
        # Bound once, before any product code runs: rebinding these names later changes nothing here.
        read_frame, write, flush, frame = protocol.read_frame, channel_out.write, channel_out.flush, protocol.frame
        while True:
            got = read_frame(channel_in)
            if got is None:
                return 0
            kind, payload = got
            if kind != protocol.CALL:
                raise protocol.ProtocolError(f"unknown request kind {kind!r}")
            head, _, line = payload.partition(b"\n")
            write(frame(protocol.ANSWER, self.answer(int(head), line).encode()))
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
    parser = argparse.ArgumentParser(prog="epoch_gate.runner.product.child")
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
