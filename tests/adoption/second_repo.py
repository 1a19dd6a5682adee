"""A new repository, not this one: it gets the plugin only from the built wheels, through
`[GLOBAL].plugins` and a find-links folder, and runs the commands of docs/adopting.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "new user",
    "GIT_AUTHOR_EMAIL": "user@example.invalid",
    "GIT_COMMITTER_NAME": "new user",
    "GIT_COMMITTER_EMAIL": "user@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
# What the machine needs to reach PyPI (the plugin resolve) and to find Python 3.9; nothing of this repo.
PASSED_ENV = (
    "HOME",
    "PATH",
    "PYENV_ROOT",
    "XDG_CACHE_HOME",
    "EPOCH_GATE_CACHE",
    "SSL_CERT_FILE",
    "PIP_CERT",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
)
PANTS_TOML = """\
[GLOBAL]
pants_version = "2.17.1"
plugins = ["epoch-gate-pants==0.1.0"]
backend_packages = ["pants.backend.python"]

[python-repos]
find_links = ["file://{wheelhouse}"]

[python]
interpreter_constraints = ["CPython==3.9.*"]

[python-infer]
use_rust_parser = true
"""

GENERATOR = '''\
"""Prices for the shop's fixture world: deterministic, from the base list."""
import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--input", action="append", default=[])
args = parser.parse_args()
base = json.load(open(args.input[0]))
os.makedirs(args.out)
with open(os.path.join(args.out, "prices.jsonl"), "w") as out:
    for i in range(base["count"]):
        out.write(json.dumps({"id": i, "cents": 100 + 37 * i, "discount_pct": i % 40}, sort_keys=True) + "\\n")
'''

PRODUCT = '''\
def discounted(cents: int, discount_pct: int) -> int:
    """The price after a whole-percent discount, rounded half down to a cent."""
    return cents - (cents * discount_pct) // 100
'''

PREDICATES = '''\
def discount_never_negative(record, product) -> bool:
    return product.shop.prices.discounted(record["cents"], record["discount_pct"]) >= 0


def discount_never_raises(record, product) -> bool:
    return product.shop.prices.discounted(record["cents"], record["discount_pct"]) <= record["cents"]
'''

# Block style, as docs/adopting.md shows it: a comma in a description is just text.
CATALOG = """\
properties:
  - name: discount_never_negative
    bound: prices
    predicate: checks.shop_properties:discount_never_negative
    description: A discount never makes a price negative, however large.
  - name: discount_never_raises
    bound: prices
    predicate: checks.shop_properties:discount_never_raises
    description: A discount never raises a price.
"""

FILES = {
    ".gitignore": "__pycache__/\n",  # the launcher's command adds its own lines
    "fixtures/generate_prices.py": GENERATOR,
    "fixtures/prices/base.json": '{"count": 200}\n',
    "src/shop/__init__.py": "",
    "src/shop/prices.py": PRODUCT,
    "checks/__init__.py": "",
    "checks/shop_properties.py": PREDICATES,
    "checks/catalog.yaml": CATALOG,
}


def documented_commands(adopting_md: str, block: str = "commands") -> list[str]:
    """The `$ ` lines of a marked block of docs/adopting.md (`adopting:commands`, `adopting:launcher`): the
    test runs what the guide says."""
    found = re.search(rf"<!-- adopting:{block}\b.*?-->\s*```console\n(.*?)```", adopting_md, re.S)
    assert found, f"docs/adopting.md lost its adopting:{block} block"
    return [line[2:] for line in found.group(1).splitlines() if line.startswith("$ ")]


@dataclass
class NewRepo:
    root: Path
    bin_dir: Path
    timings: list[tuple[str, float]] = field(default_factory=list)
    outputs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)  # by command, if timed

    @classmethod
    def create(cls, where: Path, wheels: list[Path], guide: str) -> "NewRepo":
        wheelhouse, root, origin, bin_dir = (where / n for n in ("wheelhouse", "shop", "origin.git", "bin"))
        for folder in (wheelhouse, root, bin_dir):
            folder.mkdir(parents=True)
        for wheel in wheels:
            shutil.copy2(wheel, wheelhouse / wheel.name)
        (root / "pants.toml").write_text(PANTS_TOML.format(wheelhouse=wheelhouse))
        for rel, text in FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        # A product of its own each run, so the first replay runs (and says so) even when an earlier run's
        # is in the shared process cache.
        (root / "src/shop/prices.py").write_text(PRODUCT + f"\nRUN = {uuid.uuid4().hex!r}\n")
        # `pants` on PATH, as a user has it, with its daemon (the fixture stops it: `stop_pantsd`).
        shim = bin_dir / "pants"
        shim.write_text('#!/bin/sh\nexec ./pants "$@"\n')
        shim.chmod(0o755)
        repo = cls(root, bin_dir)
        subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
        repo.sh("git init -q -b main && git remote add origin " + str(origin))
        # Pants on this machine (no scie-pants here): the guide's one command, from the wheels' folder
        for command in documented_commands(guide, "launcher"):
            done = repo.sh(command.replace("/srv/wheels", str(wheelhouse)), timed=True)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"
        return repo

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in PASSED_ENV}
        return {**env, **GIT_ENV, "PATH": f"{self.bin_dir}:{env.get('PATH', '')}"}

    def sh(
        self, command: str, env: dict[str, str] | None = None, timed: bool = False
    ) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**self.env(), **(env or {})},
            timeout=1200,
        )
        if timed:
            self.timings.append((command, time.monotonic() - started))
            self.outputs[command] = done
        return done

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def write(self, rel: str, text: str) -> None:
        (self.root / rel).write_text(text)


def report(repo: NewRepo) -> dict:
    """The last gate's report.json."""
    return json.loads(repo.read("dist/gate/report.json"))


def all_reasons(judged: dict) -> list[dict]:
    """The repository's reasons, then every suite's."""
    return [*judged["reasons"], *(r for s in judged["suites"] for r in s["reasons"])]
