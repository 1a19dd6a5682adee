"""What only the real `./pants` shows of the verdict's scenarios (docs/contract.md): the table itself runs
as goal tests (pants-plugins/epoch_gate_pants/gate_test.py, the gate goal in a RuleRunner over a git
repository). Here: the verdict and console of a real run, and `--changed-since` as Pants itself resolves it
(the gate's own code and `pants.toml` as Pants loads them: holes_test.py). Each change is committed in the
end-to-end repository and judged by the real `./pants --changed-since=<base> gate`."""

from __future__ import annotations

import re

from tests.e2e.repo import GateRun, Repo


def judged(repo: Repo, base: str) -> GateRun:
    return repo.gate(f"--changed-since={base}")


def test_unrelated_change_is_eligible(repo: Repo) -> None:
    base = repo.head()
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("docs")
    run = judged(repo, base)
    assert run.verdict == "eligible" and run.exit_code == 0, run.stdout
    assert run.all_reasons() == [] and run.report["oracle_changes"] == []
    assert (
        "epoch     orders-" in run.stdout and "manifest  sha256 " in run.stdout and "verdict   eligible" in run.stdout
    )


def test_a_clean_checkout_prints_what_the_readme_shows(repo: Repo) -> None:
    readme = (repo.root / "README.md").read_text()
    shown = readme.split("On a clean checkout, stdout reads:\n\n```\n", 1)[1].split("```", 1)[0]
    run = repo.gate()
    assert run.exit_code == 0 and run.stdout == shown, run.stdout
    # As each suite is decided, one line on stderr says how its replay went, before the report is printed.
    # A replay that ran (not from the cache) is named by Pants as it completes, as the README shows.
    for suite, passed, records, epoch in (
        ("checks:orders_properties", 8, "1,300", "orders-2026-12-e"),
        ("checks/inventory:inventory_properties", 4, "500", "inventory-2026-12-b"),
    ):
        done = re.search(
            rf"\[INFO\] {re.escape(suite)}: {passed} of {passed} sampled properties pass over {records} records"
            r"( \(from the cache\))?$",
            run.stderr,
            re.MULTILINE,
        )
        assert done, run.stderr[-3000:]
        ran = f"[INFO] Completed: Replay {passed} sampled properties of {suite} over {records} records of epoch {epoch}"
        assert done.group(1) or ran in run.stderr, run.stderr[-3000:]


def test_base_that_does_not_resolve(repo: Repo) -> None:
    missing = "0" * 40
    # Pants resolves --changed-since itself, before any goal runs: it fails the run (never eligible).
    done = repo.pants(f"--changed-since={missing}", "gate")
    assert done.returncode == 1 and "eligible" not in done.stdout
