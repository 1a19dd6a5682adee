"""The CLI end to end, outside Pants: pin, sample, replay, check, identities."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from epoch_gate.cli.main import EX_USAGE, main

CATALOG = """properties:
  - {name: amount_non_negative, bound: payments, predicate: "cli_preds:amount_non_negative", description: No negatives.}
  - {name: amount_small, bound: payments, predicate: "cli_preds:amount_small", description: Under a thousand.}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "checks").mkdir()
    (tmp_path / "fixtures" / "gen.py").write_text("print('generator')\n")
    (tmp_path / "fixtures" / "base.json").write_text("{}\n")
    (tmp_path / "checks" / "catalog.yaml").write_text(CATALOG)
    (tmp_path / "cli_preds.py").write_text(
        "def amount_non_negative(r, product):\n    return r['amount'] >= 0\n"
        "def amount_small(r, product):\n    return r['amount'] < 1000\n"
    )
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text('{"amount":1}\n{"amount":5}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check_args(*extra: str) -> list[str]:
    return [
        "check",
        "--generator",
        "fixtures/gen.py",
        "--input",
        "fixtures/base.json",
        "--replay",
        "out",
        "--world",
        "world",
        "--changed-file",
        "changed.txt",
        "--today",
        "2026-12-02",
        *extra,
    ]


PIN = ["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json", "--world", "world"]


def all_codes(report: dict) -> set[str]:
    """The codes of the repository's reasons and of every suite's."""
    return {r["code"] for r in report["reasons"]} | {r["code"] for s in report["suites"] for r in s["reasons"]}


def reported(project: Path) -> dict:
    return json.loads((project / "dist/gate/report.json").read_text())


def pinned_sampled_replayed(project: Path) -> None:
    """The reviewer's pin and draw, a replay over the world, and a product-only change."""
    assert main(PIN) == 0
    assert main(["sample", "--catalog", "checks/catalog.yaml", "--seed", "5", "--k", "2"]) == 0
    sys.modules.pop("cli_preds", None)
    assert (
        main(
            [
                "replay",
                "--manifest",
                "checks/manifest.json",
                "--world",
                "world",
                "--suite",
                "suite",
                "--epoch-id",
                "e1",
                "--out",
                "out",
                "--oracle-names",
                "cli_preds",
            ]
        )
        == 0
    )
    (project / "changed.txt").write_text("src/app.py\n")


def test_pin_sample_replay_check(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pinned_sampled_replayed(project)
    capsys.readouterr()
    assert main(check_args()) == 0
    printed = capsys.readouterr().out
    assert "epoch     e1" in printed and "verdict   eligible" in printed
    report = json.loads((project / "dist/gate/report.json").read_text())
    assert report["verdict"] == "eligible"

    (project / "changed.txt").write_text("checks/catalog.yaml\n")
    assert main(check_args()) == 1
    assert json.loads((project / "dist/gate/report.json").read_text())["reasons"][0]["code"] == "protected-path-changed"

    (project / "fixtures" / "gen.py").write_text("print('edited')\n")
    (project / "changed.txt").write_text("src/app.py\n")
    assert main(check_args()) == 1
    assert all_codes(reported(project)) == {"generator-mismatch"}

    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 1
    assert "epoch-id-reused" in capsys.readouterr().err


def test_check_verifies_the_replay_against_the_world(project: Path) -> None:
    pinned_sampled_replayed(project)

    def codes(*args: str) -> set[str]:
        main(args)
        return all_codes(reported(project))

    without_world = [a for a in check_args() if a not in ("--world", "world")]
    assert codes(*without_world) == {"replay-incomplete", "world-mismatch"}  # nothing to check it against
    (project / "world" / "payments.jsonl").write_text('{"amount":1}\n{"amount":5}\n{"amount":7}\n')
    # Another world: the pin says so, and the replay read fewer records than the world holds.
    assert codes(*check_args()) == {"world-mismatch", "replay-incomplete"}


def test_malformed_manifest_is_closed_without_a_traceback(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 0
    (project / "checks" / "manifest.json").write_bytes(b'{"seed": NaN}')
    (project / "changed.txt").write_text("")
    assert main(check_args()) == 1
    assert {"artifact-malformed", "artifact-missing"} <= all_codes(reported(project))


def test_usage_errors_exit_64_not_2(project: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["check", "--today", "yesterday"])
    assert caught.value.code == EX_USAGE


def test_module_entry_point(project: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "epoch_gate", "--version"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("epoch-gate ")


def test_check_judges_a_candidate_as_data_and_never_attests(project: Path) -> None:
    from epoch_gate.change.tree_test import git, make_repo

    make_repo(project)
    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 0
    assert main(["sample", "--catalog", "checks/catalog.yaml", "--seed", "5", "--k", "2"]) == 0
    (project / ".gitignore").write_text("dist/\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the oracle")
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(project, "checkout", "-qb", "agent")
    (project / "checks" / "catalog.yaml").write_text(CATALOG.replace("Under a thousand", "Roughly small"))
    git(project, "commit", "-qam", "loosen the catalog")
    candidate = git(project, "rev-parse", "HEAD")
    git(project, "checkout", "-q", "master" if "master" in git(project, "branch") else "main")
    check = [
        "check",
        "--generator",
        "fixtures/gen.py",
        "--input",
        "fixtures/base.json",
        "--today",
        "2026-12-02",
        "--candidate",
        candidate,
    ]
    assert main(check) == 1
    report = reported(project)
    assert report["mode"] == "local" and not (project / "dist/gate/statement.intoto.json").exists()
    assert ("protected-path-changed", "checks/catalog.yaml") in {(r["code"], r["path"]) for r in report["reasons"]}
    (project / "fixtures" / "gen.py").write_text("print('the judge is dirty')\n")
    assert main(check) == 1
    assert "base-untrusted" in all_codes(reported(project)) or "changed-set-unavailable" in all_codes(reported(project))


def test_check_judges_several_suites_from_a_suites_file(project: Path) -> None:
    pinned_sampled_replayed(project)
    (project / "suites.json").write_text(
        json.dumps(
            [
                {
                    "address": "suite",
                    "pin": "fixtures/EPOCH",
                    "generator": "fixtures/gen.py",
                    "inputs": ["fixtures/base.json"],
                    "manifest": "checks/manifest.json",
                    "catalog": "checks/catalog.yaml",
                    "replay": "out",
                    "world": "world",
                },
                {
                    "address": "other",
                    "pin": "fixtures/EPOCH",
                    "generator": "fixtures/gen.py",
                    "inputs": ["fixtures/base.json"],
                    "manifest": "checks/manifest.json",
                    "catalog": "checks/catalog.yaml",
                    "replay": "out",
                    "world": "world",
                },
            ]
        )
    )
    args = ["check", "--suites", "suites.json", "--changed-file", "changed.txt", "--today", "2026-12-02"]
    assert main(args) == 1
    report = reported(project)
    verdicts = {s["address"]: s["verdict"] for s in report["suites"]}
    # The replay was run as "suite": it is not evidence for "other".
    assert verdicts == {"suite": "eligible", "other": "closed"}
    assert {r["code"] for s in report["suites"] if s["address"] == "other" for r in s["reasons"]} >= {"suite-mismatch"}
    assert report["summary"] == {"suites": 2, "eligible": 1, "hold": 0, "closed": 1}


def test_check_with_no_suite_is_closed(project: Path) -> None:
    (project / "changed.txt").write_text("src/app.py\n")
    assert main(["check", "--changed-file", "changed.txt", "--today", "2026-12-02"]) == 1
    assert "artifact-missing" in all_codes(reported(project))


def test_check_without_a_base_takes_the_merge_base_with_the_trusted_ref(project: Path) -> None:
    from epoch_gate.change.tree_test import git, make_repo

    make_repo(project)
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    reviewed = git(project, "rev-parse", "HEAD")
    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 0
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a local commit")
    main(["check", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json", "--today", "2026-12-02"])
    report = reported(project)
    assert report["base"] == reviewed
    assert not {"base-untrusted", "changed-set-unavailable"} & all_codes(report)


# A check of the working tree against HEAD, trusted whatever it is, on a fixed day.
CHECK_AGAINST_HEAD = [
    *("check", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"),
    *("--base", "HEAD", "--trust-any-base", "--today", "2026-12-02"),
]


def test_a_tree_git_cannot_hash_closes_the_check(project: Path) -> None:
    from epoch_gate.change.tree_test import make_repo

    make_repo(project)
    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 0
    (project / "odd\nname.txt").write_text("a path `git hash-object --stdin-paths` cannot take\n")
    main(CHECK_AGAINST_HEAD)
    report = reported(project)
    assert report["verdict"] == "closed"
    assert any(r["code"] == "changed-set-unavailable" and "newline" in r["message"] for r in report["reasons"])
    assert not (project / "dist/gate/statement.intoto.json").exists()


def test_a_committed_dist_file_and_hostile_names_end_in_a_report(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from epoch_gate.change.tree_test import git, make_repo

    make_repo(project)
    (project / "dist").write_text("a regular file: the `/dist/` ignore pattern matches only a folder\n")
    git(project, "add", "dist")
    git(project, "commit", "-qm", "dist")
    assert main(["pin", "--epoch-id", "e1", "--generator", "fixtures/gen.py", "--input", "fixtures/base.json"]) == 0
    (project / "freezes").mkdir()
    with open(os.fsencode(project) + b"/freezes/\xff.json", "wb") as handle:
        handle.write(b"{}\n")
    (project / "freezes" / "a\n::stop-commands::x\x1b\u2028.json").write_text("{}\n")
    capsys.readouterr()
    assert main(CHECK_AGAINST_HEAD) == 1
    printed = capsys.readouterr()
    assert not any(line.startswith("::") for line in printed.out.splitlines())
    out = Path(printed.err.split("; report: ")[1].split("\n")[0])
    assert out.is_dir() and not out.is_relative_to(project)
    report = json.loads((out / "report.json").read_bytes())
    codes = {(r["code"], r["path"]) for r in report["reasons"]}
    assert ("output-folder-unsafe", "dist") in codes
    assert ("protected-path-changed", "freezes/\\xff.json") in codes
    assert ("protected-path-changed", "freezes/a\n::stop-commands::x\x1b\u2028.json") in codes  # JSON keeps it
    assert (project / "dist").read_text().startswith("a regular file")


def test_held_out_seed_is_re_derived_from_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from epoch_gate.evidence import held_out

    args = ["held-out-seed", "--tree", "ab" * 20, "--suite", "checks:orders", "--epoch-id", "orders-1"]
    monkeypatch.delenv("EPOCH_GATE_HELD_OUT_KEY", raising=False)
    assert main(args) == 1
    assert "no key: set $EPOCH_GATE_HELD_OUT_KEY" in capsys.readouterr().err
    monkeypatch.setenv("EPOCH_GATE_HELD_OUT_KEY", "k" * 32)
    seed = held_out.seed(held_out.draw_key(b"k" * 32, "ab" * 20), "checks:orders", "orders-1")
    assert main([*args, "--expect-sha256", held_out.seed_sha256(seed)]) == 0
    assert capsys.readouterr().out == seed + "\n"
    assert main([*args, "--expect-sha256", "0" * 64]) == 1
    assert "another key, tree, suite or epoch" in capsys.readouterr().err
    monkeypatch.setenv("EPOCH_GATE_HELD_OUT_KEY", "short")
    assert main(args) == 1
    assert "refused [held-out-unavailable] $EPOCH_GATE_HELD_OUT_KEY" in capsys.readouterr().err


def test_held_out_properties_are_re_derived_from_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from epoch_gate.evidence import held_out
    from epoch_gate.evidence.catalog import Catalog, Property
    from epoch_gate.evidence.manifest import sample, write_manifest

    catalog = Catalog(tuple(Property(f"p{i}", "orders", f"checks.props:p{i}", "Holds.") for i in range(6)))
    (tmp_path / "catalog.yaml").write_text(
        "properties:\n"
        + "".join(
            f"  - name: {p.name}\n    bound: orders\n    predicate: {p.predicate}\n    description: Holds.\n"
            for p in catalog.properties
        )
    )
    manifest = sample(catalog, 3, 2)
    write_manifest(manifest, tmp_path / "manifest.json")
    args = ["held-out-properties", "--tree", "ab" * 20, "--suite", "checks:orders", "--epoch-id", "orders-1"]
    args += ["--catalog", str(tmp_path / "catalog.yaml"), "--manifest", str(tmp_path / "manifest.json"), "--count"]
    monkeypatch.setenv("EPOCH_GATE_HELD_OUT_KEY", "k" * 32)
    seed = held_out.property_seed(held_out.draw_key(b"k" * 32, "ab" * 20), "checks:orders", "orders-1")
    assert main([*args, "2", "--expect-sha256", held_out.seed_sha256(seed)]) == 0
    drawn = held_out.draw_properties(catalog, manifest, seed, 2)
    assert capsys.readouterr().out == "".join(f"{p.name}\n" for p in drawn) and len(drawn) == 2
    assert main([*args, "2", "--expect-sha256", "0" * 64]) == 1
    assert "another key, tree, suite or epoch" in capsys.readouterr().err
    assert main([*args, "all"]) == 0
    assert capsys.readouterr().out.split() == sorted(
        set(p.name for p in catalog.properties) - {p.name for p in manifest.properties}
    )
