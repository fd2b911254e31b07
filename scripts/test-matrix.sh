#!/usr/bin/env bash
# make test-matrix: the version-sensitive suite (tests/e2e/versions/) and the fidelity test on every
# minor of MINORS in turn, each on its own control plane (third_party/control-plane/build.sh builds
# a minor on first use, ~10 min); a failing minor does not stop the others. Logs in MATRIX_DIR
# (v1.N.log, v1.N.fidelity.log); then the table, printed and written into the book's "Supported
# versions" page, docs/src/versions.md (resize-guard-matrix, tests/lab/). Exits non-zero if any minor failed.
#
# Usage (from the Makefile): MINORS="1.33 1.34 1.35 1.36 1.37" MATRIX_DIR=$PWD/target/test-matrix \
#   CARGO=cargo scripts/test-matrix.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Not exported: the programs run here see the environment make gives its recipes.
CARGO="${CARGO:-cargo}"
export -n CARGO
MINORS="${MINORS:?MINORS names the minors, e.g. 1.33 1.34 1.35 1.36 1.37}"
MATRIX_DIR="${MATRIX_DIR:?MATRIX_DIR names the directory for the logs and results}"
# Cargo's target directory as cargo resolves it (CARGO_TARGET_DIR, .cargo/config.toml or ./target).
# shellcheck disable=SC2086 # CARGO may be a command with arguments, as in the Makefile.
TARGET_DIR="$($CARGO metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"

# e2e MINOR LOG ARGS…: the e2e test binary on MINOR's control plane, everything (the control
# plane's build included) into LOG.
e2e() {
  local minor=$1 log=$2 dir
  shift 2
  {
    dir="$(RESIZE_GUARD_K8S_VERSION=$minor third_party/control-plane/build.sh | tail -n 1)"
    # shellcheck disable=SC2086
    RESIZE_GUARD_K8S_VERSION=$minor RESIZE_GUARD_K8S_BIN_DIR="$dir" RESIZE_GUARD_MATRIX_DIR=$MATRIX_DIR \
      $CARGO test --workspace --locked --test e2e -- "$@"
  } >"$log" 2>&1
}

rm -rf "$MATRIX_DIR" && mkdir -p "$MATRIX_DIR"
# shellcheck disable=SC2086
$CARGO build --locked -p resize-guard-lab --bin resize-guard-matrix
# shellcheck disable=SC2086
$CARGO test --workspace --locked --no-run
status=0
for m in $MINORS; do
  start=$(date +%s)
  echo "test-matrix: Kubernetes $m …"
  if e2e "$m" "$MATRIX_DIR/v$m.log" versions:: --nocapture; then
    echo "test-matrix: Kubernetes $m: version-sensitive suite passed in $(( $(date +%s) - start ))s"
  else
    status=1
    echo "test-matrix: Kubernetes $m: version-sensitive suite FAILED after $(( $(date +%s) - start ))s:"
    tail -n 40 "$MATRIX_DIR/v$m.log"
  fi
  start=$(date +%s)
  if e2e "$m" "$MATRIX_DIR/v$m.fidelity.log" --nocapture \
    admission::fidelity::resize_guard_never_contradicts_the_api_server_on_generated_resizes; then
    echo "test-matrix: Kubernetes $m: fidelity passed in $(( $(date +%s) - start ))s"
  else
    status=1
    echo "test-matrix: Kubernetes $m: fidelity FAILED after $(( $(date +%s) - start ))s:"
    tail -n 40 "$MATRIX_DIR/v$m.fidelity.log"
  fi
done
"$TARGET_DIR/debug/resize-guard-matrix" --dir "$MATRIX_DIR" --minors "$MINORS" --readme docs/src/versions.md || status=1
exit $status
