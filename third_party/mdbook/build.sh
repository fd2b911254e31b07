#!/usr/bin/env bash
# Install (or reuse) mdBook, which builds the book under docs/ (`make docs`, `make docs-check`),
# from crates.io with `cargo install --locked` at the version pinned below, with no default
# features: the HTML renderer only (no `serve` or `watch`, no search index). It is a debug build
# (`cargo install --debug`): a cold CI run compiles it once and runs it on ~40 pages, where an
# optimised build would cost minutes more of the 2 cores and save a second.
#
# Usage:
#   dir=$(third_party/mdbook/build.sh | tail -n 1)    # install if needed, print the bin dir
#   third_party/mdbook/build.sh --no-build            # exit 3 if not cached yet
#   "$(third_party/mdbook/build.sh | tail -n 1)/mdbook" build docs
#
# The LAST line of stdout is the absolute path of the directory holding `mdbook`; everything
# else goes to stderr (same contract as third_party/cross/build.sh).
#
# Caching: $HOME/.cache/resize-guard/mdbook-<key>/, where <key> is derived from this file (the
# pin) and `rustc -V` (mdBook is compiled by it). A hit costs ~0.1 s; a miss is one cold
# `cargo install` in its own target directory (a few minutes on 2 cores). mdbook-current points
# at the last used one.
#
# Needs: cargo. Nothing is written outside the cache directory (cargo's download cache aside).
#
# Environment:
#   RESIZE_GUARD_MDBOOK_DIR       use this directory (must hold an executable `mdbook`), never
#                                 install.
#   RESIZE_GUARD_CACHE_DIR        cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_CACHE_KEEP_DAYS  keep other keys' stamp dirs this long (default 2).
#
# Bumping: change the pin below, run this script and `make docs-check`.
set -euo pipefail

MDBOOK_VERSION=0.5.4

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-mdbook mdbook
stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_MDBOOK_DIR "an executable mdbook"

command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH"
RUSTC_VERSION="$(rustc -V)" || die "'rustc -V' failed"

KEY="$(stamp_cache_key "${BASH_SOURCE[0]}" -- "$RUSTC_VERSION" "$(uname -sm)")"
stamp_cache_init mdbook "$KEY"
stamp_cache_hit "mdbook $MDBOOK_VERSION"
if (( no_build )); then
  log "no cached mdbook for key $KEY (run $0 to install it)"
  exit 3
fi
stamp_cache_lock
TMP_OUT="$(mktemp -d "$CACHE_ROOT/.tmp-mdbook-$KEY.XXXXXX")"
trap 'rm -rf -- "$TMP_OUT"' EXIT

log "installing mdbook $MDBOOK_VERSION (crates.io) into $STAMP (first run only; a few minutes) …"
start=$SECONDS
# Its own target dir, so the build of the project is not touched.
CARGO_TARGET_DIR="$TMP_OUT/.build" cargo install --quiet --locked --debug --no-default-features \
  --root "$TMP_OUT/cargo" "mdbook@$MDBOOK_VERSION" >&2 \
  || die "cargo install mdbook failed (see above)"
rm -rf -- "$TMP_OUT/.build"
ln -s cargo/bin/mdbook "$TMP_OUT/mdbook"
have "$TMP_OUT" || die "installed, but $TMP_OUT/mdbook is missing"

# Sanity: it runs and is the pinned version.
stamp_cache_expect "mdbook v$MDBOOK_VERSION" "$TMP_OUT/mdbook" --version
{
  echo "key=$KEY"
  echo "mdbook=$MDBOOK_VERSION (--debug --no-default-features)"
  echo "rustc=$RUSTC_VERSION"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( SECONDS - start ))s"
} >"$TMP_OUT/BUILD-INFO"
stamp_cache_publish "$TMP_OUT" "$start"
