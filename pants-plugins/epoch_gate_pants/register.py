"""The epoch_gate backend: `epoch_fixture`, `property_manifest` and `sampled_properties` targets; the
`gate`, `gate-codeowners`, `pin-epoch` and `sample-properties` goals; `tailor` proposals; sampled-property replays in `pants test`;
the suites' `fixture` and `manifest` fields as inferred dependency edges."""

from __future__ import annotations

from epoch_gate_pants import (
    candidate,
    codeowners,
    edges,
    fixture,
    formatting,
    gate,
    isolation,
    protected,
    replay,
    reviewer,
    runner,
    sampled_tests,
    suite,
    tailor,
)
from epoch_gate_pants.target_types import target_types as _target_types


def target_types() -> list:
    return _target_types()


def rules() -> list:
    return [
        *candidate.rules(),
        *codeowners.rules(),
        *edges.rules(),
        *fixture.rules(),
        *formatting.rules(),
        *gate.rules(),
        *isolation.rules(),
        *protected.rules(),
        *replay.rules(),
        *reviewer.rules(),
        *runner.rules(),
        *sampled_tests.rules(),
        *suite.rules(),
        *tailor.rules(),
    ]
