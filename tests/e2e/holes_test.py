"""An adversary's changes, each of which made a failing property pass (or hold) before the gate derived
its protected set and sandbox from complete facts; judged by the real `./pants --changed-since=… gate`.

Each attack sits beside a product bug that a sampled property catches; every one must be named by its own
reason, so a test passes only when the gate saw that attack for what it is."""

from __future__ import annotations

import os

from tests.e2e.repo import GateRun, Repo

REFUND_BUG = (
    "src/orders/orders/payments.py",
    "    if already + minor > payment.captured.minor:",
    "    if already + minor > payment.authorized.minor:",
)
# Rebinds every predicate to "holds" before any of them is imported.
RIGGED_INIT = """import importlib
_rigged = importlib.import_module(__name__ + ".orders_properties")
for _name in dir(_rigged):
    if not _name.startswith("_") and callable(getattr(_rigged, _name)):
        setattr(_rigged, _name, lambda record: True)
"""
# A package that replaces the core the plugin imports, still exposing the real modules.
IMPOSTOR = """import os as _os
_real = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))),
                      "src", "epoch_gate", "epoch_gate")
__path__.insert(0, _real)
exec(open(_os.path.join(_real, "__init__.py")).read())
"""


def reasons_at(run: GateRun, code: str) -> set[str]:
    return {r["path"] for r in run.reasons(code)}


def test_attacks_on_what_the_oracle_is_read_through(repo: Repo) -> None:
    # In a worktree, judged without the daemon: the change edits .pants.rc, pants.toml and the plugin's
    # code and import path, which Pants loads afresh here (a daemon would restart for them, here and again
    # when they are gone).
    base = repo.head()
    tree = repo.worktree("holes", base)
    tree.edit(*REFUND_BUG)
    # 1. The predicates' package, and a helper module beside them.
    tree.write("checks/__init__.py", RIGGED_INIT)
    tree.write("checks/helpers.py", "HOLDS = True\n")
    # 2. A product package that becomes `checks.orders_properties` in the merged sandbox.
    tree.write("src/orders/checks/orders_properties/__init__.py", "def refund_le_captured(record):\n    return True\n")
    tree.write("src/orders/checks/orders_properties/BUILD", "python_sources()\n")
    tree.edit(
        "src/orders/orders/BUILD",
        "python_sources()",
        'python_sources(dependencies=["src/orders/checks/orders_properties"])',
    )
    # 3. Configuration outside pants.toml, and git's view of an oracle folder.
    tree.write(".pants.rc", "[gate]\ntrusted_refs = []\n")
    tree.write("checks/.gitattributes", "catalog.yaml -diff\n")
    # 4. The plugin's import path: a package ahead of the core on [GLOBAL].pythonpath.
    tree.write("pants-plugins/epoch_gate/__init__.py", IMPOSTOR)
    # 5. The gate's own code and pants.toml, as Pants loads them.
    tree.edit("src/epoch_gate/epoch_gate/verdict/suite.py", '"""The verdict (', '"""The (relaxed) verdict (')
    tree.write("pants.toml", (tree.root / "pants.toml").read_text() + "\n")
    # 6. An evidence folder through a symlink.
    tree.write("docs/notes/forged.json", "{}\n")
    os.symlink("docs/notes", tree.root / "freezes")
    # A path no UTF-8 decoder takes, and one that would inject a workflow command if printed raw.
    tree.write("docs/" + os.fsdecode(b"caf\xe9.md"), "latin-1 name\n")
    tree.write("docs/a\n::stop-commands::x.md", "control characters in a name\n")
    tree.commit("an agent's fix, with help")

    run = tree.gate(f"--changed-since={base}")
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    protected = reasons_at(run, "protected-path-changed")
    assert {
        "checks/__init__.py",
        "checks/helpers.py",
        ".pants.rc",
        "checks/.gitattributes",
        "pants-plugins/epoch_gate/__init__.py",
        "src/epoch_gate/epoch_gate/verdict/suite.py",
        "pants.toml",
        "freezes",
    } <= protected, protected
    shadowed = " ".join(r["found"] for r in run.reasons("module-shadowed"))
    assert "src/orders/checks/orders_properties/__init__.py" in shadowed  # refused in the replay's sandbox
    assert "pants-plugins/epoch_gate" in shadowed  # the gate's own package provided twice
    assert "freezes" in reasons_at(run, "path-not-regular")
    assert "docs/caf\\xe9.md" in {c["path"] for c in run.report["changed"]}
    assert not any(line.startswith("::") for line in run.stdout.splitlines())
