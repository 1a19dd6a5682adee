"""Retries with idempotency keys: a retried charge is applied at most once, and backoff is deterministic.

A client that times out cannot tell "lost request" from "lost response", so it resends the same request
with the same key; the processor applies the first and answers every repeat with the first result.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from orders.money import Money, require_int

KEY_PREFIX = "idem_"
KEY_VERSION = 1  # part of the hashed payload: changing the derivation must change every key
KEY = re.compile(r"^idem_[0-9a-f]{64}$")
MAX_ATTEMPTS = 100
MAX_MULTIPLIER = 10
_MEMO_LIMIT = 4096


class RetryError(ValueError):
    """An invalid retry request, key or backoff policy."""


class IdempotencyConflictError(RetryError):
    """The same idempotency key arrived with a different request."""


def _identifier(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise RetryError(f"{what} must be a non-empty string without surrounding spaces, got {value!r}")
    return value


def idempotency_key(merchant_id: str, order_id: str, amount: Money) -> str:
    """sha256 of the canonical JSON of the request's identity; JSON keeps ("ab","c") and ("a","bc") apart."""
    payload = {
        "v": KEY_VERSION,
        "merchant_id": _identifier(merchant_id, "merchant_id"),
        "order_id": _identifier(order_id, "order_id"),
        "amount_minor": amount.minor,
        "currency": amount.currency,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return KEY_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ChargeRequest:
    merchant_id: str
    order_id: str
    amount: Money

    def __post_init__(self) -> None:
        _identifier(self.merchant_id, "merchant_id")
        _identifier(self.order_id, "order_id")
        if self.amount.minor <= 0:
            raise RetryError(f"a charge must be positive, got {self.amount}")


@dataclass(frozen=True)
class ChargeResult:
    key: str
    charge_id: str
    amount: Money
    sequence: int  # which application of its processor this was, from 1


# Keys are a pure function of the request, so every processor in the process may share them (bounded LRU).
_REQUEST_KEYS: OrderedDict[ChargeRequest, str] = OrderedDict()


def request_key(request: ChargeRequest) -> str:
    cached = _REQUEST_KEYS.get(request)
    if cached is not None:
        _REQUEST_KEYS.move_to_end(request)
        return cached
    key = idempotency_key(request.merchant_id, request.order_id, request.amount)
    _REQUEST_KEYS[request] = key
    if len(_REQUEST_KEYS) > _MEMO_LIMIT:
        _REQUEST_KEYS.popitem(last=False)
    return key


class IdempotentProcessor:
    """Applies each key's request at most once and answers repeats with the first result."""

    def __init__(self) -> None:
        self._requests: dict[str, ChargeRequest] = {}
        self._results: dict[str, ChargeResult] = {}
        self.applications = 0

    def submit(self, request: ChargeRequest, key: Optional[str] = None) -> ChargeResult:
        """`key` is the client's own idempotency key; by default it is derived from the request."""
        if key is None:
            key = request_key(request)
        elif not isinstance(key, str) or not KEY.match(key):
            raise RetryError(f"idempotency key must match {KEY.pattern}, got {key!r}")
        seen = self._requests.get(key)
        if seen is not None:
            if seen != request:  # reusing a key for another charge is a client bug: refuse, never guess
                raise IdempotencyConflictError(f"key {key} was first used for another request")
            return self._results[key]
        result = self._apply(request, key)
        self._requests[key] = request
        self._results[key] = result
        return result

    def _apply(self, request: ChargeRequest, key: str) -> ChargeResult:
        self.applications += 1
        digest = hashlib.sha256(f"{key}:{self.applications}".encode("utf-8")).hexdigest()
        return ChargeResult(key, f"ch_{digest[:24]}", request.amount, self.applications)


@dataclass(frozen=True)
class BackoffPolicy:
    """Delay before retry n (n >= 1) = min(cap_ms, base_ms * multiplier ** (n - 1)); no jitter, no clock."""

    base_ms: int
    multiplier: int
    cap_ms: int

    def __post_init__(self) -> None:
        if require_int(self.base_ms, "base_ms") < 1:
            raise RetryError(f"base_ms must be >= 1, got {self.base_ms}")
        if not 1 <= require_int(self.multiplier, "multiplier") <= MAX_MULTIPLIER:
            raise RetryError(f"multiplier must be within [1, {MAX_MULTIPLIER}], got {self.multiplier}")
        if require_int(self.cap_ms, "cap_ms") < self.base_ms:
            raise RetryError(f"cap_ms ({self.cap_ms}) must be >= base_ms ({self.base_ms})")


def backoff_schedule(policy: BackoffPolicy, attempts: int) -> tuple[int, ...]:
    """The waits before attempts 2..attempts, in milliseconds (empty for a single attempt)."""
    if not 1 <= require_int(attempts, "attempts") <= MAX_ATTEMPTS:
        raise RetryError(f"attempts must be within [1, {MAX_ATTEMPTS}], got {attempts}")
    delays = []
    delay = policy.base_ms
    for _ in range(attempts - 1):
        delays.append(delay)
        delay = min(policy.cap_ms, delay * policy.multiplier)  # capping each step keeps the ints small
    return tuple(delays)


@dataclass(frozen=True)
class RetryRun:
    request: ChargeRequest
    results: tuple[ChargeResult, ...]  # the processor's answer to each attempt
    delays_ms: tuple[int, ...]         # the waits between attempts
    applications: int


def run_retries(processor: IdempotentProcessor, request: ChargeRequest, attempts: int,
                policy: BackoffPolicy) -> RetryRun:
    """Sends the same request `attempts` times, as a client whose responses kept getting lost would."""
    delays = backoff_schedule(policy, attempts)
    before = processor.applications
    results = tuple(processor.submit(request) for _ in range(attempts))
    return RetryRun(request, results, delays, processor.applications - before)


def request_from_record(record: Mapping[str, Any]) -> ChargeRequest:
    amount = Money(require_int(record["amount_minor"], "amount_minor"), record["currency"])
    return ChargeRequest(record["merchant_id"], record["order_id"], amount)


def policy_from_record(record: Mapping[str, Any]) -> BackoffPolicy:
    raw = record["backoff"]
    if not isinstance(raw, Mapping) or set(raw) != {"base_ms", "multiplier", "cap_ms"}:
        raise RetryError("backoff must be an object with exactly base_ms, multiplier, cap_ms")
    return BackoffPolicy(raw["base_ms"], raw["multiplier"], raw["cap_ms"])


def retries_from_record(record: Mapping[str, Any]) -> RetryRun:
    """A retry-scenario record (merchant_id, order_id, amount_minor, currency, attempts, backoff), on a fresh
    processor; other keys (id, labels) are ignored."""
    missing = sorted({"merchant_id", "order_id", "amount_minor", "currency", "attempts", "backoff"} - set(record))
    if missing:
        raise RetryError(f"a retry record needs {', '.join(missing)}")
    return run_retries(IdempotentProcessor(), request_from_record(record), record["attempts"],
                       policy_from_record(record))
