"""The core package as a sandbox input: the replay runs the bytes Pants itself loaded as `epoch_gate`."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get, collect_rules, rule

import epoch_gate

RUNNER_ROOT = "__epoch_gate"


@dataclass(frozen=True)
class CoreRunner:
    """`__epoch_gate/epoch_gate/*.py`; put RUNNER_ROOT on PYTHONPATH to run `python -m epoch_gate`."""

    digest: Digest


@rule(desc="Package the epoch_gate replay runner")
async def package_core_runner() -> CoreRunner:
    package = epoch_gate.__name__
    # Tests beside the code are not the runner: editing one must not change the replay's cache key.
    names = sorted(n for n in importlib.resources.contents(package)
                   if n.endswith(".py") and not n.endswith("_test.py"))
    files = [FileContent(f"{RUNNER_ROOT}/{package}/{name}", importlib.resources.read_binary(package, name))
             for name in names]
    return CoreRunner(await Get(Digest, CreateDigest(files)))


def rules() -> list:
    return [*collect_rules()]
