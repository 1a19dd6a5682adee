"""`pants gate-codeowners`: CODEOWNERS lines for the protected set the gate derives from the build graph."""

from __future__ import annotations

from pathlib import Path

from pants.base.build_root import BuildRoot
from pants.engine.console import Console
from pants.engine.goal import Goal, GoalSubsystem
from pants.build_graph.address import BuildFileAddress, BuildFileAddressRequest
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import AllTargets
from pants.option.option_types import StrListOption, StrOption
from pants.util.strutil import help_text

from epoch_gate.change import codeowners
from epoch_gate.reasons import EvidenceError
from epoch_gate_pants.fixture import FixtureFiles, FixtureFilesRequest
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest, Suite, SuiteRequest
from epoch_gate_pants.target_types import SampledPropertiesOracleOwnersField, SampledPropertiesTarget


class CodeownersSubsystem(GoalSubsystem):
    name = "gate-codeowners"
    help = help_text(
        """
        Print CODEOWNERS lines that give the gate's protected set (the oracle's files from the build
        graph, the BUILD files declaring them, the gate's code, observations, freezes, pants.toml and
        `[gate].protected`) to its reviewers, so branch protection asks them exactly where `pants gate`
        refuses a change. A suite's `oracle_owners` are added, in a group of lines of its own, on the
        files of that suite's oracle. Append the block to `.github/CODEOWNERS`; with `--check`, verify that file
        still ends with it (exit 1 when the build graph has moved on).
        """
    )

    owners = StrListOption(
        default=[],
        help="Who reviews the oracle: CODEOWNERS owners, `org/team` or `user` (the `@` is added) or an email.",
    )
    check = StrOption(
        default=None,
        help="A CODEOWNERS file that must end with the block (e.g. `.github/CODEOWNERS`); print nothing else.",
    )


class GateCodeowners(Goal):
    subsystem_cls = CodeownersSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def _read(relative: str) -> str:
    # Read directly: `.github/` is hidden from Pants' file globs by the default `pants_ignore`.
    try:
        return (Path(BuildRoot().path) / relative).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


async def _suite_owners(all_targets: AllTargets) -> list[codeowners.SuiteOwners]:
    """Every suite, its `oracle_owners`, and the files of its oracle as Pants loads them (all of them: a
    file two suites share is no one suite's to approve)."""
    targets = [t for t in all_targets if isinstance(t, SampledPropertiesTarget)]
    if not any(t[SampledPropertiesOracleOwnersField].value for t in targets):
        return []
    suites = await MultiGet(Get(Suite, SuiteRequest(t.address)) for t in targets)
    resolved = [s for s in suites if s.fixture is not None and s.manifest is not None]
    fixtures = await MultiGet(Get(FixtureFiles, FixtureFilesRequest(s.fixture.address)) for s in resolved)
    manifests = await MultiGet(Get(ManifestFiles, ManifestFilesRequest(s.manifest.address)) for s in resolved)
    build_files = await MultiGet(
        Get(BuildFileAddress, BuildFileAddressRequest(t.address, description_of_origin="gate-codeowners"))
        for s in resolved
        for t in (s.target, s.fixture, s.manifest)
    )
    builds = [build_files[3 * i : 3 * i + 3] for i in range(len(resolved))]
    owners = [tuple(s.target[SampledPropertiesOracleOwnersField].value or ()) for s in resolved]
    return [
        codeowners.SuiteOwners(
            str(s.target.address),
            who,
            (
                f.pin_path,
                f.generator_path,
                *f.input_paths,
                m.manifest_path,
                m.catalog_path,
                *m.predicate_paths,
                *(b.rel_path for b in build),
            ),
        )
        for s, who, f, m, build in zip(resolved, owners, fixtures, manifests, builds)
    ]


@goal_rule
async def gate_codeowners(console: Console, options: CodeownersSubsystem, all_targets: AllTargets) -> GateCodeowners:
    protected = await Get(ProtectedPaths)
    suites = await _suite_owners(all_targets)
    try:
        lines = codeowners.block(protected.as_set(), options.owners, suites)
        if options.check:
            codeowners.check(_read(options.check), lines, options.check)
            console.print_stderr(f"{options.check} covers the protected set ({len(lines) - 2} patterns)")
            return GateCodeowners(exit_code=0)
    except EvidenceError as error:
        console.print_stderr("\n".join(error.reason.refusal()))
        return GateCodeowners(exit_code=1)
    for line in lines:
        console.print_stdout(line)
    return GateCodeowners(exit_code=0)


def rules() -> list:
    return [*collect_rules()]
