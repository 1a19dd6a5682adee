from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from epoch_gate.evidence.catalog import _load_yaml, parse_catalog
from epoch_gate.reasons import Code, EvidenceError, Reason

CATALOG = "properties:\n" + "".join(
    f"  - name: p{i}\n    bound: b\n    predicate: checks.mod:p{i}\n    description: Property {i}.\n" for i in range(3)
)
MAX_DEPTH = 64  # catalog.MAX_DEPTH: a catalog nests 3 deep; PyYAML recurses a few frames per level


def malformed(data: bytes) -> EvidenceError:
    with pytest.raises(EvidenceError) as caught:
        parse_catalog(data, "checks/catalog.yaml")
    assert caught.value.reason.code is Code.ARTIFACT_MALFORMED
    assert caught.value.reason.path == "checks/catalog.yaml"
    return caught.value


def test_a_plain_catalog_parses() -> None:
    assert [p.name for p in parse_catalog(CATALOG.encode(), "c.yaml").properties] == ["p0", "p1", "p2"]


def test_nesting_up_to_the_limit_is_read_and_one_more_is_refused() -> None:
    value = _load_yaml(("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode(), "c.yaml")
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == []
    deeper = ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode()
    with pytest.raises(EvidenceError) as caught:
        _load_yaml(deeper, "c.yaml")
    assert caught.value.reason.expected == f"nesting depth <= {MAX_DEPTH}"
    assert caught.value.reason.found == f"depth > {MAX_DEPTH}"


@pytest.mark.parametrize(
    "tail",
    [
        "deep: " + "[" * 300 + "]" * 300 + "\n",  # flow sequences
        "deep: " + "{a: " * 300 + "1" + "}" * 300 + "\n",  # flow mappings
        "deep:\n" + "".join("  " * i + "  a:\n" for i in range(100)) + "  " * 101 + "1\n",  # block mappings
        "deep:\n  " + "- " * 100 + "1\n",  # block sequences
        "deep: " + "[{a: " * 150 + "1" + "}]" * 150 + "\n",  # both
    ],
    ids=["flow-seq", "flow-map", "block-map", "block-seq", "mixed"],
)
def test_over_deep_nesting_is_malformed(tail: str) -> None:
    error = malformed((CATALOG + tail).encode())
    assert error.reason.expected == f"nesting depth <= {MAX_DEPTH}"
    assert re.fullmatch(
        r"catalog nests collections deeper than 64 levels \(line \d+, column \d+\)", error.reason.message
    )


def test_aliases_are_refused_they_nest_without_nesting_in_the_text() -> None:
    chain = "x0: &a0 [1]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 300))
    assert malformed(chain.encode()).reason.expected == "no aliases"
    reused = CATALOG.replace("  - name: p2\n", "  - &p\n    name: p2\n") + "  - *p\n"
    assert malformed(reused.encode()).reason.found == "*p"


def test_issue_catalog_inside_pants_like_limits_is_malformed_not_a_crash() -> None:
    # The issue's file, where Pants ran it: recursion limit 10,000 on a 2 MiB rule thread. Before the
    # depth bound the composer recursed ~2,700 levels and the process died with SIGSEGV.
    code = textwrap.dedent(
        """
        import sys, threading
        from epoch_gate.evidence.catalog import parse_catalog
        from epoch_gate.reasons import EvidenceError

        sys.setrecursionlimit(10000)
        threading.stack_size(2 * 1024 * 1024)

        def run():
            try:
                parse_catalog(sys.stdin.buffer.read(), "checks/catalog.yaml")
            except EvidenceError as error:
                print(error.reason.code.value, error.reason.expected)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    data = (CATALOG + "deep: " + "[" * 5000 + "]" * 5000 + "\n").encode()
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.decode().split() == ["artifact-malformed", "nesting", "depth", "<=", str(MAX_DEPTH)]


def _refusal(entry: str) -> Reason:
    """Why the example catalog with `entry` (a flow-style YAML mapping) as its fourth property is refused."""
    with pytest.raises(EvidenceError) as raised:
        parse_catalog((CATALOG + "  - " + entry + "\n").encode(), "c.yaml")
    return raised.value.reason


def test_a_probe_says_how_to_migrate() -> None:
    """The probe/judge split is gone: a predicate drives the product itself through `product`."""
    reason = _refusal("{name: q, bound: b, predicate: 'checks.mod:q', description: Q., probe: 'app.api:total'}")
    assert (reason.code, reason.path, reason.expected, reason.found) == (
        Code.ARTIFACT_MALFORMED,
        "c.yaml#properties[3]",
        "bound, description, name, predicate",
        "probe",
    )
    assert reason.message.startswith("property q has a probe: a predicate now drives the product itself")


@pytest.mark.parametrize("key, value", [("name", "q\\n"), ("bound", "b\\n"), ("predicate", "checks.mod:q\\n")])
def test_a_value_with_a_trailing_newline_is_not_valid(key: str, value: str) -> None:
    entry = {"name": '"q"', "bound": '"b"', "predicate": '"checks.mod:q"', "description": "Q."}
    entry[key] = f'"{value}"'  # YAML's escape: the value ends in a newline
    reason = _refusal("{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}")
    assert (reason.code, reason.path, reason.message, reason.found) == (
        Code.ARTIFACT_MALFORMED,
        "c.yaml#properties[3]",
        f"property {key} is not valid",
        value.replace("\\n", "\n"),
    )
