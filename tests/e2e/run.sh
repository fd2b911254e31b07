#!/usr/bin/env bash
# Runs the end-to-end suites of tests/e2e, one process per suite (a module: `admission::memory`),
# because a suite owns its control plane and whatever it installs there
# (`resize_guard_harness::env::shared` refuses a second suite in one process).
#
#   tests/e2e/run.sh [FILTER...] [-- ARGS...]
#
# runs every suite whose module path contains one of the FILTERs (every suite without one), each
# with ARGS passed to the test binary (e.g. `-- --nocapture`), but none whose path contains one
# of SKIP's words (SKIP="images real_node": the suites that need make image's output). Every
# suite runs even when one fails; the exit status is 1 when any failed, and the failing suites
# are named at the end, with each suite's wall time.
#
# JOBS=N runs up to N suites at once (default 1). Each is its own process with its own control
# plane on free ports and its own work dirs; the real node's suites serialise on the machine-wide
# lock the harness takes. With N > 1 a suite's output goes to target/e2e-logs/<suite>.log and is
# printed whole when the suite ends, and the longest suites start first (their last times are in
# tests/e2e/durations.tsv; a suite missing there counts as the longest), so the slowest suite
# does not start last.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
filters=()
extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
  filters+=("$1"); shift
done

# `--workspace` everywhere: one feature set, so nothing recompiles between the commands, and the
# product crates' own tests make cargo build the programs the suites run. The e2e binary is
# `test = false`, so it is built when named.
$CARGO test --workspace --locked --no-run
$CARGO test --workspace --locked --test e2e --no-run
names=$($CARGO test --workspace --locked --test e2e -- --list 2>/dev/null | sed -n 's/: test$//p')
[ -n "$names" ] || { echo "e2e: the test binary lists no tests" >&2; exit 1; }
suites=$(printf '%s\n' "$names" | sed 's/::[^:]*$//' | sort -u)

read -r -a skips <<<"${SKIP:-}"
selected=()
for suite in $suites; do
  for s in ${skips[@]+"${skips[@]}"}; do
    case "$suite" in *"$s"*) continue 2;; esac
  done
  if [ ${#filters[@]} -eq 0 ]; then selected+=("$suite"); continue; fi
  for f in "${filters[@]}"; do
    case "$suite" in *"$f"*) selected+=("$suite"); break;; esac
  done
done
[ ${#selected[@]} -gt 0 ] || { echo "e2e: no suite matches: ${filters[*]} (SKIP=${SKIP:-})" >&2; exit 1; }

lanes=${JOBS:-1}
[[ "$lanes" =~ ^[1-9][0-9]*$ ]] || { echo "e2e: JOBS=$lanes: expected a whole number from 1" >&2; exit 2; }
if [ "$lanes" -gt 1 ]; then
  # Longest first: a suite's last measured seconds, unknown suites ahead of all.
  mapfile -t selected < <(for suite in "${selected[@]}"; do
    secs=$(awk -v s="$suite" '$2 == s { print $1; exit }' tests/e2e/durations.tsv 2>/dev/null)
    printf '%s %s\n' "${secs:-999999}" "$suite"
  done | sort -k1,1nr -k2 | cut -d' ' -f2)
fi

# run_suite SUITE: one process for SUITE's own tests (not those of a module inside it, a suite of
# their own); prints the verdict line and returns the test binary's status.
run_suite() {
  local suite=$1 start status=0
  local -a tests
  mapfile -t tests < <(printf '%s\n' "$names" | grep -E "^${suite}::[^:]+$")
  start=$(date +%s)
  echo "e2e: ${suite} (${#tests[@]} tests) …"
  $CARGO test --workspace --locked --test e2e -- --exact "${tests[@]}" ${extra[@]+"${extra[@]}"} || status=$?
  if [ "$status" -eq 0 ]; then
    echo "e2e: ${suite}: passed in $(( $(date +%s) - start ))s"
  else
    echo "e2e: ${suite}: FAILED after $(( $(date +%s) - start ))s"
  fi
  return "$status"
}

failed=()
total=$(date +%s)
if [ "$lanes" -eq 1 ]; then
  for suite in "${selected[@]}"; do
    run_suite "$suite" || failed+=("$suite")
  done
else
  logs=target/e2e-logs
  rm -rf "$logs" && mkdir -p "$logs"
  declare -A running=()
  # finish: waits for one running suite, prints its log whole and records a failure.
  finish() {
    local pid status=0
    wait -n -p pid "${!running[@]}" || status=$?
    local suite=${running[$pid]}
    unset "running[$pid]"
    cat "$logs/$suite.log"
    [ "$status" -eq 0 ] || failed+=("$suite")
  }
  echo "e2e: ${#selected[@]} suites, ${lanes} at a time; logs in $logs/"
  for suite in "${selected[@]}"; do
    while [ ${#running[@]} -ge "$lanes" ]; do finish; done
    run_suite "$suite" >"$logs/$suite.log" 2>&1 &
    running[$!]=$suite
    echo "e2e: started ${suite}"
  done
  while [ ${#running[@]} -gt 0 ]; do finish; done
fi
echo "e2e: ${#selected[@]} suites in $(( $(date +%s) - total ))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "e2e: failed suites: ${failed[*]}"
  exit 1
fi
