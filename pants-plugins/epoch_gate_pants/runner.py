"""The replay runner as a sandbox input: the bytes Pants itself loaded as `epoch_gate`, but only the
modules the runner imports, so that editing the report, the CLI or the gate's orchestration leaves every
cached replay valid."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get, collect_rules, rule

import epoch_gate
from epoch_gate.closure import closure, imported

RUNNER_ROOT = "__epoch_gate"
# The runner's entry point, and the child it starts by name (epoch_gate.channel's CHILD_BOOT).
ENTRY_MODULES = {"epoch_gate.runner_main", "epoch_gate.child"}


@dataclass(frozen=True)
class CoreRunner:
    """`__epoch_gate/epoch_gate/<the runner's modules>.py`; put RUNNER_ROOT on the path to run it."""

    digest: Digest


def runner_files() -> dict[str, bytes]:
    """The runner's import closure within the package, by path relative to RUNNER_ROOT."""
    package = epoch_gate.__name__
    sources = {f"{package}/{name}": importlib.resources.read_binary(package, name)
               for name in importlib.resources.contents(package) if name.endswith(".py")}
    modules = {f"{package}.{path[len(package) + 1:-3]}".replace(".__init__", ""): [path] for path in sources}
    name_of = {path: name for name, (path,) in modules.items()}
    reached = closure(ENTRY_MODULES, lambda name: modules.get(name, ()),
                      lambda path: imported(sources[path], name_of[path], path.endswith("__init__.py")))
    return {path: sources[path] for path in sorted(reached)}


@rule(desc="Package the epoch_gate replay runner")
async def package_core_runner() -> CoreRunner:
    files = [FileContent(f"{RUNNER_ROOT}/{path}", data) for path, data in runner_files().items()]
    return CoreRunner(await Get(Digest, CreateDigest(files)))


def rules() -> list:
    return [*collect_rules()]
