#!/usr/bin/env bash
# epoch_gate for any CI that runs a shell: judge the change against origin/main, print one
# `path: severity [code] message` line per reason and the Markdown report, and keep dist/gate/ in
# $GATE_ARTIFACTS when it is set. Exits with the gate's own code: 0 eligible, 1 closed, 2 hold.
# tests/adoption/ci_recipes_test.py runs this script.
set -uo pipefail

base="${GATE_BASE:-origin/main}"
git fetch --quiet origin main 2>/dev/null || true # a clone that already has origin/main is fine too
rm -rf dist/gate # a report left from an earlier run must never stand in for this one
# The launcher reads these before Pants (and so the gate) starts: a change must not configure it.
for file in .env .pants.bootstrap; do
  if [ -f "$file" ]; then
    echo "epoch_gate: $file in the change would configure the launcher before the gate runs: closed" >&2
    exit 1
  fi
done
# --no-pantsrc: a .pants.rc in the change must not configure the gate that judges it.
PANTS_GATE_ANNOTATIONS=plain pants --no-pantsd --no-pantsrc gate --base="$base" ::
verdict=$?
if [ -f dist/gate/report.md ]; then
  cat dist/gate/report.md
else
  echo "epoch_gate: no report was written (exit $verdict)" >&2
  [ "$verdict" = 0 ] && verdict=1 # no report, no eligible verdict
fi
if [ -n "${GATE_ARTIFACTS:-}" ] && [ -d dist/gate ]; then
  mkdir -p "$GATE_ARTIFACTS" && cp -R dist/gate/. "$GATE_ARTIFACTS/"
fi
exit "$verdict"
