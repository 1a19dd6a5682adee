"""Two gates at once on one repository: the same verdict, and a report and witnesses that are whole."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.e2e.repo import Repo

ORDERS = "checks:orders_properties"
REFUND_BUG = (
    "src/orders/orders/payments.py",
    "    if already + minor > payment.captured.minor:",
    "    if already + minor > payment.authorized.minor:",
)


def written(out: Path) -> dict[Path, object]:
    """Every file the gate wrote; report.json without where each replay came from (a cache or a run),
    which is the one thing a rerun may change."""
    files: dict[Path, object] = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    report = json.loads(files.pop(Path("report.json")))  # type: ignore[arg-type]
    files[Path("report.json")] = {**report, "suites": [{**s, "cached": None} for s in report["suites"]]}
    return files


def test_two_gates_at_once_agree_and_corrupt_nothing(repo: Repo) -> None:
    base = repo.head()
    repo.edit(*REFUND_BUG)  # a failing property, so both runs write the same witness files
    repo.commit("refund against the authorization")

    # Two Pants processes, each without the daemon (which serves one run at a time), in one repository.
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: repo.pants("--no-pantsd", f"--changed-since={base}", "gate"), range(2)))
    for done in runs:
        assert done.returncode == 1, done.stderr[-2000:]
        assert "verdict   closed" in done.stdout.splitlines()  # then the local run's advisory line
    assert runs[0].stdout == runs[1].stdout

    out = repo.root / "dist" / "gate"
    report = json.loads((out / "report.json").read_text())
    orders = next(s for s in report["suites"] if s["address"] == ORDERS)
    assert report["verdict"] == "closed" and {r["code"] for r in orders["reasons"]} == {"property-failed"}
    for witness in orders["identities"]["witnesses"]:
        data = (out / orders["folder"] / "observations" / f"{witness['observation_id']}.bin").read_bytes()
        assert hashlib.sha256(data).hexdigest() == witness["witness_sha256"]
        json.loads((out / orders["folder"] / "observations" / f"{witness['observation_id']}.json").read_text())
    assert orders["identities"]["witnesses"]

    # A third, alone (through the daemon), writes byte for byte what the concurrent pair left.
    left = written(out)
    alone = repo.pants(f"--changed-since={base}", "gate")
    assert alone.returncode == 1 and alone.stdout == runs[0].stdout
    assert written(out) == left
