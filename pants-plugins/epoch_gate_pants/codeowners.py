"""`pants gate-codeowners`: CODEOWNERS lines for the protected set the gate derives from the build graph."""

from __future__ import annotations

from pathlib import Path

from pants.base.build_root import BuildRoot
from pants.engine.console import Console
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.option.option_types import StrListOption, StrOption
from pants.util.strutil import help_text

from epoch_gate import codeowners
from epoch_gate.reasons import EvidenceError
from epoch_gate_pants.protected import ProtectedPaths


class CodeownersSubsystem(GoalSubsystem):
    name = "gate-codeowners"
    help = help_text(
        """
        Print CODEOWNERS lines that give the gate's protected set (the oracle's files from the build
        graph, the BUILD files declaring them, the gate's code, observations, freezes, pants.toml and
        `[gate].protected`) to its reviewers, so branch protection asks them exactly where `pants gate`
        refuses a change. Append the block to `.github/CODEOWNERS`; with `--check`, verify that file
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


@goal_rule
async def gate_codeowners(console: Console, options: CodeownersSubsystem) -> GateCodeowners:
    protected = await Get(ProtectedPaths)
    try:
        lines = codeowners.block(protected.as_set(), options.owners)
        if options.check:
            codeowners.check(_read(options.check), lines, options.check)
            console.print_stderr(f"{options.check} covers the protected set ({len(lines) - 2} patterns)")
            return GateCodeowners(exit_code=0)
    except EvidenceError as error:
        r = error.reason
        console.print_stderr(f"refused [{r.code.value}] {r.path}: {r.message}\n  expected {r.expected}; found {r.found}")
        return GateCodeowners(exit_code=1)
    for line in lines:
        console.print_stdout(line)
    return GateCodeowners(exit_code=0)


def rules() -> list:
    return [*collect_rules()]
