"""The end-to-end tests' repositories: this one copied once per test module (`example`), and cloned from
that copy for each test that changes it (`repo`). Both run Pants with its daemon, stopped when done: most
tests run the gate more than once in one repository, and each run would otherwise start Pants anew."""

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
def repo(example: Repo, tmp_path: Path) -> Iterator[Repo]:
    clone = example.clone_to(tmp_path / "repo", daemon=True)
    yield clone
    clone.stop_daemon()
