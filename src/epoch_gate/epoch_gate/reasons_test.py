"""Every reason says what to do: one sentence per code, carried by the report and every printer."""

from __future__ import annotations

import pytest

from epoch_gate.reasons import Code, Reason


@pytest.mark.parametrize("code", list(Code))
def test_every_code_says_what_to_do(code: Code) -> None:
    advice = code.advice
    assert advice[0].isupper() and advice.endswith(".") and "\n" not in advice and len(advice) <= 140, advice


def test_the_report_and_a_refusal_carry_the_advice() -> None:
    reason = Reason(Code.EPOCH_ID_REUSED, "fixtures/EPOCH", "new bytes under a new id", "e1", "e1 is pinned")
    assert reason.to_json()["advice"] == "Choose a new `--epoch-id`: an epoch id never gets other bytes."
    assert reason.refusal() == [
        "refused [epoch-id-reused] fixtures/EPOCH: e1 is pinned",
        "  expected new bytes under a new id; found e1",
        "  to do: Choose a new `--epoch-id`: an epoch id never gets other bytes.",
    ]
    assert Reason(Code.FREEZE_UNUSED, "freezes/a.json", "", "", "m").refusal() == [
        "refused [freeze-unused] freezes/a.json: m",
        "  to do: Delete the freeze: it covers no current flake.",
    ]
