"""Adoption of a framework: a Django suite beside the first, in the adopted repository (`adopted`,
conftest.py), as docs/adopting.md's "Frameworks" section has it. It runs after second_repo_test.py."""

from __future__ import annotations

import re
from pathlib import Path

from tests.adoption import django_suite
from tests.adoption.second_repo import NewRepo, all_reasons, report


def test_a_django_suite_replays_after_its_product_set_up_in_local_and_trusted_mode(adopted: NewRepo) -> None:
    suite = "checks/bookings:properties"
    reset = adopted.sh("git checkout -q -f -B bookings origin/main && git clean -fdq")  # what the other module left
    assert reset.returncode == 0, reset.stderr
    for rel, text in django_suite.files(Path("docs/adopting.md").read_text()).items():
        (adopted.root / rel).parent.mkdir(parents=True, exist_ok=True)
        adopted.write(rel, text)
    adopted.write("pants.toml", django_suite.with_resolves(adopted.read("pants.toml")))
    for command in ("pants generate-lockfiles", "pants tailor ::"):
        done = adopted.sh(command)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    assert '"Django' in adopted.read("3rdparty/python/default.lock")
    proposed = adopted.read("checks/bookings/BUILD")
    assert 'fixture="fixtures/bookings:bookings_epoch"' in proposed, proposed
    # The guide's one edit for a framework: the suite names the product's set-up.
    adopted.write(
        "checks/bookings/BUILD",
        proposed.replace(
            '    name="properties",\n', '    name="properties",\n    product_setup="bookings.replay:set_up",\n'
        ),
    )
    minted = adopted.sh(f"pants pin-epoch --epoch-id=bookings-2026-12-a sample-properties --seed=1 --k=2 {suite}")
    assert minted.returncode == 0, minted.stderr[-3000:]
    local = adopted.sh(f"pants test {suite}")
    assert local.returncode == 0 and f"✓ {suite} succeeded" in local.stderr, local.stderr[-3000:]
    adopted.sh("git add -A && git commit -qm 'the bookings suite' && git push -q origin HEAD:main")

    honest = adopted.sh("pants gate --gate-candidate=HEAD ::")  # trusted: the checkout is origin/main
    judged = report(adopted)
    assert honest.returncode == 0 and judged["mode"] == "trusted", honest.stdout + honest.stderr[-3000:]
    (bookings,) = [s for s in judged["suites"] if s["address"] == suite]
    assert bookings["verdict"] == "eligible" and sorted(p["name"] for p in bookings["properties"]) == [
        "booking_keeps_its_nights",
        "total_within_gross",
    ]
    adopted.sh("git checkout -q -B discount origin/main")
    pricing = adopted.read("src/bookings/pricing.py")
    adopted.write("src/bookings/pricing.py", pricing.replace(*django_suite.QUADRUPLE_DISCOUNT))
    adopted.sh("git commit -qam 'bookings: a bigger discount' && git checkout -q --detach origin/main")
    buggy = adopted.sh("pants gate --gate-candidate=discount ::")
    judged = report(adopted)
    assert buggy.returncode == 1 and judged["verdict"] == "closed", buggy.stdout
    [failed] = all_reasons(judged)
    assert (failed["code"], failed["path"]) == ("property-failed", f"{suite}#total_within_gross"), failed
    assert re.fullmatch(
        r"the bookings record at line \d+ \(saved as dist/gate/\S+\.bin\) fails it: .+",
        failed["message"],
    ), failed

    # The set-up is the candidate's like the rest of the product: a candidate whose set-up fails is closed,
    # and the reason names the set-up and what it raised.
    adopted.sh("git checkout -q -B setup origin/main")
    setup = adopted.read("src/bookings/replay.py")
    adopted.write(
        "src/bookings/replay.py", setup.replace("    django.setup()\n", "    raise RuntimeError('no apps today')\n")
    )
    adopted.sh("git commit -qam 'bookings: a set-up that fails' && git checkout -q --detach origin/main")
    failed = adopted.sh("pants gate --gate-candidate=setup ::")
    judged = report(adopted)
    assert failed.returncode == 1 and judged["verdict"] == "closed", failed.stdout
    assert {(r["code"], r["path"]) for r in all_reasons(judged)} == {("replay-failed", suite)}, all_reasons(judged)
    assert any(
        "the product's set-up bookings.replay:set_up raised RuntimeError: no apps today" in r["message"]
        for r in all_reasons(judged)
    ), all_reasons(judged)
