#!/usr/bin/env bash
# make sign: signs what make push pushed: each image index by the digest make image wrote (the
# one the tag names after the push), with cosign (COSIGN=path, else v3 built by
# third_party/cosign/build.sh) and KEY (a cosign key file with COSIGN_PASSWORD in the
# environment, or a KMS URI). The signature goes beside the image as a Sigstore bundle referring
# to it; SIGNATURE_FORMAT=legacy writes cosign's older `sha256-<hex>.sig` tag instead, for
# verifiers that read only that. TLOG=0 keeps it out of the Rekor transparency log (a registry on
# loopback, an air-gapped site). docs/src/signing.md says how to verify it and how an admission
# policy checks it.
#
# Usage (from the Makefile): REGISTRY=host[:port]/namespace KEY=cosign.key|kms-uri [TLOG=0] \
#   [SIGNATURE_FORMAT=bundle|legacy] [PLAIN_HTTP=1] [COSIGN=path] CARGO=cargo scripts/sign.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/release.sh
source scripts/lib/release.sh

[[ -n "${REGISTRY:-}" && -n "${KEY:-}" ]] || {
  echo "usage: make sign REGISTRY=host[:port]/namespace KEY=cosign.key|kms-uri [TLOG=0] [SIGNATURE_FORMAT=bundle|legacy] [PLAIN_HTTP=1] [COSIGN=path]" >&2
  exit 2
}
format="${SIGNATURE_FORMAT:-bundle}"
case "$format" in
  bundle | legacy) ;;
  *) echo "make sign: SIGNATURE_FORMAT is bundle or legacy" >&2; exit 2 ;;
esac
cosign="${COSIGN:-$(third_party/cosign/build.sh | tail -n 1)/cosign}"
version="$(release_version)"
flags=()
# Without the transparency log, or for the legacy format, cosign's signing config (which names
# Rekor and the bundle format) is not used.
[[ "${TLOG:-}" != 0 && "$format" != legacy ]] || flags+=(--use-signing-config=false)
[[ "${TLOG:-}" != 0 ]] || flags+=(--tlog-upload=false)
[[ "$format" != legacy ]] || flags+=(--new-bundle-format=false)
[[ -z "${PLAIN_HTTP:-}" ]] || flags+=(--allow-http-registry)
for b in webhook controller; do
  layout="target/image/resize-guard-$b-$version.oci"
  [[ -f "$layout/index.json" ]] || {
    echo "make sign: $layout is missing: run make image and make push first" >&2
    exit 2
  }
  digest="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$layout/index.json")"
  echo "make sign: $REGISTRY/resize-guard-$b@$digest"
  "$cosign" sign --yes --key "$KEY" ${flags[@]+"${flags[@]}"} "$REGISTRY/resize-guard-$b@$digest"
done
