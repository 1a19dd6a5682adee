"""The replay runner as a sandbox input: the bytes Pants itself loaded as `epoch_gate`, but only the
runner package and the core modules it declares (`epoch_gate.runner.SHIPPED_CORE`), so that editing the
report, the CLI or the gate's judgement leaves every cached replay valid."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get, collect_rules, rule

from epoch_gate import runner as runner_package
from epoch_gate.runner import SHIPPED_CORE

RUNNER_DIR = "__epoch_gate"


@dataclass(frozen=True)
class CoreRunner:
    """`__epoch_gate/epoch_gate/...`; put RUNNER_DIR on the path to run it."""

    digest: Digest


def _source(module: str) -> tuple[str, bytes]:
    """A module's path below RUNNER_DIR and the bytes Pants loaded it from (its `__file__`: whatever
    package it was imported through, the runner runs the code the gate itself runs)."""
    loaded = Path(importlib.import_module(module).__file__ or "")
    relative = module.replace(".", "/") + ("/__init__.py" if loaded.name == "__init__.py" else ".py")
    return relative, loaded.read_bytes()


def runner_files() -> dict[str, bytes]:
    """The runner package's modules, its subpackages' included (the judge, the product's child, the jail),
    and the declared core modules, by path relative to RUNNER_DIR."""
    package = runner_package.__name__
    folder = Path(runner_package.__file__ or "").parent
    modules = [
        ".".join((package, *path.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__")
        for path in sorted(folder.rglob("*.py"))
        if not path.stem.endswith("_test")
    ]
    return dict(sorted(_source(module) for module in (*modules, *SHIPPED_CORE)))


@rule(desc="Package the epoch_gate replay runner")
async def package_core_runner() -> CoreRunner:
    files = [FileContent(f"{RUNNER_DIR}/{path}", data) for path, data in runner_files().items()]
    return CoreRunner(await Get(Digest, CreateDigest(files)))


def rules() -> list:
    return [*collect_rules()]
