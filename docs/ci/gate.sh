#!/usr/bin/env bash
# epoch_gate in trusted mode, for any CI that runs a shell: judge a candidate commit from a detached
# worktree of the trusted ref, so that Pants, the plugin, the launcher, pants.toml and every BUILD file
# are the reviewed ones and the candidate enters only as git objects. Prints one
# `path: severity [code] message` line per reason and the Markdown report, copies dist/gate/ back (and
# into $GATE_ARTIFACTS when set), and exits with the gate's own code: 0 eligible, 1 closed, 2 hold.
#
# Trusted mode requires the jail: install bubblewrap where this runs (`apt-get install bubblewrap`; on
# Ubuntu 23.10 and later also `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`), or the verdict
# is `closed` (`isolation-unavailable`) with the fix in its message.
#
# Held-out draws: export EPOCH_GATE_HELD_OUT_KEY (a CI secret, `openssl rand -hex 32`) and each suite is
# also judged over a world drawn from a seed only the key derives; unset, the pinned world only.
#
# Run the trusted ref's copy of this script, never the candidate's:
#   git fetch origin main && git show refs/remotes/origin/main:docs/ci/gate.sh | bash -s -- "$CANDIDATE"
# tests/adoption/second_repo_test.py runs it.
set -uo pipefail

trusted="${GATE_TRUSTED_REF:-refs/remotes/origin/main}"
case "$trusted" in
  refs/*) ;;
  *) # a short name resolves through refs/tags/ first: a pushed tag could stand in for the branch
    echo "epoch_gate: the trusted ref $trusted is not a full ref name (refs/...): closed" >&2
    exit 1 ;;
esac
git fetch --quiet origin main 2>/dev/null || true # a clone that already has the trusted ref is fine too
if ! git show-ref --verify --quiet "$trusted"; then
  echo "epoch_gate: the trusted ref $trusted does not exist here (fetch it): closed" >&2
  exit 1
fi
candidate="$(git rev-parse --verify --quiet "${1:-HEAD}^{commit}")" || {
  echo "epoch_gate: the candidate ${1:-HEAD} is not a commit: closed" >&2
  exit 1
}
scratch="$(mktemp -d)"
judge="$scratch/judge"
trap 'git worktree remove --force "$judge" 2>/dev/null; rm -rf "$scratch"' EXIT
if ! git worktree add --quiet --detach "$judge" "$trusted"; then
  echo "epoch_gate: cannot check out the trusted ref $trusted: closed" >&2
  exit 1
fi
# The trusted checkout's own launcher when it ships one (this repository's ./pants), else Pants on PATH.
pants=(pants)
[ -x "$judge/pants" ] && [ -f "$judge/pants" ] && pants=(./pants)
# The report is copied into ./dist/gate: in a checkout of the candidate, a committed `dist` symlink would
# send the delete and the copy elsewhere.
if [ -L dist ] || [ -L dist/gate ] || { [ -e dist ] && [ ! -d dist ]; }; then
  echo "epoch_gate: dist here is not a plain folder: closed" >&2
  exit 1
fi
rm -rf dist/gate # a report left from an earlier run must never stand in for this one
# --no-pantsrc: nothing outside the trusted checkout (a ~/.pants.rc, say) configures the judge.
(cd "$judge" && PANTS_GATE_ANNOTATIONS=plain "${pants[@]}" --no-pantsd --no-pantsrc gate --gate-candidate="$candidate" ::)
verdict=$?
if [ -f "$judge/dist/gate/report.md" ]; then
  mkdir -p dist && cp -R "$judge/dist/gate" dist/gate
  cat dist/gate/report.md
else
  echo "epoch_gate: no report was written (exit $verdict)" >&2
  [ "$verdict" = 0 ] && verdict=1 # no report, no eligible verdict
fi
if [ -n "${GATE_ARTIFACTS:-}" ] && [ -d dist/gate ]; then
  mkdir -p "$GATE_ARTIFACTS" && cp -R dist/gate/. "$GATE_ARTIFACTS/"
fi
exit "$verdict"
