#!/usr/bin/env bash
# Install (or reuse) the release build's cross toolchain, from package registries only and
# without root, for `make image` and `make plugins`:
#   zig             the `ziglang` wheel from PyPI: C compiler and linker for every target
#                   (musl libc for static Linux binaries, macOS libSystem, MinGW-w64 for Windows)
#   cargo-zigbuild  the `cargo-zigbuild` wheel from PyPI: runs cargo with zig as linker and C
#                   compiler of each --target
#   cargo-auditable `cargo install --locked` from crates.io: embeds the dependency tree in every
#                   binary (a `.dep-v0` section) that the image tool turns into the SBOMs
#   macos-sdk/      link stubs (.tbd text files, written here) of the two macOS frameworks the
#                   plugin calls, Security and CoreFoundation: zig ships macOS's libSystem but no
#                   frameworks, and Apple's SDK is not in any package registry. A stub names the
#                   framework's install path and the symbols the program binds to; the Mac's own
#                   framework serves them at run time. A dependency that calls one more function
#                   fails the darwin link with "undefined symbol: _Name": add it below.
# Each is pinned below; rustup adds the Rust targets (rust-std) scripts/lib/release.sh names.
#
# Usage:
#   dir=$(third_party/cross/build.sh | tail -n 1)    # install if needed, print the bin dir
#   third_party/cross/build.sh --no-build            # exit 3 if not cached yet
#
# The LAST line of stdout is the absolute path of a directory holding `zig`, `cargo-zigbuild`,
# `cargo-auditable` and `macos-sdk/` (SDKROOT for the darwin targets); everything else goes to
# stderr (same contract as third_party/krew/build.sh).
#
# Caching: $HOME/.cache/resize-guard/cross-<key>/, where <key> is derived from this file (the
# pins) and `rustc -V` (cargo-auditable is compiled by it). A hit costs ~0.1 s; a miss ~1 min
# (two wheels, ~70 MB, and one `cargo install`). cross-current points at the last used one.
#
# Needs: python3 with pip, cargo. Nothing is written outside the cache directory (pip's and
# cargo's download caches aside), so a macOS or CI builder runs it as any user.
#
# Environment:
#   RESIZE_GUARD_CROSS_DIR        use this directory (must hold the three programs), never install.
#   RESIZE_GUARD_CACHE_DIR        cache root (default $HOME/.cache/resize-guard).
#   RESIZE_GUARD_CACHE_KEEP_DAYS  keep other keys' stamp dirs this long (default 2).
#
# Bumping: change a pin below, run this script and `make image plugins` (cargo-zigbuild names the
# zig versions it supports in its README).
set -euo pipefail

ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1
CARGO_AUDITABLE_VERSION=0.7.7
# What kubectl-resize_guard binds to in each framework (rustls-platform-verifier,
# security-framework and core-foundation as Cargo.lock pins them).
SECURITY_SYMBOLS=(SecCertificateCopySubjectSummary SecCertificateCreateWithData
  SecCopyErrorMessageString SecPolicyCreateSSL SecTrustCreateWithCertificates
  SecTrustEvaluateWithError SecTrustSetAnchorCertificates SecTrustSetAnchorCertificatesOnly
  SecTrustSetOCSPResponse SecTrustSetVerifyDate)
COREFOUNDATION_SYMBOLS=(CFArrayCreate CFDataCreate CFDateCreate CFErrorCopyDescription
  CFErrorGetCode CFRelease CFStringCreateWithBytes CFStringGetBytes CFStringGetCStringPtr
  CFStringGetLength kCFAbsoluteTimeIntervalSince1970 kCFAllocatorDefault kCFTypeArrayCallBacks)
SDK_FRAMEWORKS=System/Library/Frameworks

# shellcheck source=third_party/stamp-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stamp-cache.sh"

stamp_cache_tool build-cross zig cargo-zigbuild cargo-auditable \
  "macos-sdk/$SDK_FRAMEWORKS/Security.framework/Security.tbd" \
  "macos-sdk/$SDK_FRAMEWORKS/CoreFoundation.framework/CoreFoundation.tbd"
stamp_cache_args "$@"
stamp_cache_override RESIZE_GUARD_CROSS_DIR "zig, cargo-zigbuild and cargo-auditable"

command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH (pip installs zig)"
python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip (python3 -m ensurepip --user)"
command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH"
RUSTC_VERSION="$(rustc -V)" || die "'rustc -V' failed"

KEY="$(stamp_cache_key "${BASH_SOURCE[0]}" -- "$RUSTC_VERSION" "$(uname -sm)")"
stamp_cache_init cross "$KEY"
stamp_cache_hit "zig $ZIGLANG_VERSION, cargo-zigbuild $CARGO_ZIGBUILD_VERSION, cargo-auditable $CARGO_AUDITABLE_VERSION"
if (( no_build )); then
  log "no cached toolchain for key $KEY (run $0 to install it)"
  exit 3
fi
stamp_cache_lock
TMP_OUT="$(mktemp -d "$CACHE_ROOT/.tmp-cross-$KEY.XXXXXX")"
trap 'rm -rf -- "$TMP_OUT"' EXIT

log "installing zig $ZIGLANG_VERSION, cargo-zigbuild $CARGO_ZIGBUILD_VERSION (PyPI) and" \
  "cargo-auditable $CARGO_AUDITABLE_VERSION (crates.io) into $STAMP (first run only; ~1 min) …"
start=$SECONDS
# --target: a plain directory, no virtualenv and no site-packages of the user's python touched;
# --only-binary: the wheels carry the programs, nothing is compiled.
PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --only-binary=:all: --target "$TMP_OUT/python" \
  "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION" >&2 \
  || die "pip install of ziglang and cargo-zigbuild failed (see above)"
# zig finds its lib/ beside its real path, so a symlink is enough.
ln -s python/ziglang/zig "$TMP_OUT/zig"
ln -s python/bin/cargo-zigbuild "$TMP_OUT/cargo-zigbuild"
# Its own target dir, so the build of the project is not touched.
CARGO_TARGET_DIR="$TMP_OUT/.build" cargo install --quiet --locked --root "$TMP_OUT/cargo" \
  "cargo-auditable@$CARGO_AUDITABLE_VERSION" >&2 || die "cargo install cargo-auditable failed (see above)"
rm -rf -- "$TMP_OUT/.build"
ln -s cargo/bin/cargo-auditable "$TMP_OUT/cargo-auditable"

# tbd_stub NAME SYMBOL…: a text-based stub of /System/Library/Frameworks/NAME.framework (tapi
# tbd v4, both macOS CPUs), exporting SYMBOL… (C names, `_`-prefixed as Mach-O spells them).
tbd_stub() {
  local name=$1 dir
  shift
  dir="$TMP_OUT/macos-sdk/$SDK_FRAMEWORKS/$name.framework"
  mkdir -p "$dir"
  {
    echo "--- !tapi-tbd"
    echo "tbd-version: 4"
    echo "targets: [ x86_64-macos, arm64-macos ]"
    echo "install-name: '/$SDK_FRAMEWORKS/$name.framework/Versions/A/$name'"
    echo "exports:"
    echo "  - targets: [ x86_64-macos, arm64-macos ]"
    printf '    symbols: [ %s ]\n' "$(printf '_%s, ' "$@" | sed 's/, $//')"
    echo "..."
  } >"$dir/$name.tbd"
}
tbd_stub Security "${SECURITY_SYMBOLS[@]}"
tbd_stub CoreFoundation "${COREFOUNDATION_SYMBOLS[@]}"
have "$TMP_OUT" || die "installed, but a program is missing in $TMP_OUT"

# Sanity: each runs and is the pinned version.
stamp_cache_expect "$ZIGLANG_VERSION" "$TMP_OUT/zig" version
stamp_cache_expect "cargo-zigbuild $CARGO_ZIGBUILD_VERSION" "$TMP_OUT/cargo-zigbuild" --version
stamp_cache_expect "should be invoked through Cargo" "$TMP_OUT/cargo-auditable"
{
  echo "key=$KEY"
  echo "ziglang=$ZIGLANG_VERSION cargo-zigbuild=$CARGO_ZIGBUILD_VERSION cargo-auditable=$CARGO_AUDITABLE_VERSION"
  echo "rustc=$RUSTC_VERSION"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( SECONDS - start ))s"
} >"$TMP_OUT/BUILD-INFO"
stamp_cache_publish "$TMP_OUT" "$start"
