#!/usr/bin/env bash
# Smoke test for the control-plane binaries from third_party/control-plane/build.sh:
# etcd -> kube-apiserver (/readyz) -> kubectl: Node + bound Pod + pods/resize
# patch -> kube-scheduler starts and reports /healthz. Everything binds to
# 127.0.0.1 on free ports under a temp dir and is killed on exit.
#
# Usage: third_party/control-plane/smoke.sh [BIN_DIR]
#   FEATURE_GATES (default InPlacePodVerticalScalingSchedulerPreemption=true)
#   KEEP_TMP=1 keeps the temp dir (logs) for inspection.
set -euo pipefail

log() { printf '%s\n' "smoke: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
BIN="${1:-$("$REPO_ROOT/third_party/control-plane/build.sh" | tail -n1)}"
GATES="${FEATURE_GATES-InPlacePodVerticalScalingSchedulerPreemption=true}"
for b in etcd kube-apiserver kube-scheduler kubectl; do [[ -x "$BIN/$b" ]] || die "missing $BIN/$b"; done
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy
export NO_PROXY=127.0.0.1,localhost

T="$(mktemp -d /tmp/rg-smoke.XXXXXX)"
PIDS=()
cleanup() {
  local rc=$?
  # Reverse start order, each fully stopped before the next (etcd last).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null || true
    wait "${PIDS[i]}" 2>/dev/null || true
  done
  if (( rc != 0 )); then
    for f in "$T"/*.log; do [[ -f "$f" ]] && { log "--- tail of $f"; tail -n 25 "$f" >&2; }; done
  fi
  if [[ -n "${KEEP_TMP:-}" ]]; then log "kept $T"; else rm -rf -- "$T"; fi
  exit "$rc"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
wait_for() { # wait_for SECONDS DESC CMD...   (fails fast if the last started child died)
  local limit=$1 desc=$2; shift 2
  local end=$(( SECONDS + limit )) last="${PIDS[${#PIDS[@]}-1]:-}"
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < end )) || die "timed out after ${limit}s waiting for $desc"
    [[ -z "$last" ]] || kill -0 "$last" 2>/dev/null || die "process $last exited while waiting for $desc"
    sleep 0.1
  done
}

ETCD_PORT=$(free_port); PEER_PORT=$(free_port); API_PORT=$(free_port); SCHED_PORT=$(free_port)
TOKEN="smoke-admin-token-$RANDOM$RANDOM"
echo "$TOKEN,smoke-admin,uid-smoke-admin,\"system:masters\"" >"$T/tokens.csv"
openssl ecparam -name prime256v1 -genkey -noout -out "$T/sa.key" 2>/dev/null
openssl ec -in "$T/sa.key" -pubout -out "$T/sa.pub" 2>/dev/null

# --- etcd
t0=$(now)
"$BIN/etcd" --data-dir="$T/etcd" --name=smoke \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$PEER_PORT" \
  --initial-cluster="smoke=http://127.0.0.1:$PEER_PORT" \
  --unsafe-no-fsync --log-level=warn >"$T/etcd.log" 2>&1 &
PIDS+=($!)
wait_for 30 "etcd /health" curl -sf "http://127.0.0.1:$ETCD_PORT/health"
log "etcd healthy in $(since "$t0")s"

# --- kube-apiserver
# --endpoint-reconciler-type=none: 1.37 refuses a loopback --advertise-address with
# the default "lease" reconciler ("cannot use public IP 127.0.0.1 with endpoint
# reconciler: ... may not be in the loopback range"); "none" skips that check and
# just leaves the default/kubernetes Endpoints unmanaged.
t0=$(now)
"$BIN/kube-apiserver" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" --cert-dir="$T/certs" \
  --endpoint-reconciler-type=none \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" --service-cluster-ip-range=10.0.0.0/24 \
  --authorization-mode=RBAC --token-auth-file="$T/tokens.csv" \
  --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$T/sa.pub" --service-account-signing-key-file="$T/sa.key" \
  ${GATES:+--feature-gates="$GATES"} --profiling=false \
  >"$T/kube-apiserver.log" 2>&1 &
PIDS+=($!)
wait_for 120 "kube-apiserver /readyz" curl -skf -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$API_PORT/readyz"
API_READY=$(since "$t0")
log "kube-apiserver /readyz OK in ${API_READY}s"

cat >"$T/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: smoke, cluster: {server: "https://127.0.0.1:$API_PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: "$TOKEN"}}]
contexts: [{name: smoke, context: {cluster: smoke, user: admin}}]
current-context: smoke
EOF
k() { "$BIN/kubectl" --kubeconfig="$T/kubeconfig" "$@"; }
wait_for 30 "default namespace" k get namespace default

k version >&2
k version -o json | grep -q '"gitVersion": "v1.37.2"' || die "server/client gitVersion is not v1.37.2"

# --- Node (with the alpha podPreemptionPolicy field) + status
k apply -f - >&2 <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: sim-node-1}
spec:
  podPreemptionPolicy:
    disableResizePreemption: ["example.com/smoke"]
EOF
k patch node sim-node-1 --subresource=status --type=merge -p \
  '{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"},"conditions":[{"type":"Ready","status":"True","reason":"Smoke","message":"simulated","lastHeartbeatTime":null}]}}' >&2 \
  || k patch node sim-node-1 --subresource=status --type=merge -p \
  '{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"}}}' >&2
PPP="$(k get node sim-node-1 -o jsonpath='{.spec.podPreemptionPolicy}')"
log "node.spec.podPreemptionPolicy after round-trip: '${PPP}'"
log "node taints: '$(k get node sim-node-1 -o jsonpath='{.spec.taints}')'"

# --- Pod bound to the node, then a resize
k apply -f - >&2 <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: smoke-pod, namespace: default}
spec:
  nodeName: sim-node-1
  containers:
  - name: c
    image: registry.invalid/pause:3.10
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 250m, memory: 64Mi}
EOF
gen0="$(k get pod smoke-pod -o jsonpath='{.metadata.generation}')"
k patch pod smoke-pod --subresource resize -p \
  '{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"550m"},"limits":{"cpu":"550m"}}}]}}' >&2
gen1="$(k get pod smoke-pod -o jsonpath='{.metadata.generation}')"
cpu="$(k get pod smoke-pod -o jsonpath='{.spec.containers[0].resources.requests.cpu}')"
log "resize: generation $gen0 -> $gen1, requests.cpu=$cpu"
[[ "$cpu" == 550m && "$gen1" -gt "$gen0" ]] || die "resize not applied"

# --- kube-scheduler starts with the same gates
t0=$(now)
"$BIN/kube-scheduler" --kubeconfig="$T/kubeconfig" \
  --authentication-kubeconfig="$T/kubeconfig" --authorization-kubeconfig="$T/kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" \
  ${GATES:+--feature-gates="$GATES"} >"$T/kube-scheduler.log" 2>&1 &
PIDS+=($!)
wait_for 60 "kube-scheduler /healthz" curl -skf "https://127.0.0.1:$SCHED_PORT/healthz"
log "kube-scheduler /healthz OK in $(since "$t0")s"

echo "smoke: OK (kube-apiserver ready in ${API_READY}s)"
