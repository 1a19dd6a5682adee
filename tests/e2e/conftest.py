"""The end-to-end tests' repository: this one copied once for every module (`example`), which Pants runs in
one pytest process (`batch_compatibility_tag` in BUILD), and reset to its landed commit for each test that
changes it (`repo`). It runs Pants with one daemon, stopped when the session is done: each run without
the daemon starts Pants anew (~12 s of CPU here, mostly building the rule graph twice), and so does each
edit of the files a daemon was started from (`pants.toml`, the plugin's code). Tests that need such an
edit, or a run without a daemon, make it in a worktree (`Repo.worktree`) or as git objects
(`Repo.candidate`), never in this working tree."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.repo import Repo


@pytest.fixture(scope="session")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    repo = Repo.from_example(Path.cwd(), tmp_path_factory.mktemp("example") / "repo")
    repo.daemon = True
    yield repo
    repo.stop_daemon()


@pytest.fixture
def repo(example: Repo) -> Repo:
    example.reset()
    return example
