#!/usr/bin/env bash
# make image: static, stripped release binaries for each of PLATFORMS (scripts/lib/release.sh says
# how), then one OCI archive per image (an image index over the platforms' manifests), stamped with
# the commit and its time (same binaries, same digest), and its CycloneDX SBOM; the controller
# image also carries resize-guard-certs (deploy/image/Containerfile says why). Then the kubectl
# plugin's krew archives for PLATFORMS and the krew manifest listing them. What runs where is
# checked by the image tests (tests/e2e/images/), not here: a binary for another CPU or a
# dynamically linked one is refused by the image writer (image/src/executable.rs).
#
# Usage (from the Makefile): PLATFORMS="linux/amd64 linux/arm64" [RELEASE=1] CARGO=cargo \
#   scripts/image.sh
#
# Writes target/image/resize-guard-{webhook,controller}-<version>.oci.tar (and the .oci layout),
# .cdx.json, kubectl-resize_guard-<version>-linux-<arch>.tar.gz (+ .sha256) and resize-guard.yaml.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/release.sh
source scripts/lib/release.sh

read -r -a platforms <<<"${PLATFORMS:?PLATFORMS names the platforms to build, e.g. linux/amd64 linux/arm64}"
check_platforms "${platforms[@]}"
version="$(release_version)"
tag="$(image_tag "$version")"

triples=()
for p in "${platforms[@]}"; do triples+=("$(triple "$p")"); done
# shellcheck disable=SC2046 # one Rust target a line, no spaces in them
rustup_targets $(printf '%s\n' "${triples[@]}" "$TOOL_TARGET" | LC_ALL=C sort -u)

cross_toolchain
tools_built=
for p in "${platforms[@]}"; do
  t="$(triple "$p")"
  if [[ "$t" == "$TOOL_TARGET" ]]; then
    zigbuild --target "$t" "${IMAGE_PACKAGES[@]}" "${TOOL_PACKAGES[@]}"
    tools_built=1
  else
    zigbuild --target "$t" "${IMAGE_PACKAGES[@]}"
  fi
done
# The image tools for this machine, when no platform above built them.
if [[ -z "$tools_built" ]]; then
  if [[ "$TOOL_TARGET" == *musl* ]]; then
    zigbuild --target "$TOOL_TARGET" "${TOOL_PACKAGES[@]}"
  else
    echo "cargo build --locked --release --target $TOOL_TARGET ${TOOL_PACKAGES[*]}"
    # shellcheck disable=SC2086 # CARGO may be a command with arguments, as in the Makefile.
    CARGO_TARGET_DIR=$IMAGE_BUILD $CARGO build --locked --release --target "$TOOL_TARGET" "${TOOL_PACKAGES[@]}"
  fi
fi

platform_args=()
for p in "${platforms[@]}"; do platform_args+=(--platform "$p=$(bin_dir "$p")"); done
echo "resize-guard-image --out-dir target/image --tag $tag ${platform_args[*]} resize-guard-webhook resize-guard-controller"
SOURCE_DATE_EPOCH="$COMMIT_TIME" "$IMAGE_BIN/resize-guard-image" \
  --revision "$(git rev-parse HEAD 2>/dev/null || echo unknown)" --out-dir target/image --tag "$tag" \
  "${platform_args[@]}" resize-guard-webhook resize-guard-controller
plugin_pack "${platforms[@]}"
echo "image: both images are tagged $tag (${platforms[*]}); make push REGISTRY=<yours> prints the kustomize and Helm lines that run them"
