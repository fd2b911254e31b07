# Shared by every third_party/*/build.sh: Go binaries cached in stamp directories
# $RESIZE_GUARD_CACHE_DIR/<name>-<key>/ (default cache root $HOME/.cache/resize-guard). Sourced,
# not run. The caller names itself and its outputs with stamp_cache_tool (which gives it log,
# die and `have DIR`, true when DIR holds every output; a caller may define its own have after).
#
#   stamp_cache_tool NAME FILE…   log and die prefixed with NAME; have DIR checks DIR/FILE… (a
#                                 FILE that is a program must be executable: NAMES without a dot)
#   stamp_cache_args "$@"         parses --no-build (sets no_build) and --help (prints the caller's
#                                 header: its comment lines after the #! line)
#   stamp_cache_override VAR WHAT use the directory $VAR names as is (it must hold WHAT), never build
#   stamp_cache_go MOD_DIR DOC FILE…  local Go toolchain only, static builds, no DWARF; MOD_DIR
#                                 must hold FILE…; sets GO_VERSION
#   stamp_cache_init NAME KEY     sets CACHE_ROOT, STAMP, CURRENT, LOCK
#   stamp_cache_begin LABEL GB WHAT OVERRIDE  a hit (exit 0) or --no-build (exit 3), else the slow
#                                 path: lock, disk check, a fresh TMP_OUT removed on failure
#   stamp_cache_hit LABEL         on a hit: touch, refresh <name>-current, print STAMP, exit 0
#   stamp_cache_lock              the slow path: serialise builders; exits 0 if one finished it
#   stamp_cache_check_disk GB WHAT OVERRIDE   refuse a cold build without GB free
#   stamp_cache_publish DIR START  move a finished build into STAMP, print it, exit 0
#   stamp_cache_key FILE… -- LINE…  the 16-hex key: the files' bytes, then one LINE a line
#   stamp_cache_go_build DIR OUT PACKAGE…  go build BUILD_FLAGS -ldflags LDFLAGS in DIR, or die
#   stamp_cache_from_module DIR MODULE SUBDIR FILE…  copy FILE… from MODULE's SUBDIR (as DIR's
#                                 go.mod pins it) into TMP_OUT
#   stamp_cache_expect WANT CMD…  die unless CMD's output (stdout and stderr) contains WANT
#   stamp_cache_build_info LINE…  TMP_OUT/BUILD-INFO: the key, LINE…, go, ldflags and build time
#
# <name>-current is a symlink to the last used stamp dir; stamp dirs with other keys are
# pruned once unused for RESIZE_GUARD_CACHE_KEEP_DAYS days (default 2), so checkouts at
# different revisions on one machine do not delete each other's binaries.

stamp_cache_tool() {
  STAMP_TOOL=$1
  shift
  STAMP_OUTPUTS=("$@")
}
log() { printf '%s\n' "$STAMP_TOOL: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
have() {
  local d=$1 f
  for f in "${STAMP_OUTPUTS[@]}"; do
    [[ -f "$d/$f" ]] || return 1
    [[ "$f" == *.* || -x "$d/$f" ]] || return 1
  done
}

stamp_cache_args() {
  local arg
  no_build=0
  for arg in "$@"; do
    case "$arg" in
      --no-build) no_build=1 ;;
      -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "${BASH_SOURCE[1]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
      *) die "unknown argument: $arg (try --help)" ;;
    esac
  done
}

stamp_cache_override() {
  local var=$1 what=$2 d
  [[ -n "${!var:-}" ]] || return 0
  d="$(cd "${!var}" 2>/dev/null && pwd -P)" || die "$var=${!var} is not a directory"
  have "$d" || die "$var=$d must contain $what"
  log "using $var=$d (no build)"
  printf '%s\n' "$d"
  exit 0
}

stamp_cache_go() {
  local mod_dir=$1 doc=$2 f
  shift 2
  # GOTOOLCHAIN=local: a dependency drifting to a newer `go` line must fail loudly rather than
  # download a toolchain (no internet here).
  export GOTOOLCHAIN=local
  export CGO_ENABLED=0
  unset GOOS GOARCH 2>/dev/null || true
  # Every binary is linked without DWARF (-ldflags -s -w), so the compiler skips writing it too:
  # the same programs for less CPU on a cold build (third_party/README.md). Not part of a key.
  export GOFLAGS=-gcflags=all=-dwarf=false
  for f in "$@"; do
    [[ -f "$mod_dir/$f" ]] || die "missing $mod_dir/$f"
  done
  command -v go >/dev/null 2>&1 || die "'go' not found on PATH (need Go >= 1.26, see $doc)"
  GO_VERSION="$(go version)" || die "'go version' failed"
}

stamp_cache_begin() {
  local label=$1 min_gb=$2 what=$3 override=$4
  stamp_cache_hit "$label"
  if (( no_build )); then
    log "no cached build for key $STAMP_KEY (run $0 to build)"
    exit 3
  fi
  stamp_cache_lock
  stamp_cache_check_disk "$min_gb" "$what" "$override"
  TMP_OUT="$(mktemp -d "$CACHE_ROOT/.tmp-$STAMP_NAME-$STAMP_KEY.XXXXXX")"
  trap 'rm -rf -- "$TMP_OUT"' EXIT
}

stamp_cache_init() {
  STAMP_NAME=$1
  STAMP_KEY=$2
  CACHE_ROOT="${RESIZE_GUARD_CACHE_DIR:-$HOME/.cache/resize-guard}"
  mkdir -p "$CACHE_ROOT" || die "cannot create cache dir $CACHE_ROOT"
  CACHE_ROOT="$(cd "$CACHE_ROOT" && pwd -P)"
  STAMP="$CACHE_ROOT/$STAMP_NAME-$2"
  CURRENT="$CACHE_ROOT/$STAMP_NAME-current"
  LOCK="$CACHE_ROOT/.lock-$STAMP_NAME"
}

stamp_cache_prune() {
  local tmp_link="$CACHE_ROOT/.$STAMP_NAME-current.$$"
  ln -sfn "$(basename "$STAMP")" "$tmp_link" && mv -Tf "$tmp_link" "$CURRENT" \
    || log "warning: could not update $CURRENT"
  local d keep_days="${RESIZE_GUARD_CACHE_KEEP_DAYS:-2}"
  for d in "$CACHE_ROOT/$STAMP_NAME"-* "$CACHE_ROOT/.tmp-$STAMP_NAME"-*; do
    [[ -e "$d" && ! -L "$d" && -d "$d" && "$d" != "$STAMP" ]] || continue
    # We hold the lock, so any .tmp dir here is from a crashed build and can go.
    # Stamp dirs are touched on every use: keep those another checkout used lately.
    if [[ "$(basename "$d")" == "$STAMP_NAME"-* && -n "$(find "$d" -maxdepth 0 -mtime "-$keep_days" 2>/dev/null)" ]]; then
      continue
    fi
    log "pruning old stamp dir $d"
    rm -rf -- "$d" || log "warning: could not remove $d"
  done
}

stamp_cache_finish() {
  stamp_cache_prune
  printf '%s\n' "$STAMP"
  exit 0
}

stamp_cache_hit() {
  have "$STAMP" || return 0
  log "cache hit: $1 in $STAMP"
  touch "$STAMP" 2>/dev/null || true
  exec 9>"$LOCK"
  if flock -n 9 2>/dev/null; then stamp_cache_prune; fi
  printf '%s\n' "$STAMP"
  exit 0
}

stamp_cache_lock() {
  exec 9>"$LOCK"
  if command -v flock >/dev/null 2>&1; then
    if ! flock -n 9; then
      log "another build holds $LOCK; waiting for it…"
      flock 9
    fi
  fi
  if have "$STAMP"; then
    log "cache hit after waiting: $STAMP"
    stamp_cache_finish
  fi
  [[ -e "$STAMP" ]] && { log "removing incomplete stamp dir $STAMP"; rm -rf -- "$STAMP"; }
  return 0
}

stamp_cache_check_disk() {
  local min_gb=$1 what=$2 override=$3 p fs avail_kb
  local gocache gomodcache
  gocache="$(go env GOCACHE)"
  gomodcache="$(go env GOMODCACHE)"
  declare -A seen_fs=()
  for p in "$CACHE_ROOT" "$gocache" "$gomodcache" "${TMPDIR:-/tmp}"; do
    while [[ ! -e "$p" ]]; do p="$(dirname "$p")"; done
    fs="$(df -P "$p" | awk 'NR == 2 { print $1 }')"
    [[ -n "${seen_fs[$fs]:-}" ]] && continue
    seen_fs[$fs]=1
    avail_kb="$(df -Pk "$p" | awk 'NR == 2 { print $4 }')"
    if (( avail_kb < min_gb * 1024 * 1024 )); then
      die "only $(( avail_kb / 1024 / 1024 )) GB free on $fs ($p); a cold $what build needs ~${min_gb} GB" \
          "(GOCACHE=$gocache, GOMODCACHE=$gomodcache). Free space, e.g. 'go clean -cache', or set $override."
    fi
  done
}

stamp_cache_publish() {
  local dir=$1 start=$2
  chmod 755 "$dir"
  mv -T "$dir" "$STAMP" || die "could not move $dir to $STAMP"
  trap - EXIT
  log "built in $(( SECONDS - start ))s: $STAMP"
  stamp_cache_finish
}

stamp_cache_key() {
  {
    while [[ $# -gt 0 && "$1" != -- ]]; do cat "$1"; shift; done
    [[ $# -gt 0 ]] && shift
    printf '%s\n' "$@"
  } | sha256sum | cut -c1-16
}

stamp_cache_go_build() {
  local dir=$1 out=$2
  shift 2
  (cd "$dir" && go build "${BUILD_FLAGS[@]}" -ldflags "$LDFLAGS" -o "$out" "$@") >&2 \
    || die "go build failed after $(( SECONDS - start ))s (see output above). Module: $dir"
}

stamp_cache_from_module() {
  local dir=$1 module=$2 sub=$3 src f
  shift 3
  src="$(cd "$dir" && go list -mod=readonly -m -f '{{.Dir}}' "$module")" || die "go list -m $module failed"
  for f in "$@"; do
    [[ -f "$src/$sub/$f" ]] || die "$src/$sub/$f not found"
    cp -- "$src/$sub/$f" "$TMP_OUT/$f"
    chmod 644 "$TMP_OUT/$f"
  done
}

stamp_cache_expect() {
  local want=$1 out
  shift
  out="$("$@" 2>&1 || true)"
  [[ "$out" == *"$want"* ]] || die "'$(basename -- "$1")${2:+ ${*:2}}' printed '${out:0:2000}', expected it to contain '$want'"
}

stamp_cache_build_info() {
  {
    echo "key=$STAMP_KEY"
    printf '%s\n' "$@"
    echo "go=$GO_VERSION"
    echo "ldflags=$LDFLAGS"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( SECONDS - start ))s"
  } >"$TMP_OUT/BUILD-INFO"
}
