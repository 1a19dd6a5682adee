"""Caching shown, not assumed: replays are keyed by the epoch, the manifest and the code under test."""

from __future__ import annotations

import json
import re
import uuid

from tests.e2e.repo import Repo

SUITE = "checks:orders_properties"


def replay_line(repo: Repo) -> str:
    done = repo.pants("test", SUITE)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith(f"✓ {SUITE} ")]
    return line


def test_unrelated_change_replays_nothing_and_a_new_epoch_replays_everything(repo: Repo) -> None:
    # Through the daemon, as a developer's shell keeps it: a result it still holds is `memoized`, one it
    # reads back from the process cache `cached locally`; either way nothing replays.
    replay_line(repo)  # warm the cache

    repo.write("src/orders/orders/notes.py", '"""A module nothing imports."""\n')
    repo.write("docs/notes.md", "unrelated\n")
    assert re.search(r" \((cached locally|memoized)\)\.$", replay_line(repo))

    pin = json.loads((repo.root / "fixtures/EPOCH").read_text())
    # Unique per run: the local cache outlives this test, and an epoch id replayed by an earlier run
    # would rightly be a cache hit.
    pin["epoch_id"] = f"orders-{uuid.uuid4().hex[:12]}"
    repo.write("fixtures/EPOCH", json.dumps(pin))
    assert "cached" not in replay_line(repo)  # a new epoch id is a new cache key: everything replays
