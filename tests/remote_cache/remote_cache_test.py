"""Replays shared across machines: what CI wrote to the remote cache is a hit on a laptop whose local
cache is empty; and with the server down the gate still replays locally, gets the same verdict, and says
the cache was unreachable."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.repo import GateRun, Repo
from tests.remote_cache.server import INSTANCE, buildgrid, free_port, interpreter, remote_options, stats

REPLAY = "checks:orders_properties"
INVENTORY = "checks/inventory:inventory_properties"
# Pants' defaults for [GLOBAL].remote_cache_rpc_concurrency and remote_store_rpc_concurrency.
PANTS_CONCURRENT_RPCS = 128 + 128
# A generator or a replay run on this machine (the debug log's workunit of a local process, not a lookup's).
LOCAL_START = re.compile(r"\] Starting: (?:Generate the fixture world of|Replay \d+ sampled properties of) \S+")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return Repo.from_example(Path.cwd(), tmp_path_factory.mktemp("example") / "repo")


@pytest.fixture(scope="module")
def ci(example: Repo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, GateRun]]:
    """CI's gate: a cold local cache, remote writes on, to a server that stays up for the module."""
    where = tmp_path_factory.mktemp("ci")
    with buildgrid(example.root, where / "buildgrid.log", where / "cas") as port:
        yield port, example.gate(
            "-ldebug", "--local-store-dir=" + str(where / "ci-store"), *remote_options(port, write=True)
        )


def identities(report: dict) -> dict[str, dict]:
    return {s["address"]: s["identities"] for s in report["suites"]}


@pytest.mark.parametrize("store", ["memory", "disk"])
def test_each_configuration_serves_the_calls_pants_makes(example: Repo, tmp_path: Path, store: str) -> None:
    # Both stores answer the REAPI calls of Pants' remote cache; the gate itself runs over one (below): the
    # two differ only in where BuildGrid keeps the CAS.
    log = tmp_path / "buildgrid.log"
    with buildgrid(example.root, log, tmp_path / "cas" if store == "disk" else None) as port:
        probe = [str(interpreter(log)), str(Path(__file__).with_name("reapi_probe.py")), str(port), INSTANCE]
        done = subprocess.run(probe, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-3000:]
    assert f"buildgrid: serving {store}.yml on 127.0.0.1:{port} from " in log.read_text()


def test_a_laptop_with_an_empty_local_cache_replays_nothing(
    example: Repo, ci: tuple[int, GateRun], tmp_path: Path
) -> None:
    port, written = ci
    ci_report, ci_stdout = written.report, written.stdout
    assert LOCAL_START.findall(written.stderr)  # the pattern sees a process run here: CI ran them all
    # A laptop: nothing local (a new store), read-only; it waits on the cache as long as it takes, so a
    # generator or replay that starts locally raced the lookup (debug logs each local start).
    laptop = ["--local-store-dir=" + str(tmp_path / "laptop-store"), *remote_options(port, write=False)]
    run = example.gate("--stats-log", "-ldebug", "--property-replay-remote-cache-speculation-delay=600000", *laptop)
    report, stdout, counters = run.report, run.stdout, stats(run.stderr)
    # `pants test` asks for the very replay the gate ran: a remote hit too.
    test = example.pants(*laptop[1:], "--local-store-dir=" + str(tmp_path / "laptop-store-2"), "test", REPLAY)
    assert test.returncode == 0, test.stderr[-3000:]
    assert f"✓ {REPLAY} succeeded" in test.stderr and "(cached remotely)" in test.stderr, test.stderr[-2000:]
    # Every cacheable process of the gate (the generators and the replays) came from the remote cache.
    assert counters["remote_cache_requests_cached"] >= 4 and counters["remote_cache_requests_uncached"] == 0, counters
    assert counters["remote_cache_read_errors"] == 0, counters
    assert report["verdict"] == ci_report["verdict"] == "eligible"
    assert identities(report) == identities(ci_report) and stdout == ci_stdout
    assert all(s["cached"] for s in report["suites"])  # every replay came from the remote cache
    assert not LOCAL_START.findall(run.stderr), LOCAL_START.findall(run.stderr)


def test_with_the_server_down_the_gate_replays_locally_and_says_so(
    example: Repo, ci: tuple[int, GateRun], tmp_path: Path
) -> None:
    # The smaller suite shows it: with an empty local store its generator and replay must run here, and
    # come to what CI's run (the server up) came to.
    expected = ci[1].report
    run = example.gate(
        "--stats-log",
        "--local-store-dir=" + str(tmp_path / "store"),
        *remote_options(free_port(), write=True),
        specs=("checks/inventory::",),
    )
    counters = stats(run.stderr)
    assert run.report["verdict"] == expected["verdict"] == "eligible"
    assert identities(run.report) == {INVENTORY: identities(expected)[INVENTORY]}
    assert counters["remote_cache_read_errors"] >= 1 and counters["remote_cache_requests_cached"] == 0, counters
    assert "Failed to read from remote cache" in run.stderr and "Connection refused" in run.stderr


@pytest.mark.parametrize("config", ["memory.yml", "disk.yml"])
def test_the_server_queues_every_request_pants_sends_at_once(config: str) -> None:
    # A request refused as RESOURCE_EXHAUSTED is a read error, and Pants runs its process locally.
    text = (Path.cwd() / "3rdparty" / "buildgrid" / config).read_text()
    limits = re.findall(r"^maximum-concurrent-rpcs: (\d+)$", text, re.MULTILINE)
    assert len(limits) == 1 and int(limits[0]) >= PANTS_CONCURRENT_RPCS, limits
