"""The oracle's predicates in the parent: imported from the sandbox under the oracle's names only, each
checked to take (record, product), and then the sandbox taken off the import path before the child, which
shares it, starts."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Callable, Iterable, Iterator, Union

from epoch_gate.evidence.catalog import Property
from epoch_gate.runner.finder import SandboxFinder
from epoch_gate.runner.judge.judging import Product

Predicate = Callable[[object, Product], object]


@contextlib.contextmanager
def oracle_imports(sandbox: Path, names: Iterable[str]) -> Iterator[None]:
    """While open, the sandbox's modules under `names` (the oracle's) can be imported, and no others."""
    finder = SandboxFinder(names, sandbox)
    sys.meta_path.append(finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def load_predicate(prop: Property) -> Union[Predicate, str]:
    """The property's predicate, imported under the oracle's names only, or why it cannot judge."""
    module, _, function = prop.predicate.partition(":")
    try:
        found = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:
        return (
            f"cannot load predicate {prop.predicate}: it imports {exc.name}, which is not the oracle's. A "
            "predicate runs outside the product: take `product` as its second parameter and call the product "
            "through it (`product.pkg.module.function(...)`, docs/adopting.md) instead of importing it"
        )
    except Exception as exc:  # noqa: BLE001 - a predicate that cannot load is that property's error
        return f"cannot load predicate {prop.predicate}: {type(exc).__name__}: {exc}"
    try:
        parameters = len(inspect.signature(found).parameters)
    except (TypeError, ValueError):
        parameters = -1
    if parameters != 2:
        return (
            f"predicate {prop.predicate} takes "
            f"{'no readable' if parameters < 0 else parameters} parameter{'' if parameters == 1 else 's'}, "
            "not (record, product): a predicate runs outside the product and calls it through `product` "
            "(docs/adopting.md)"
        )
    return found  # type: ignore[no-any-return]


def _inside(entry: object, root: Path) -> bool:
    """Whether an import path entry is in `root` ('' and other relative entries: from the cwd)."""
    return isinstance(entry, str) and Path(entry).resolve().is_relative_to(root)


def close_imports(sandbox: Path) -> None:
    """Called once the runner and the predicates are imported, before the child starts: the child shares
    the sandbox and may write to it, and the runner's own folder (sys.path[0] in the jail), cwd-relative
    entries and the packages imported from it (epoch_gate, the oracle's) are all in it. Any later import
    of the parent (a lazy one of the standard library, say) can then only come from the standard library,
    never from a module the product planted."""
    root = sandbox.resolve()
    sys.path[:] = [entry for entry in sys.path if not _inside(entry, root)]
    for entry in [entry for entry in sys.path_importer_cache if _inside(entry, root)]:
        del sys.path_importer_cache[entry]
    for module in list(sys.modules.values()):
        # vars(), not getattr: a module's __getattr__ could import (or run) anything
        folders = vars(module).get("__path__") if isinstance(module, types.ModuleType) else None
        if any(_inside(folder, root) for folder in folders or ()):
            module.__path__ = []  # no new submodule from the sandbox either
