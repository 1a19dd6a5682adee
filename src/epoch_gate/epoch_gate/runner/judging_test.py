from __future__ import annotations

import pytest

from epoch_gate.runner import judging


def test_a_product_value_reads_as_data_whatever_its_fields_are_named() -> None:
    """Plain fields become attributes at the first read; none of them, whatever its name, can stand in
    for a method or a slot of the value, so the value still refuses to decide anything."""
    value = judging.Remote(
        [1, 0, []],
        "Totals",
        {
            "total": 5,
            "__eq__": True,
            "__hash__": 0,
            "__class__": "int",
            "__bool__": True,
            "_ref": [9, 9, []],
            "lines": [{"gross": 2}],
            "owner": {"name": "x"},
        },
    )
    assert value.total == 5 and value.total == 5  # the first read fills, the second finds it
    assert type(value) is judging.Remote and value._ref == [1, 0, []]
    for use in (lambda: value == 5, lambda: hash(value), lambda: bool(value), lambda: value < 1, lambda: str(value)):
        with pytest.raises(judging.HandleMisused):
            use()
    (line,) = value.lines
    assert isinstance(line, judging.Remote) and line.gross == 2
    assert isinstance(value.owner, judging.Remote) and value.owner.name == "x"
