"""One provider per module: the replay's sandbox merges every source root into one folder, so two files
can claim one module name (or one path), and Python would pick one of them silently."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from epoch_gate.evidence.catalog import Catalog
from epoch_gate.reasons import Code, Reason

# What Python imports a module from, besides source: bytecode and extension modules (which a product
# `resource` could place beside a predicate, and which the import system tries first).
_SOURCELESS = (".pyc",)
_EXTENSIONS = (".so", ".pyd")


def module_name(stripped: str) -> Optional[str]:
    """`a/b.py`, `a/b/__init__.py`, `a/b.cpython-39-x86_64-linux-gnu.so` -> `a.b`; None for what Python
    does not import as a module."""
    folder, _, name = stripped.rpartition("/")
    if name.endswith((".py", *_SOURCELESS)):
        stem = name.rsplit(".", 1)[0]
    elif name.endswith(_EXTENSIONS):
        stem = name.split(".", 1)[0]
    else:
        return None
    parts = [p for p in folder.split("/") if p] + ([] if stem == "__init__" else [stem])
    return ".".join(parts) if parts and all(parts) else None


def top_level(stripped: str) -> str:
    """The top-level import name a sandbox path belongs to (`checks/p.py` -> `checks`, `m.py` -> `m`)."""
    first = stripped.split("/", 1)[0]
    if stripped == "__init__.py":  # a source root's own: Python imports it as `__init__`
        return "__init__"
    return first if "/" in stripped else (module_name(stripped) or first)


def _shadow(path: str, expected: str, found: str, message: str) -> Reason:
    return Reason(Code.MODULE_SHADOWED, path, expected=expected, found=found, message=message)


def shadowing(
    files: Mapping[str, str], reserved: Iterable[str], oracle: Mapping[str, str] = {}
) -> list[Reason]:  # noqa: B006 - read only
    """`files` maps each file's path in the repository to its path in the sandbox. Refuses a sandbox in
    which a path or a module is provided twice, anything lands in a reserved top-level name (the runner's
    package, the world, the manifest, the output, the jail's tools), or a file outside the oracle's own
    package lands in it (`oracle`: top-level name -> the package folder or module file that owns it)."""
    reserved = frozenset(reserved)
    reasons: list[Reason] = []
    by_path: dict[str, list[str]] = {}
    by_module: dict[str, list[str]] = {}
    for path, stripped in sorted(files.items()):
        top = top_level(stripped)
        if top in reserved or stripped.split("/", 1)[0] in reserved:
            reasons.append(
                _shadow(
                    path,
                    f"nothing of the change at {top}",
                    stripped,
                    f"{path} would stand in for the gate's own {top} in the replay",
                )
            )
        owner = oracle.get(top)
        if owner is not None and not (path == owner or (owner.endswith("/") and path.startswith(owner))):
            reasons.append(
                _shadow(
                    path,
                    f"{top} only from {owner}",
                    stripped,
                    f"{path} would become part of the oracle's package {top} in the replay",
                )
            )
        by_path.setdefault(stripped, []).append(path)
        name = module_name(stripped)
        if name is not None:
            by_module.setdefault(name, []).append(path)
    groups = [(f"path {p}", paths) for p, paths in sorted(by_path.items())]
    groups += [
        (f"module {m}", paths)
        for m, paths in sorted(by_module.items())
        if not any(set(paths) <= set(g) for _, g in groups if len(g) > 1)
    ]
    for what, paths in groups:
        if len(paths) > 1:
            reasons.append(
                _shadow(
                    paths[0],
                    f"one file providing {what}",
                    " and ".join(paths),
                    f"{what} is provided by {len(paths)} files: {', '.join(paths)}",
                )
            )
    return reasons


def unowned_predicates(catalog: Optional[Catalog], predicate_files: Iterable[str], catalog_path: str) -> list[Reason]:
    """Every catalog entry's predicate must live in a predicate file of its `property_manifest` (as the
    replay sees it, source root stripped): elsewhere it is unprotected code the change may edit."""
    if catalog is None:
        return []
    owned = {module_name(path) for path in predicate_files}
    return [
        Reason(
            Code.PREDICATE_UNPROTECTED,
            catalog_path,
            expected="a module among the manifest's predicates: " + ", ".join(sorted(m for m in owned if m)),
            found=prop.predicate.partition(":")[0],
            message=f"{prop.name}: its predicate's module is not a predicates file of the property_manifest, "
            "so the change could edit it",
        )
        for prop in catalog.properties
        if prop.predicate.partition(":")[0] not in owned
    ]
