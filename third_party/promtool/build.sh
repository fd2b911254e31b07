#!/usr/bin/env bash
# Build (or reuse) `promtool`, Prometheus's own checker (github.com/prometheus/prometheus/
# cmd/promtool, pinned by third_party/promtool/go.mod + go.sum) and `scrapeparse`
# (third_party/promtool/scrapeparse/: Prometheus's own scrape parser, model/textparse, from the
# same module): they parse /metrics of the running programs as a scrape would and evaluate the
# chart's PrometheusRule against series scraped from the harness (tests/e2e/install/monitoring.rs).
#
# Usage:
#   dir=$(third_party/promtool/build.sh | tail -n 1)    # build if needed, print bin dir
#   third_party/promtool/build.sh --no-build            # exit 3 if not cached yet
#   RESIZE_GUARD_PROMTOOL_BIN="$(third_party/promtool/build.sh | tail -n 1)/promtool" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `promtool`;
# everything else goes to stderr (same contract as third_party/control-plane/build.sh).
#
# Caching: $HOME/.cache/resize-guard/promtool-<key>/promtool, where <key> is derived from
# third_party/promtool/go.mod, go.sum, `go version` and the build flags. A hit costs ~0.1 s.
# $HOME/.cache/resize-guard/promtool-current is a symlink to the last used stamp dir; promtool-*
# stamp dirs with other keys are pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days.
#
# Environment:
#   RESIZE_GUARD_PROMTOOL_DIR  use this directory (must hold an executable `promtool`) and
#                              never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_PROMTOOL_MIN_FREE_GB  free space demanded before a cold build (default 2).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-promtool promtool scrapeparse

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_PROMTOOL_DIR "an executable promtool"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/promtool"
stamp_cache_go "$MOD_DIR" third_party/promtool/build.sh go.mod go.sum scrapeparse/main.go

MOD=github.com/prometheus/prometheus
# The Go module's v0.3XX.Y is Prometheus v3.XX.Y (Prometheus's own tagging of its library).
MODVER="$(awk -v m="$MOD" '$1 == "require" { $1 = ""; $0 = $0 } ($1 == m && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$MODVER" =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]] || die "cannot find a $MOD v0.3XX.Y requirement in $MOD_DIR/go.mod"
VERSION="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"

# As Prometheus's .promu.yml does (a fixed revision keeps the build and the key reproducible).
COMMON=github.com/prometheus/common/version
LDFLAGS="-s -w -X $COMMON.Version=$VERSION"
LDFLAGS+=" -X $COMMON.Revision=0000000000000000000000000000000000000000"
LDFLAGS+=" -X $COMMON.Branch=resize-guard"
# remove_all_sd: Prometheus's own build tag (plugins/plugin_*.go) that leaves out every service
# discovery but file and http; promtool checks and tests rule files here, which use none of them,
# and the build needs a quarter fewer packages (no cloud SDKs, no client-go API types).
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly -tags=remove_all_sd)
PACKAGE=$MOD/cmd/promtool

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR/scrapeparse/main.go" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE")"

stamp_cache_init promtool "$KEY"
stamp_cache_begin "promtool $VERSION" "${RESIZE_GUARD_PROMTOOL_MIN_FREE_GB:-2}" "promtool" RESIZE_GUARD_PROMTOOL_DIR

log "building promtool $VERSION (first run only; a few minutes with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/promtool" "$PACKAGE"
LDFLAGS="-s -w" stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/scrapeparse" ./scrapeparse
have "$TMP_OUT" || die "go build succeeded but promtool or scrapeparse is missing in $TMP_OUT"

# Sanity: the version ldflags took effect and the binary runs.
stamp_cache_expect "$VERSION" "$TMP_OUT/promtool" --version
stamp_cache_build_info "promtool=$VERSION ($MOD $MODVER)"

stamp_cache_publish "$TMP_OUT" "$start"
