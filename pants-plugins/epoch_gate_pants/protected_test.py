"""Rule tests of `protected.py`: the protected set, derived from the build graph and the options."""

from __future__ import annotations

from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants import protected
from epoch_gate_pants.gate_harness import configure
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.rule_harness import write_repo

MODULES = (protected,)
QUERIES = (QueryRule(ProtectedPaths, []),)


def test_protected_set_comes_from_the_build_graph(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    protected = rule_runner.request(ProtectedPaths, [])
    assert {
        "fixtures/EPOCH",
        "fixtures/gen.py",
        "fixtures/base.json",
        "checks/manifest.json",
        "checks/catalog.yaml",
    } <= set(protected.paths)
    assert "src/payments_lib.py" not in protected.paths  # the code under test is not the oracle
    assert {"observations/", "freezes/"} <= set(protected.globs)
    assert not set(protected.globs) & set(protected.paths)
    guarded = protected.as_set()
    # What shapes how the oracle is read: the predicates' package (its __init__.py, helper modules), the
    # BUILD files whose __defaults__ reach an oracle target, git's ignore and attribute files above and
    # inside oracle folders, every configuration file Pants reads from the repository.
    for path in (
        "fixtures/BUILD",
        "checks/__init__.py",
        "checks/helpers.py",
        "checks/props.py",
        "checks/BUILD",
        "BUILD",
        "fixtures/.gitattributes",
        ".gitignore",
        "checks/deep/.gitignore",
        "pants.toml",
        ".pants.rc",
        "pants.ci.toml",
        ".env",
        ".pants.bootstrap",
        "pants",  # the launcher, and its pins and configuration (`epoch-gate launcher`)
        "3rdparty/bootstrap/pants-pins.txt",
        "3rdparty/bootstrap/pants.toml",
        "freezes",
        "observations",
    ):
        assert guarded.matches(path), path
    for path in ("src/payments_lib.py", "src/BUILD", "docs/notes.md"):
        assert not guarded.matches(path), path


def test_a_pants_config_file_named_by_the_options_is_protected(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"ci/extra.toml": "", "ci/gate.rc": ""})
    configure(
        rule_runner,
        f"--pants-config-files=['{rule_runner.build_root}/ci/extra.toml']",
        "--pantsrc-files=['ci/gate.rc']",
    )
    guarded = rule_runner.request(ProtectedPaths, []).as_set()
    assert guarded.matches("ci/extra.toml") and guarded.matches("ci/gate.rc")


def test_what_the_product_is_installed_with_is_a_requirement_path(rule_runner: RuleRunner) -> None:
    """Each resolve's lockfile, and the files requirements are generated from: a change to them is a
    dependency change (`requirements-changed`); without resolves, the BUILD files declaring requirements
    too, whose strings then decide what is installed."""
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "3rdparty/BUILD": 'python_requirement(name="inline", requirements=["attrs==23.1.0"])\n',
            "3rdparty/default.lock": "",
        }
    )
    configure(rule_runner, "--python-enable-resolves", "--python-resolves={'python-default': '3rdparty/default.lock'}")
    found = rule_runner.request(ProtectedPaths, [])
    assert found.requirements == ("3rdparty/default.lock",)
    assert found.as_set().matches("3rdparty/default.lock") and not found.as_set().matches("3rdparty/BUILD")

    rule_runner.write_files(
        {
            "3rdparty/python/BUILD": 'python_requirements(name="reqs", source="reqs.txt")\n',
            "3rdparty/python/reqs.txt": "pyyaml==6.0.1\n",
        }
    )
    configure(rule_runner, "--no-python-enable-resolves")
    assert rule_runner.request(ProtectedPaths, []).requirements == (
        "3rdparty/BUILD",
        "3rdparty/python/BUILD",
        "3rdparty/python/reqs.txt",
    )
