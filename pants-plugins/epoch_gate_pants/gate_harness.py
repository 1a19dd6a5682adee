"""Goal tests of `pants gate` without the launcher: a RuleRunner whose build root is a small git repository
(one product module, one epoch, one manifest of two properties), judged by `run_goal_rule(Gate)`."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, Optional

import pytest
from pants.backend.python import target_types_rules
from pants.backend.python.macros import python_requirements
from pants.backend.python.macros.python_requirements import PythonRequirementsTargetGenerator
from pants.backend.python.target_types import PythonRequirementTarget, PythonSourcesGeneratorTarget, PythonSourceTarget
from pants.core.target_types import TargetGeneratorSourcesHelperTarget
from pants.backend.python.util_rules import pex_from_targets, python_sources
from pants.core.goals import tailor, test
from pants.core.util_rules import source_files, stripped_source_files
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.pin import PinnedFile, mint_pin
from epoch_gate.evidence.world import world_sha256
from epoch_gate_pants import register
from epoch_gate_pants.gate import Gate
from epoch_gate_pants.isolation import Bubblewrap, Libfaketime
from epoch_gate_pants.target_types import target_types

PEX_SHA = "2917b29129a5865346d87f2b2c7a50670e7abc416429c6b1c8e6c8f45f82871d"
PEX_SIZE = 3563513
BWRAP_SHA = "85580dd52ed366ece8844e90fa75ac7c4de8802963071344e123221fb9f6f11e"
FAKETIME_SHA = "45c4822a7516e9c41ec1b5498b0f08665ba4877330e9e9573c1213d16d6629a0"
ENV_INHERIT = {"PATH", "PYENV_ROOT", "HOME"}


def bootstrapped(name: str, sha256: str) -> str:
    """A tool the launcher built or provisioned, by its pinned digest (GitHub, where Pants would fetch
    pex from, is unreachable here; bubblewrap and libfaketime come from Debian's archive)."""
    roots = [os.environ.get("EPOCH_GATE_CACHE", ""), os.path.expanduser("~/.cache/epoch_gate/bootstrap")]
    for root in roots:
        for candidate in sorted(glob.glob(os.path.join(root, "*", name))):
            if hashlib.sha256(Path(candidate).read_bytes()).hexdigest() == sha256:
                return candidate
    # Fail, never skip: a goal test skipped for a missing tool is a test that cannot fail.
    pytest.fail(
        f"no bootstrapped {name} with sha256 {sha256} under {' or '.join(r for r in roots if r)}: "
        "run ./pants once, which provisions it"
    )


def jail_options() -> list[str]:
    return [
        f"--bwrap-url-template=file://{bootstrapped('isolation/bwrap', BWRAP_SHA)}",
        f"--libfaketime-url-template=file://{bootstrapped('isolation/libfaketime.so.1', FAKETIME_SHA)}",
    ]


def runner_options(*extra: str, jailed: bool = False) -> list[str]:
    # No jail unless a test asks for one: /usr/bin/bwrap may or may not exist on the host.
    tools = (
        jail_options()
        if jailed
        else ["--bwrap-url-template=file:///nonexistent/bwrap", "--bwrap-system-search-path=[]"]
    )
    return [
        "--pex-cli-version=v2.1.137",
        f"--pex-cli-url-template=file://{bootstrapped('pex-v2.1.137', PEX_SHA)}",
        f"--pex-cli-known-versions=['v2.1.137|linux_x86_64|{PEX_SHA}|{PEX_SIZE}']",
        "--source-root-patterns=['/', '/src']",
        "--python-bootstrap-search-path=['<PYENV>', '<PATH>']",
        "--python-infer-use-rust-parser",
        *tools,
        *extra,
    ]


# As pants.toml sets it: a flag would override every target's own `interpreter_constraints` too.
CONFIGURED_ENV = {"PANTS_PYTHON_INTERPRETER_CONSTRAINTS": "['CPython==3.9.*']"}


def configure(runner: RuleRunner, *extra: str, jailed: bool = False) -> None:
    runner.set_options(runner_options(*extra, jailed=jailed), env=CONFIGURED_ENV, env_inherit=ENV_INHERIT)


# What the backend asks of Pants: sources and their roots, the Python backend's sources and requirement pexes,
# and the goals it plugs into (`test`, `tailor`). The whole Python backend would cost ~6 s per runner.
PANTS_RULES = (
    *source_files.rules(),
    *stripped_source_files.rules(),
    *python_sources.rules(),
    *pex_from_targets.rules(),
    *target_types_rules.rules(),
    *test.rules(),
    *tailor.rules(),
    *python_requirements.rules(),
)
# `runner_options` sets the jail's tools' options for every runner: their subsystems must be registered.
CONFIGURED_SUBSYSTEMS = (*Bubblewrap.rules(), *Libfaketime.rules())
TARGET_TYPES = (
    *target_types(),
    PythonSourcesGeneratorTarget,
    PythonSourceTarget,
    PythonRequirementTarget,
    PythonRequirementsTargetGenerator,
    TargetGeneratorSourcesHelperTarget,
)


# -- the example --------------------------------------------------------------------------------

GENERATOR = """
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--input", action="append")
args = parser.parse_args()
base = json.load(open(args.input[0]))
os.makedirs(args.out)
with open(os.path.join(args.out, "payments.jsonl"), "w") as out:
    for i in range(base["count"]):
        out.write(json.dumps({"id": i, "captured": 100, "refunded": i % 7 * 10}, sort_keys=True) + "\\n")
"""
BASE = '{"count": 50}\n'
PRODUCT = "def refundable(captured: int, refunded: int) -> bool:\n    return refunded <= captured\n"
# A rare flake: a process's first call answers wrong when it refunds nothing, so one record fails once and
# passes its rerun.
FLAKY_PRODUCT = """_calls = []


def refundable(captured: int, refunded: int) -> bool:
    _calls.append(1)  # wrong on a process's first call if it refunds nothing: one child's first record
    return not (len(_calls) == 1 and refunded == 0) and refunded <= captured
"""

PREDICATES = """
def refund_le_captured(record, product) -> bool:
    refundable = product.payments_lib.refundable
    captured, refunded = record["captured"], record["refunded"]
    return refundable(captured, refunded) is (refunded <= captured) and refundable(captured, captured + 1) is False


def refunds_never_negative(record, product) -> bool:
    return record["refunded"] >= 0
"""
CATALOG = """properties:
  - name: refund_le_captured
    bound: payments
    predicate: checks.props:refund_le_captured
    description: A refund never exceeds the captured amount.
  - name: refunds_never_negative
    bound: payments
    predicate: checks.props:refunds_never_negative
    description: No refund is negative.
"""
EPOCH_ID = "payments-e1"
SEED = 3
PIN_PATH = "fixtures/EPOCH"
GITIGNORE = "/dist/\n/.pants.d/\n__pycache__/\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "goal",
    "GIT_AUTHOR_EMAIL": "goal@example.invalid",
    "GIT_COMMITTER_NAME": "goal",
    "GIT_COMMITTER_EMAIL": "goal@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def generate_world(generator: str, base: str) -> tuple[str, dict[str, bytes]]:
    """Runs the generator outside Pants, as a reviewer would before pinning: world_sha256, {file: bytes}."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "gen.py").write_text(generator)
        Path(tmp, "base.json").write_text(base)
        subprocess.run(
            [sys.executable, "-B", "gen.py", "--out", "world", "--input", "base.json"],
            cwd=tmp,
            check=True,
            env={"PYTHONHASHSEED": "0", "LC_ALL": "C", "TZ": "UTC"},
        )
        world = Path(tmp, "world")
        return world_sha256(world), {p.name: p.read_bytes() for p in world.iterdir()}


def example_files() -> tuple[dict[str, str], dict[str, bytes]]:
    """The example repository's files, its pin and manifest minted by the core; and its fixture world."""
    world_digest, world = generate_world(GENERATOR, BASE)
    pin = mint_pin(
        epoch_id=EPOCH_ID,
        generator=PinnedFile("fixtures/gen.py", sha256_bytes(GENERATOR.encode())),
        inputs={"fixtures/base.json": sha256_bytes(BASE.encode())},
        world_sha256=world_digest,
        existing=None,
        path=PIN_PATH,
    )
    manifest = sample(parse_catalog(CATALOG.encode(), "checks/catalog.yaml"), SEED, 2)
    return {
        ".gitignore": GITIGNORE,
        "fixtures/BUILD": 'epoch_fixture(name="epoch", generator="gen.py", inputs=["base.json"])\n',
        "fixtures/gen.py": GENERATOR,
        "fixtures/base.json": BASE,
        PIN_PATH: pin.to_bytes().decode(),
        "checks/BUILD": (
            'python_sources(name="preds", sources=["props.py"])\n'
            'property_manifest(name="manifest", predicates=["props.py"])\n'
            'sampled_properties(name="props", fixture="fixtures:epoch", manifest=":manifest", '
            'dependencies=[":preds", "src:lib"])\n'
        ),
        "checks/props.py": PREDICATES,
        "checks/catalog.yaml": CATALOG,
        "checks/manifest.json": manifest.to_bytes().decode(),
        "src/BUILD": 'python_sources(name="lib")\n',
        "src/payments_lib.py": PRODUCT,
    }, world


# -- reading a report (v2: the repository's reasons, and `suites[]` each with its own) -----------------


def suites(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report.get("suites", []))


def reasons(report: dict[str, Any], code: str | None = None) -> list[dict[str, Any]]:
    found = [*report.get("reasons", []), *(r for s in suites(report) for r in s["reasons"])]
    return [r for r in found if code is None or r["code"] == code]


def codes(report: dict[str, Any]) -> set[str]:
    return {r["code"] for r in reasons(report)}


def observations(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for s in suites(report) for o in s["observations"]]


def properties(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for s in suites(report) for p in s["properties"]]


def identities(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [s["identities"] for s in suites(report)]


def oracle_changes(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report.get("oracle_changes", []))


# -- the repository and the goal --------------------------------------------------------------------


class GateRun(NamedTuple):
    exit_code: int
    report: dict[str, Any]
    stdout: str
    stderr: str

    @property
    def verdict(self) -> str:
        return str(self.report.get("verdict"))


class GateRepo:
    """The example as a git repository that is the RuleRunner's build root; `landed` is origin/main."""

    def __init__(self, runner: RuleRunner, world: dict[str, bytes]) -> None:
        self.runner = runner
        self.root = Path(runner.build_root)
        self.world = world
        self.landed = ""

    @classmethod
    def create(cls, tmp: Path, named_caches: Path) -> "GateRepo":
        """Over a store of its own under `tmp` and the shared named caches (conftest.py: pex's and pip's
        downloads and venvs, which hold no results)."""
        runner = RuleRunner(
            rules=[*register.rules(), *PANTS_RULES, *CONFIGURED_SUBSYSTEMS],
            target_types=TARGET_TYPES,
            bootstrap_args=[f"--local-store-dir={tmp / 'store'}", f"--named-caches-dir={named_caches}"],
        )
        files, world = example_files()
        repo = cls(runner, world)
        for rel, text in files.items():
            repo.write(rel, text)
        repo.git("init", "-q", "-b", "main")
        repo.landed = repo.land("the example, as landed")
        return repo

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.root), *args],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **GIT_ENV},
        )
        return done.stdout.strip()

    def reset(self, commit: str = "") -> None:
        """Back on main at `commit` (default: the example as landed), which becomes origin/main; nothing else
        on disk but the RuleRunner's own workdir."""
        commit = commit or self.landed
        self.git("checkout", "-q", "-f", "-B", "main", commit)
        self.git("clean", "-q", "-ffdx", "-e", "/.pants.d/")
        self.git("update-ref", "refs/remotes/origin/main", commit)

    def write(self, rel: str, data: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def edit(self, rel: str, old: str, new: str) -> None:
        text = self.read(rel)
        assert text.count(old) == 1, f"{old!r} is not exactly once in {rel}"
        self.write(rel, text.replace(old, new))

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def land(self, message: str) -> str:
        """Commits as reviewed history: origin/main (the default trusted ref) moves to it, as after a merge."""
        commit = self.commit(message)
        self.git("update-ref", "refs/remotes/origin/main", commit)
        return commit

    def candidate(self, name: str, files: dict[str, str]) -> str:
        """A commit on its own branch from main, which is checked out again after: trusted mode reads the
        candidate from git objects."""
        self.git("checkout", "-q", "-B", name, "main")
        for rel, text in files.items():
            self.write(rel, text)
        commit = self.commit(name)
        self.git("checkout", "-q", "main")
        return commit

    def gate(
        self,
        *options: str,
        report_at: str = "dist/gate/report.json",
        jailed: Optional[bool] = None,
        env: Optional[dict[str, str]] = None,
    ) -> GateRun:
        """`pants [options] gate ::`; options are flags (`--changed-since=…`, which replaces the specs, or
        `--gate-base=…`). Jailed by default in trusted mode (`--gate-candidate`), which requires it."""
        report_path = self.root / report_at
        report_path.unlink(missing_ok=True)
        # The engine learns of edits from a file watcher, asynchronously: say everything may have changed.
        self.runner.scheduler.invalidate_all_files()
        specs = [] if any(o.startswith("--changed-since") for o in options) else ["::"]
        if jailed is None:
            jailed = any(option.startswith("--gate-candidate") for option in options)
        result = self.runner.run_goal_rule(
            Gate,
            args=specs,
            global_args=runner_options(*options, jailed=jailed),
            env={**CONFIGURED_ENV, **(env or {})},
            env_inherit=ENV_INHERIT,
        )
        report = json.loads(report_path.read_bytes()) if report_path.exists() else {}
        return GateRun(result.exit_code, report, result.stdout, result.stderr)
