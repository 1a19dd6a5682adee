"""Trusted mode end to end: the judge runs from a clean checkout of origin/main (the end-to-end repository,
with its daemon; the README's CI command makes its own worktree) and the candidate enters as data.

Each attacking candidate carries the refund bug that `refund_le_captured` catches, so a verdict other
than `closed` with `property-failed` means the attack programmed the judge.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from epoch_gate.change.tree import repository_url
from epoch_gate.cli.main import main
from tests.e2e.repo import GateRun, Repo, pants_env

REFUND_BUG = (
    "src/orders/orders/payments.py",
    "    if already + minor > payment.captured.minor:",
    "    if already + minor > payment.authorized.minor:",
)
# Pants executes BUILD files with the full builtins; its ban on `import` is a check of the tokens.
GATE_PATCH = """
_import = __builtins__["__im" + "port__"]
_decision = _import("epoch_gate.verdict.suite", fromlist=["Label"])
_judge = _import("epoch_gate.verdict.judge", fromlist=["label_of"])
_decision.label_of = _judge.label_of = lambda reasons: _decision.Label.ELIGIBLE
"""
HOST_PROBES = {
    "Find interpreter for constraints: CPython==3.9.*",
    # The inventory suite's, from its targets' constraints (orders' are the repository's 3.9)
    "Find interpreter for constraints: CPython==3.11.*",
    "Locate the interpreter",
    "Read the bubblewrap version",
    "Probe the jail",
}
# Product code, run when the predicates import `orders`: it swaps the predicates' module for one where
# everything holds and rebinds whatever of the runner it finds loaded beside it.
# The uncapped discount that `discount_never_exceeds_subtotal` catches, and three ways product code once
# made the predicates that ran beside it pass anyway (issue 24).
UNCAPPED = (
    "src/orders/orders/totals.py",
    "    return min(amount, _percent_of(amount, bp) + fixed)",
    "    return _percent_of(amount, bp) + fixed",
)
CHEATS = {
    # An amount "equal within the ledger's tolerance": every comparison of it holds.
    "int-subclass": """
class _Tolerant(int):
    __eq__ = __le__ = __lt__ = __ge__ = __gt__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = int.__hash__


_compute = compute_totals


def compute_totals(order):
    totals = _compute(order)
    for money in (totals.order_discount, totals.subtotal, totals.gross, totals.taxable):
        object.__setattr__(money, "minor", _Tolerant(money.minor))
    return totals
""",
    # Money whose every dunder a predicate might lean on says what it wants.
    "dunders": """
from orders.money import Money as _Money

for _name in ("__eq__", "__le__", "__lt__", "__ge__", "__gt__"):
    setattr(_Money, _name, lambda self, other: True)
_Money.__ne__ = lambda self, other: False
_Money.__hash__ = lambda self: 0
_Money.__bool__ = lambda self: True
_Money.__iter__ = lambda self: iter(())
_Money.__index__ = _Money.__int__ = lambda self: 0
_Money.__float__ = lambda self: 0.0
""",
    # The child's serving loop, found and taken over: it answers for the product from then on.
    "channel-takeover": """
import sys as _sys

for _module in list(_sys.modules.values()):
    _server = getattr(_module, "Server", None)
    if isinstance(_server, type) and hasattr(_server, "answer"):
        _server.answer = lambda self, scope, line: '["v","bool",true]'
""",
    # A second key in the discount's __dict__ that prints as its field's name, with a capped value: JSON
    # would hold `minor` twice, and a parser that keeps the last would read the lie (issue 43).
    "dict-key-twice": """
class _Minor(str):
    __hash__ = lambda self: 7
    __eq__ = lambda self, other: other is self


_compute = compute_totals


def compute_totals(order):
    totals = _compute(order)
    vars(totals.order_discount)[_Minor("minor")] = min(totals.order_discount.minor, totals.subtotal.minor)
    return totals
""",
    # A discount whose __dict__, read as such, holds a capped value, while every attribute read (what
    # production code does) sees the bug (issue 43).
    "two-faced": """
_compute = compute_totals


def compute_totals(order):
    totals = _compute(order)
    real = type(totals.order_discount)
    shown = {"minor": min(totals.order_discount.minor, totals.subtotal.minor), "currency": totals.order_discount.currency}

    class _TwoFaced(real):
        def __getattribute__(self, name):
            return shown if name == "__dict__" else real.__getattribute__(self, name)

    object.__setattr__(totals.order_discount, "__class__", _TwoFaced)
    return totals
""",
}
# Product code that goes for the runner beside it, as it could when they shared a jail, a uid and a PID
# namespace (issue 25): a detached process that stops the runner and rewrites its summary; a signal to
# the parent; the runner's memory through /proc; the runner's files. Every attempt is tried and ignored.
ESCAPES = """
import json as _json, os as _os, signal as _signal, time as _time


def _attempt(action):
    try:
        action()
    except Exception:
        pass


def _runners():
    for pid in _os.listdir("/proc"):
        if pid.isdigit() and b"epoch_gate.runner.main" in open(f"/proc/{pid}/cmdline", "rb").read():
            yield int(pid)


def _rewrite(path):
    summary = _json.load(open(path))
    for prop in summary["properties"]:
        prop.update(outcome="pass", observation_ids=[], failures=0, first_failure=0, detail="")
    _json.dump(summary, open(path, "w"))


def _detached():
    for _ in range(600):
        for pid in list(_runners()):
            _attempt(lambda: _os.kill(pid, _signal.SIGSTOP))
            for root in (f"/proc/{pid}/cwd", ".."):
                _attempt(lambda: _rewrite(f"{root}/__replay/replay.json"))
            _attempt(lambda: _os.kill(pid, _signal.SIGCONT))
        _time.sleep(0.05)


if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _attempt(_detached)
    _os._exit(0)
_attempt(lambda: _os.kill(_os.getppid(), _signal.SIGSTOP))
_attempt(lambda: _os.kill(_os.getppid(), _signal.SIGCONT))
_attempt(lambda: open(f"/proc/{_os.getppid()}/mem", "r+b").write(b"x"))
_attempt(lambda: open("__world/orders.jsonl", "w").write(""))
_attempt(lambda: open(__file__, "a").write("# rewritten"))
"""
# Product code that would take the machine down without its limits ([property-replay].child_*).
HOGS = {
    "forks": ("import os as _os\nwhile True:\n    _os.fork()\n", "the product went over its process limit"),
    "allocates": (
        "_kept = []\nwhile True:\n    _kept.append(bytearray(1 << 26))\n",
        # One child out of address space, or (two children, [property-replay].children) both over their
        # resident memory together: either names the memory limit.
        "its memory limit (",
    ),
    "prints": (
        "import sys as _sys\nfor _ in range(1 << 14):\n    _sys.stderr.write('x' * (1 << 16))\n",
        "the product went over its output limit",
    ),
}
FAKE_LAUNCHER = """#!/usr/bin/env bash
mkdir -p dist/gate && echo '{"verdict": "eligible"}' > dist/gate/report.json
"""


@pytest.fixture
def judge(repo: Repo) -> Repo:
    """The judge: a clean checkout of the trusted ref (origin/main), as `docs/ci/gate.sh` makes in CI, run
    through the daemon the other modules share. A candidate reaches it only as git objects."""
    return repo


def judged(judge: Repo, commit: str, *options: str) -> GateRun:
    return judge.gate(*options, f"--gate-candidate={commit}")


def assert_property_failed(run: GateRun) -> None:
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert {r["path"] for r in run.reasons("property-failed")} == {
        "checks:orders_properties#refund_le_captured"
    }, run.stdout


def test_a_product_build_file_cannot_program_the_judge(example: Repo, judge: Repo) -> None:
    commit = example.candidate(
        "build-patch",
        REFUND_BUG,
        files={"src/orders/orders/BUILD": "python_sources()\n\npython_tests(name=\"tests\")\n" + GATE_PATCH},
    )
    # The control: judged from its own working tree (a worktree, without a daemon that would go on holding
    # the patched judge), the candidate's BUILD file rewrites the verdict.
    local = example.worktree("build-patch", commit).gate("--gate-base=main")
    assert local.verdict == "eligible", local.stdout
    run = judged(judge, commit)
    assert_property_failed(run)
    # And it could not land to program later judges: a BUILD file that is code is not passed.
    assert [r["path"] for r in run.reasons("build-file-code")] == ["src/orders/orders/BUILD"], run.stdout


def test_the_gates_own_code_and_configuration_are_protected(example: Repo, judge: Repo) -> None:
    commit = example.candidate(
        "gate-code",
        ("src/epoch_gate/epoch_gate/verdict/suite.py", '"""The verdict (', '"""The (relaxed) verdict ('),
        files={"pants.toml": (example.root / "pants.toml").read_text() + "\n"},
    )
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.codes() == {"protected-path-changed"}, run.stdout
    assert {r["path"] for r in run.reasons("protected-path-changed")} == {
        "src/epoch_gate/epoch_gate/verdict/suite.py",
        "pants.toml",
    }


def test_a_replaced_launcher_and_configuration_are_data(example: Repo, judge: Repo) -> None:
    commit = example.candidate(
        "config",
        REFUND_BUG,
        files={
            "pants": FAKE_LAUNCHER,
            ".pants.rc": "[gate]\ntrusted_refs = []\nisolation = \"off\"\n",
            "pants.toml": (example.root / "pants.toml").read_text() + "\n[property-replay]\nskip = true\n",
        },
    )
    run = judged(judge, commit)
    assert_property_failed(run)
    assert {"pants", ".pants.rc", "pants.toml"} <= {r["path"] for r in run.reasons("protected-path-changed")}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_product_values_and_the_childs_channel_never_decide(example: Repo, judge: Repo, cheat: str) -> None:
    source = (example.root / UNCAPPED[0]).read_text()
    assert source.count(UNCAPPED[1]) == 1
    commit = example.candidate(f"cheat-{cheat}", files={UNCAPPED[0]: source.replace(*UNCAPPED[1:]) + CHEATS[cheat]})
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    orders = run.suite("checks:orders_properties")
    outcomes = {p["name"]: p["outcome"] for p in orders["properties"]}
    if cheat == "channel-takeover":
        # Every answer after each child's first is `true`: the predicates judge that data and fail on it
        # (one that reads a field of `true` stops with its own error), and none passes.
        assert set(outcomes.values()) <= {"fail", "error"}, run.stdout
        assert {r["code"] for r in orders["reasons"]} <= {"property-failed", "predicate-error"}, run.stdout
    else:
        assert outcomes["discount_never_exceeds_subtotal"] == "fail", run.stdout
        assert {r["code"] for r in orders["reasons"]} == {"property-failed"}, run.stdout


def test_product_code_cannot_stop_signal_read_or_rewrite_the_runner(example: Repo, judge: Repo) -> None:
    source = (example.root / UNCAPPED[0]).read_text()
    commit = example.candidate("escapes", files={UNCAPPED[0]: source.replace(*UNCAPPED[1:]) + ESCAPES})
    started = time.monotonic()
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert time.monotonic() - started < 60
    orders = run.suite("checks:orders_properties")
    outcomes = {p["name"]: p["outcome"] for p in orders["properties"]}
    assert outcomes["discount_never_exceeds_subtotal"] == "fail", run.stdout
    assert {r["code"] for r in orders["reasons"]} == {"property-failed"}, run.stdout


@pytest.mark.parametrize("hog", sorted(HOGS))
def test_product_code_over_a_limit_is_closed_naming_the_limit(example: Repo, judge: Repo, hog: str) -> None:
    code, limit = HOGS[hog]
    source = (example.root / UNCAPPED[0]).read_text()
    commit = example.candidate(f"hog-{hog}", files={UNCAPPED[0]: source + code})
    started = time.monotonic()
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert time.monotonic() - started < 120
    orders = run.suite("checks:orders_properties")
    assert {r["code"] for r in orders["reasons"]} == {"replay-failed"}, run.stdout
    assert any(limit in r["message"] for r in orders["reasons"]), run.stdout


def test_without_a_jail_trusted_mode_is_closed_unless_an_unjailed_verdict_is_accepted(
    example: Repo, judge: Repo
) -> None:
    commit = example.candidate("unjailed", files={"src/orders/orders/unjailed.py": '"""Notes."""\n'})
    no_jail = ("--bwrap-url-template=file:///nonexistent/bwrap", "--bwrap-system-search-path=[]")
    refused = judged(judge, commit, *no_jail)
    assert refused.verdict == "closed" and refused.codes() == {"isolation-unavailable", "replay-failed"}, refused.stdout
    assert all(
        "install bubblewrap" in r["message"].lower() and "unsafe_allow_unjailed_verdict" in r["message"]
        for r in refused.reasons("isolation-unavailable")
    ), refused.stdout

    accepted = judged(judge, commit, *no_jail, "--gate-unsafe-allow-unjailed-verdict")
    assert accepted.verdict == "eligible", accepted.stdout
    assert "isolation UNJAILED ([gate].unsafe_allow_unjailed_verdict): none (bubblewrap unavailable" in accepted.stdout
    statement = json.loads((judge.root / "dist" / "gate" / "statement.intoto.json").read_text())
    assert statement["predicate"]["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE"]


# The uncapped discount in a new top-level module that the product imports by a name built at run time,
# falling back to the correct code when the module is missing (issues 26 and 44): the scanner cannot see
# the name, and a dunder name is a module name all the same.
FASTPATH = """
import importlib as _importlib

try:
    _discount = _importlib.import_module("{head}" + "{tail}").discount
except ImportError:
    pass
"""


@pytest.mark.parametrize("module", ["fastpath", "__fastpath__"])
def test_a_module_imported_by_a_name_built_at_run_time_cannot_be_left_behind(
    example: Repo, judge: Repo, module: str
) -> None:
    source = (example.root / "src/orders/orders/totals.py").read_text()
    commit = example.candidate(
        module,
        files={
            "src/orders/orders/totals.py": source + FASTPATH.format(head=module[:4], tail=module[4:]),
            f"src/orders/{module}.py": "from orders.totals import _percent_of\n\n\n"
            "def discount(amount, bp, fixed):\n    return _percent_of(amount, bp) + fixed\n",
        },
    )
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    orders = run.suite("checks:orders_properties")
    assert {r["code"] for r in orders["reasons"]} == {"replay-failed"}, run.stdout
    said = f"the product imported {module} of the candidate"
    assert any(said in r["message"] for r in orders["reasons"]), run.stdout


# The uncapped discount behind an import of a package the resolve locks but the trusted graph never saw
# the product import (PyYAML): production installs the whole resolve, so the replay must too.
LOCKED_UNINFERRED = """
try:
    import yaml as _yaml

    def _discount(amount, bp, fixed):
        return _percent_of(amount, bp) + fixed
except ImportError:
    pass
"""


def test_a_locked_package_the_trusted_graph_does_not_infer_is_installed_as_in_production(
    example: Repo, judge: Repo
) -> None:
    source = (example.root / "src/orders/orders/totals.py").read_text()
    commit = example.candidate("locked-uninferred", files={"src/orders/orders/totals.py": source + LOCKED_UNINFERRED})
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    orders = run.suite("checks:orders_properties")
    assert {r["code"] for r in orders["reasons"]} == {"property-failed"}, run.stdout


@pytest.mark.parametrize("direction", ["downgrade", "upgrade", "another resolve"])
def test_a_lockfile_change_is_judged_as_a_dependency_change(example: Repo, judge: Repo, direction: str) -> None:
    """The replay installs the base's resolve: a change that moves a locked version (a downgrade whose old
    behaviour the product's new code relies on, or an honest upgrade), or that moves product code to
    another resolve (which production would install it with), lands on its own first."""
    if direction == "another resolve":
        path, text = "src/orders/orders/BUILD", (example.root / "src/orders/orders/BUILD").read_text()
        moved = text.replace("python_sources()", 'python_sources(resolve="pants-plugins")')
    else:
        path = "3rdparty/python/python-default.lock"
        text = (example.root / path).read_text()
        moved = text.replace(
            '"version": "26.1.0"', '"version": "25.1.0"' if direction == "downgrade" else '"version": "26.2.0"'
        )
    assert moved != text
    commit = example.candidate(f"lock-{direction.replace(' ', '-')}", files={path: moved})
    run = judged(judge, commit)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    found = [(r["code"], r["path"]) for r in run.report["reasons"]]
    assert found == [("requirements-changed", path)], run.stdout


def test_the_ci_script_refuses_a_short_trusted_ref(repo: Repo) -> None:
    script = (repo.root / "docs" / "ci" / "gate.sh").read_text()
    done = subprocess.run(
        ["bash", "-s", "--", "HEAD"],
        input=script,
        cwd=repo.root,
        capture_output=True,
        text=True,
        env={**os.environ, "GATE_TRUSTED_REF": "origin/main"},
    )
    assert done.returncode == 1
    assert done.stderr == "epoch_gate: the trusted ref origin/main is not a full ref name (refs/...): closed\n"


def planted(example: Repo, folder: str, name: str) -> str:
    """A commit on main whose tree adds `folder/name`, as `git mktree` takes any name (issue 26)."""

    def fed(stdin: str, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(example.root), *args], input=stdin, capture_output=True, text=True, check=True
        ).stdout.strip()

    blob = fed("x = 1\n", "hash-object", "-w", "--stdin")
    inner = fed(f"100644 blob {blob}\t{name}\0", "mktree", "-z")
    top = example.git("ls-tree", "-z", "main").split("\0")
    tree = fed("".join(f"{entry}\0" for entry in top if entry) + f"040000 tree {inner}\t{folder}\0", "mktree", "-z")
    return example.git("commit-tree", tree, "-p", "main", "-m", f"planted {folder}")


@pytest.mark.parametrize("folder, name", [("..", "escape.py"), ("long", "m" * 300 + ".py")])
def test_a_tree_entry_no_file_system_holds_is_refused_with_a_report_in_seconds(
    example: Repo, judge: Repo, folder: str, name: str
) -> None:
    commit = planted(example, folder, name)
    started = time.monotonic()
    run = judged(judge, commit)
    assert time.monotonic() - started < 60
    # Without a tree it can write, the gate has no changed set either: both say so.
    assert run.verdict == "closed" and run.codes() == {"path-not-regular", "changed-set-unavailable"}, run.stdout
    (refused,) = run.reasons("path-not-regular")
    assert refused["path"].endswith(name) and "no file system can hold" in refused["message"]


def test_an_honest_candidate_is_eligible_and_the_readmes_ci_command_judges_it_again_from_the_cache(
    example: Repo, judge: Repo, tmp_path: Path
) -> None:
    commit = example.candidate("honest", files={"src/orders/orders/notes.py": '"""Notes."""\n'})
    first = judged(judge, commit)
    assert first.verdict == "eligible" and first.exit_code == 0, first.stdout
    assert first.report["mode"] == "trusted"
    statement = json.loads((judge.root / "dist" / "gate" / "statement.intoto.json").read_text())
    assert statement["subject"][0]["digest"]["gitCommit"] == commit
    assert statement["predicate"]["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]

    # The README's command, as written, in a clone whose origin is the example and with no `pants` on PATH:
    # the trusted checkout's own ./pants judges the candidate again, without a daemon, as CI runs it.
    readme = (example.root / "README.md").read_text()
    block = readme.split("In CI, judge a pull request in **trusted mode**", 1)[1].split("```console\n", 1)[1]
    (command,) = [line[2:] for line in block.split("```", 1)[0].splitlines() if line.startswith("$ ")]
    ci = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", str(example.root), str(ci)], check=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "pants").exists())
    again = subprocess.run(
        ["bash", "-c", command],
        cwd=ci,
        capture_output=True,
        text=True,
        timeout=900,
        # With what each process was, and how many ran (read below).
        env={
            **pants_env(),  # as the judge's: the cache keys of Pants' own processes hold part of it
            "PR_SHA": commit,
            "PATH": path,
            "TMPDIR": str(scratch),
            "PANTS_STATS_LOG": "true",
            "PANTS_LEVEL": "debug",
        },
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert json.loads((ci / "dist" / "gate" / "report.json").read_text())["verdict"] == "eligible"
    # What it prints: the gate's console, as the daemon's run printed it, then the report's Markdown.
    markdown = (ci / "dist" / "gate" / "report.md").read_text()
    assert again.stdout.endswith(markdown), again.stdout
    console = again.stdout[: -len(markdown)]
    assert [line for line in console.splitlines() if not line.startswith("report")] == [
        line for line in first.stdout.splitlines() if not line.startswith("report")
    ], again.stdout
    assert [p.name for p in scratch.iterdir() if p.name.startswith("tmp.")] == []  # mktemp's; Pants leaves its own
    # Without pantsd each run re-probes the host (the interpreter, the jail); nothing else may execute.
    spawned = re.findall(r'spawned local process .*? description: "([^"]*)"', again.stderr)
    executed = set(spawned)  # the host's probes run once for each interpreter: the suites' 3.9 and 3.11
    unexpected = executed - HOST_PROBES
    # What the engine logged of each process that ran again (a cache miss, and why), should one
    assert not unexpected, "\n".join(
        [line[:600] for line in again.stderr.splitlines() if any(d in line for d in unexpected)][:30]
    )
    counters = dict(re.findall(r"^\s+(\w+): (\d+)$", again.stderr, re.M))
    assert int(counters["local_execution_requests"]) == len(spawned), counters
    assert int(counters["local_cache_requests_cached"]) >= 3, counters  # generator, requirements, replay


def test_a_signed_statement_verifies_for_the_candidate_and_no_other_commit(
    example: Repo, judge: Repo, tmp_path: Path
) -> None:
    """With CI's signing key (without pantsd, as CI runs it) the statement is also written in a DSSE
    envelope; `epoch-gate verify-statement` passes the honest candidate's against its commit and refuses it
    against another commit. (A bug's FAILED statement, refused: gate_test, in one engine.)"""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    public = tmp_path / "statement.pub"
    public.write_bytes(key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    envelope = judge.root / "dist" / "gate" / "statement.intoto.dsse.json"

    def verified(commit: str, *required: str) -> int:
        given = ["--public-key", str(public), "--repository", repository_url(judge.root), "--commit", commit]
        levels = [a for level in required for a in ("--require-level", level)]
        return main(["verify-statement", str(envelope), *given, *levels])

    honest = example.candidate("honest-signed", files={"src/orders/orders/notes.py": '"""Signed notes."""\n'})
    run = judge.gate("--no-pantsd", f"--gate-candidate={honest}", env={"EPOCH_GATE_STATEMENT_KEY": pem})
    assert run.verdict == "eligible" and run.report["statement"]["signed"] is True, run.stdout
    assert pem.splitlines()[1] not in run.stdout + run.stderr + json.dumps(run.report)
    assert verified(honest, "EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED") == 0
    assert verified(example.git("rev-parse", "main")) == 1
