#!/usr/bin/env bash
# make deps-check: the policy crate (shared/) must stay pure: no kube client, no async runtime, no
# HTTP stack among its normal dependencies, direct or not; and its mirrors of upstream's code
# (shared/src/upstream/) import nothing of the rest but the data they are handed.
#
# Usage (from the Makefile): CARGO=cargo scripts/deps-check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CARGO="${CARGO:-cargo}"
export -n CARGO
# shellcheck disable=SC2086 # CARGO may be a command with arguments, as in the Makefile.
tree=$($CARGO tree -p resize-guard-policy -e normal --prefix none --locked)
bad=$(printf '%s\n' "$tree" | grep -E '^(kube|kube-[a-z]+|tokio|hyper|hyper-[a-z]+|reqwest|axum|tower) ' || true)
if [[ -n "$bad" ]]; then
  echo "resize-guard-policy must not depend on:"
  echo "$bad"
  exit 1
fi
echo "deps-check: resize-guard-policy has no kube/tokio/hyper dependency"
# The wall's test, built with the features of the workspace's test build (`--workspace`, the
# target filtered to `policy`), so make unit compiles nothing of it a second time.
# shellcheck disable=SC2086
$CARGO test --workspace --locked --test policy -q -- upstream_wall::
