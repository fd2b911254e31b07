#!/usr/bin/env bash
# Build (or reuse) the `helm` CLI (Helm v3, helm.sh/helm/v3/cmd/helm, pinned by
# third_party/helm/go.mod + go.sum) used to lint and render charts/resize-guard in the
# tests (tests/e2e/install/helm.rs).
#
# Usage:
#   dir=$(third_party/helm/build.sh | tail -n 1)        # build if needed, print bin dir
#   third_party/helm/build.sh --no-build                # exit 3 if not cached yet
#   RESIZE_GUARD_HELM_BIN="$(third_party/helm/build.sh | tail -n 1)/helm" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `helm`;
# everything else goes to stderr (same contract as third_party/control-plane/build.sh).
#
# Caching: the binary lives in $HOME/.cache/resize-guard/helm-<key>/helm, where
# <key> is derived from third_party/helm/go.mod, go.sum, `go version` and the build
# flags. A hit costs ~0.1 s; a miss is a cold build (measured with empty Go
# caches on 2 busy cores: 8.5 min wall, 5 min CPU; 410 MB GOMODCACHE + 716 MB
# GOCACHE + a 59 MB binary; much less with warm caches). $HOME/.cache/resize-guard/helm-current is a symlink to the last used
# stamp dir; helm-* stamp dirs with other keys are pruned once unused for
# RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
#
# Environment:
#   RESIZE_GUARD_HELM_DIR      use this directory (must hold an executable `helm`)
#                              and never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_HELM_MIN_FREE_GB  free space demanded before a cold build (default 2).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced: a dependency
# drifting to a newer `go` line must fail loudly rather than download a toolchain.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-helm helm

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_HELM_DIR "an executable helm"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/helm"
stamp_cache_go "$MOD_DIR" third_party/helm/README.md go.mod go.sum

# Versions come from go.mod itself, so a bump there is all it takes.
mod_version() {
  awk -v m="$1" '($1 == m && $2 ~ /^v/) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' "$MOD_DIR/go.mod"
}
HELM_VERSION="$(mod_version helm.sh/helm/v3)"
[[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot find a helm.sh/helm/v3 v3.X.Y requirement in $MOD_DIR/go.mod"
CLIENT_GO="$(mod_version k8s.io/client-go)"
[[ "$CLIENT_GO" =~ ^v0\.[0-9]+\.[0-9]+$ ]] || die "cannot find k8s.io/client-go v0.X.Y in $MOD_DIR/go.mod"
K8S_MINOR="${CLIENT_GO#v0.}"; K8S_MINOR="${K8S_MINOR%%.*}"

# As helm's own Makefile does: the version, and the Kubernetes version `helm
# template`/`helm lint` assume (.Capabilities.KubeVersion) from client-go's.
# Fixed values keep the build (and the cache key) reproducible.
LDFLAGS="-s -w"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.metadata="
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitCommit=0000000000000000000000000000000000000000"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$K8S_MINOR"
done
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGE=helm.sh/helm/v3/cmd/helm

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE")"

stamp_cache_init helm "$KEY"

# A hit prints the cached directory; otherwise serialise concurrent builders and check the disk
# (GOMODCACHE + GOCACHE + binaries).
stamp_cache_begin "helm $HELM_VERSION" "${RESIZE_GUARD_HELM_MIN_FREE_GB:-2}" "helm" RESIZE_GUARD_HELM_DIR

log "building helm $HELM_VERSION (first run only; up to ~8 min on 2 busy cores with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/helm" "$PACKAGE"
have "$TMP_OUT" || die "go build succeeded but $TMP_OUT/helm is missing"

# Sanity: the version ldflags took effect and the binary runs without a home.
v="$(HELM_CONFIG_HOME="$TMP_OUT/.cfg" HELM_CACHE_HOME="$TMP_OUT/.cfg" HELM_DATA_HOME="$TMP_OUT/.cfg" \
  "$TMP_OUT/helm" version --template '{{.Version}}' 2>&1 || true)"
rm -rf -- "$TMP_OUT/.cfg"
[[ "$v" == "$HELM_VERSION" ]] || die "helm version printed '$v', expected '$HELM_VERSION'"

stamp_cache_build_info "helm=$HELM_VERSION" "kubernetes-default=v1.$K8S_MINOR"

stamp_cache_publish "$TMP_OUT" "$start"
