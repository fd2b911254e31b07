# shellcheck shell=bash
# The release build's shared definitions, sourced (not run) by scripts/image.sh, plugins.sh,
# push.sh and sign.sh, each run by the Makefile from the checkout's root: the Rust target of each
# platform, where the release binaries and the image tools land, the version and the images' tag,
# and the zig cross build.
#
# Environment: CARGO (the Makefile passes its own; default cargo, split into words as make does).
#
# Static, stripped release binaries for each platform (Linux: musl, so static) go to their own
# target dir so the debug cache stays warm. No root and no system package: every target is
# cross-compiled with zig as C compiler and linker through cargo-zigbuild, under cargo-auditable
# so each binary embeds its dependency tree, the three installed (pinned, cached) by
# third_party/cross/build.sh from PyPI and crates.io; rustup adds the Rust targets. The image
# writer, the plugin packer and the pusher (image/) are built with the platform of this machine
# (optimised: gzip is ~5x slower in a debug build).

# Not exported: the programs run here see the environment make gives its recipes.
CARGO="${CARGO:-cargo}"
export -n CARGO
REPO_ROOT="$(pwd -P)"

# The platforms the binaries are built for, and the Rust target of each.
KNOWN_PLATFORMS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"
triple() {
  case "$1" in
    linux/amd64) echo x86_64-unknown-linux-musl ;;
    linux/arm64) echo aarch64-unknown-linux-musl ;;
    darwin/amd64) echo x86_64-apple-darwin ;;
    darwin/arm64) echo aarch64-apple-darwin ;;
    windows/amd64) echo x86_64-pc-windows-gnu ;;
    *) return 1 ;;
  esac
}

# check_platforms PLATFORM…: every one known, or exit 2 naming the known ones.
check_platforms() {
  local p
  for p in "$@"; do
    triple "$p" >/dev/null || { echo "unknown platform $p (known: $KNOWN_PLATFORMS)" >&2; exit 2; }
  done
}

IMAGE_BUILD=target/image-build
# bin_dir PLATFORM: where the release binaries of PLATFORM land.
bin_dir() { echo "$IMAGE_BUILD/$(triple "$1")/release"; }

# The image tools run here: on Linux built static like the images (so they share one build),
# elsewhere (a macOS builder) for the host.
HOST_TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
case "$HOST_TRIPLE" in
  x86_64-unknown-linux-gnu) TOOL_TARGET=x86_64-unknown-linux-musl ;;
  aarch64-unknown-linux-gnu) TOOL_TARGET=aarch64-unknown-linux-musl ;;
  *) TOOL_TARGET=$HOST_TRIPLE ;;
esac
IMAGE_BIN="$IMAGE_BUILD/$TOOL_TARGET/release"

# Paths in panic messages name the checkout and cargo's registry relatively, so two machines
# building one commit write the same bytes.
IMAGE_RUSTFLAGS="-C strip=symbols --remap-path-prefix=$REPO_ROOT=. --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=cargo"
# shellcheck disable=SC2034 # the scripts that source this use them
IMAGE_PACKAGES=(-p resize-guard-webhook -p resize-guard-controller -p resize-guard-certs -p resize-guard-kubectl)
# shellcheck disable=SC2034
TOOL_PACKAGES=(-p resize-guard-image)

# release_version: the version of the kubectl plugin's crate, which every image and archive
# carries.
release_version() {
  # shellcheck disable=SC2086 # CARGO may be a command with arguments, as in the Makefile.
  $CARGO metadata --format-version 1 --no-deps --locked | python3 -c 'import json, sys
print([p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "resize-guard-kubectl"][0])'
}
# The commit's time, stamped on every image and archive entry (same source, same bytes).
COMMIT_TIME="$(git log -1 --format=%ct 2>/dev/null || echo 0)"

# image_tag VERSION: every build gets its own tag, so a node never keeps a stale image under
# IfNotPresent: the version, the commit, and -dirty for uncommitted changes (0.2.0-g1a2b3c4);
# RELEASE=1 tags the version alone.
image_tag() {
  if [[ -n "${RELEASE:-}" ]]; then
    echo "$1"
  else
    echo "$1-g$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"
  fi
}

# rustup_targets TRIPLE…: adds the Rust targets not installed yet.
rustup_targets() {
  local installed t
  installed="$(rustup target list --installed)" || true
  for t in "$@"; do
    printf '%s\n' "$installed" | grep -qx "$t" || rustup target add "$t" || exit 1
  done
}

# cross_toolchain: sets cross to third_party/cross/build.sh's directory (zig, cargo-zigbuild,
# cargo-auditable, macos-sdk/), installing them on first use.
cross_toolchain() {
  cross="$(third_party/cross/build.sh | tail -n 1)"
}

# zigbuild ARGS…: `cargo auditable zigbuild --locked --release ARGS…` into IMAGE_BUILD, printed
# first. cargo-auditable runs $CARGO (here cargo-zigbuild) with itself as rustc's workspace
# wrapper; cargo-zigbuild runs cargo with zig as each target's linker and C compiler.
zigbuild() {
  echo "cargo auditable zigbuild --locked --release $*"
  RUSTFLAGS="$IMAGE_RUSTFLAGS" CARGO_TARGET_DIR=$IMAGE_BUILD CARGO_ZIGBUILD_ZIG_PATH="$cross/zig" \
    CARGO="$cross/cargo-zigbuild" "$cross/cargo-auditable" auditable zigbuild --locked --release "$@"
}

# plugin_pack PLATFORM…: the kubectl plugin's krew archives of PLATFORM… and the krew manifest
# listing exactly those (image/src/plugin/), written to target/image.
plugin_pack() {
  local p args=()
  for p in "$@"; do args+=(--platform "$p=$(bin_dir "$p")"); done
  echo "resize-guard-plugin --out-dir target/image ${args[*]}"
  SOURCE_DATE_EPOCH="$COMMIT_TIME" "$IMAGE_BIN/resize-guard-plugin" --out-dir target/image "${args[@]}"
}
