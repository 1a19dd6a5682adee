"""What a change did to the oracle: the reviewer's reading before approving an oracle change by hand.

Compares the oracle's files on the base with the working tree: the pin (epoch id, generator, inputs),
the manifest (sampled properties, k, seed), the catalog, each sampled predicate's code, freezes and the
observation archive. It never decides anything: a change touching the oracle is already `closed`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from epoch_gate.evidence.catalog import Catalog, Property, parse_catalog
from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.manifest import Manifest, parse_manifest
from epoch_gate.evidence.pin import Pin, parse_pin
from epoch_gate.reasons import Code, EvidenceError, fail
from epoch_gate.text import last_line

# A path's bytes on one side of the change, or None where the file does not exist there.
Reader = Callable[[str], Optional[bytes]]

MAX_SOURCE_BYTES = 1024 * 1024
MAX_AST_DEPTH = 200
PARSE_TIMEOUT = 60

# A predicate module is parsed in a child interpreter. CPython's parser (C) and ast.dump (Python) recurse
# on the depth of the code; inside Pants (recursion limit 10,000, rules on 2 MiB threads) a 12,000-term
# sum overflows the C stack and SIGSEGV ends the whole run, and no check on the text bounds the depth of
# `1+1+...` short of parsing it. In a child, a crash is the child's: the module is then malformed.
# The child's limits are its own main thread's stack and the default recursion limit (1,000), which
# MAX_AST_DEPTH keeps ast.dump (at most two frames per level) well inside.
# 3.9 builds a tree of any depth and the walk measures it. 3.11+ refuse to build one deeper than their own
# limit (RecursionError "during ast construction": about 3,000 levels in the child on 3.11 and 3.12, 10,000
# on 3.13), which is far past MAX_AST_DEPTH: that is the same refusal, without a measured depth.
_PARSE = """
import ast, json, sys
try:
    tree = ast.parse(sys.stdin.buffer.read())
except (SyntaxError, ValueError):
    json.dump({"unparsable": True}, sys.stdout)
    raise SystemExit(0)
except RecursionError:
    json.dump({"depth": None}, sys.stdout)
    raise SystemExit(0)
except MemoryError as exc:
    json.dump({"error": type(exc).__name__}, sys.stdout)
    raise SystemExit(0)
deepest, stack = 0, [(tree, 1)]
while stack:
    node, depth = stack.pop()
    deepest = max(deepest, depth)
    stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
if deepest > int(sys.argv[1]):
    json.dump({"depth": deepest}, sys.stdout)
    raise SystemExit(0)
defs = (ast.FunctionDef, ast.AsyncFunctionDef)
json.dump({"functions": {n.name: ast.dump(n) for n in tree.body if isinstance(n, defs)},
           "rest": [ast.dump(n) for n in tree.body if not isinstance(n, defs)]}, sys.stdout)
"""


@dataclass(frozen=True)
class OracleChange:
    kind: str  # stable, kebab-case: reports and reviewers' tooling key on it
    subject: str  # a path or a property name
    before: str
    after: str
    note: str

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "before": self.before,
            "after": self.after,
            "note": self.note,
        }


@dataclass(frozen=True)
class OraclePaths:
    pin: str
    manifest: str
    catalog: str
    predicates: tuple[str, ...]
    freezes_dir: str
    observations_dir: str


def _parsed(
    parse: Callable[[bytes, str], object], data: Optional[bytes], path: str, side: str, out: list[OracleChange]
) -> object:
    if data is None:
        return None
    try:
        return parse(data, path)
    except EvidenceError as error:
        out.append(OracleChange("unreadable", path, side, error.reason.code.value, error.reason.message))
        return None


def _presence(kind: str, path: str, before: Optional[bytes], after: Optional[bytes], out: list[OracleChange]) -> None:
    if before is None and after is not None:
        out.append(OracleChange(f"{kind}-added", path, "absent", "present", f"the change adds the {kind}"))
    elif before is not None and after is None:
        out.append(OracleChange(f"{kind}-removed", path, "present", "absent", f"the change removes the {kind}"))


def _pin_changes(
    before: Optional[Pin], after: Optional[Pin], read_old: Reader, read_new: Reader, path: str
) -> list[OracleChange]:
    out: list[OracleChange] = []
    if before is None or after is None:
        return out
    old_files = {f.path: f.sha256 for f in (before.generator, *before.inputs)}
    new_files = {f.path: f.sha256 for f in (after.generator, *after.inputs)}
    moved = False
    # What the pin records, and the bytes actually on each side (a generator edit the pin does not
    # mention is still a generator edit).
    for name in sorted(set(old_files) | set(new_files)):
        role = "generator" if name in (before.generator.path, after.generator.path) else "input"
        old_bytes, new_bytes = read_old(name), read_new(name)
        old_sha = sha256_bytes(old_bytes) if old_bytes is not None else "absent"
        new_sha = sha256_bytes(new_bytes) if new_bytes is not None else "absent"
        if name not in old_files:
            out.append(
                OracleChange(f"{role}-added", name, "unpinned", new_files[name], f"the pin now names this {role}")
            )
            moved = True
        elif name not in new_files:
            out.append(
                OracleChange(
                    f"{role}-removed", name, old_files[name], "unpinned", f"the pin no longer names this {role}"
                )
            )
            moved = True
        elif old_sha != new_sha or old_files[name] != new_files[name]:
            pinned = (
                f"pinned {old_files[name][:12]} -> {new_files[name][:12]}"
                if old_files[name] != new_files[name]
                else f"the pin still records {old_files[name][:12]}"
            )
            out.append(
                OracleChange(
                    f"{role}-changed", name, old_sha, new_sha, f"the {role}'s bytes differ from the base ({pinned})"
                )
            )
            moved = True
    if before.world_sha256 != after.world_sha256:
        out.append(
            OracleChange(
                "world-changed",
                path,
                before.world_sha256 or "unrecorded",
                after.world_sha256 or "unrecorded",
                "the world the pin records: the generator's output must match it",
            )
        )
        moved = True
    if before.epoch_id != after.epoch_id:
        out.append(
            OracleChange(
                "epoch-id-changed",
                path,
                before.epoch_id,
                after.epoch_id,
                "a new epoch: every replay runs again and old freezes stop applying",
            )
        )
    elif moved:
        out.append(
            OracleChange(
                "new-epoch-id-required",
                path,
                before.epoch_id,
                after.epoch_id,
                "the generator or its inputs changed under the same epoch id: an existing pin is "
                "never rewritten; mint a new epoch id (`pants pin-epoch --epoch-id=...`)",
            )
        )
    return out


def _manifest_changes(before: Optional[Manifest], after: Optional[Manifest], path: str) -> list[OracleChange]:
    out: list[OracleChange] = []
    if before is None or after is None:
        return out
    if after.k < before.k:
        out.append(
            OracleChange(
                "k-lowered", path, str(before.k), str(after.k), "fewer properties are sampled: the draw checks less"
            )
        )
    elif after.k > before.k:
        out.append(OracleChange("k-raised", path, str(before.k), str(after.k), "more properties are sampled"))
    if after.seed != before.seed:
        out.append(
            OracleChange(
                "seed-changed",
                path,
                str(before.seed),
                str(after.seed),
                "a new draw: check the seed came from the reviewer's sampler, not the change",
            )
        )
    if after.algorithm != before.algorithm:
        out.append(OracleChange("algorithm-changed", path, before.algorithm, after.algorithm, "another draw algorithm"))
    old = {p.name: p for p in before.properties}
    new = {p.name: p for p in after.properties}
    for name in sorted(set(old) - set(new)):
        out.append(
            OracleChange("property-dropped", name, old[name].predicate, "not sampled", f"{name} is no longer replayed")
        )
    for name in sorted(set(new) - set(old)):
        out.append(OracleChange("property-added", name, "not sampled", new[name].predicate, f"{name} is now replayed"))
    for name in sorted(set(old) & set(new)):
        out.extend(_entry_changes("property-changed", name, old[name], new[name]))
    return out


def _entry_changes(kind: str, name: str, old: Property, new: Property) -> list[OracleChange]:
    return [
        OracleChange(kind, name, getattr(old, field), getattr(new, field), f"{field} changed")
        for field in ("bound", "predicate", "description")
        if getattr(old, field) != getattr(new, field)
    ]


def _catalog_changes(before: Optional[Catalog], after: Optional[Catalog], path: str) -> list[OracleChange]:
    if before is None or after is None:
        return []
    out: list[OracleChange] = []
    old, new = before.by_name(), after.by_name()
    for name in sorted(set(old) - set(new)):
        out.append(
            OracleChange(
                "catalog-entry-removed",
                name,
                old[name].predicate,
                "absent",
                "the property can no longer be drawn: the catalog is loosened",
            )
        )
    for name in sorted(set(new) - set(old)):
        out.append(
            OracleChange("catalog-entry-added", name, "absent", new[name].predicate, "a new property can be drawn")
        )
    for name in sorted(set(old) & set(new)):
        out.extend(_entry_changes("catalog-entry-changed", name, old[name], new[name]))
    return out


def _malformed(path: str, message: str, found: str) -> EvidenceError:
    return fail(
        Code.ARTIFACT_MALFORMED,
        path,
        message,
        expected=f"Python that CPython parses, nesting depth <= {MAX_AST_DEPTH}",
        found=found,
    )


def _parse_module(source: bytes, path: str) -> tuple[dict[str, str], list[str]]:
    """Each top-level function's AST dump, and every other statement's; `unparsable <sha>` for bad syntax.

    Raises EvidenceError(ARTIFACT_MALFORMED) for a module too large, too deep, or that kills its parser.
    """
    if len(source) > MAX_SOURCE_BYTES:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "predicate module is larger than the size cap",
            expected=f"<= {MAX_SOURCE_BYTES} bytes",
            found=f"{len(source)} bytes",
        )
    try:
        # -I -S: the standard library only. An absolute path and close_fds=False: posix_spawn, not a fork
        # of pantsd (see git.run_git).
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _PARSE, str(MAX_AST_DEPTH)],
            input=source,
            capture_output=True,
            timeout=PARSE_TIMEOUT,
            close_fds=False,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _malformed(
            path, f"parsing the predicate module took over {PARSE_TIMEOUT}s", f"over {PARSE_TIMEOUT}s"
        ) from None
    except OSError as exc:
        raise _malformed(path, f"the predicate module's parser did not start: {exc}", "OSError") from None
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise _malformed(path, f"parsing the predicate module killed the parser ({name}): nested too deeply", name)
    try:
        result = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise _malformed(
            path,
            f"the predicate module's parser failed (exit {done.returncode}): " f"{last_line(done.stderr, 200)}",
            f"exit {done.returncode}",
        )
    if "unparsable" in result:
        return {}, [f"unparsable {sha256_bytes(source)}"]
    if "error" in result:
        raise _malformed(
            path,
            f"CPython cannot parse the predicate module: {result['error']} " "(nested too deeply)",
            str(result["error"]),
        )
    if "depth" in result:
        depth = result["depth"]  # None where CPython (3.11+) refused to build a tree that deep
        how = f"{depth} levels" if depth is not None else "CPython refuses to build its syntax tree (RecursionError)"
        raise _malformed(
            path,
            f"the predicate module's code nests more than {MAX_AST_DEPTH} levels deep: {how}",
            f"depth {depth}" if depth is not None else f"depth > {MAX_AST_DEPTH}",
        )
    return dict(result["functions"]), list(result["rest"])


def _functions(
    source: Optional[bytes], path: str, side: str, out: list[OracleChange]
) -> tuple[dict[str, str], list[str]]:
    """Each top-level function's AST (formatting and comments ignored), and every other statement's."""
    if source is None:
        return {}, []
    try:
        return _parse_module(source, path)
    except EvidenceError as error:
        # Not comparable: every sampled predicate of it and the module itself then read as changed.
        out.append(OracleChange("unreadable", path, side, error.reason.code.value, error.reason.message))
        return {}, [f"unreadable {sha256_bytes(source)}"]


def _predicate_changes(
    manifests: Sequence[Optional[Manifest]], files: tuple[str, ...], read_old: Reader, read_new: Reader
) -> list[OracleChange]:
    out: list[OracleChange] = []
    sampled = {p.name: p.predicate for m in manifests if m is not None for p in m.properties}
    for path in files:
        old_source, new_source = read_old(path), read_new(path)
        if old_source == new_source:
            continue
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        here = {
            name: ref.partition(":")[2]
            for name, ref in sampled.items()
            if module == ref.partition(":")[0] or module.endswith("." + ref.partition(":")[0])
        }
        (old_funcs, old_rest), (new_funcs, new_rest) = (
            _functions(old_source, path, "base", out),
            _functions(new_source, path, "change", out),
        )
        for name, func in sorted(here.items()):
            if old_funcs.get(func) != new_funcs.get(func):
                out.append(
                    OracleChange(
                        "predicate-changed",
                        name,
                        "defined" if func in old_funcs else "absent",
                        "changed" if func in new_funcs else "absent",
                        f"the code of {sampled[name]} differs from the base",
                    )
                )
        # Helpers and module-level code can change what any predicate computes.
        own = set(here.values())
        if (old_rest, {k: v for k, v in old_funcs.items() if k not in own}) != (
            new_rest,
            {k: v for k, v in new_funcs.items() if k not in own},
        ):
            out.append(
                OracleChange(
                    "predicate-module-changed",
                    path,
                    sha256_bytes(old_source or b"")[:12],
                    sha256_bytes(new_source or b"")[:12],
                    "code beside the sampled predicates (helpers, imports, constants) changed: "
                    "any predicate of this module may behave differently",
                )
            )
    return out


def _folder_changes(changed: Sequence[ChangedPath], folder: str, kind: str, note: str) -> list[OracleChange]:
    prefix = folder.rstrip("/") + "/"
    verbs = {"added": "added", "untracked": "added", "deleted": "removed"}
    return [
        OracleChange(f"{kind}-{verbs.get(c.status, 'changed')}", c.path, "", c.status, note)
        for c in changed
        if c.path.startswith(prefix)
    ]


def oracle_changes(
    paths: OraclePaths, changed: Sequence[ChangedPath], read_old: Reader, read_new: Reader
) -> tuple[OracleChange, ...]:
    """Every change to the oracle between the base (`read_old`) and the working tree (`read_new`)."""
    out: list[OracleChange] = []
    pins = [
        _parsed(parse_pin, read(paths.pin), paths.pin, side, out)
        for read, side in ((read_old, "base"), (read_new, "change"))
    ]
    manifests = [
        _parsed(parse_manifest, read(paths.manifest), paths.manifest, side, out)
        for read, side in ((read_old, "base"), (read_new, "change"))
    ]
    catalogs = [
        _parsed(parse_catalog, read(paths.catalog), paths.catalog, side, out)
        for read, side in ((read_old, "base"), (read_new, "change"))
    ]
    for kind, path in (("pin", paths.pin), ("manifest", paths.manifest), ("catalog", paths.catalog)):
        _presence(kind, path, read_old(path), read_new(path), out)
    out += _pin_changes(pins[0], pins[1], read_old, read_new, paths.pin)  # type: ignore[arg-type]
    out += _manifest_changes(manifests[0], manifests[1], paths.manifest)  # type: ignore[arg-type]
    out += _catalog_changes(catalogs[0], catalogs[1], paths.catalog)  # type: ignore[arg-type]
    out += _predicate_changes(manifests, paths.predicates, read_old, read_new)  # type: ignore[arg-type]
    return (*out, *evidence_changes(changed, paths.freezes_dir, paths.observations_dir))


def evidence_changes(
    changed: Sequence[ChangedPath], freezes_dir: str, observations_dir: str
) -> tuple[OracleChange, ...]:
    """What the change does to the repository's freezes and observation archive."""
    return (
        *_folder_changes(
            changed,
            freezes_dir,
            "freeze",
            "a freeze turns a flake into hold: check it cites a real flake and expires soon",
        ),
        *_folder_changes(
            changed,
            observations_dir,
            "observation",
            "archived evidence: only the replay runner writes it; a hand edit is tampering",
        ),
    )
