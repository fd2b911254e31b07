#!/usr/bin/env bash
# Runs the end-to-end suites of tests/e2e, one process per suite (a module: `admission::memory`),
# because a suite owns its control plane and whatever it installs there
# (`resize_guard_harness::env::shared` refuses a second suite in one process).
#
#   tests/e2e/run.sh [FILTER...] [-- ARGS...]
#
# runs every suite whose module path contains one of the FILTERs (every suite without one), each
# with ARGS passed to the test binary (e.g. `-- --nocapture`). Every suite runs even when one
# fails; the exit status is 1 when any failed, and the failing suites are named at the end, with
# each suite's wall time.
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

selected=()
for suite in $suites; do
  if [ ${#filters[@]} -eq 0 ]; then selected+=("$suite"); continue; fi
  for f in "${filters[@]}"; do
    case "$suite" in *"$f"*) selected+=("$suite"); break;; esac
  done
done
[ ${#selected[@]} -gt 0 ] || { echo "e2e: no suite matches: ${filters[*]}" >&2; exit 1; }

failed=()
total=$(date +%s)
for suite in "${selected[@]}"; do
  # The suite's own tests, not those of a module inside it (a suite of their own).
  mapfile -t tests < <(printf '%s\n' "$names" | grep -E "^${suite}::[^:]+$")
  start=$(date +%s)
  echo "e2e: ${suite} (${#tests[@]} tests) …"
  if $CARGO test --workspace --locked --test e2e -- --exact "${tests[@]}" ${extra[@]+"${extra[@]}"}; then
    echo "e2e: ${suite}: passed in $(( $(date +%s) - start ))s"
  else
    echo "e2e: ${suite}: FAILED after $(( $(date +%s) - start ))s"
    failed+=("$suite")
  fi
done
echo "e2e: ${#selected[@]} suites in $(( $(date +%s) - total ))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "e2e: failed suites: ${failed[*]}"
  exit 1
fi
