# The Go build module of one Kubernetes minor's upstream binaries, assembled from its module
# directory third_party/control-plane/v1.N/ (go.mod, go.sum) and the sources shared by every minor
# (third_party/control-plane/cmd/). Sourced, not run, by third_party/control-plane/build.sh and
# third_party/control-plane/gen-module.sh.
#
# A source file named NAME.v1.A.go belongs to minor A only, NAME.v1.A-v1.B.go to minors A..B:
# they adapt to upstream signatures that changed between minors (see
# third_party/control-plane/README.md). Every other .go file belongs to every minor. Only the files
# of one minor are copied, so each assembled module compiles and tidies against its own Kubernetes
# alone.

# control_plane_minors: the supported minors, oldest first.
control_plane_minors() { printf '%s\n' 1.33 1.34 1.35 1.36 1.37; }

# control_plane_file_applies FILE MINOR: true when source FILE belongs to MINOR (e.g. 1.35).
control_plane_file_applies() {
  local base minor=${2#1.} lo hi
  base="$(basename "$1" .go)"
  if [[ "$base" =~ \.v1\.([0-9]+)-v1\.([0-9]+)$ ]]; then
    lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
  elif [[ "$base" =~ \.v1\.([0-9]+)$ ]]; then
    lo=${BASH_REMATCH[1]} hi=$lo
  else
    return 0
  fi
  (( minor >= lo && minor <= hi ))
}

# control_plane_sources ROOT MINOR: the shared source files (relative to ROOT) MINOR builds from.
control_plane_sources() {
  local root=$1 minor=$2 f
  while IFS= read -r f; do
    control_plane_file_applies "$f" "$minor" && printf '%s\n' "$f"
  done < <(cd "$root" && find cmd -type f -name '*.go' | LC_ALL=C sort)
}

# control_plane_assemble ROOT MINOR DEST: DEST becomes MINOR's module (go.mod and go.sum from
# ROOT/v$MINOR, sources from ROOT/cmd).
control_plane_assemble() {
  local root=$1 minor=$2 dest=$3 f
  mkdir -p "$dest"
  cp "$root/v$minor/go.mod" "$dest/go.mod"
  [[ -f "$root/v$minor/go.sum" ]] && cp "$root/v$minor/go.sum" "$dest/go.sum"
  while IFS= read -r f; do
    mkdir -p "$dest/$(dirname "$f")"
    cp "$root/$f" "$dest/$f"
  done < <(control_plane_sources "$root" "$minor")
}

# control_plane_ldflags VERSION: the -ldflags every Kubernetes binary of ours is linked with
# (stripped; the version packages stamped with VERSION, e.g. v1.37.2, and a fixed commit and date,
# so the build and its cache key are reproducible). One definition, so the real node's kubelet
# (third_party/node/build.sh) shares the control plane's GOCACHE entries.
control_plane_ldflags() {
  local version=$1 minor pkg flags="-s -w"
  minor="${version#v1.}"
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    flags+=" -X $pkg.buildDate=2026-01-01T00:00:00Z"
  done
  printf '%s\n' "$flags"
}
