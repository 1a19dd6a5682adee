"""The gate checks that the code deciding is the code it expects: one provider of each of its packages
on the import path, and every loaded module of theirs from that provider."""

from __future__ import annotations

import os
import sys
from typing import Sequence

from epoch_gate.reasons import Code, Reason

GATE_PACKAGES = ("epoch_gate", "epoch_gate_pants")
# What Python's path finder would import for a top-level name, first match per path entry.
_CANDIDATES = ("{}/__init__.py", "{}.py", "{}.pyc", "{}/__init__.pyc")


def providers(name: str, path: Sequence[str]) -> list[str]:
    """Every place that could provide the top-level module `name` (a regular package, a module, a
    sourceless or an extension module), in import order; a folder listed twice on the path (test runners
    do that) is one provider."""
    found = []
    for entry in path:
        folder = entry or os.getcwd()
        if not os.path.isdir(folder):
            continue
        hits = [os.path.join(folder, c.format(name)) for c in _CANDIDATES]
        extensions = [
            e.path for e in os.scandir(folder) if e.name.startswith(name + ".") and e.name.endswith((".so", ".pyd"))
        ]
        provider = os.path.realpath(os.path.join(folder, name))
        if (any(os.path.exists(h) for h in hits) or extensions) and provider not in found:
            found.append(provider)
    return found


def gate_code_shadowed(path: Sequence[str] = (), modules: dict | None = None) -> list[Reason]:
    path = path or sys.path
    modules = sys.modules if modules is None else modules
    reasons = []
    for name in GATE_PACKAGES:
        found = providers(name, path)
        if len(found) != 1:
            reasons.append(
                Reason(
                    Code.MODULE_SHADOWED,
                    name,
                    "one provider of the gate's package " + name,
                    " and ".join(found) or "none",
                    f"the gate's own package {name} is provided {len(found)} times on the import "
                    "path: the code deciding may not be the gate's",
                )
            )
            continue
        for module_name, module in sorted(modules.items()):
            if module_name != name and not module_name.startswith(name + "."):
                continue
            file = os.path.realpath(getattr(module, "__file__", None) or "")
            if not file.startswith(found[0] + os.sep) and file != found[0] + ".py":
                reasons.append(
                    Reason(
                        Code.MODULE_SHADOWED,
                        module_name,
                        f"loaded from {found[0]}",
                        file or "?",
                        f"the gate's module {module_name} was loaded from elsewhere",
                    )
                )
    return reasons
