#!/usr/bin/env bash
# Fetch (or reuse) qemu's user-mode emulator for AArch64, statically linked, from Debian's
# `qemu-user-static` package, without root: `apt-get download` the .deb into the cache and
# extract the one program (`dpkg-deb --fsys-tarfile`). The image tests run every arm64 binary
# `make image` builds under it (tests/e2e/images/elf.rs); the build itself never runs one.
#
# Usage:
#   dir=$(third_party/qemu/build.sh | tail -n 1)    # fetch if needed, print the dir of qemu-aarch64
#   third_party/qemu/build.sh --no-build            # exit 3 if not cached yet
#
# The LAST line of stdout is the absolute path of a directory holding `qemu-aarch64`; everything
# else goes to stderr (same contract as third_party/krew/build.sh).
#
# Caching: $HOME/.cache/resize-guard/qemu-<key>/, <key> from this file and the package version
# apt offers. A hit costs ~0.2 s; a miss ~10 s (a ~60 MB .deb, every emulator, of which one is
# kept). qemu-current points at the last used one.
#
# Needs: a Debian or Ubuntu host with apt's package lists (on a bare container `apt-get update`
# once, as root). Elsewhere, set RESIZE_GUARD_QEMU_DIR to a directory holding qemu-aarch64.
#
# Environment:
#   RESIZE_GUARD_QEMU_DIR         use this directory (must hold qemu-aarch64), never fetch.
#   RESIZE_GUARD_CACHE_DIR        cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_CACHE_KEEP_DAYS  keep other keys' stamp dirs this long (default 2).
set -euo pipefail

PACKAGE=qemu-user-static

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-qemu qemu-aarch64
stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_QEMU_DIR "an executable qemu-aarch64"

for tool in apt-get apt-cache dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 \
    || die "'$tool' not found: not a Debian host; set RESIZE_GUARD_QEMU_DIR to a dir with qemu-aarch64"
done
VERSION="$(apt-cache policy "$PACKAGE" 2>/dev/null | awk '/Candidate:/ { print $2 }')"
[[ -n "$VERSION" && "$VERSION" != "(none)" ]] \
  || die "apt knows no $PACKAGE: its package lists are missing (run 'apt-get update' once, as root)"

KEY="$(stamp_cache_key "${BASH_SOURCE[0]}" -- "$PACKAGE=$VERSION" "$(uname -m)")"
stamp_cache_init qemu "$KEY"
stamp_cache_hit "$PACKAGE $VERSION"
if (( no_build )); then
  log "no cached qemu-aarch64 for key $KEY (run $0 to fetch it)"
  exit 3
fi
stamp_cache_lock
TMP_OUT="$(mktemp -d "$CACHE_ROOT/.tmp-qemu-$KEY.XXXXXX")"
trap 'rm -rf -- "$TMP_OUT"' EXIT

log "fetching $PACKAGE $VERSION from Debian's archive and extracting qemu-aarch64 (first run only) …"
start=$SECONDS
mkdir "$TMP_OUT/deb"
(cd "$TMP_OUT/deb" && apt-get download -q -o APT::Sandbox::User="$(id -un)" "$PACKAGE=$VERSION") >&2 \
  || die "apt-get download $PACKAGE=$VERSION failed (see above)"
deb=("$TMP_OUT"/deb/*.deb)
dpkg-deb --fsys-tarfile "${deb[0]}" | tar -xO ./usr/bin/qemu-aarch64-static >"$TMP_OUT/qemu-aarch64" \
  || die "no usr/bin/qemu-aarch64-static in ${deb[0]}"
chmod 755 "$TMP_OUT/qemu-aarch64"
rm -rf -- "$TMP_OUT/deb"
stamp_cache_expect "qemu-aarch64 version" "$TMP_OUT/qemu-aarch64" --version
printf 'key=%s\npackage=%s=%s\nbuilt=%s in %ss\n' "$KEY" "$PACKAGE" "$VERSION" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(( SECONDS - start ))" >"$TMP_OUT/BUILD-INFO"
stamp_cache_publish "$TMP_OUT" "$start"
