"""A Django suite for the adopted repository (docs/adopting.md, "Frameworks"): a small app whose product
code stores each booking in an in-memory SQLite database, Django from the repository's lockfile, and the
product set-up the guide shows."""

from __future__ import annotations

import re

GENERATOR = '''\
"""Bookings for the hotel's fixture world: deterministic, from the base file."""
import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--input", action="append", default=[])
parser.add_argument("--seed")
args = parser.parse_args()
base = json.load(open(args.input[0]))
shift = int(args.seed[:8], 16) if args.seed else 0
os.makedirs(args.out)
with open(os.path.join(args.out, "bookings.jsonl"), "w") as out:
    for i in range(base["count"]):
        record = {"id": i, "nights": 1 + (i + shift) % 9, "rate_cents": 4000 + 125 * ((i + shift) % 17),
                  "discount_pct": (i + shift) % 30}
        out.write(json.dumps(record, sort_keys=True) + "\\n")
'''

MODELS = '''\
from django.db import models


class Booking(models.Model):
    nights = models.PositiveIntegerField()
    rate_cents = models.PositiveIntegerField()
    discount_pct = models.PositiveIntegerField(default=0)
'''

PRICING = '''\
from bookings.models import Booking


def book(nights: int, rate_cents: int, discount_pct: int) -> int:
    """Stores the booking; its id."""
    return Booking.objects.create(nights=nights, rate_cents=rate_cents, discount_pct=discount_pct).pk


def total(booking_id: int) -> int:
    """A stored booking's total in cents, the discount rounded down to a cent."""
    booking = Booking.objects.get(pk=booking_id)
    gross = booking.nights * booking.rate_cents
    return gross - gross * booking.discount_pct // 100


def nights(booking_id: int) -> int:
    return Booking.objects.get(pk=booking_id).nights
'''

# Each record's calls stand alone: a property reads back its own booking by id.
PREDICATES = '''\
def total_within_gross(record, product) -> bool:
    pricing = product.bookings.pricing
    booking = pricing.book(record["nights"], record["rate_cents"], record["discount_pct"])
    return 0 <= pricing.total(booking) <= record["nights"] * record["rate_cents"]


def booking_keeps_its_nights(record, product) -> bool:
    pricing = product.bookings.pricing
    booking = pricing.book(record["nights"], record["rate_cents"], record["discount_pct"])
    return pricing.nights(booking) == record["nights"]
'''

CATALOG = """\
properties:
  - name: total_within_gross
    bound: bookings
    predicate: checks.bookings.bookings_properties:total_within_gross
    description: "A booking's total is never negative and never above nights times the rate."
  - name: booking_keeps_its_nights
    bound: bookings
    predicate: checks.bookings.bookings_properties:booking_keeps_its_nights
    description: "A stored booking reads back with the nights it was booked for."
"""

# Takes the discount four times over: a negative total from 26 % on, which `total_within_gross` catches.
QUADRUPLE_DISCOUNT = (
    "    return gross - gross * booking.discount_pct // 100\n",
    "    return gross - 4 * gross * booking.discount_pct // 100\n",
)

RESOLVES = """
# Django for the hotel's bookings, from the lockfile (`pants generate-lockfiles`).
[python.resolves]
python-default = "3rdparty/python/default.lock"
"""


def with_resolves(pants_toml: str) -> str:
    """The adopted repository's `pants.toml` with a lockfile for its requirements."""
    python = '[python]\ninterpreter_constraints = ["CPython==3.9.*"]\n'
    assert pants_toml.count(python) == 1, pants_toml
    return pants_toml.replace(python, python + "enable_resolves = true\n") + RESOLVES


REQUIREMENTS_BUILD = 'python_requirement(name="django", requirements=["Django>=4.2,<4.3"])\n'


def setup_module(adopting_md: str) -> str:
    """`bookings/replay.py` as the guide shows it: the test runs the guide's own set-up."""
    block = re.search(r"<!-- adopting:django-setup.*?-->\s*```python\n(.*?)```", adopting_md, re.S)
    assert block, "docs/adopting.md lost its adopting:django-setup block"
    return block.group(1)


def files(adopting_md: str) -> dict[str, str]:
    return {
        "3rdparty/python/BUILD": REQUIREMENTS_BUILD,
        "fixtures/bookings/generate_bookings.py": GENERATOR,
        "fixtures/bookings/base.json": '{"count": 120}\n',
        "src/bookings/__init__.py": "",
        "src/bookings/models.py": MODELS,
        "src/bookings/pricing.py": PRICING,
        "src/bookings/replay.py": setup_module(adopting_md),
        "checks/bookings/__init__.py": "",
        "checks/bookings/bookings_properties.py": PREDICATES,
        "checks/bookings/catalog.yaml": CATALOG,
    }
