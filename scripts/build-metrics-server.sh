#!/usr/bin/env bash
# Build (or reuse) upstream metrics-server (sigs.k8s.io/metrics-server v0.8.0, unpatched,
# pinned by tests/metrics-server/go.mod + go.sum) that the harness registers as the APIService
# v1beta1.metrics.k8s.io on its real kube-apiserver (tests/harness/src/metrics_server.rs),
# scraping the hollow nodes' kubelets.
#
# Usage:
#   dir=$(scripts/build-metrics-server.sh | tail -n 1)   # build if needed, print the dir
#   scripts/build-metrics-server.sh --no-build           # exit 3 if not cached yet
#   RESIZE_GUARD_METRICS_SERVER_BIN="$(scripts/build-metrics-server.sh | tail -n 1)/metrics-server" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `metrics-server` and the
# module's own manifests the harness applies, `rbac.yaml` and `apiservice.yaml` (from
# manifests/base/); everything else goes to stderr (same contract as scripts/build-vpa.sh).
#
# Caching: $HOME/.cache/resize-guard/metrics-server-<key>/metrics-server, where <key> is
# derived from tests/metrics-server/go.mod, go.sum, `go version` and the build flags. A hit
# costs ~0.08 s; a cold miss took 9 min 7 s on 2 cores at load 13 (Go caches warm from the
# control plane, whose k8s.io libraries differ; tests/metrics-server/README.md). $HOME/.cache/resize-guard/metrics-server-current
# is a symlink to the last used stamp dir; metrics-server-* stamp dirs with other keys are pruned
# once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
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

# shellcheck source=scripts/lib/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/stamp-cache.sh"

log() { printf '%s\n' "build-metrics-server: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

MANIFESTS=(rbac.yaml apiservice.yaml)
have() { [[ -f "$1/metrics-server" && -x "$1/metrics-server" && -f "$1/rbac.yaml" && -f "$1/apiservice.yaml" ]]; }

stamp_cache_args 30 "$@"
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
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
MOD_DIR="$REPO_ROOT/tests/metrics-server"
stamp_cache_go "$MOD_DIR" tests/metrics-server/README.md go.mod go.sum

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

KEY="$(
  {
    cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"
    printf '%s\n' "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE" "${MANIFESTS[*]}"
  } | sha256sum | cut -c1-16
)"

stamp_cache_init metrics-server "$KEY"
stamp_cache_begin "metrics-server $VERSION" "${RESIZE_GUARD_METRICS_SERVER_MIN_FREE_GB:-2}" "metrics-server" RESIZE_GUARD_METRICS_SERVER_BIN

log "building metrics-server $VERSION (first run only; a few minutes with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
if ! (cd "$MOD_DIR" && go build "${BUILD_FLAGS[@]}" -ldflags "$LDFLAGS" -o "$TMP_OUT/metrics-server" "$PACKAGE") >&2; then
  die "go build failed after $(( SECONDS - start ))s (see output above). Module: $MOD_DIR"
fi
[[ -x "$TMP_OUT/metrics-server" ]] || die "go build succeeded but $TMP_OUT/metrics-server is missing"

# The RBAC and APIService the release ships, from the module itself.
MS_MOD_DIR="$(cd "$MOD_DIR" && go list -mod=readonly -m -f '{{.Dir}}' "$MODULE")" || die "go list -m $MODULE failed"
for f in "${MANIFESTS[@]}"; do
  [[ -f "$MS_MOD_DIR/manifests/base/$f" ]] || die "$MS_MOD_DIR/manifests/base/$f not found"
  cp -- "$MS_MOD_DIR/manifests/base/$f" "$TMP_OUT/$f"
  chmod 644 "$TMP_OUT/$f"
done
have "$TMP_OUT" || die "build finished but $TMP_OUT is incomplete"

# Sanity: the binary runs, knows the flags the harness passes, and carries the version.
out="$("$TMP_OUT/metrics-server" --help 2>&1 || true)"
for flag in --kubelet-insecure-tls --kubelet-use-node-status-port --metric-resolution --secure-port; do
  grep -q -- "$flag" <<<"$out" || die "metrics-server --help does not mention $flag; it printed: ${out:0:2000}"
done
v="$("$TMP_OUT/metrics-server" --version 2>&1 || true)"
[[ "$v" == *"$VERSION"* ]] || die "metrics-server --version printed '$v', expected $VERSION"

{
  echo "key=$KEY"
  echo "metrics-server=$MODULE@$VERSION"
  echo "go=$GO_VERSION"
  echo "ldflags=$LDFLAGS"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( SECONDS - start ))s"
} >"$TMP_OUT/BUILD-INFO"

stamp_cache_publish "$TMP_OUT" "$start"
