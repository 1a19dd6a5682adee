"""The end-to-end tests' repository: this one copied once per test module (`example`) and reset to its landed
commit for each test that changes it (`repo`). It runs Pants with its daemon, stopped when the module is
done: each test runs Pants more than once, and each run without the daemon would start Pants anew (~12 s
of CPU here, mostly building the rule graph twice)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.repo import Repo


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    repo = Repo.from_example(Path.cwd(), tmp_path_factory.mktemp("example") / "repo")
    repo.daemon = True
    yield repo
    repo.stop_daemon()


@pytest.fixture
def repo(example: Repo) -> Repo:
    example.reset()
    return example
