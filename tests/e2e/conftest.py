"""The end-to-end tests' repositories: this one copied once per test module (`example`), and cloned from
that copy for each test that changes it (`repo`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.repo import Repo


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return Repo.from_example(Path.cwd(), tmp_path_factory.mktemp("example") / "repo")


@pytest.fixture
def repo(example: Repo, tmp_path: Path) -> Repo:
    return example.clone_to(tmp_path / "repo")
