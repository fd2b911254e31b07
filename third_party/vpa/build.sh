#!/usr/bin/env bash
# Build (or reuse) the Vertical Pod Autoscaler's recommender, updater and
# admission-controller (k8s.io/autoscaler/vertical-pod-autoscaler v1.6.0,
# unpatched, pinned by third_party/vpa/go.mod + go.sum) that the VPA tests run against
# the harness's kube-apiserver (tests/harness/src/vpa.rs).
#
# Usage:
#   dir=$(third_party/vpa/build.sh | tail -n 1)         # build if needed, print the dir
#   third_party/vpa/build.sh --no-build                 # exit 3 if not cached yet
#   RESIZE_GUARD_VPA_DIR="$(third_party/vpa/build.sh | tail -n 1)" cargo test ...
#
# The LAST line of stdout is the absolute path of a directory holding
# `vpa-recommender`, `vpa-updater`, `vpa-admission-controller`,
# `vpa-v1-crd-gen.yaml` and `vpa-rbac.yaml` (the module's own CRD and RBAC
# files, deploy/); everything else goes to stderr
# (same contract as third_party/control-plane/build.sh and third_party/helm/build.sh).
#
# Caching: the files live in $HOME/.cache/resize-guard/vpa-<key>/, where <key>
# is derived from third_party/vpa/go.mod, go.sum, `go version` and the build flags. A
# hit costs ~0.03 s; a miss is a cold build. Measured on 2 shared cores: updater +
# admission-controller with empty Go caches, load ~2.5: 3 min 54 s wall, 6 min
# 14 s CPU, 219 MB GOMODCACHE + 1.05 GB GOCACHE. All three with an empty GOCACHE
# (modules already downloaded), `nice -n 10`, load ~8: 8 min 11 s wall, 4 min
# 40 s CPU, 1.1 GB GOCACHE; three ~51 MB binaries (recommender 51.4 MB). Adding
# the recommender to warm Go caches took 29 s; a miss with warm caches ~25 s. $HOME/.cache/resize-guard/vpa-current is a
# symlink to the last used stamp dir; vpa-* stamp dirs with other keys are
# pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
#
# Environment:
#   RESIZE_GUARD_VPA_DIR       use this directory (must hold executable
#                              vpa-recommender, vpa-updater and
#                              vpa-admission-controller, vpa-v1-crd-gen.yaml
#                              and vpa-rbac.yaml) and never build.
#   RESIZE_GUARD_CACHE_DIR     cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_VPA_MIN_FREE_GB   free space demanded before a cold build (default 2).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced: a dependency
# drifting to a newer `go` line must fail loudly rather than download a toolchain.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

CRD=vpa-v1-crd-gen.yaml
RBAC=vpa-rbac.yaml
stamp_cache_tool build-vpa vpa-recommender vpa-updater vpa-admission-controller "$CRD" "$RBAC"

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_VPA_DIR "executable vpa-recommender, vpa-updater and vpa-admission-controller, $CRD and $RBAC"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/vpa"
stamp_cache_go "$MOD_DIR" third_party/vpa/README.md go.mod go.sum

MODULE=k8s.io/autoscaler/vertical-pod-autoscaler
VPA_VERSION="$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' "$MOD_DIR/go.mod")"
[[ "$VPA_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "cannot find a $MODULE v1.X.Y requirement in $MOD_DIR/go.mod"

# VPA's own Makefiles build with plain `go build` (the version is a constant in
# common/version.go; only an optional git commit is stamped, left empty here).
LDFLAGS="-s -w"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
# package → output name
PACKAGES=("$MODULE/pkg/recommender" "$MODULE/pkg/updater" "$MODULE/pkg/admission-controller")
NAMES=(vpa-recommender vpa-updater vpa-admission-controller)

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" \
  -- "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" \
  "${PACKAGES[*]}" "${NAMES[*]}" "$CRD" "$RBAC")"

stamp_cache_init vpa "$KEY"

# A hit prints the cached directory; otherwise serialise concurrent builders and check the disk
# (GOMODCACHE + GOCACHE + binaries).
stamp_cache_begin "vpa $VPA_VERSION" "${RESIZE_GUARD_VPA_MIN_FREE_GB:-2}" "VPA" RESIZE_GUARD_VPA_DIR

log "building VPA $VPA_VERSION recommender + updater + admission-controller (first run only; 4-8 min on 2 busy cores with empty Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
# One invocation builds all three (shared packages compiled once); -o DIR/ names each binary
# after its package's last path element.
mkdir -p "$TMP_OUT/bin"
stamp_cache_go_build "$MOD_DIR" "$TMP_OUT/bin/" "${PACKAGES[@]}"
for i in "${!PACKAGES[@]}"; do
  built="$TMP_OUT/bin/${PACKAGES[$i]##*/}"
  [[ -x "$built" ]] || die "go build succeeded but $built is missing"
  mv -- "$built" "$TMP_OUT/${NAMES[$i]}"
done
rmdir -- "$TMP_OUT/bin"

# The CRD and RBAC (ServiceAccounts, ClusterRoles, bindings) the binaries were released with,
# from the module itself.
stamp_cache_from_module "$MOD_DIR" "$MODULE" deploy "$CRD" "$RBAC"
have "$TMP_OUT" || die "build finished but $TMP_OUT is incomplete"

# Sanity: each binary runs and knows its own flags (`--help` prints usage and exits).
stamp_cache_expect --recommender-interval "$TMP_OUT/vpa-recommender" --help
stamp_cache_expect --memory-aggregation-interval "$TMP_OUT/vpa-recommender" --help
stamp_cache_expect --updater-interval "$TMP_OUT/vpa-updater" --help
stamp_cache_expect --in-place-skip-disruption-budget "$TMP_OUT/vpa-updater" --help
stamp_cache_expect --register-by-url "$TMP_OUT/vpa-admission-controller" --help
stamp_cache_expect --webhook-address "$TMP_OUT/vpa-admission-controller" --help

stamp_cache_build_info "vpa=$VPA_VERSION" "crd=$MODULE@$VPA_VERSION/deploy/$CRD" \
  "rbac=$MODULE@$VPA_VERSION/deploy/$RBAC"

stamp_cache_publish "$TMP_OUT" "$start"
