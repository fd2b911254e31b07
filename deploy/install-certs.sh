#!/usr/bin/env bash
# Creates the webhook's serving certificate (CA + leaf for the Service) with resize-guard-certs,
# stores it in Secret resize-guard-webhook-tls and writes the CA into both webhook
# configurations' caBundle. Re-running it rotates the leaf and keeps the CA.
#   deploy/install-certs.sh [DIR]   (DIR keeps ca.key between runs; default ./resize-guard-certs)
set -euo pipefail
dir=${1:-./resize-guard-certs}
certs=${RESIZE_GUARD_CERTS_BIN:-resize-guard-certs}
if [[ -f "$dir/ca.key" ]]; then
  "$certs" renew --out-dir "$dir" --service resize-guard-webhook --namespace resize-guard
else
  "$certs" generate --out-dir "$dir" --service resize-guard-webhook --namespace resize-guard
fi
kubectl -n resize-guard create secret tls resize-guard-webhook-tls \
  --cert="$dir/tls.crt" --key="$dir/tls.key" --dry-run=client -o yaml | kubectl apply -f -
ca=$(base64 -w0 < "$dir/ca.crt")
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  kubectl patch "$kind" resize-guard --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]"
done
