#!/usr/bin/env bash
# Build (or reuse) the binaries of a REAL Kubernetes node for the E2E tests:
#   kubelet, kube-proxy          k8s.io/kubernetes/cmd/{kubelet,kube-proxy}, from the control plane's
#                                module (third_party/control-plane/v1.37, same ldflags and
#                                GOCACHE as third_party/control-plane/build.sh, CGO_ENABLED=0)
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2 (CGO_ENABLED=0)
#   runc                         github.com/opencontainers/runc (cgo, -tags seccomp, static;
#                                installs Debian's libseccomp-dev with apt-get if missing)
#   cni/{bridge,host-local,loopback,portmap}   github.com/containernetworking/plugins
#   pause                        a tiny static Go program written here: PID 1 of a pod sandbox,
#                                reaps children, exits 0 on SIGTERM/SIGINT; the tests' workload
#                                too (HOLD_MIB holds memory, SPIN burns a CPU)
#
# Usage:
#   dir=$(third_party/node/build.sh | tail -n 1)        # build if needed, print bin dir
#   third_party/node/build.sh --no-build                # exit 3 if not cached yet
#
# The LAST line of stdout is the absolute path of the directory holding the binaries (CNI
# plugins in its cni/ subdirectory); everything else goes to stderr (same contract as
# third_party/control-plane/build.sh).
#
# The registry the node pulls from is third_party/registry/build.sh's (third_party/registry).
#
# Caching: $HOME/.cache/resize-guard/node-<key>/, where <key> hashes the versions below, the
# control plane module's go.mod/go.sum (the kubelet's dependencies), this script, `go version`
# and the build flags. A hit costs ~0.05 s. A miss, measured on 2 cores busy with other work,
# Go caches warm from the control plane's build but not from these modules: pause 1 s, runc 64 s
# (incl. apt-get libseccomp-dev), CNI plugins 37 s, containerd+shim+ctr 193 s, kubelet and
# kube-proxy ~60 s (they share the control plane's GOCACHE; ~3-6 min without it). BUILD-INFO in
# the stamp dir records each part's seconds. Binaries: ~200 MB.
# $HOME/.cache/resize-guard/node-current is a symlink to the last used stamp dir; node-* stamp
# dirs with other keys are pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2).
#
# Environment:
#   RESIZE_GUARD_NODE_BIN_DIR   use this directory (must hold every binary) and never build.
#   RESIZE_GUARD_CACHE_DIR      cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_NODE_MIN_FREE_GB  free space demanded before a cold build (default 6).
#   RESIZE_GUARD_CACHE_KEEP_DAYS   keep other keys' stamp dirs this long (default 2).
#
# Offline except the Go module proxy and Debian's apt. GOTOOLCHAIN=local is forced.
set -euo pipefail

# Pinned versions (a bump here changes the key).
CONTAINERD_VERSION=v2.3.7
RUNC_VERSION=v1.4.4
CNI_PLUGINS_VERSION=v1.10.0
K8S_MINOR_DIR=1.37

CONTAINERD_MOD=github.com/containerd/containerd/v2
RUNC_MOD=github.com/opencontainers/runc
CNI_MOD=github.com/containernetworking/plugins

BINARIES=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc pause
          cni/bridge cni/host-local cni/loopback cni/portmap)

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-node "${BINARIES[@]}"

stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_NODE_BIN_DIR "executable ${BINARIES[*]}"

# --- inputs -------------------------------------------------------------------
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
SCRIPT="$REPO_ROOT/third_party/node/build.sh"
CP_ROOT="$REPO_ROOT/third_party/control-plane"
# shellcheck source=third_party/control-plane/module.sh
source "$REPO_ROOT/third_party/control-plane/module.sh"
MOD_DIR="$CP_ROOT/v$K8S_MINOR_DIR"
stamp_cache_go "$MOD_DIR" third_party/control-plane/README.md go.mod go.sum

K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$MOD_DIR/go.mod")"
[[ "$K8S_VERSION" == "v$K8S_MINOR_DIR".* ]] || die "cannot find a k8s.io/kubernetes v$K8S_MINOR_DIR.P requirement in $MOD_DIR/go.mod"

# The kubelet: exactly the control plane's flags, so it shares its GOCACHE entries.
GIT_COMMIT="0000000000000000000000000000000000000000"
K8S_LDFLAGS="$(control_plane_ldflags "$K8S_VERSION")"
BUILD_FLAGS=(-trimpath -buildvcs=false)
# As the upstream Makefiles do (version package, fixed revision).
CONTAINERD_LDFLAGS="-s -w -X $CONTAINERD_MOD/version.Version=$CONTAINERD_VERSION -X $CONTAINERD_MOD/version.Revision=$GIT_COMMIT -X $CONTAINERD_MOD/version.Package=github.com/containerd/containerd"
RUNC_TAGS="seccomp urfave_cli_no_docs netgo osusergo"
RUNC_LDFLAGS="-s -w -X main.gitCommit=$GIT_COMMIT -extldflags -static"
CNI_LDFLAGS="-s -w -X $CNI_MOD/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
PAUSE_LDFLAGS="-s -w"

KEY="$(
  {
    printf '%s\n' "$CONTAINERD_VERSION" "$RUNC_VERSION" "$CNI_PLUGINS_VERSION" "$K8S_VERSION"
    cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$SCRIPT"
    printf '%s\n' "$GO_VERSION" "${BUILD_FLAGS[*]}" "$K8S_LDFLAGS" "$CONTAINERD_LDFLAGS" "$RUNC_TAGS" \
      "$RUNC_LDFLAGS" "$CNI_LDFLAGS" "$PAUSE_LDFLAGS"
  } | sha256sum | cut -c1-16
)"

stamp_cache_init node "$KEY"
stamp_cache_begin "node binaries (kubelet $K8S_VERSION, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION)" \
  "${RESIZE_GUARD_NODE_MIN_FREE_GB:-6}" "node" RESIZE_GUARD_NODE_BIN_DIR

log "building kubelet and kube-proxy $K8S_VERSION, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION, CNI plugins $CNI_PLUGINS_VERSION, pause (first run only) …"
log "  key: $KEY   $GO_VERSION"
start=$SECONDS
TIMES=()
part() { # part NAME CMD…: run one part's build, time it
  local name=$1 t0 t1
  shift
  t0=$(date +%s)
  log "[$name] $(date -u +%H:%M:%S) start"
  "$@" >&2 || die "$name build failed after $(( $(date +%s) - t0 ))s (see output above)"
  t1=$(date +%s)
  log "[$name] done in $(( t1 - t0 ))s"
  TIMES+=("$name=$(( t1 - t0 ))s")
}

# go install MODULE@VERSION's packages into DIR (upstream's own go.mod/go.sum, no replace directives).
go_install() { # go_install DIR LDFLAGS PKG@VER…
  local dir=$1 ldflags=$2
  shift 2
  mkdir -p "$dir"
  GOBIN="$dir" go install "${BUILD_FLAGS[@]}" -ldflags "$ldflags" "$@"
}

build_pause() {
  local src="$TMP_OUT/.pause"
  mkdir -p "$src"
  cat >"$src/go.mod" <<'EOF'
module resize-guard.io/pause

go 1.26
EOF
  cat >"$src/main.go" <<'EOF'
// pause: PID 1 of a pod sandbox, or a test workload. Reaps every child that exits and exits 0
// on SIGTERM or SIGINT. As a workload: HOLD_MIB=N allocates N MiB and touches every page (real
// resident memory for the memory wall), SPIN=1 keeps one CPU busy (throttling). `pause -v`
// prints a version.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

var held [][]byte

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause resize-guard 2")
		return
	}
	if v := os.Getenv("HOLD_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "HOLD_MIB=%q: want a number of MiB\n", v)
			os.Exit(2)
		}
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			held = append(held, b)
		}
		fmt.Printf("holding %d MiB\n", n)
	}
	if os.Getenv("SPIN") != "" {
		go func() {
			for {
			}
		}()
		fmt.Println("spinning")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  (cd "$src" && go build "${BUILD_FLAGS[@]}" -ldflags "$PAUSE_LDFLAGS" -o "$TMP_OUT/pause" .) || return 1
  rm -rf -- "$src"
}

ensure_libseccomp() {
  if dpkg-query -W -f='${Status}' libseccomp-dev 2>/dev/null | grep -q 'install ok installed'; then
    return 0
  fi
  [[ $(id -u) == 0 ]] || die "runc needs Debian's libseccomp-dev: apt-get install libseccomp-dev (as root)"
  log "installing libseccomp-dev with apt-get (runc's seccomp support) …"
  export DEBIAN_FRONTEND=noninteractive
  nice -n 19 apt-get install -y --no-install-recommends libseccomp-dev pkg-config >&2 \
    || { nice -n 19 apt-get update >&2 && nice -n 19 apt-get install -y --no-install-recommends libseccomp-dev pkg-config >&2; } \
    || die "apt-get install libseccomp-dev failed"
}

build_runc() {
  ensure_libseccomp
  CGO_ENABLED=1 go_install "$TMP_OUT" "$RUNC_LDFLAGS" -tags "$RUNC_TAGS" "$RUNC_MOD@$RUNC_VERSION"
}

build_kubelet() {
  local dir="$TMP_OUT/.module"
  control_plane_assemble "$CP_ROOT" "$K8S_MINOR_DIR" "$dir"
  (cd "$dir" && go build "${BUILD_FLAGS[@]}" -mod=readonly -ldflags "$K8S_LDFLAGS" -o "$TMP_OUT/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy) || return 1
  rm -rf -- "$dir"
}

part pause build_pause
part runc build_runc
part cni-plugins go_install "$TMP_OUT/cni" "$CNI_LDFLAGS" \
  "$CNI_MOD/plugins/main/bridge@$CNI_PLUGINS_VERSION" "$CNI_MOD/plugins/ipam/host-local@$CNI_PLUGINS_VERSION" \
  "$CNI_MOD/plugins/main/loopback@$CNI_PLUGINS_VERSION" "$CNI_MOD/plugins/meta/portmap@$CNI_PLUGINS_VERSION"
part containerd go_install "$TMP_OUT" "$CONTAINERD_LDFLAGS" \
  "$CONTAINERD_MOD/cmd/containerd@$CONTAINERD_VERSION" "$CONTAINERD_MOD/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
  "$CONTAINERD_MOD/cmd/ctr@$CONTAINERD_VERSION"
part kubelet+kube-proxy build_kubelet

have "$TMP_OUT" || die "builds succeeded but $TMP_OUT lacks one of: ${BINARIES[*]}"

# Sanity: each binary runs and reports the pinned version.
v="$("$TMP_OUT/kubelet" --version 2>&1 || true)"
[[ "$v" == "Kubernetes $K8S_VERSION" ]] || die "kubelet --version printed '$v', expected 'Kubernetes $K8S_VERSION'"
v="$("$TMP_OUT/containerd" --version 2>&1 || true)"
[[ "$v" == *" $CONTAINERD_VERSION "* ]] || die "containerd --version printed '$v', expected $CONTAINERD_VERSION"
v="$("$TMP_OUT/runc" --version 2>&1 | head -n 1 || true)"
[[ "$v" == "runc version ${RUNC_VERSION#v}" ]] || die "runc --version printed '$v', expected ${RUNC_VERSION#v}"
"$TMP_OUT/runc" features 2>/dev/null | grep -q '"enabled": true' || die "runc was built without seccomp ('runc features')"
v="$("$TMP_OUT/kube-proxy" --version 2>&1 || true)"
[[ "$v" == "Kubernetes $K8S_VERSION" ]] || die "kube-proxy --version printed '$v', expected 'Kubernetes $K8S_VERSION'"
v="$(CNI_COMMAND=VERSION "$TMP_OUT/cni/bridge" 2>&1 </dev/null || true)"
[[ "$v" == *cniVersion* ]] || die "cni/bridge VERSION printed '$v'"
[[ "$("$TMP_OUT/pause" -v)" == "pause resize-guard 2" ]] || die "pause -v failed"

{
  echo "key=$KEY"
  echo "kubernetes=$K8S_VERSION"
  echo "containerd=$CONTAINERD_VERSION"
  echo "runc=$RUNC_VERSION"
  echo "cni-plugins=$CNI_PLUGINS_VERSION"
  echo "go=$GO_VERSION"
  echo "parts=${TIMES[*]}"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( SECONDS - start ))s"
} >"$TMP_OUT/BUILD-INFO"

stamp_cache_publish "$TMP_OUT" "$start"
