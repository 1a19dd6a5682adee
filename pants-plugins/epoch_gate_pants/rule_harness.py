"""Rule tests' harness: a RuleRunner with exactly the rules the module under test needs (its own, the plugin
modules it asks of and the Pants rules they call), over a small repository of one epoch, one manifest of one
property and one product module."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Iterable

from pants.base.build_root import BuildRoot
from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.manifest import sample
from epoch_gate_pants.candidate import CandidateFiles
from epoch_gate_pants.gate_harness import CONFIGURED_SUBSYSTEMS, GENERATOR, PANTS_RULES, TARGET_TYPES, configure

PREDICATES = """
def refund_le_captured(record, product) -> bool:
    return product.payments_lib.refundable(record["captured"], record["refunded"]) is True
"""

CATALOG = """properties:
  - name: refund_le_captured
    bound: payments
    predicate: checks.props:refund_le_captured
    description: A refund never exceeds the captured amount.
"""


def new_rule_runner(
    tmp: Path,
    named_caches: Path,
    modules: Iterable[ModuleType],
    queries: Iterable[QueryRule] = (),
    extra_rules: Iterable = (),
) -> RuleRunner:
    """A RuleRunner over the rules of `modules` and what they call, with its own store under `tmp` (so its own
    process cache) and the shared named caches (pex's and pip's downloads, which hold no results)."""
    runner = RuleRunner(
        rules=[
            *(rule for module in modules for rule in module.rules()),
            *PANTS_RULES,
            *CONFIGURED_SUBSYSTEMS,
            *queries,
            *extra_rules,
        ],
        target_types=TARGET_TYPES,
        bootstrap_args=[f"--local-store-dir={tmp / 'store'}", f"--named-caches-dir={named_caches}"],
    )
    configure(runner)
    return runner


def fresh(runner: RuleRunner) -> RuleRunner:
    """`runner` for the next test: an empty build root and the default options, over the same scheduler (so
    what Pants runs once per scheduler, the interpreter search and the jail's probes, runs once per file).
    The build root's path and the store are the module's: a process whose result depends on a file it reads
    outside its inputs is cached across the module's tests."""
    BuildRoot().path = runner.build_root  # process-wide: another RuleRunner made since has moved it
    root = Path(runner.build_root)
    removed = [str(p.relative_to(root)) for p in root.rglob("*") if ".pants.d" not in p.relative_to(root).parts]
    for top in root.iterdir():
        if top.name == ".pants.d":
            continue
        if top.is_dir() and not top.is_symlink():
            shutil.rmtree(top)
        else:
            top.unlink()
    runner._invalidate_for(*removed)  # every path the last test left, as write_files invalidates its own
    configure(runner)
    return runner


def write_repo(
    runner: RuleRunner, *, pinned_generator: str = GENERATOR, refund_ok: str = "refunded <= captured", seed: int = 3
) -> None:
    base = b'{"count": 50}\n'
    pin = {
        "schema": 1,
        "epoch_id": "e1",
        "generator": "fixtures/gen.py",
        "generator_sha256": sha256_bytes(pinned_generator.encode()),
        "inputs": [{"path": "fixtures/base.json", "sha256": sha256_bytes(base)}],
    }
    manifest = sample(parse_catalog(CATALOG.encode(), "c"), seed, 1)
    runner.write_files(
        {
            "fixtures/BUILD": 'epoch_fixture(name="epoch", generator="gen.py", inputs=["base.json"])',
            "fixtures/gen.py": GENERATOR,
            "fixtures/base.json": base.decode(),
            "fixtures/EPOCH": canonical_json(pin).decode(),
            "checks/BUILD": (
                'python_sources(name="preds", sources=["props.py"])\n'
                'property_manifest(name="manifest", predicates=["props.py"])\n'
                'sampled_properties(name="props", fixture="fixtures:epoch", manifest=":manifest", '
                'dependencies=[":preds", "src:lib"])'
            ),
            "checks/props.py": PREDICATES,
            "checks/catalog.yaml": CATALOG,
            "checks/manifest.json": manifest.to_bytes().decode(),
            "src/BUILD": 'python_sources(name="lib")',
            "src/payments_lib.py": f"def refundable(captured: int, refunded: int) -> bool:\n    return {refund_ok}\n",
        }
    )


def candidate_files(
    runner: RuleRunner, files: dict[str, str], irregular: tuple[tuple[str, str], ...] = ()
) -> CandidateFiles:
    """A candidate's files as trusted mode reads them from git: data, with no BUILD file loaded."""
    digest = runner.request(Digest, [CreateDigest([FileContent(p, t.encode()) for p, t in files.items()])])
    return CandidateFiles(digest, irregular)
