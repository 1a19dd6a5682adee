"""The adopted repository, one for the session (both modules run in one pytest process): a new one that gets
the plugin from the built wheels alone and has run the commands of docs/adopting.md."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.adoption.second_repo import NewRepo, documented_commands
from tests.e2e.repo import stop_pantsd


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Django module last: it lands a second suite on origin/main, which the first module's reports
    would otherwise show."""
    items.sort(key=lambda item: item.path.name == "django_test.py")


@pytest.fixture(scope="session")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NewRepo]:
    here = Path.cwd()
    wheels = sorted(here.glob("epoch_gate*.whl"))  # at the sandbox root, where Pants puts the packages
    assert {w.name.split("-")[0] for w in wheels} == {"epoch_gate", "epoch_gate_pants"}, wheels
    guide = (here / "docs/adopting.md").read_text()
    repo = NewRepo.create(tmp_path_factory.mktemp("adoption"), wheels, guide)
    try:
        for command in documented_commands(guide):
            done = repo.sh(command, timed=True)
            if command != "pants gate ::":
                assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"
        print("\n".join(f"{seconds:7.1f} s  {command}" for command, seconds in repo.timings))
        yield repo
    finally:
        stop_pantsd(repo.root)
