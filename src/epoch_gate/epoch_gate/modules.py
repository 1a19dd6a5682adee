"""One provider per module: the replay's sandbox merges every source root into one folder, so two files
can claim one module name, and Python would pick one of them silently."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from epoch_gate.catalog import Catalog
from epoch_gate.reasons import Code, Reason


def module_name(stripped: str) -> Optional[str]:
    """`a/b.py` and `a/b/__init__.py` -> `a.b`; None for what Python does not import as a module."""
    if not stripped.endswith(".py"):
        return None
    parts = stripped[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts else None


def shadowing(files: Mapping[str, str], reserved: Iterable[str]) -> list[Reason]:
    """`files` maps each file's path in the repository to its path in the sandbox. Closes a sandbox in
    which a module is provided twice, or anything outside the runner lands in a reserved top-level name
    (the runner's package, the world, the manifest, the output)."""
    reserved = frozenset(reserved)
    reasons: list[Reason] = []
    providers: dict[str, list[str]] = {}
    for path, stripped in sorted(files.items()):
        top = stripped.split("/", 1)[0]
        name = module_name(stripped)
        if top in reserved or (name is not None and name.split(".")[0] in reserved):
            reasons.append(Reason(Code.MODULE_SHADOWED, path, expected=f"nothing of the change at {top}",
                                  found=stripped, message=f"{path} would stand in for the gate's own {top} "
                                                          "in the replay"))
        if name is not None:
            providers.setdefault(name, []).append(path)
    for name, paths in sorted(providers.items()):
        if len(paths) > 1:
            reasons.append(Reason(Code.MODULE_SHADOWED, paths[0], expected=f"one file providing {name}",
                                  found=" and ".join(paths),
                                  message=f"module {name} is provided by {len(paths)} files: "
                                          f"{', '.join(paths)}"))
    return reasons


def unowned_predicates(catalog: Optional[Catalog], predicate_files: Iterable[str], catalog_path: str) -> list[Reason]:
    """Every catalog entry's predicate must live in a predicate file of its `property_manifest` (as the
    replay sees it, source root stripped): elsewhere it is unprotected code the change may edit."""
    if catalog is None:
        return []
    owned = {module_name(path) for path in predicate_files}
    return [Reason(Code.PREDICATE_UNPROTECTED, catalog_path, expected="a module among the manifest's predicates: "
                   + ", ".join(sorted(m for m in owned if m)), found=prop.predicate.partition(":")[0],
                   message=f"{prop.name}: its predicate's module is not a predicates file of the property_manifest, "
                           "so the change could edit it")
            for prop in catalog.properties if prop.predicate.partition(":")[0] not in owned]
