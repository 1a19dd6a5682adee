"""The parent's judges. A property with a probe is split in two: the probe (product code) runs in the
child and returns plain JSON data; the judge, its catalog predicate `predicate(record, observed) -> bool`,
runs here in the trusted parent over data the parent parsed itself, so no object of the product (one
whose `__eq__` always holds, say) ever reaches it. Judges import from the sandbox under the oracle's own
top-level names only: a judge that imports product code does not load."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

from epoch_gate.finder import SandboxFinder
from epoch_gate.stream import RAISED

Judge = Callable[[object, object], object]


@contextlib.contextmanager
def oracle_imports(sandbox: Path, names: Iterable[str]) -> Iterator[None]:
    finder = SandboxFinder(names, sandbox)
    sys.meta_path.append(finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def load_judge(spec: str) -> Judge:
    module, _, function = spec.partition(":")
    found = getattr(importlib.import_module(module), function)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return found


def judge(function: Judge, witness: bytes, observed: object) -> tuple[bool, str]:
    """Exactly True holds; False, anything else, or raising is a violation (with why)."""
    try:
        verdict = function(json.loads(witness), observed)
    except Exception as exc:  # noqa: BLE001 - a raising judge is a violation, reported
        return False, f"{RAISED}{type(exc).__name__}: {exc}"[:500]
    if type(verdict) is not bool:
        return False, f"predicate returned {type(verdict).__name__}, not bool"
    return verdict, "" if verdict else "predicate returned False"
