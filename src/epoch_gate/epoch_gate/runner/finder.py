"""Imports from a sandbox folder under declared top-level names only, after the standard library."""

from __future__ import annotations

import importlib.machinery
import types
from pathlib import Path
from typing import Iterable, Optional, Sequence


class SandboxFinder:
    """Appended to sys.meta_path, after the path finder: the sandbox can shadow neither the standard
    library nor the runner (not even an optional import such as `copy`'s `org.python.core`), and is
    reachable only under `names`."""

    def __init__(self, names: Iterable[str], folder: Path) -> None:
        self.names, self.folder = frozenset(names), str(folder)

    def find_spec(
        self, name: str, path: Optional[Sequence[str]] = None, target: Optional[types.ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if path is None and name in self.names:
            return importlib.machinery.PathFinder.find_spec(name, [self.folder])
        return None
