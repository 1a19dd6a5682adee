"""The launcher's behaviour, against temporary build roots and cache folders (never the user's)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FAKE_PEX = b"#!/bin/sh\necho fake pex\n"
LAUNCHER_FILES = ("pants-pins.txt", "pex-pins.txt", "isolation.txt", "pants.toml")


def make_root(tmp_path: Path, pex_sha: str, pex_size: int) -> Path:
    """A copy of the launcher and its files, with its [pex-cli] known_versions set to (sha, size), in a
    repository whose own pants.toml says nothing of the launcher."""
    root = tmp_path / "repo"
    (root / "3rdparty" / "bootstrap").mkdir(parents=True)
    shutil.copy("pants", root / "pants")
    for name in LAUNCHER_FILES:
        shutil.copy(f"3rdparty/bootstrap/{name}", root / "3rdparty" / "bootstrap" / name)
    toml = Path("3rdparty/bootstrap/pants.toml").read_text()
    start = toml.index('known_versions = ["v2.1.137|linux_x86_64|')
    end = toml.index('"]', start)
    row = f'known_versions = ["v2.1.137|linux_x86_64|{pex_sha}|{pex_size}'
    (root / "3rdparty" / "bootstrap" / "pants.toml").write_text(toml[:start] + row + toml[end:])
    (root / "pants.toml").write_text('[GLOBAL]\npants_version = "2.17.1"\n')
    return root


def run(root: Path, cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cache.parent), "EPOCH_GATE_CACHE": str(cache)}
    for name in (
        "PYENV_ROOT",
        "SSL_CERT_FILE",
        "PIP_CERT",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        if name in os.environ:
            base[name] = os.environ[name]
    return subprocess.run(
        ["bash", str(root / "pants"), *args], capture_output=True, text=True, env={**base, **env}, timeout=900
    )


def fake_bootstrap(root: Path, cache: Path, pex: bytes) -> Path:
    """A finished bootstrap whose `pants` is a stub, so warm-path behaviour is testable offline."""
    folder = Path(run(root, cache, EPOCH_GATE_WHERE="1").stdout.strip())
    (folder / "venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, folder / "venv" / "bin" / "python")
    stub = folder / "venv" / "bin" / "pants"
    stub.write_text(
        '#!/bin/sh\necho "stub pants $*"; echo "ca=${PANTS_CA_CERTS_PATH:-none}"; echo "config=${PANTS_CONFIG_FILES:-}"\n'
    )
    stub.chmod(0o755)
    (folder / "pex-v2.1.137").write_bytes(pex)
    (folder / "ready").touch()
    return folder


def test_warm_launch_reuses_the_bootstrap_and_installs_the_verified_tool(tmp_path: Path) -> None:
    root = make_root(tmp_path, hashlib.sha256(FAKE_PEX).hexdigest(), len(FAKE_PEX))
    cache = tmp_path / "cache"
    folder = fake_bootstrap(root, cache, FAKE_PEX)
    ready = (folder / "ready").stat().st_mtime_ns
    for _ in range(2):
        done = run(root, cache, "--version")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("stub pants --version")
        assert "bootstrapping" not in done.stderr
    assert (folder / "ready").stat().st_mtime_ns == ready
    assert (root / ".pants.bootstrap" / "pex-v2.1.137").read_bytes() == FAKE_PEX
    if Path("/etc/ssl/certs/ca-certificates.crt").exists():
        assert "ca=/etc/ssl/certs/ca-certificates.crt" in done.stdout


def test_a_tool_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    root = make_root(tmp_path, "0" * 64, len(FAKE_PEX))
    cache = tmp_path / "cache"
    fake_bootstrap(root, cache, FAKE_PEX)
    done = run(root, cache, "--version")
    assert done.returncode == 1
    assert "refusing the pex tool" in done.stderr and "0" * 64 in done.stderr
    assert "stub pants" not in done.stdout
    assert not (root / ".pants.bootstrap" / "pex-v2.1.137").exists()


def test_a_tool_with_the_wrong_size_is_refused(tmp_path: Path) -> None:
    root = make_root(tmp_path, hashlib.sha256(FAKE_PEX).hexdigest(), len(FAKE_PEX) + 1)
    cache = tmp_path / "cache"
    fake_bootstrap(root, cache, FAKE_PEX)
    done = run(root, cache, "--version")
    assert done.returncode == 1 and "refusing the pex tool" in done.stderr


def test_a_config_without_the_tools_pin_is_refused_in_words(tmp_path: Path) -> None:
    """A launcher configuration without the [pex-cli] row once ended the launch with exit 1 and no output:
    `set -e` stopped it inside the grep that found no row."""
    root = make_root(tmp_path, hashlib.sha256(FAKE_PEX).hexdigest(), len(FAKE_PEX))
    cache = tmp_path / "cache"
    fake_bootstrap(root, cache, FAKE_PEX)
    (root / "3rdparty" / "bootstrap" / "pants.toml").write_text("[GLOBAL]\n")
    done = run(root, cache, "--version")
    assert done.returncode == 1
    assert "3rdparty/bootstrap/pants.toml has no [pex-cli] known_versions row for v2.1.137 on" in done.stderr
    assert "stub pants" not in done.stdout
    (root / "3rdparty" / "bootstrap" / "pants.toml").unlink()
    done = run(root, cache, "--version")
    assert done.returncode == 1 and "3rdparty/bootstrap/pants.toml, the launcher's configuration, is missing" in (
        done.stderr
    )


def test_the_launchers_configuration_comes_first_and_the_repositorys_wins(tmp_path: Path) -> None:
    """Pants reads the launcher's configuration, then the repository's pants.toml (the later file wins): an
    adopting repository's pants.toml needs none of the launcher's settings. A list the user set, in any of
    the variables Pants reads, is passed on as a flag (merged after both); one a launcher set (a nested
    launch's) is replaced by this repository's."""
    root = make_root(tmp_path, hashlib.sha256(FAKE_PEX).hexdigest(), len(FAKE_PEX))
    cache = tmp_path / "cache"
    fake_bootstrap(root, cache, FAKE_PEX)
    real = root.resolve()
    ours = f"config=['{real}/3rdparty/bootstrap/pants.toml', '{real}/pants.toml']"
    done = run(root, cache, "--version")
    assert done.returncode == 0 and done.stdout.splitlines()[::2] == ["stub pants --version", ours], done.stdout
    elsewhere = "['/elsewhere/a', '/elsewhere/b']"
    nested = run(root, cache, "--version", PANTS_CONFIG_FILES=elsewhere, EPOCH_GATE_CONFIG_FILES=elsewhere)
    assert nested.stdout.splitlines()[::2] == ["stub pants --version", ours], nested.stdout
    for variable in ("PANTS_CONFIG_FILES", "PANTS_PANTS_CONFIG_FILES", "PANTS_GLOBAL_PANTS_CONFIG_FILES"):
        users = run(root, cache, "--version", **{variable: "+['ci.toml']"})
        assert users.stdout.splitlines()[::2] == ["stub pants --pants-config-files=+['ci.toml'] --version", ours]
    replacing = run(root, cache, "--version", PANTS_CONFIG_FILES="['ci.toml']")  # would drop both files
    assert replacing.stdout.splitlines()[::2] == ["stub pants --pants-config-files=+['ci.toml'] --version", ours]
    assert "pants launcher: your config file list ['ci.toml'] is added after" in replacing.stderr


def test_the_first_launch_with_a_plugin_list_says_pants_resolves_it(tmp_path: Path) -> None:
    """Pants resolves [GLOBAL].plugins before it prints anything (up to a minute the first time): the
    launcher says so, once per plugin list on the machine."""
    root = make_root(tmp_path, hashlib.sha256(FAKE_PEX).hexdigest(), len(FAKE_PEX))
    cache = tmp_path / "cache"
    fake_bootstrap(root, cache, FAKE_PEX)
    said = "pants launcher: Pants first resolves [GLOBAL].plugins"
    assert said not in run(root, cache, "--version").stderr  # no plugins, nothing to say
    (root / "pants.toml").write_text(
        '[GLOBAL]\npants_version = "2.17.1"\nplugins = ["epoch-gate-pants==0.1.0"]  # ours\n'
    )
    first, second = run(root, cache, "--version"), run(root, cache, "--version")
    assert f'{said} (["epoch-gate-pants==0.1.0"]): once on this machine, up to a minute' in first.stderr.splitlines()
    assert said not in second.stderr and second.returncode == 0


def test_a_path_pants_would_read_otherwise_is_refused(tmp_path: Path) -> None:
    """Pants reads the list of config files as a Python literal: a backslash in the path would read as an
    escape (a\\x41b as aAb), a quote would end the string."""
    root = make_root(tmp_path / "a\\x41b", "0" * 64, 1)
    done = run(root, tmp_path / "cache", "--version")
    assert done.returncode == 1 and "the repository's path holds a quote, a backslash or a control character" in (
        done.stderr
    )
    assert "bootstrapping" not in done.stderr


def test_a_bootstrap_step_that_fails_ends_the_launch_and_keeps_nothing(tmp_path: Path) -> None:
    """A download that does not match its pin stops the launch at that step, with pip's own words, and no
    bootstrap is left for the next launch to take as finished."""
    root = make_root(tmp_path, "0" * 64, 1)
    pins = root / "3rdparty" / "bootstrap" / "pants-pins.txt"
    text = pins.read_text()
    end = re.search(r"\n(?=\S)", text).start()  # type: ignore[union-attr] # the first requirement and its hashes
    pins.write_text(re.sub("[0-9a-f]{64}", "0" * 64, text[:end]) + text[end:])
    cache = tmp_path / "cache"
    done = run(root, cache, "--version")
    assert done.returncode != 0
    said = done.stderr.splitlines()
    assert said[1] == "pants launcher: installing Pants 2.17.1 from PyPI (hash-checked)", done.stderr
    assert "HASHES" in done.stderr and "building the pex tool" not in done.stderr
    assert not list(cache.glob("*/ready"))


def test_a_missing_python39_says_what_to_install(tmp_path: Path) -> None:
    root = make_root(tmp_path, "0" * 64, 1)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/bin", "/bin"):  # every tool but the interpreters
        for tool in os.listdir(folder):
            if not tool.startswith("python") and not (bin_dir / tool).exists():
                os.symlink(os.path.join(folder, tool), bin_dir / tool)
    done = run(root, tmp_path / "cache", "--version", PATH=str(bin_dir), PYENV_ROOT=str(tmp_path / "no-pyenv"))
    assert done.returncode == 1
    assert "needs CPython 3.9 and none was found" in done.stderr
    assert "pyenv install 3.9" in done.stderr


def test_an_override_that_is_not_python39_is_refused(tmp_path: Path) -> None:
    root = make_root(tmp_path, "0" * 64, 1)
    done = run(root, tmp_path / "cache", "--version", EPOCH_GATE_PYTHON=shutil.which("true") or "/bin/true")
    assert done.returncode == 1 and "is not a working CPython 3.9" in done.stderr


def test_cold_bootstrap_races_safely_and_yields_a_working_pants(tmp_path: Path) -> None:
    """Two launches on an empty cache: one builds under the lock, the other reuses it; the pex tool
    built from PyPI has exactly the pinned hash."""
    toml = Path("3rdparty/bootstrap/pants.toml").read_text()
    row = toml[toml.index("v2.1.137|linux_x86_64|") :].split('"')[0].split("|")
    root = make_root(tmp_path, row[2], int(row[3]))
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: run(root, cache, EPOCH_GATE_BOOTSTRAP_ONLY="1"), range(2)))
    for done in results:
        assert done.returncode == 0, done.stderr[-2000:]
    (built,) = [d.stderr for d in results if "bootstrapping" in d.stderr]
    said = [line.split(" (")[0] for line in built.splitlines() if not line.startswith("pants launcher: still ")]
    assert all(line.startswith("pants launcher: ") for line in said), built  # nothing else, no tool's warning
    assert said[1:4] == [  # each step said as it starts, and again every 10 s while it runs
        "pants launcher: installing Pants 2.17.1 from PyPI",
        "pants launcher: building the pex tool v2.1.137",
        "pants launcher: fetching the jail's tools",
    ], built
    folder = Path(results[0].stdout.strip())
    assert hashlib.sha256((folder / "pex-v2.1.137").read_bytes()).hexdigest() == row[2]
    version = subprocess.run(
        [
            str(folder / "venv" / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('pantsbuild.pants'))",
        ],
        capture_output=True,
        text=True,
    )
    assert version.stdout.strip() == "2.17.1"
    if debian_archive_has_the_jail():
        # The jail's tools, taken from the pinned .debs, are the pinned bytes.
        rows = [
            line.split()
            for line in Path("3rdparty/bootstrap/isolation.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        assert len(rows) == 2
        for *_, sha256, name in rows:
            data = (root / ".pants.bootstrap" / "isolation" / name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == sha256, name


def debian_archive_has_the_jail() -> bool:
    if not shutil.which("apt-cache"):
        return False
    policy = subprocess.run(["apt-cache", "policy", "bubblewrap"], capture_output=True, text=True).stdout
    return "0.8.0-2+deb12u1" in policy


def test_a_tampered_jail_package_is_refused_and_the_launch_goes_on(tmp_path: Path) -> None:
    toml = Path("3rdparty/bootstrap/pants.toml").read_text()
    row = toml[toml.index("v2.1.137|linux_x86_64|") :].split('"')[0].split("|")
    root = make_root(tmp_path, row[2], int(row[3]))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"  # "downloads" a package whose bytes are not the pinned ones
    fake.write_text('#!/bin/sh\necho tampered > "bubblewrap_0.8.0-2+deb12u1_amd64.deb"\n')
    fake.chmod(0o755)
    if not shutil.which("dpkg-deb"):
        (bin_dir / "dpkg-deb").symlink_to(shutil.which("true") or "/bin/true")
    done = run(
        root,
        tmp_path / "cache",
        EPOCH_GATE_BOOTSTRAP_ONLY="1",
        PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    if (
        shutil.which("dpkg")
        and subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip() == "amd64"
    ):
        assert "refusing" in done.stderr and "the gate's jail is not provisioned" in done.stderr
    assert not (root / ".pants.bootstrap" / "isolation").exists()
