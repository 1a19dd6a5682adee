"""What enters the replay's jail is the runner package and its declared list of core modules: exactly
what the runner's entry points import, so nothing it needs is missing and nothing else ships."""

from __future__ import annotations

from pathlib import Path

import epoch_gate
from epoch_gate.change.closure import closure, imported
from epoch_gate.runner import ENTRY_POINTS, SHIPPED_CORE

ROOT = Path(epoch_gate.__file__).resolve().parent.parent


def _module(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def test_the_runner_ships_its_package_and_exactly_the_core_modules_it_imports() -> None:
    sources = {
        path: path.read_bytes() for path in (ROOT / "epoch_gate").rglob("*.py") if not path.name.endswith("_test.py")
    }
    modules = {_module(path): [path] for path in sources}
    reached = closure(
        ENTRY_POINTS,
        lambda name: modules.get(name, ()),
        lambda path: imported(sources[path], _module(path), path.name == "__init__.py"),
    )
    package = {name for name in modules if name == "epoch_gate.runner" or name.startswith("epoch_gate.runner.")}
    assert {_module(path) for path in reached} == package | set(SHIPPED_CORE)
