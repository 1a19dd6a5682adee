from __future__ import annotations

import hashlib

import pytest

from orders.money import Money
from orders.retries import (BackoffPolicy, ChargeRequest, IdempotencyConflictError, IdempotentProcessor,
                            RetryError, backoff_schedule, idempotency_key, retries_from_record, run_retries)

USD_100 = Money(10000, "USD")


def test_key_is_the_sha256_of_the_canonical_request() -> None:
    payload = '{"amount_minor":10000,"currency":"USD","merchant_id":"m_1","order_id":"o_1","v":1}'
    assert idempotency_key("m_1", "o_1", USD_100) == "idem_" + hashlib.sha256(payload.encode()).hexdigest()


@pytest.mark.parametrize("a, b", [
    (("m_1", "o_1", USD_100), ("m_1", "o_1", Money(10001, "USD"))),
    (("m_1", "o_1", USD_100), ("m_1", "o_2", USD_100)),
    (("m_1", "o_1", USD_100), ("m_2", "o_1", USD_100)),
    (("m_1", "o_1", USD_100), ("m_1", "o_1", Money(10000, "EUR"))),
    (("ab", "c", USD_100), ("a", "bc", USD_100)),  # no ambiguity from concatenation
])
def test_different_requests_have_different_keys(a: tuple[str, str, Money], b: tuple[str, str, Money]) -> None:
    assert idempotency_key(*a) != idempotency_key(*b)
    assert idempotency_key(*a) == idempotency_key(*a)


@pytest.mark.parametrize("merchant, order", [("", "o"), ("m", ""), (" m", "o"), ("m", 5)])
def test_key_inputs_are_validated(merchant: object, order: object) -> None:
    with pytest.raises(RetryError):
        idempotency_key(merchant, order, USD_100)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [1, 2, 7, 100])
def test_repeats_apply_once_and_return_the_first_result(attempts: int) -> None:
    processor = IdempotentProcessor()
    request = ChargeRequest("m_1", "o_1", USD_100)
    run = run_retries(processor, request, attempts, BackoffPolicy(100, 2, 1000))
    assert run.applications == 1 == processor.applications
    assert len(run.results) == attempts and len(set(run.results)) == 1
    assert run.results[0].sequence == 1


def test_distinct_requests_are_each_applied() -> None:
    processor = IdempotentProcessor()
    first = processor.submit(ChargeRequest("m_1", "o_1", USD_100))
    second = processor.submit(ChargeRequest("m_1", "o_1", Money(1, "USD")))
    assert processor.applications == 2 and first.charge_id != second.charge_id


def test_a_client_key_reused_for_another_request_is_a_conflict() -> None:
    processor = IdempotentProcessor()
    key = "idem_" + "0" * 64
    processor.submit(ChargeRequest("m_1", "o_1", USD_100), key=key)
    with pytest.raises(IdempotencyConflictError):
        processor.submit(ChargeRequest("m_1", "o_2", USD_100), key=key)
    with pytest.raises(RetryError, match="must match"):
        processor.submit(ChargeRequest("m_1", "o_1", USD_100), key="not-a-key")


@pytest.mark.parametrize("minor", [0, -100])
def test_a_charge_must_be_positive(minor: int) -> None:
    with pytest.raises(RetryError, match="positive"):
        ChargeRequest("m", "o", Money(minor, "USD"))


@pytest.mark.parametrize("base, multiplier, cap, attempts, expected", [
    (100, 2, 1000, 1, ()),
    (100, 2, 1000, 2, (100,)),
    (100, 2, 1000, 6, (100, 200, 400, 800, 1000)),
    (100, 3, 100, 4, (100, 100, 100)),
    (250, 1, 5000, 4, (250, 250, 250)),
    (1, 10, 10**6, 100, tuple(min(10**6, 10 ** n) for n in range(99))),
])
def test_backoff_schedule(base: int, multiplier: int, cap: int, attempts: int, expected: tuple[int, ...]) -> None:
    assert backoff_schedule(BackoffPolicy(base, multiplier, cap), attempts) == expected


@pytest.mark.parametrize("base, multiplier, cap", [(0, 2, 10), (10, 0, 100), (10, 11, 100), (100, 2, 99),
                                                    (10, 2.0, 100)])
def test_invalid_backoff_policies_are_refused(base: int, multiplier: int, cap: int) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(base, multiplier, cap)


@pytest.mark.parametrize("attempts", [0, 101, True])
def test_attempts_are_bounded(attempts: int) -> None:
    with pytest.raises(ValueError):
        backoff_schedule(BackoffPolicy(1, 2, 10), attempts)


def test_retries_from_record_uses_a_fresh_processor_each_time() -> None:
    record = {"id": "r", "merchant_id": "m", "order_id": "o", "amount_minor": 5, "currency": "JPY", "attempts": 3,
              "backoff": {"base_ms": 10, "multiplier": 2, "cap_ms": 30}}
    first, again = retries_from_record(record), retries_from_record(record)
    assert first == again and first.applications == 1 and first.delays_ms == (10, 20)
