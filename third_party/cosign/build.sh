#!/usr/bin/env bash
# Build (or reuse) `cosign`, sigstore's signing tool (github.com/sigstore/cosign/v3/cmd/cosign,
# pinned by third_party/cosign/go.mod + go.sum): it signs what `make push` pushed and verifies the
# signature against a registry on loopback (tests/e2e/images/sign.rs, make sign).
#
# Usage:
#   dir=$(third_party/cosign/build.sh | tail -n 1)    # build if needed, print bin dir
#   third_party/cosign/build.sh --no-build            # exit 3 if not cached yet
#   RESIZE_GUARD_COSIGN_BIN="$(third_party/cosign/build.sh | tail -n 1)/cosign" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `cosign`;
# everything else goes to stderr (same contract as third_party/control-plane/build.sh).
#
# Caching: $HOME/.cache/resize-guard/cosign-<key>/cosign, where <key> is derived from
# third_party/cosign/go.mod, go.sum, `go version` and the build flags. A hit costs ~0.1 s; a miss
# is a cold build (see third_party/cosign/README.md for the measured time).
# $HOME/.cache/resize-guard/cosign-current is a symlink to the last used stamp dir; cosign-*
# stamp dirs with other keys are pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days.
#
# Environment:
#   RESIZE_GUARD_COSIGN_DIR    use this directory (must hold an executable `cosign`) and
#                              never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_COSIGN_MIN_FREE_GB  free space demanded before a cold build (default 3).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-cosign cosign

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_COSIGN_DIR "an executable cosign"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/cosign"
stamp_cache_go "$MOD_DIR" third_party/cosign/README.md go.mod go.sum

MOD=github.com/sigstore/cosign/v3
VERSION="$(awk -v m="$MOD" '$1 == "require" { $1 = ""; $0 = $0 } ($1 == m && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot find a $MOD v3.X.Y requirement in $MOD_DIR/go.mod"

# As cosign's own Makefile does (a fixed commit and date keep the build and the key reproducible).
RELEASE_UTILS=sigs.k8s.io/release-utils/version
LDFLAGS="-s -w -buildid= -X $RELEASE_UTILS.gitVersion=$VERSION"
LDFLAGS+=" -X $RELEASE_UTILS.gitCommit=0000000000000000000000000000000000000000"
LDFLAGS+=" -X $RELEASE_UTILS.gitTreeState=clean"
LDFLAGS+=" -X $RELEASE_UTILS.buildDate=1970-01-01T00:00:00Z"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGE=$MOD/cmd/cosign

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE")"

stamp_cache_init cosign "$KEY"
stamp_cache_begin "cosign $VERSION" "${RESIZE_GUARD_COSIGN_MIN_FREE_GB:-3}" "cosign" RESIZE_GUARD_COSIGN_DIR

log "building cosign $VERSION (first run only; several minutes with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/cosign" "$PACKAGE"
have "$TMP_OUT" || die "go build succeeded but $TMP_OUT/cosign is missing"

# Sanity: the version ldflags took effect and the binary runs.
stamp_cache_expect "$VERSION" "$TMP_OUT/cosign" version
stamp_cache_build_info "cosign=$VERSION"

stamp_cache_publish "$TMP_OUT" "$start"
