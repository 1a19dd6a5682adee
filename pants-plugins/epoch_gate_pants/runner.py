"""The replay runner as a sandbox input: the bytes Pants itself loaded as `epoch_gate`, but only the
runner package and the core modules it declares (`epoch_gate.runner.SHIPPED_CORE`), so that editing the
report, the CLI or the gate's judgement leaves every cached replay valid."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get, collect_rules, rule

from epoch_gate import runner as runner_package
from epoch_gate.runner import SHIPPED_CORE

RUNNER_ROOT = "__epoch_gate"


@dataclass(frozen=True)
class CoreRunner:
    """`__epoch_gate/epoch_gate/...`; put RUNNER_ROOT on the path to run it."""

    digest: Digest


def _module_file(module: str) -> tuple[str, bytes]:
    package, _, name = module.rpartition(".")
    if not package:  # the package itself
        return f"{module}/__init__.py", importlib.resources.read_binary(module, "__init__.py")
    return f"{package.replace('.', '/')}/{name}.py", importlib.resources.read_binary(package, f"{name}.py")


def runner_files() -> dict[str, bytes]:
    """The runner package's modules and the declared core modules, by path relative to RUNNER_ROOT."""
    package = runner_package.__name__
    folder = package.replace(".", "/")
    files = {f"{folder}/{name}": importlib.resources.read_binary(package, name)
             for name in importlib.resources.contents(package) if name.endswith(".py") and not name.endswith("_test.py")}
    files.update(_module_file(module) for module in SHIPPED_CORE)
    return dict(sorted(files.items()))


@rule(desc="Package the epoch_gate replay runner")
async def package_core_runner() -> CoreRunner:
    files = [FileContent(f"{RUNNER_ROOT}/{path}", data) for path, data in runner_files().items()]
    return CoreRunner(await Get(Digest, CreateDigest(files)))


def rules() -> list:
    return [*collect_rules()]
