"""Trusted mode's overhead over local mode, warm: the same candidate judged both ways by the real ./pants.

    python3 bench/trusted_mode.py --packages 50 --runs 7 [--write docs/benchmarks.md]

A synthetic monorepo (bench/monorepo.py's generator) gets a candidate commit that changes one product
module. Local mode judges the candidate's own checkout (`gate ::`); trusted mode judges the same commit
from a detached worktree of origin/main (`gate --gate-candidate=SHA ::`), reading it from git objects.
Both run with pantsd on and every replay cached; runs are interleaved and medians compared in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from monorepo import Bench, git, generate, interleaved, summary  # noqa: E402

MARKER = "<!-- bench:trusted-mode -->"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=50)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", type=Path, help="replace the trusted-mode table in this Markdown file")
    args = parser.parse_args()

    where = Path(tempfile.mkdtemp(prefix="bench-trusted-"))
    root = where / "repo"
    generate(root, args.packages)
    (root / "src/synth/pkg00001/core.py").write_text(
        (root / "src/synth/pkg00001/core.py").read_text() + "\n# a change\n"
    )
    git(root, "commit", "-qam", "the candidate: one product module")
    candidate = git(root, "rev-parse", "HEAD")
    judge_root = where / "judge"
    git(root, "worktree", "add", "-q", "--detach", str(judge_root), "refs/remotes/origin/main")
    local, judge = Bench(root), Bench(judge_root)
    try:
        commands = {
            "local": lambda: local.pants("gate", "::"),
            "trusted": lambda: judge.pants("gate", f"--gate-candidate={candidate}", "::"),
        }
        for command in commands.values():  # warm: pantsd up, every process cached
            command()
            command()
        verdicts = (local.gate_verdict(), judge.gate_verdict())
        samples = interleaved(args.runs, commands)
    finally:
        local.stop_pantsd()
        judge.stop_pantsd()
    ratio = statistics.median(samples["trusted"]) / statistics.median(samples["local"])
    table = "\n".join(
        [
            MARKER,
            f"| warm, pantsd on, {args.runs} interleaved runs, {args.packages} synthetic packages | median (min–max) |",
            "|---|---|",
            f"| local mode: `gate ::` on the candidate's checkout (verdict {verdicts[0]}) | {summary(samples['local'])} |",
            f"| trusted mode: `gate --gate-candidate=SHA ::` from origin/main (verdict {verdicts[1]}) "
            f"| {summary(samples['trusted'])} |",
            f"| trusted / local | **{ratio:.2f}×** |",
            MARKER,
        ]
    )
    print(table)
    if args.write:
        text = args.write.read_text()
        start, end = text.find(MARKER), text.rfind(MARKER)
        args.write.write_text(
            text[:start] + table + text[end + len(MARKER) :]
            if start != end
            else text.rstrip("\n") + "\n\n" + table + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
