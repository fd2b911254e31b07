#!/usr/bin/env bash
# Build (or reuse) krew v0.4.3's own tools from its Go module (sigs.k8s.io/krew, pinned by
# third_party/krew/go.mod + go.sum, whose `tool` directives name them):
#   validate-krew-manifest   cmd/validate-krew-manifest: the check krew-index runs on every
#                            plugin manifest (schema, platforms, overlaps, and an install of each
#                            platform through `kubectl krew install --manifest`)
#   kubectl-krew             cmd/krew: the plugin manager that install runs
# for `make krew` and tests/e2e/images/krew.rs, which check target/image/resize-guard.yaml.
#
# Usage:
#   dir=$(third_party/krew/build.sh | tail -n 1)    # build if needed, print bin dir
#   third_party/krew/build.sh --no-build            # exit 3 if not cached yet
#
# The LAST line of stdout is the absolute path of the directory holding both binaries;
# everything else goes to stderr (same contract as third_party/registry/build.sh).
#
# Caching: $HOME/.cache/resize-guard/krew-<key>/, where <key> is derived from
# third_party/krew/go.mod, go.sum, `go version` and the build flags. A hit costs ~0.1 s; a miss,
# measured on 2 busy cores with a warm module cache: ~30 s for validate-krew-manifest, ~20 s more
# for krew (6 s for both with a warm GOCACHE).
# $HOME/.cache/resize-guard/krew-current is a symlink to the last used stamp dir; krew-* stamp
# dirs with other keys are pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days.
#
# Environment:
#   RESIZE_GUARD_KREW_DIR      use this directory (must hold both binaries) and never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_KREW_MIN_FREE_GB  free space demanded before a cold build (default 1).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Bumping: in third_party/krew, `GOTOOLCHAIN=local go get -tool sigs.k8s.io/krew/cmd/krew@vX.Y.Z
# sigs.k8s.io/krew/cmd/validate-krew-manifest@vX.Y.Z && go mod tidy` (check the Go module proxy
# serves that version first: `go list -m -versions sigs.k8s.io/krew`).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-krew validate-krew-manifest kubectl-krew

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_KREW_DIR "executable validate-krew-manifest and kubectl-krew"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/krew"
stamp_cache_go "$MOD_DIR" third_party/krew/build.sh go.mod go.sum

MOD=sigs.k8s.io/krew
VERSION="$(awk -v m="$MOD" '($1 == m && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$VERSION" =~ ^v0\.[0-9]+\.[0-9]+$ ]] || die "cannot find a $MOD v0.X.Y requirement in $MOD_DIR/go.mod"

# No version stamp (krew's hack/make-binaries.sh sets internal/version.gitTag): an unstamped krew
# is a "development build" and never runs its upgrade check against the GitHub API
# (cmd/krew/cmd/root.go preRun, isDevelopmentBuild), which validate-krew-manifest cannot turn
# off (it runs `kubectl krew install` with a bare environment) and which has no network here.
LDFLAGS="-s -w"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS")"

stamp_cache_init krew "$KEY"
stamp_cache_begin "krew $VERSION" "${RESIZE_GUARD_KREW_MIN_FREE_GB:-1}" "validate-krew-manifest and kubectl-krew" RESIZE_GUARD_KREW_DIR

log "building krew $VERSION's validate-krew-manifest and krew (first run only; ~1 min) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/validate-krew-manifest" "$MOD/cmd/validate-krew-manifest"
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/kubectl-krew" "$MOD/cmd/krew"
have "$TMP_OUT" || die "go build succeeded but a binary is missing in $TMP_OUT"

# Sanity: both run.
"$TMP_OUT/kubectl-krew" help >/dev/null 2>&1 || die "kubectl-krew help failed"
stamp_cache_expect "-manifest must be specified" "$TMP_OUT/validate-krew-manifest"
stamp_cache_build_info "krew=$VERSION"

stamp_cache_publish "$TMP_OUT" "$start"
