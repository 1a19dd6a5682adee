"""Adoption, as a new user meets it: a new repository (`adopted`, conftest.py) gets the plugin from the built
wheels alone, runs the commands of docs/adopting.md to its first `eligible`, then is `closed` for an edit of
the oracle; and the CI recipes of docs/ci/ run their own steps over it. (A framework's suite:
django_test.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import yaml

from epoch_gate.testutil import layout_problems
from tests.adoption.second_repo import NewRepo, all_reasons, documented_commands, report

LOOSENED = (
    '    return product.shop.prices.discounted(record["cents"], record["discount_pct"]) >= 0\n',
    "    return True\n",
)


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
    # The launcher's pins are not requirements of the repository's: tailor proposes no target for them
    assert not (adopted.root / "3rdparty/bootstrap/BUILD").exists()
    assert adopted.sh("pants tailor --check ::").returncode == 0


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
    assert runs[1]["env"]["EPOCH_GATE_STATEMENT_KEY"] == "${{ secrets.EPOCH_GATE_STATEMENT_KEY }}"
    # Keyless too: actions/attest signs the statement's predicate with the workflow's identity, and the
    # verify job requires a verified PASSED one about the head commit before anything merges.
    assert workflow["jobs"]["gate"]["permissions"] == {"contents": "read", "id-token": "write", "attestations": "write"}
    attest = next(s for s in steps if s.get("uses", "").startswith("actions/attest@"))
    assert attest["with"] == {
        "subject-path": "dist/gate/report.json",
        "predicate-type": "https://slsa.dev/verification_summary/v1",
        "predicate-path": "${{ runner.temp }}/predicate.json",
    }
    verify = workflow["jobs"]["verify"]
    assert verify["needs"] == "gate" and verify["permissions"] == {"contents": "read", "attestations": "read"}
    (check,) = [s for s in verify["steps"] if "run" in s]
    assert check["run"].startswith("gh attestation verify gate/report.json --repo \"$GITHUB_REPOSITORY\"")
    for required in ("--predicate-type https://slsa.dev/verification_summary/v1", "--signer-workflow", '"PASSED"'):
        assert required in check["run"]
    assert 'endswith("@" + env.CANDIDATE)' in check["run"]
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
    shutil.rmtree(adopted.root / "dist" / "gate", ignore_errors=True)  # the report read below is this run's
    outputs = []
    for step in runs[1:]:  # the fetch needs GitHub's pull refs: the candidate is already a local commit
        env = {
            **{k: str(v) for k, v in step.get("env", {}).items()},
            "GITHUB_STEP_SUMMARY": str(summary),
            "CANDIDATE": candidate,
            "RUNNER_TEMP": str(tmp_path),
        }
        outputs.append(adopted.sh(step["run"], env=env))
    gate = outputs[0]
    said = gate.stdout + gate.stderr[-3000:]
    assert gate.returncode == 1 and (adopted.root / "dist/gate/report.json").is_file(), said
    judged = report(adopted)
    assert judged["mode"] == "trusted", said
    reasons = all_reasons(judged)
    annotations = [line for line in gate.stdout.splitlines() if line.startswith("::")]
    assert len(reasons) >= 2 and len(annotations) == len(reasons)
    assert "::error file=checks/shop_properties.py,title=epoch_gate protected-path-changed::" in gate.stdout
    assert "::error file=checks/catalog.yaml,title=epoch_gate protected-path-changed::" in gate.stdout
    assert all(done.returncode == 0 for done in outputs[1:])
    predicate = json.loads((tmp_path / "predicate.json").read_text())  # what actions/attest signs
    assert predicate == json.loads(adopted.read("dist/gate/statement.intoto.json"))["predicate"]
    assert summary.read_text() == adopted.read("dist/gate/report.md")
    assert "## epoch_gate: **closed**" in summary.read_text()


def test_the_shell_recipe_judges_from_the_trusted_ref_and_keeps_the_artifacts(adopted: NewRepo, tmp_path: Path) -> None:
    several_reasons(adopted)  # checked out: the script must not judge from this checkout
    done = adopted.sh(f"bash {recipe('gate.sh')} several", env={"GATE_ARTIFACTS": str(tmp_path / "artifacts")})
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    judged = report(adopted)
    assert judged["mode"] == "trusted", done.stdout + done.stderr[-3000:]
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
        "/pants",  # the launcher, its pins and its configuration, which CI's Pants is installed and run with
        "/3rdparty/bootstrap/",
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
