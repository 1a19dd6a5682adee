"""Adoption, as a new user meets it: a new repository gets the plugin from the built wheels alone, runs the
commands of docs/adopting.md to its first `eligible`, then is `closed` for an edit of the oracle; and the
CI recipes of docs/ci/ run their own steps over it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from epoch_gate.testutil import layout_problems
from tests.adoption import django_suite
from tests.adoption.second_repo import NewRepo, documented_commands
from tests.e2e.repo import stop_pantsd

LOOSENED = (
    '    return product.shop.prices.discounted(record["cents"], record["discount_pct"]) >= 0\n',
    "    return True\n",
)


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NewRepo]:
    here = Path.cwd()
    wheels = sorted(here.glob("epoch_gate*.whl"))  # at the sandbox root, where Pants puts the packages
    assert {w.name.split("-")[0] for w in wheels} == {"epoch_gate", "epoch_gate_pants"}, wheels
    repo = NewRepo.create(tmp_path_factory.mktemp("adoption"), wheels, here)
    try:
        for command in documented_commands((here / "docs/adopting.md").read_text()):
            done = repo.sh(command, timed=True)
            if command != "pants gate ::":
                assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"
        print("\n".join(f"{seconds:7.1f} s  {command}" for command, seconds in repo.timings))
        yield repo
    finally:
        stop_pantsd(repo.root)


def report(repo: NewRepo) -> dict:
    return json.loads(repo.read("dist/gate/report.json"))


def all_reasons(judged: dict) -> list[dict]:
    """The repository's reasons, then every suite's."""
    return [*judged["reasons"], *(r for s in judged["suites"] for r in s["reasons"])]


def test_the_plugin_comes_from_the_wheels_alone(adopted: NewRepo) -> None:
    toml = adopted.read("pants.toml")
    assert "pythonpath" not in toml and 'plugins = ["epoch-gate-pants==0.1.0"]' in toml
    assert not list(adopted.root.glob("**/epoch_gate*/__init__.py"))  # no copy of the plugin or core sources
    done = adopted.sh("pants help epoch_fixture")
    assert done.returncode == 0 and "A pinned fixture epoch" in done.stdout


def test_the_guide_and_the_readme_give_the_same_six_commands(adopted: NewRepo) -> None:
    commands = documented_commands(Path("docs/adopting.md").read_text())
    assert len(commands) <= 6, commands
    readme = Path("README.md").read_text().split("## Adopting it in another repository", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. (.*)$", readme, re.M)
    assert len(steps) == len(commands), steps
    for command, step in zip(commands, steps):
        words = command.split()
        said = (
            [f"pants {words[1]}", *(w for w in words[2:] if re.fullmatch(r"[a-z]+-[a-z-]+", w))]
            if words[0] == "pants"
            else [f"git {re.findall(r'git ([a-z]+)', command)[-1]}"]
        )
        assert all(s in step for s in said), (command, step)


def test_each_slow_step_says_what_it_does_before_its_result(adopted: NewRepo) -> None:
    # The first replay runs (the product is new each run) and says so before the test's result.
    tested = adopted.outputs["pants test checks:properties"].stderr
    replayed = tested.find(
        "Completed: Replay 2 sampled properties of checks:properties over 200 records of epoch prices-2026-12-a"
    )
    assert 0 <= replayed < tested.index("✓ checks:properties succeeded in"), tested[-3000:]
    assert "(cached locally)" not in tested, tested[-3000:]
    # The gate's suite line comes as soon as its replay is done, before the report.
    gated = adopted.sh("pants gate :: 2>&1").stdout
    announced = gated.find("checks:properties: 2 of 2 sampled properties pass over 200 records (from the cache)")
    assert 0 <= announced < gated.index("\nsuite     checks:properties\n"), gated[-3000:]


def test_tailor_declared_the_oracle(adopted: NewRepo) -> None:
    fixtures, checks = adopted.read("fixtures/BUILD"), adopted.read("checks/BUILD")
    assert 'epoch_fixture(\n    name="prices_epoch",\n    generator="generate_prices.py",\n' in fixtures
    assert '"prices/base.json"' in fixtures
    assert 'property_manifest(\n    name="manifest",\n)' in checks
    assert 'fixture="fixtures:prices_epoch"' in checks and '"checks/shop_properties.py"' in checks


def test_the_first_gate_is_eligible_with_an_attested_verdict(adopted: NewRepo) -> None:
    local = adopted.sh("pants gate ::")
    assert local.returncode == 0, local.stdout + local.stderr[-3000:]
    assert "verdict   eligible" in local.stdout and "epoch     prices-2026-12-a" in local.stdout
    assert "advisory  local mode: " in local.stdout
    assert report(adopted)["mode"] == "local" and not (adopted.root / "dist/gate/statement.intoto.json").exists()
    gate = adopted.sh("pants gate --gate-candidate=HEAD ::")  # trusted mode: the checkout is origin/main
    assert gate.returncode == 0, gate.stdout + gate.stderr[-3000:]
    assert report(adopted)["verdict"] == "eligible" and report(adopted)["mode"] == "trusted"
    statement = json.loads(adopted.read("dist/gate/statement.intoto.json"))
    assert layout_problems(statement) == []
    head = adopted.sh("git rev-parse HEAD HEAD^{tree}").stdout.split()
    assert statement["subject"][0]["digest"] == {"gitCommit": head[0], "gitTree": head[1]}
    assert adopted.sh("pants test ::").returncode == 0


def test_a_product_change_is_eligible_and_an_oracle_edit_is_closed(adopted: NewRepo) -> None:
    adopted.sh("git checkout -q -B product origin/main")
    adopted.write("src/shop/prices.py", adopted.read("src/shop/prices.py") + "\n\nCURRENCY = 'EUR'\n")
    adopted.sh("git commit -qam 'product: name the currency'")
    product = adopted.sh("pants --changed-since=origin/main gate")
    assert product.returncode == 0, product.stdout + product.stderr[-3000:]

    adopted.sh("git checkout -q -B agent origin/main")
    adopted.write("checks/shop_properties.py", adopted.read("checks/shop_properties.py").replace(*LOOSENED))
    adopted.sh("git commit -qam 'agent: make the failing property pass'")
    closed = adopted.sh("pants --changed-since=origin/main gate")
    assert closed.returncode == 1 and "verdict   closed" in closed.stdout
    reasons = report(adopted)["reasons"]
    assert ("protected-path-changed", "checks/shop_properties.py") in {(r["code"], r["path"]) for r in reasons}


# -- the CI recipes, run over the same repository --------------------------------------------------


def recipe(name: str) -> Path:
    return Path.cwd() / "docs" / "ci" / name


def several_reasons(repo: NewRepo) -> None:
    """A change with several reasons: the predicate loosened and the catalog reworded."""
    repo.sh("git checkout -q -B several origin/main")
    repo.write("checks/shop_properties.py", repo.read("checks/shop_properties.py").replace(*LOOSENED))
    repo.write("checks/catalog.yaml", repo.read("checks/catalog.yaml").replace("never raises", "rarely raises"))
    repo.sh("git commit -qam 'agent: several oracle edits'")


def test_the_github_workflow_is_valid_and_its_steps_do_what_the_docs_say(adopted: NewRepo, tmp_path: Path) -> None:
    workflow = yaml.safe_load(recipe("github-actions.yml").read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert list(on) == ["pull_request_target"] and on["pull_request_target"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["gate"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0 and "ref" not in checkout["with"]  # the base, never the PR
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"] == {"name": "epoch-gate", "path": "dist/gate/", "if-no-files-found": "error"}
    assert upload.get("if") == "always()"
    install, *runs = [s for s in steps if "run" in s]
    assert install["name"] == "Install the jail" and steps.index(install) == 0
    assert runs[0]["name"] == "Fetch the pull request as data" and "refs/pull/$PR/head" in runs[0]["run"]
    assert runs[1]["run"] == 'pants --no-pantsd --no-pantsrc gate --gate-candidate="$CANDIDATE" ::'
    assert runs[1]["env"]["EPOCH_GATE_HELD_OUT_KEY"] == "${{ secrets.EPOCH_GATE_HELD_OUT_KEY }}"
    # The install step as written, with `sudo` recording what it would run and the provisioned bubblewrap
    # as the one it installs: its own check must start a jail.
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "sudo").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/sudo.log\n')
    (shims / "sudo").chmod(0o755)
    (shims / "bwrap").symlink_to(adopted.root / ".pants.bootstrap" / "isolation" / "bwrap")
    installed = adopted.sh(install["run"], env={"PATH": f"{shims}:{os.environ['PATH']}"})
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / "sudo.log").read_text().splitlines()[:2] == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends bubblewrap",
    ]

    several_reasons(adopted)
    candidate = adopted.sh("git rev-parse several").stdout.strip()
    adopted.sh("git checkout -q --detach origin/main")  # what pull_request_target checks out
    summary = tmp_path / "summary.md"
    outputs = []
    for step in runs[1:]:  # the fetch needs GitHub's pull refs: the candidate is already a local commit
        env = {
            **{k: str(v) for k, v in step.get("env", {}).items()},
            "GITHUB_STEP_SUMMARY": str(summary),
            "CANDIDATE": candidate,
        }
        outputs.append(adopted.sh(step["run"], env=env))
    gate = outputs[0]
    assert gate.returncode == 1, gate.stdout + gate.stderr[-3000:]
    judged = report(adopted)
    assert judged["mode"] == "trusted"
    reasons = all_reasons(judged)
    annotations = [line for line in gate.stdout.splitlines() if line.startswith("::")]
    assert len(reasons) >= 2 and len(annotations) == len(reasons)
    assert "::error file=checks/shop_properties.py,title=epoch_gate protected-path-changed::" in gate.stdout
    assert "::error file=checks/catalog.yaml,title=epoch_gate protected-path-changed::" in gate.stdout
    assert all(done.returncode == 0 for done in outputs[1:])
    assert summary.read_text() == adopted.read("dist/gate/report.md")
    assert "## epoch_gate: **closed**" in summary.read_text()


def test_the_shell_recipe_judges_from_the_trusted_ref_and_keeps_the_artifacts(adopted: NewRepo, tmp_path: Path) -> None:
    several_reasons(adopted)  # checked out: the script must not judge from this checkout
    done = adopted.sh(f"bash {recipe('gate.sh')} several", env={"GATE_ARTIFACTS": str(tmp_path / "artifacts")})
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    judged = report(adopted)
    assert judged["mode"] == "trusted"
    reasons = all_reasons(judged)
    plain = [line for line in done.stdout.splitlines() if " closed [" in line and not line.startswith("|")]
    assert len(plain) >= len(reasons) >= 2
    assert any(line.startswith("checks/catalog.yaml: closed [protected-path-changed]") for line in plain)
    assert done.stdout.index(plain[-1]) < done.stdout.index("## epoch_gate: **closed**")  # lines, then Markdown
    kept = {p.name for p in (tmp_path / "artifacts").iterdir()}
    assert {"report.json", "report.md", "statement.intoto.json"} <= kept
    statement = json.loads((tmp_path / "artifacts" / "statement.intoto.json").read_text())
    assert layout_problems(statement) == [] and statement["predicate"]["verificationResult"] == "FAILED"
    head = adopted.sh("git rev-parse several several^{tree}").stdout.split()
    assert statement["subject"][0]["digest"] == {"gitCommit": head[0], "gitTree": head[1]}
    assert adopted.sh("git worktree list").stdout.count("\n") == 1  # the judge's worktree is gone


def test_codeowners_from_the_build_graph_cover_the_oracle(adopted: NewRepo) -> None:
    adopted.sh("git checkout -q -B owners origin/main")
    done = adopted.sh("pants gate-codeowners --gate-codeowners-owners=shop/oracle")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for path in (
        "/fixtures/EPOCH",
        "/fixtures/generate_prices.py",
        "/checks/catalog.yaml",
        "/checks/shop_properties.py",
        "/checks/manifest.json",
        "/pants.toml",
        "/freezes/",
    ):
        assert f"{path} @shop/oracle" in lines, lines
    assert not any(line.startswith("/src/") for line in lines)  # product code is not the oracle
    (adopted.root / ".github").mkdir(exist_ok=True)
    adopted.write(".github/CODEOWNERS", "* @shop/everyone\n" + done.stdout)
    check = adopted.sh(
        "pants gate-codeowners --gate-codeowners-owners=shop/oracle " "--gate-codeowners-check=.github/CODEOWNERS"
    )
    assert check.returncode == 0, check.stderr[-2000:]


# -- a framework: a Django suite beside the first (docs/adopting.md, "Frameworks") ---------------------


def test_a_django_suite_replays_after_its_product_set_up_in_local_and_trusted_mode(adopted: NewRepo) -> None:
    suite = "checks/bookings:properties"
    adopted.sh("git checkout -q -B bookings origin/main")
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
