from __future__ import annotations

from dataclasses import dataclass

import pytest

from epoch_gate.runner import data


@dataclass(frozen=True)
class Line:
    sku: str
    gross: int


@dataclass(frozen=True)
class Totals:
    lines: tuple[Line, ...]
    total: int

    @property
    def count(self) -> int:
        return len(self.lines)


def test_an_object_crosses_with_its_fields_and_an_answer_with_its_own_properties() -> None:
    totals = Totals((Line("a", 2), Line("b", 3)), 5)
    assert data.encode(totals) == ('{"lines":[{"sku":"a","gross":2},{"sku":"b","gross":3}],"total":5}', '{"count":2}')


def test_only_the_fields_cross_when_the_instance_holds_more() -> None:
    line = Line("a", 2)
    object.__setattr__(line, "_cache", "private")  # beside the fields in __dict__: not a field
    assert data.encode(line) == ('{"sku":"a","gross":2}', "{}")


def test_the_encoder_is_as_good_as_new_after_a_value_it_refused() -> None:
    """A cycle is not data; the encoder keeps nothing of the value it refused, so a later answer holding a
    part of it crosses."""
    held = {"v": 1}
    value: dict[str, object] = {"held": held}
    value["me"] = value
    with pytest.raises(data.NotData, match="nested too deeply, or a cycle"):
        data.encode(value)
    del value["me"]
    assert data.encode(value) == ('{"held":{"v":1}}', "{}")
    assert data.encode([value, value]) == ('[{"held":{"v":1}},{"held":{"v":1}}]', "{}")


def test_what_is_not_data_says_why() -> None:
    with pytest.raises(data.NotData, match="Out of range float values are not JSON compliant"):
        data.encode([float("nan")])
    with pytest.raises(data.NotData, match="a function"):
        data.encode(lambda: None)
    with pytest.raises(data.NotData, match="keys must be str, int, float, bool or None"):
        data.encode({(1, 2): 3})
