#!/usr/bin/env bash
# make plugins (after make image): the kubectl plugin for PLUGIN_PLATFORMS too (macOS on Intel and
# Apple silicon, Windows), each a release build of kubectl/ alone with zig (~5 min each on 2
# cores, so not part of make test; scripts/lib/release.sh says how), then every archive and the
# krew manifest again, now listing PLATFORMS and PLUGIN_PLATFORMS.
#
# Usage (from the Makefile): PLATFORMS="linux/amd64 linux/arm64" \
#   PLUGIN_PLATFORMS="darwin/amd64 darwin/arm64 windows/amd64" CARGO=cargo scripts/plugins.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/release.sh
source scripts/lib/release.sh

read -r -a platforms <<<"${PLATFORMS:?PLATFORMS names the platforms make image built}"
read -r -a plugin_platforms <<<"${PLUGIN_PLATFORMS-}"
check_platforms "${platforms[@]}" ${plugin_platforms[@]+"${plugin_platforms[@]}"}

triples=()
targets=()
for p in ${plugin_platforms[@]+"${plugin_platforms[@]}"}; do
  triples+=("$(triple "$p")")
  targets+=(--target "$(triple "$p")")
done
rustup_targets ${triples[@]+"${triples[@]}"}

cross_toolchain
# macOS: the oldest release the plugin runs on, and the framework stubs it links against.
MACOSX_DEPLOYMENT_TARGET=11.0 SDKROOT="$cross/macos-sdk" \
  zigbuild ${targets[@]+"${targets[@]}"} -p resize-guard-kubectl
plugin_pack "${platforms[@]}" ${plugin_platforms[@]+"${plugin_platforms[@]}"}
