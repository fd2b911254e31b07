#!/usr/bin/env bash
# Build (or reuse) the test binary of Kubernetes' own in-place resize e2e specs
# (test/e2e/common/node/pod_resize.go and test/e2e/node/pod_resize.go of k8s.io/kubernetes,
# unmodified), compiled with `go test -c` from third_party/upstream-e2e/ (go.mod, go.sum, resize/),
# which tests/e2e/upstream/resize_specs.rs runs against the real node.
#
# Usage:
#   dir=$(third_party/upstream-e2e/build.sh | tail -n 1)   # build if needed, print the dir
#   third_party/upstream-e2e/build.sh --no-build           # exit 3 if not cached yet
#   RESIZE_GUARD_UPSTREAM_E2E_BIN="$(third_party/upstream-e2e/build.sh | tail -n 1)/resize-e2e.test" cargo test ...
#
# The LAST line of stdout is the absolute path of the directory holding `resize-e2e.test`,
# `ginkgo` (the CLI at the version the module pins, which runs it in parallel processes) and
# `busybox.oci.tar`, the image every resize spec's container runs, under upstream's name
# (test/utils/image/manifest.go's BusyBox: registry.k8s.io/e2e-test-images/busybox:<tag>, read from
# the pinned module), built from Debian's busybox-static (`apt-get download`, no root needed) with
# tests/node/oci-archive.py: /bin/busybox and a /bin symlink per applet. The name is in
# `busybox.ref`. Everything else goes to stderr (same contract as
# third_party/control-plane/build.sh).
#
# Caching: $HOME/.cache/resize-guard/upstream-e2e-<key>/resize-e2e.test, where <key> is derived
# from third_party/upstream-e2e/go.mod, go.sum, the Go sources, `go version` and the build flags. A
# hit costs ~0.1 s; a miss took 4 min on 2 cores at load 7 (GOCACHE warm from the control plane,
# which shares k8s.io/kubernetes v1.37.2; the e2e framework's packages compiled cold).
# upstream-e2e-current is a symlink to the last used stamp dir; stamp dirs with other keys are
# pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
#
# Environment:
#   RESIZE_GUARD_UPSTREAM_E2E_BIN     use this executable and never build; its directory is printed.
#   RESIZE_GUARD_CACHE_DIR            cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_UPSTREAM_E2E_MIN_FREE_GB  free space demanded before a cold build (default 3).
#   RESIZE_GUARD_CACHE_KEEP_DAYS      keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy. GOTOOLCHAIN=local is forced: a dependency drifting to a
# newer `go` line must fail loudly rather than download a toolchain.
set -euo pipefail

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

BINARY=resize-e2e.test
stamp_cache_tool build-upstream-e2e "$BINARY" ginkgo busybox.oci.tar busybox.ref

stamp_cache_args "$@"
# The override names the binary (as the Makefile exports it), not a directory.
if [[ -n "${RESIZE_GUARD_UPSTREAM_E2E_BIN:-}" ]]; then
  bin="$RESIZE_GUARD_UPSTREAM_E2E_BIN"
  [[ -f "$bin" && -x "$bin" && "$(basename -- "$bin")" == "$BINARY" ]] \
    || die "RESIZE_GUARD_UPSTREAM_E2E_BIN=$bin must be an executable named $BINARY"
  d="$(cd "$(dirname -- "$bin")" && pwd -P)"
  log "using RESIZE_GUARD_UPSTREAM_E2E_BIN=$bin (no build)"
  printf '%s\n' "$d"
  exit 0
fi

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
MOD_DIR="$REPO_ROOT/third_party/upstream-e2e"
stamp_cache_go "$MOD_DIR" third_party/upstream-e2e/README.md go.mod go.sum resize/resize_test.go

K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$K8S_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "cannot find a k8s.io/kubernetes v1.N.P requirement in $MOD_DIR/go.mod"
mapfile -t SOURCES < <(cd "$MOD_DIR" && find . -type f -name '*.go' | LC_ALL=C sort)

# The version packages stamped as the control plane's binaries are
# (third_party/control-plane/module.sh), so `resize-e2e.test --version` names the Kubernetes the
# specs come from. shellcheck source=third_party/control-plane/module.sh
source "$REPO_ROOT/third_party/control-plane/module.sh"
LDFLAGS="$(control_plane_ldflags "$K8S_VERSION")"
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
PACKAGE=./resize

# The image: Debian's statically linked busybox (whatever version the machine's apt lists name;
# BUILD-INFO records it), packed by the node's own archive writer.
IMAGE_PACKAGE=busybox-static
OCI_ARCHIVE="$REPO_ROOT/tests/node/oci-archive.py"

KEY="$(stamp_cache_key "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "${SOURCES[@]/#/$MOD_DIR/}" "$OCI_ARCHIVE" \
  -- "${SOURCES[@]}" "$GO_VERSION" "CGO_ENABLED=$CGO_ENABLED" "${BUILD_FLAGS[*]}" "$LDFLAGS" "$PACKAGE" \
  "image=$IMAGE_PACKAGE")"

stamp_cache_init upstream-e2e "$KEY"
stamp_cache_begin "Kubernetes $K8S_VERSION resize e2e specs" "${RESIZE_GUARD_UPSTREAM_E2E_MIN_FREE_GB:-3}" "upstream e2e" RESIZE_GUARD_UPSTREAM_E2E_BIN

log "building Kubernetes $K8S_VERSION's resize e2e specs with go test -c (first run only; ~4 min on 2 cores with the control plane's Go caches) …"
log "  module: $MOD_DIR   key: $KEY   $GO_VERSION"
start=$SECONDS
(cd "$MOD_DIR" && go test -c "${BUILD_FLAGS[@]}" -ldflags "$LDFLAGS" -o "$TMP_OUT/$BINARY" "$PACKAGE") >&2 \
  || die "go test -c failed after $(( SECONDS - start ))s (see output above). Module: $MOD_DIR"
[[ -x "$TMP_OUT/$BINARY" ]] || die "go test -c succeeded but $TMP_OUT lacks $BINARY"
(cd "$MOD_DIR" && go build "${BUILD_FLAGS[@]}" -o "$TMP_OUT/ginkgo" github.com/onsi/ginkgo/v2/ginkgo) >&2 \
  || die "go build of ginkgo's CLI failed after $(( SECONDS - start ))s. Module: $MOD_DIR"
log "compiled in $(( SECONDS - start ))s"

# BusyBox's name as the specs ask for it: test/utils/image/manifest.go of the pinned module
# (configs[BusyBox] = Config{list.PromoterE2eRegistry, "busybox", "<tag>"}, and that registry's
# default in initReg).
K8S_DIR="$(cd "$MOD_DIR" && go list -mod=readonly -m -f '{{.Dir}}' k8s.io/kubernetes)" || die "go list -m k8s.io/kubernetes failed"
MANIFEST="$K8S_DIR/test/utils/image/manifest.go"
tag="$(sed -n 's/^[[:space:]]*configs\[BusyBox\] = Config{list.PromoterE2eRegistry, "busybox", "\([^"]*\)"}.*/\1/p' "$MANIFEST")"
registry="$(sed -n 's/^[[:space:]]*PromoterE2eRegistry:[[:space:]]*"\([^"]*\)",.*/\1/p' "$MANIFEST")"
[[ -n "$tag" && -n "$registry" ]] || die "cannot read BusyBox's image name from $MANIFEST"
BUSYBOX_REF="$registry/busybox:$tag"
deb_dir="$TMP_OUT/.deb"
mkdir -p "$deb_dir"
if ! (cd "$deb_dir" && apt-get download "$IMAGE_PACKAGE") >&2 2>"$deb_dir/apt.log"; then
  # A machine whose apt lists were never fetched knows no package yet (root can fetch them).
  [[ "$(id -u)" == 0 ]] || die "apt-get download $IMAGE_PACKAGE failed: $(cat "$deb_dir/apt.log")"
  log "apt-get download $IMAGE_PACKAGE failed; running apt-get update once"
  apt-get update >&2 || die "apt-get update failed"
  (cd "$deb_dir" && apt-get download "$IMAGE_PACKAGE") >&2 || die "apt-get download $IMAGE_PACKAGE failed"
fi
deb=("$deb_dir"/"$IMAGE_PACKAGE"_*.deb)
[[ -f "${deb[0]}" ]] || die "apt-get download left no $IMAGE_PACKAGE .deb in $deb_dir"
dpkg-deb -x "${deb[0]}" "$deb_dir/root" || die "dpkg-deb -x ${deb[0]} failed"
busybox="$deb_dir/root/bin/busybox"
[[ -x "$busybox" ]] || die "${deb[0]} holds no bin/busybox"
mapfile -t applets < <("$busybox" --list)
(( ${#applets[@]} > 100 )) || die "$busybox --list printed only ${#applets[@]} applets"
link_args=()
for a in "${applets[@]}"; do link_args+=(--link "$a"); done
python3 "$OCI_ARCHIVE" --dir bin "${link_args[@]}" "$BUSYBOX_REF" "$busybox" "$TMP_OUT/busybox.oci.tar" /bin/sh >&2 \
  || die "oci-archive.py failed for $BUSYBOX_REF"
printf '%s\n' "$BUSYBOX_REF" >"$TMP_OUT/busybox.ref"
busybox_version="$(dpkg-deb -f "${deb[0]}" Version)"
rm -rf -- "$deb_dir"
have "$TMP_OUT" || die "build finished but $TMP_OUT is incomplete"

# Sanity: the binary runs, carries the version, and holds the resize specs.
stamp_cache_expect "$K8S_VERSION" "$TMP_OUT/$BINARY" --version
stamp_cache_expect "$(go -C "$MOD_DIR" list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2 | tr -d v)" "$TMP_OUT/ginkgo" version
stamp_cache_expect "Pod InPlace Resize Container" "$TMP_OUT/$BINARY" --ginkgo.dry-run --ginkgo.v \
  --ginkgo.focus "InPlace Resize" --kubeconfig /dev/null
stamp_cache_build_info "kubernetes=$K8S_VERSION" "ginkgo=$(go -C "$MOD_DIR" list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)" \
  "busybox=$BUSYBOX_REF from $IMAGE_PACKAGE $busybox_version (${#applets[@]} applets)"

stamp_cache_publish "$TMP_OUT" "$start"
