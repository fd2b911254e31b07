#!/usr/bin/env bash
# Build (or reuse) upstream metrics-server (sigs.k8s.io/metrics-server v0.8.0, unpatched,
# pinned by third_party/metrics-server/go.mod + go.sum) that the harness registers as the APIService
# v1beta1.metrics.k8s.io on its real kube-apiserver (tests/harness/src/metrics_server.rs),
# scraping the hollow nodes' kubelets.
#
# Usage:
#   dir=$(third_party/metrics-server/build.sh | tail -n 1)   # build if needed, print the dir
#   third_party/metrics-server/build.sh --no-build           # exit 3 if not cached yet
#   RESIZE_GUARD_METRICS_SERVER_BIN="$(third_party/metrics-server/build.sh | tail -n 1)/metrics-server" \
#     cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `metrics-server` and the
# module's own manifests the harness applies, `rbac.yaml` and `apiservice.yaml` (from
# manifests/base/); everything else goes to stderr (same contract as third_party/vpa/build.sh).
#
# Caching: $HOME/.cache/resize-guard/metrics-server-<key>/metrics-server, where <key> is
# derived from third_party/metrics-server/go.mod, go.sum, `go version` and the build flags. A hit
# costs ~0.08 s; a cold miss took 9 min 7 s on 2 cores at load 13 (Go caches warm from the
# control plane, whose k8s.io libraries differ; third_party/metrics-server/README.md).
# $HOME/.cache/resize-guard/metrics-server-current is a symlink to the last used stamp dir;
# metrics-server-* stamp dirs with other keys are pruned once unused for
# RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
#
# Environment:
#   RESIZE_GUARD_METRICS_SERVER_BIN   use this executable and never build; its directory (which
#                                     must hold rbac.yaml and apiservice.yaml too) is printed.
#   RESIZE_GUARD_CACHE_DIR            cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_METRICS_SERVER_MIN_FREE_GB  free space demanded before a cold build (default 2).
#   RESIZE_GUARD_CACHE_KEEP_DAYS      keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced: a dependency drifting to a
# newer `go` line must fail loudly rather than download a toolchain.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

MANIFESTS=(rbac.yaml apiservice.yaml)
stamp_cache_tool build-metrics-server metrics-server "${MANIFESTS[@]}"

stamp_cache_args "$@"
# The override names the binary (as the Makefile exports it), not a directory.
if [[ -n "${RESIZE_GUARD_METRICS_SERVER_BIN:-}" ]]; then
  bin="$RESIZE_GUARD_METRICS_SERVER_BIN"
  [[ -f "$bin" && -x "$bin" && "$(basename -- "$bin")" == metrics-server ]] \
    || die "RESIZE_GUARD_METRICS_SERVER_BIN=$bin must be an executable named metrics-server"
  d="$(cd "$(dirname -- "$bin")" && pwd -P)"
  have "$d" || die "RESIZE_GUARD_METRICS_SERVER_BIN=$bin: $d must hold ${MANIFESTS[*]} too"
  log "using RESIZE_GUARD_METRICS_SERVER_BIN=$bin (no build)"
  printf '%s\n' "$d"
  exit 0
fi

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/metrics-server"
stamp_cache_go "$MOD_DIR" third_party/metrics-server/README.md go.mod go.sum

MODULE=sigs.k8s.io/metrics-server
VERSION="$(awk -v m="$MODULE" '$1 == "require" { $1 = ""; $0 = $0 } ($1 == m && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$VERSION" =~ ^v0\.[0-9]+\.[0-9]+$ ]] || die "cannot find a $MODULE v0.X.Y requirement in $MOD_DIR/go.mod"

# As metrics-server's own Makefile (`build` target) does: -mod=readonly -trimpath, the version in
# client-go's version package; a fixed commit and date keep the build and the key reproducible.
VERSION_PKG=k8s.io/client-go/pkg/version
LDFLAGS="-s -w -X $VERSION_PKG.gitVersion=$VERSION"
LDFLAGS+=" -X $VERSION_PKG.gitCommit=0000000000000000000000000000000000000000"
LDFLAGS+=" -X $VERSION_PKG.buildDate=1970-01-01T00:00:00Z"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGE=$MODULE/cmd/metrics-server

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE" "${MANIFESTS[*]}")"

stamp_cache_init metrics-server "$KEY"
stamp_cache_begin "metrics-server $VERSION" "${RESIZE_GUARD_METRICS_SERVER_MIN_FREE_GB:-2}" "metrics-server" RESIZE_GUARD_METRICS_SERVER_BIN

log "building metrics-server $VERSION (first run only; a few minutes with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/metrics-server" "$PACKAGE"

# The RBAC and APIService the release ships, from the module itself.
stamp_cache_from_module "$MOD_DIR" "$MODULE" manifests/base "${MANIFESTS[@]}"
have "$TMP_OUT" || die "build finished but $TMP_OUT is incomplete"

# Sanity: the binary runs, knows the flags the harness passes, and carries the version.
for flag in --kubelet-insecure-tls --kubelet-use-node-status-port --metric-resolution --secure-port; do
  stamp_cache_expect "$flag" "$TMP_OUT/metrics-server" --help
done
stamp_cache_expect "$VERSION" "$TMP_OUT/metrics-server" --version
stamp_cache_build_info "metrics-server=$MODULE@$VERSION"

stamp_cache_publish "$TMP_OUT" "$start"
