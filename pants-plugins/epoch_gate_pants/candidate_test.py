"""Rule tests of `candidate.py`: the candidate's import closure in trusted mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.change.candidate import Candidate, _entries
from epoch_gate.reasons import Code
from epoch_gate.runner.product.child import unshipped_stub
from epoch_gate_pants import candidate
from epoch_gate_pants.candidate import CandidateClosure, CandidateClosureRequest, candidate_files
from epoch_gate_pants.rule_harness import PREDICATES, write_repo
from epoch_gate_pants.rule_harness import candidate_files as harness_files

MODULES = (candidate,)
QUERIES = (
    QueryRule(CandidateClosure, [CandidateClosureRequest]),
    QueryRule(Digest, [CreateDigest]),
    QueryRule(DigestContents, [Digest]),
)


def test_the_candidate_closure_is_what_the_suites_product_modules_import(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    candidate = harness_files(
        rule_runner,
        {
            "src/payments_lib.py": "from pkg import rules\nimport helper\n",
            "src/helper.py": "",
            "src/pkg/__init__.py": "",
            "src/pkg/rules.py": "from . import tables\n",
            "src/pkg/tables.py": "",
            "src/pkg/rates.json": "{}",
            "src/pkg/fast.py": "",  # imported only by a name built at run time: ships with its package all the same
            "src/pkg/sub/__init__.py": "",  # a subpackage: ships with its package too
            "src/pkg/sub/engine.py": "",
            "src/other/__init__.py": "import helper\n",  # a package nothing imports: it does not ship
            "src/unrelated.py": "import helper\n",
            "src/__fast__.py": "",  # names an import by a built name can ask for: each stands in too
            "src/fast-path.py": "",
            "src/ünï/__init__.py": "",
            "src/a.b.py": "",  # a name with a dot: no import asks for it
            "src/__world/x.py": "",  # under the gate's own folder: refused, neither shipped nor stood in for
            "src/checks/rates.py": "",  # the oracle's or the runner's name from elsewhere: refused alike
            "src/epoch_gate/rates.py": "",
            "src/__init__.py": "",  # a source root's own: imported as `__init__`, so it stands in
            "src/epoch_gate/__init__.py": "",  # the runner's package: the trusted plugin's copy runs, never this
            "src/epoch_gate/runner/__init__.py": "",
            "src/epoch_gate/runner/judge/judging.py": "def refused(*a):\n    return True\n",
            "checks/props.py": "def refund_le_captured(record, product):\n    return True\n",  # the candidate's oracle copy
        },
        irregular=(
            ("src/pkg/link.py", "a symlink"),
            ("src/elsewhere/link.py", "a symlink"),
            ("src/fastpath.pyc", "compiled code"),  # imported by a built name, it could not stand in
        ),
    )
    # The predicates import the runner's API and call the product by name: the closure starts from the
    # product modules the suite depends on in the trusted graph.
    predicates = "from epoch_gate.runner.api import refused\n" + PREDICATES
    oracle = rule_runner.request(Digest, [CreateDigest([FileContent("checks/props.py", predicates.encode())])])
    closure = rule_runner.request(
        CandidateClosure,
        [
            CandidateClosureRequest(
                candidate, oracle, (("checks/props.py", "checks/props.py"),), ("payments_lib",), ("__world",)
            )
        ],
    )
    assert dict(closure.places) == {
        "src/payments_lib.py": "payments_lib.py",
        "src/helper.py": "helper.py",
        "src/pkg/__init__.py": "pkg/__init__.py",
        "src/pkg/rules.py": "pkg/rules.py",
        "src/pkg/tables.py": "pkg/tables.py",
        "src/pkg/rates.json": "pkg/rates.json",
        "src/pkg/fast.py": "pkg/fast.py",
        "src/pkg/sub/__init__.py": "pkg/sub/__init__.py",
        "src/pkg/sub/engine.py": "pkg/sub/engine.py",
    }
    assert [(r.code, r.path) for r in closure.refusals] == [
        (Code.PATH_NOT_REGULAR, "src/pkg/link.py"),
        (Code.MODULE_SHADOWED, "src/__world/x.py"),
        (Code.MODULE_SHADOWED, "src/checks/rates.py"),
        # The runner's name, the gate's copy outside the repository (an adopter's): the child imports the
        # runner's own `epoch_gate`, which has none of these
        (Code.MODULE_SHADOWED, "src/epoch_gate/__init__.py"),
        (Code.MODULE_SHADOWED, "src/epoch_gate/rates.py"),
        (Code.MODULE_SHADOWED, "src/epoch_gate/runner/__init__.py"),
        (Code.MODULE_SHADOWED, "src/epoch_gate/runner/judge/judging.py"),
        (Code.PATH_NOT_REGULAR, "src/fastpath.pyc"),
    ]
    # What the suite's imports do not reach stands in by its name: imported by a name built at run time, it
    # ends the replay instead of being missing (which code could fall back from).
    assert closure.stand_ins == (
        "__fast__.py",
        "__init__.py",
        "elsewhere/__init__.py",
        "fast-path.py",
        "other/__init__.py",
        "unrelated.py",
        "ünï/__init__.py",
    )
    shipped = {c.path: c.content for c in rule_runner.request(DigestContents, [closure.stripped])}
    assert shipped["unrelated.py"] == unshipped_stub("unrelated") and shipped["other/__init__.py"] == unshipped_stub(
        "other"
    )


def test_compiled_code_alone_in_a_folder_is_read_and_refused(tmp_path: Path) -> None:
    """A folder holding only an extension module is a Python folder too: imported by a name built at run
    time, production loads it, so the replay must not simply miss it (a stand-in is source: refused)."""
    files = {
        "src/app.py": b"",
        "src/native/fastpath.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
        "src/compiled/__init__.pyc": b"\x00",  # a package of compiled code alone
        "src/pkg/__init__.py": b"",
        "docs/notes.md": b"not Python",
    }
    for path, content in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(content)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    tree = subprocess.run([*git, "rev-parse", "HEAD^{tree}"], check=True, capture_output=True, text=True).stdout
    candidate = Candidate("c", tree.strip(), "b", (), _entries(tmp_path, tree.strip()), True)
    read, irregular = candidate_files(tmp_path, candidate)
    assert sorted(c.path for c in read) == ["src/app.py", "src/pkg/__init__.py"]
    compiled = "compiled code, which cannot be reviewed or followed as source"
    assert irregular == [
        ("src/compiled/__init__.pyc", compiled),
        ("src/native/fastpath.cpython-311-x86_64-linux-gnu.so", compiled),
    ]
