"""The epoch_gate backend: `epoch_fixture`, `property_manifest` and `sampled_properties` targets; the
`gate`, `pin-epoch` and `sample-properties` goals; sampled-property replays in `pants test`."""

from __future__ import annotations

from epoch_gate_pants import fixture, gate, isolation, protected, replay, reviewer, runner, suite
from epoch_gate_pants.target_types import target_types as _target_types


def target_types() -> list:
    return _target_types()


def rules() -> list:
    return [*fixture.rules(), *gate.rules(), *isolation.rules(), *protected.rules(), *replay.rules(), *reviewer.rules(),
            *runner.rules(), *suite.rules()]
