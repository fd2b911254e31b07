#!/usr/bin/env bash
# Build (or reuse) the upstream binaries used by the E2E tests: kube-apiserver,
# kube-scheduler, kube-controller-manager, kubectl (k8s.io/kubernetes),
# etcd (cmd/etcd) and hollow-node (cmd/hollow-node: upstream's kubelet run
# through kubemark's library with fakes only at the runtime boundary, one
# process per simulated node), for one Kubernetes minor: v1.33 to v1.37, each
# from its own module directory third_party/control-plane/v1.N/ (go.mod, go.sum) and
# the shared sources in third_party/control-plane/cmd/ (third_party/control-plane/module.sh).
#
# Usage:
#   dir=$(third_party/control-plane/build.sh)            # build if needed, print bin dir
#   RESIZE_GUARD_K8S_VERSION=1.35 third_party/control-plane/build.sh
#   third_party/control-plane/build.sh --no-build        # exit 3 if not cached yet
#
# The LAST line of stdout is the absolute path of the directory holding the six
# binaries; everything else goes to stderr.
#
# Caching: binaries live in $HOME/.cache/resize-guard/k8s-v1.N-<key>/, where
# <key> is derived from the minor's go.mod and go.sum, the sources it builds,
# `go version` and the build flags. A hit costs a second or so; a miss is a
# cold build (~10 min on 2 cores for a minor whose modules are not in GOCACHE
# yet, a few minutes with a warm one; ~2.5 GB of GOCACHE and ~500 MB of
# GOMODCACHE per minor).
# $HOME/.cache/resize-guard/k8s-v1.N-current is a symlink to the minor's last
# used stamp dir; stamp dirs with other keys are pruned once unused for
# RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2), so checkouts at different
# revisions on one machine do not delete each other's binaries.
#
# Environment:
#   RESIZE_GUARD_K8S_VERSION   the minor to build: 1.33, 1.34, 1.35, 1.36 or
#                              1.37 (default; a leading v and a patch that
#                              matches the module, e.g. v1.35.4, are accepted).
#   RESIZE_GUARD_K8S_BIN_DIR   use this directory (must hold all six binaries)
#                              and never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_MIN_FREE_GB   free space demanded before a cold build (default 8).
#   RESIZE_GUARD_CACHE_KEEP_DAYS  keep other keys' stamp dirs this long (default 2).
#
# GOTOOLCHAIN=local is forced: a dependency drifting to a newer `go` line must
# fail loudly rather than silently download a toolchain (no internet here).
set -euo pipefail

BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd hollow-node)

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-control-plane "${BINARIES[@]}"

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_K8S_BIN_DIR "executable ${BINARIES[*]}"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
CP_ROOT="$REPO_ROOT/third_party/control-plane"
# shellcheck source=third_party/control-plane/module.sh
source "$REPO_ROOT/third_party/control-plane/module.sh"
requested="${RESIZE_GUARD_K8S_VERSION:-1.37}"
[[ "$requested" =~ ^v?(1\.[0-9]+)(\.[0-9]+)?$ ]] \
  || die "RESIZE_GUARD_K8S_VERSION=$requested: expected a minor such as 1.35 (or v1.35.4)"
MINOR="${BASH_REMATCH[1]}"
control_plane_minors | grep -qx "$MINOR" \
  || die "RESIZE_GUARD_K8S_VERSION=$requested: supported minors are $(control_plane_minors | tr '\n' ' ')"
MOD_DIR="$CP_ROOT/v$MINOR"
stamp_cache_go "$MOD_DIR" third_party/control-plane/README.md go.mod go.sum

K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$K8S_VERSION" == "v$MINOR".* ]] || die "cannot find a k8s.io/kubernetes v$MINOR.P requirement in $MOD_DIR/go.mod"
[[ "$requested" != *.*.* || "v${requested#v}" == "$K8S_VERSION" ]] \
  || die "RESIZE_GUARD_K8S_VERSION=$requested, but $MOD_DIR pins $K8S_VERSION (regenerate it with third_party/control-plane/gen-module.sh)"
mapfile -t SOURCES < <(control_plane_sources "$CP_ROOT" "$MINOR")

# Fixed values keep the build (and the cache key) reproducible
# (third_party/control-plane/module.sh).
LDFLAGS="$(control_plane_ldflags "$K8S_VERSION")"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGES=(
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kubectl
  ./cmd/etcd
  ./cmd/hollow-node
)

KEY="$(
  {
    cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"
    for f in "${SOURCES[@]}"; do printf '%s\n' "$f"; cat "$CP_ROOT/$f"; done
    printf '%s\n' "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "${PACKAGES[*]}"
  } | sha256sum | cut -c1-16
)"

stamp_cache_init "k8s-v$MINOR" "$KEY"

# A hit prints the cached directory; otherwise serialise concurrent builders and check the disk
# (GOMODCACHE + GOCACHE + binaries).
stamp_cache_begin "Kubernetes $K8S_VERSION binaries" "${RESIZE_GUARD_MIN_FREE_GB:-8}" "Kubernetes" RESIZE_GUARD_K8S_BIN_DIR

log "building kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd, hollow-node for Kubernetes $K8S_VERSION (first run only, about 10 min on 2 cores and ~3 GB of Go caches per minor) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
BUILD_DIR="$TMP_OUT/.module"
control_plane_assemble "$CP_ROOT" "$MINOR" "$BUILD_DIR"
if ! (cd "$BUILD_DIR" && go build "${BUILD_FLAGS[@]}" -ldflags "$LDFLAGS" -o "$TMP_OUT/" "${PACKAGES[@]}") >&2; then
  die "go build failed after $(( SECONDS - start ))s (see output above). Module: $MOD_DIR"
fi
rm -rf -- "$BUILD_DIR"
have "$TMP_OUT" || die "go build succeeded but $TMP_OUT lacks one of: ${BINARIES[*]}"

# Sanity: the version ldflags took effect.
v="$("$TMP_OUT/kube-apiserver" --version 2>&1 || true)"
[[ "$v" == "Kubernetes $K8S_VERSION" ]] || die "kube-apiserver --version printed '$v', expected 'Kubernetes $K8S_VERSION'"
"$TMP_OUT/etcd" --version >/dev/null 2>&1 || die "built etcd does not run ('etcd --version' failed)"
v="$("$TMP_OUT/kube-controller-manager" --version 2>&1 || true)"
[[ "$v" == "Kubernetes $K8S_VERSION" ]] || die "kube-controller-manager --version printed '$v', expected 'Kubernetes $K8S_VERSION'"
v="$("$TMP_OUT/hollow-node" --version 2>&1 || true)"
[[ "$v" == "Kubernetes $K8S_VERSION" ]] || die "hollow-node --version printed '$v', expected 'Kubernetes $K8S_VERSION'"

stamp_cache_build_info "kubernetes=$K8S_VERSION"

stamp_cache_publish "$TMP_OUT" "$start"
