from __future__ import annotations

from pathlib import Path

import pytest
from pants.base.build_environment import get_pants_cachedir


@pytest.fixture(scope="session")
def named_caches() -> Path:
    """Pex's and pip's caches: Pants' own, which every rule test and Pants itself share (they are keyed by
    content and made for concurrent use), so that a requirement or a pex tool is fetched and built once.
    (Not the store: LMDB must not be opened twice in one process, and each test's scheduler would.)"""
    return Path(get_pants_cachedir()) / "named_caches"
