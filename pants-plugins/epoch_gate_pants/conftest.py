from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def named_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pex's and pip's caches, shared by a file's rule tests: each downloads the requirements' wheels once.
    (Not the store: LMDB must not be opened twice in one process, and each test's scheduler would.)"""
    return tmp_path_factory.mktemp("named")
