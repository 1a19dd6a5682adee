"""Checks, inside the replay's child, that the code it calls is the code it loaded. Defense in depth only.

The parent cannot verify any of this: the child shares its process with product code, which can forge
verdicts outright (the protocol's file descriptors are in its process). These checks catch the cheap
cheats, before and after every batch: a predicate rebound (`checks.p.pred = lambda r: True`) or its code
swapped, a runner or oracle module replaced in `sys.modules`, a function or class in one rebound.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


class Tampered(Exception):
    """Protected code is not what was loaded."""


@dataclass(frozen=True)
class Snapshot:
    """A protected module as loaded: the object and each function or class in its dict (with its code)."""

    name: str
    module: types.ModuleType
    members: tuple[tuple[str, object, Optional[types.CodeType]], ...]


def snapshot(name: str, module: types.ModuleType) -> Snapshot:
    members = tuple((key, value, value.__code__ if isinstance(value, types.FunctionType) else None)
                    for key, value in sorted(vars(module).items())
                    if isinstance(value, (types.FunctionType, type)))
    return Snapshot(name, module, members)


def verify_modules(snapshots: tuple[Snapshot, ...]) -> None:
    for snap in snapshots:
        if sys.modules.get(snap.name) is not snap.module:
            raise Tampered(f"module {snap.name} was replaced in sys.modules")
        namespace = vars(snap.module)
        for key, value, code in snap.members:
            swapped = code is not None and value.__code__ is not code  # type: ignore[attr-defined]
            if namespace.get(key) is not value or swapped:
                raise Tampered(f"{snap.name}.{key} was replaced")


def source_path(sandbox: Path, module: str) -> Path:
    """Where the sandbox holds a module's source: `a/b.py` or `a/b/__init__.py`."""
    base = sandbox.joinpath(*module.split("."))
    plain = base.with_name(base.name + ".py")
    return plain if plain.is_file() else base / "__init__.py"


@dataclass(frozen=True)
class Predicate:
    """A protected predicate: the function, its module, and the code compiled from the file's own bytes."""

    spec: str
    module: types.ModuleType
    function: types.FunctionType
    code: types.CodeType

    def verify(self) -> None:
        name, _, attribute = self.spec.partition(":")
        if sys.modules.get(name) is not self.module:
            raise Tampered(f"module {name} was replaced in sys.modules")
        if getattr(self.module, attribute, None) is not self.function:
            raise Tampered(f"{self.spec} was rebound")
        if self.function.__code__ != self.code:
            raise Tampered(f"{self.spec} does not run the code of its file")


def protected_predicate(spec: str, module: types.ModuleType, sandbox: Path) -> Predicate:
    """`spec`'s function, checked against its file in the sandbox compiled here (as the import system does:
    no inherited future flags, the interpreter's optimization level)."""
    name, _, attribute = spec.partition(":")
    path = source_path(sandbox, name)
    if Path(getattr(module, "__file__", None) or "").resolve() != path.resolve():
        raise Tampered(f"{name} was not loaded from {path.relative_to(sandbox)} in the sandbox")
    compiled = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    codes = {c.co_name: c for c in compiled.co_consts if isinstance(c, types.CodeType)}
    if attribute not in codes:
        raise LookupError(f"{path.relative_to(sandbox)} defines no function {attribute}")
    function = getattr(module, attribute, None)
    if type(function) is not types.FunctionType:
        raise Tampered(f"{spec} is a {type(function).__name__}, not the function its file defines")
    predicate = Predicate(spec, module, function, codes[attribute])
    predicate.verify()
    return predicate
