#!/usr/bin/env bash
# make push: the images make image wrote, pushed under REGISTRY by the release build of
# resize-guard-push (image/src/push.rs; tests/e2e/images/push.rs runs make push against a real
# registry), each with its CycloneDX SBOM beside it as an OCI artifact referring to the image
# (NO_SBOM=1 leaves the SBOMs out). Credentials: docker's and podman's files and credential
# helpers. Prints the kustomize images: block and the Helm --set flags that pin what it pushed.
#
# Usage (from the Makefile): REGISTRY=host[:port]/namespace [TAG=tag] [PLAIN_HTTP=1] [NO_SBOM=1] \
#   CARGO=cargo scripts/push.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/release.sh
source scripts/lib/release.sh

[[ -n "${REGISTRY:-}" ]] || {
  echo "usage: make push REGISTRY=host[:port]/namespace [TAG=tag] [PLAIN_HTTP=1] [NO_SBOM=1]" >&2
  exit 2
}
[[ -x "$IMAGE_BIN/resize-guard-push" ]] || { echo "make push: run make image first" >&2; exit 2; }
version="$(release_version)"
args=(--registry "$REGISTRY")
[[ -z "${TAG:-}" ]] || args+=(--tag "$TAG")
[[ -z "${PLAIN_HTTP:-}" ]] || args+=(--plain-http)
[[ -z "${NO_SBOM:-}" ]] || args+=(--no-sbom)
"$IMAGE_BIN/resize-guard-push" "${args[@]}" \
  "target/image/resize-guard-webhook-$version.oci" "target/image/resize-guard-controller-$version.oci"
