#!/usr/bin/env bash
# Build (or reuse) `registry`, the CNCF distribution registry (github.com/distribution/
# distribution/v3, pinned by third_party/registry/go.mod + go.sum; its command as
# third_party/registry/cmd/registry/main.go, with the filesystem and inmemory storage drivers only):
# the real OCI registry that `make push` is tested against on loopback (tests/e2e/images/push.rs).
#
# Usage:
#   dir=$(third_party/registry/build.sh | tail -n 1)    # build if needed, print bin dir
#   third_party/registry/build.sh --no-build            # exit 3 if not cached yet
#   RESIZE_GUARD_REGISTRY_BIN="$(third_party/registry/build.sh | tail -n 1)/registry" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `registry`;
# everything else goes to stderr (same contract as third_party/control-plane/build.sh).
#
# Caching: $HOME/.cache/resize-guard/registry-<key>/registry, where <key> is derived from
# third_party/registry/go.mod, go.sum, cmd/registry/main.go, `go version` and the build flags. A
# hit costs ~0.1 s; a miss is a cold build (third_party/registry/README.md).
# $HOME/.cache/resize-guard/registry-current is a symlink to the last used stamp dir; registry-*
# stamp dirs with other keys are pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days.
#
# Environment:
#   RESIZE_GUARD_REGISTRY_DIR  use this directory (must hold an executable `registry`) and
#                              never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_REGISTRY_MIN_FREE_GB  free space demanded before a cold build (default 2).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-registry registry

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_REGISTRY_DIR "an executable registry"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/registry"
stamp_cache_go "$MOD_DIR" third_party/registry/README.md go.mod go.sum cmd/registry/main.go

MOD=github.com/distribution/distribution/v3
VERSION="$(awk -v m="$MOD" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot find a $MOD v3.X.Y requirement in $MOD_DIR/go.mod"

# As distribution's own Makefile does (a fixed revision keeps the build and the key reproducible).
LDFLAGS="-s -w -X $MOD/version.version=$VERSION"
LDFLAGS+=" -X $MOD/version.revision=0000000000000000000000000000000000000000"
LDFLAGS+=" -X $MOD/version.mainpkg=$MOD"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGE=./cmd/registry

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR/cmd/registry/main.go" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE")"

stamp_cache_init registry "$KEY"
stamp_cache_begin "registry $VERSION" "${RESIZE_GUARD_REGISTRY_MIN_FREE_GB:-2}" "registry" RESIZE_GUARD_REGISTRY_DIR

log "building registry $VERSION (first run only; a few minutes with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/registry" "$PACKAGE"
have "$TMP_OUT" || die "go build succeeded but $TMP_OUT/registry is missing"

# Sanity: the version ldflags took effect and the binary runs.
stamp_cache_expect "$VERSION" "$TMP_OUT/registry" --version
stamp_cache_build_info "registry=$VERSION"

stamp_cache_publish "$TMP_OUT" "$start"
