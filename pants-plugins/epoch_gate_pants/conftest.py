from __future__ import annotations

from pathlib import Path

import pytest
from pants.base.build_environment import get_pants_cachedir
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants.rule_harness import fresh, new_rule_runner


@pytest.fixture(scope="session")
def named_caches() -> Path:
    """Pex's and pip's caches: Pants' own, which every rule test and Pants itself share (they are keyed by
    content and made for concurrent use), so that a requirement or a pex tool is fetched and built once.
    (Not the store: LMDB must not be opened twice in one process, and each module's scheduler would.)"""
    return Path(get_pants_cachedir()) / "named_caches"


@pytest.fixture(scope="module")
def module_rule_runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, named_caches: Path
) -> RuleRunner:
    """One RuleRunner per test module, over the rules of its `MODULES`, its `QUERIES` and any `EXTRA_RULES`: what
    Pants runs once per scheduler (the interpreter search, the jail's probes) then runs once per module, not once
    per test."""
    module = request.module
    tmp = tmp_path_factory.mktemp(module.__name__.rsplit(".", 1)[-1])
    return new_rule_runner(tmp, named_caches, module.MODULES, module.QUERIES, getattr(module, "EXTRA_RULES", ()))


@pytest.fixture
def rule_runner(module_rule_runner: RuleRunner) -> RuleRunner:
    """The module's RuleRunner with an empty build root and the default options."""
    return fresh(module_rule_runner)
