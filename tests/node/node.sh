#!/usr/bin/env bash
# One real Kubernetes node on this machine for the tests and `make demo-node`: upstream's kubelet
# and kube-proxy, containerd and runc (third_party/node/build.sh), the CNI bridge plugin, all inside
# a network namespace and a private mount namespace, under one work directory. See README.md here.
#
#   node.sh net   WORK                 sweep stale state, then the netns and its veth (the API
#                                      server binds the host end, 10.213.0.1, next)
#   node.sh up    WORK KUBECONFIG RESERVED_CPU CLIENT_CA
#                                      registry, cgroup root, sysctl guard, mount namespace,
#                                      containerd, the pause image, kubelet (trusting CLIENT_CA
#                                      for client certificates), kube-proxy
#   node.sh import WORK ARCHIVE…       import OCI image archives (oci-archive.py's) into the
#                                      running node's containerd under the names they carry
#   node.sh down  WORK                 stop everything, restore sysctls, remove it all
#   node.sh check WORK                 print anything left behind; exit 1 if something is
#
# Environment: RESIZE_GUARD_NODE_BIN_DIR (third_party/node/build.sh's directory),
# RESIZE_GUARD_REGISTRY_BIN (third_party/registry/build.sh's registry). Needs root (netns, cgroups,
# mounts). One node per machine: the caller holds a lock on WORK.lock while it runs.
set -euo pipefail

NETNS=rgnode1
HOST_IF=rgn1-host
NODE_IF=rgn1-node
HOST_IP=10.213.0.1
NODE_IP=10.213.0.2
POD_CIDR=10.214.0.0/24
POD_GW=10.214.0.1
REGISTRY_ADDR=$HOST_IP:5000
NODE_NAME=real-node
CGROUP_ROOT=rgnode1
# The sysctls the kubelet sets once at start (pkg/kubelet/cm/container_manager_linux.go,
# setupKernelTunables), host-wide; the guard writes the originals back.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
log() { printf 'node.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $# -ge 2 ]] || die "usage: node.sh net|up|import|down|check WORK [...]"
CMD=$1
WORK=$2
[[ "$WORK" == /* && "$WORK" != / ]] || die "WORK must be an absolute path: $WORK"
[[ $(id -u) == 0 ]] || die "a real node needs root (network namespace, cgroups, mounts)"

cgroup_v2() { [[ "$(stat -fc %T /sys/fs/cgroup)" == cgroup2fs ]]; }
# Every cgroup hierarchy's directory for our root (v1: one per controller, and runc's unified).
cgroup_dirs() {
  if cgroup_v2; then echo "/sys/fs/cgroup/$CGROUP_ROOT"; return; fi
  local h
  for h in /sys/fs/cgroup/*/; do echo "${h%/}/$CGROUP_ROOT"; done
}

stop_pid() { # stop_pid FILE: TERM, 5 s, KILL
  local f=$1 p i
  [[ -f $f ]] || return 0
  p=$(<"$f")
  if kill "$p" 2>/dev/null; then
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f -- "$f"
}

wait_for() { # wait_for SECONDS WHAT CMD…
  local s=$1 what=$2 i
  shift 2
  for i in $(seq $(( s * 10 ))); do "$@" 2>/dev/null && return 0; sleep 0.1; done
  die "$what not ready after ${s}s"
}

cmd_net() {
  cmd_down quiet
  mkdir -p "$WORK"/{state,logs}
  ip netns add $NETNS
  ip link add $HOST_IF type veth peer name $NODE_IF
  ip link set $NODE_IF netns $NETNS
  ip addr add $HOST_IP/30 dev $HOST_IF
  ip link set $HOST_IF up
  ip -n $NETNS addr add $NODE_IP/30 dev $NODE_IF
  ip -n $NETNS link set $NODE_IF up
  ip -n $NETNS link set lo up
  # kube-apiserver calls webhooks at pod IPs (--enable-aggregator-routing); the node has no
  # default route, so nothing it or its pods send can leave the machine.
  ip route add $POD_CIDR via $NODE_IP dev $HOST_IF
  log "netns $NETNS: $HOST_IP (host) <-> $NODE_IP (node), pods $POD_CIDR"
}

ensure_iptables() {
  command -v iptables-restore >/dev/null && return 0
  log "installing Debian's iptables (kube-proxy's rules) with apt-get …"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends iptables >&2 \
    || { apt-get update >&2 && apt-get install -y --no-install-recommends iptables >&2; } \
    || die "apt-get install iptables failed"
}

write_configs() { # KUBECONFIG RESERVED_CPU CLIENT_CA
  local kubeconfig=$1 reserved_cpu=$2 client_ca=$3
  mkdir -p "$WORK"/{containerd/root,containerd/state,"containerd/certs.d/$REGISTRY_ADDR",run/s,kubelet/root,kubelet/pod-logs,cni/conf,cni/ipam,registry/data,images}
  cp "$kubeconfig" "$WORK/kubeconfig"
  cp "$client_ca" "$WORK/kubelet/client-ca.crt"
  cat >"$WORK/registry/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $WORK/registry/data}
http: {addr: $REGISTRY_ADDR}
EOF
  # The local registry is an operator's own: `make push REGISTRY=$REGISTRY_ADDR/resize-guard` puts
  # resize-guard's images there and the install names them so; it speaks plain HTTP.
  cat >"$WORK/containerd/certs.d/$REGISTRY_ADDR/hosts.toml" <<EOF
server = "http://$REGISTRY_ADDR"
[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$WORK/cni/conf/10-$NETNS.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "$NETNS", "plugins": [
  {"type": "bridge", "bridge": "rgcni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$WORK/cni/ipam",
            "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  cat >"$WORK/containerd/config.toml" <<EOF
version = 3
root = '$WORK/containerd/root'
state = '$WORK/containerd/state'
oom_score = 0
[grpc]
  address = '$WORK/run/containerd.sock'
[ttrpc]
  address = '$WORK/run/containerd.sock.ttrpc'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'localhost/resize-guard/pause:1'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '$WORK/containerd/certs.d'
  [plugins.'io.containerd.cri.v1.runtime']
    # No CAP_SYS_RESOURCE here: the kubelet's negative oom_score_adj values are clamped to
    # containerd's own (0) instead of failing every sandbox.
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$BIN/runc'
          Root = '$WORK/containerd/state/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$BIN/cni']
      conf_dir = '$WORK/cni/conf'
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
  [plugins.'io.containerd.internal.v1.opt']
    path = '$WORK/containerd/opt'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '$WORK/run/s'
EOF
  : >"$WORK/kubelet/resolv.conf"
  local fail_v1=false
  cgroup_v2 && fail_v1=true
  cat >"$WORK/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: $fail_v1
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
containerRuntimeEndpoint: unix://$WORK/run/containerd.sock
# No CAP_SYS_RESOURCE: a negative oom_score_adj or a nofile limit of 1e6 fails.
oomScoreAdj: 0
maxOpenFiles: 20000
failSwapOn: false
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# As a production kubelet: bearer tokens checked by TokenReview, client certificates from the CA
# of kube-apiserver's kubelet client certificate (exec, logs, port-forward), requests by
# SubjectAccessReview (metrics-server's ServiceAccount scrapes /metrics/resource with the RBAC of
# its rbac.yaml).
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $WORK/kubelet/client-ca.crt}}
authorization: {mode: Webhook}
# A shared test machine must not evict the tests' pods or collect their images. Its disk is the
# host's, filled by everyone's builds: 1 % of it is gigabytes (DiskPressure evicted upstream's e2e
# pods at 2.4 GB free), so the disk thresholds are an absolute floor.
evictionHard: {memory.available: "100Mi", nodefs.available: "512Mi", nodefs.inodesFree: "1%", imagefs.available: "512Mi", imagefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $WORK/kubelet/pod-logs
volumePluginDir: $WORK/kubelet/volume-plugins
clusterDomain: cluster.local
resolvConf: $WORK/kubelet/resolv.conf
serializeImagePulls: false
systemReserved: {cpu: "$reserved_cpu", memory: 256Mi}
EOF
  # RESIZE_GUARD_NODE_FEATURE_GATES=Name=true,...: the kubelet's feature gates (an alpha's e2e).
  if [[ -n "${RESIZE_GUARD_NODE_FEATURE_GATES:-}" ]]; then
    echo "featureGates:" >>"$WORK/kubelet/config.yaml"
    local gate
    for gate in ${RESIZE_GUARD_NODE_FEATURE_GATES//,/ }; do
      echo "  ${gate%%=*}: ${gate#*=}" >>"$WORK/kubelet/config.yaml"
    done
  fi
  cat >"$WORK/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
clientConnection: {kubeconfig: $WORK/kubeconfig}
# 0: leave the conntrack sysctls alone (they are host-wide).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

cmd_up() {
  [[ $# -eq 3 ]] || die "usage: node.sh up WORK KUBECONFIG RESERVED_CPU CLIENT_CA"
  BIN="${RESIZE_GUARD_NODE_BIN_DIR:?the directory third_party/node/build.sh prints}"
  local registry="${RESIZE_GUARD_REGISTRY_BIN:?the registry binary of third_party/registry/build.sh}"
  ip netns list | grep -qw $NETNS || die "no netns $NETNS: run node.sh net first"
  ensure_iptables
  write_configs "$@"
  local t0=$SECONDS

  # The registry, on the host end of the veth (reachable from the node, not from outside).
  OTEL_TRACES_EXPORTER=none nohup "$registry" serve "$WORK/registry/config.yml" \
    >"$WORK/logs/registry.log" 2>&1 &
  echo $! >"$WORK/state/registry.pid"

  # The kubelet's cgroup root in every hierarchy; cpuset needs its cpus and mems.
  local d
  if cgroup_v2; then
    mkdir -p "/sys/fs/cgroup/$CGROUP_ROOT"
    for c in cpu cpuset memory pids; do echo "+$c" >"/sys/fs/cgroup/$CGROUP_ROOT/cgroup.subtree_control" 2>/dev/null || true; done
  else
    while read -r d; do [[ "$d" == */unified/* ]] || mkdir -p "$d"; done < <(cgroup_dirs)
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  fi

  # The sysctl guard: the originals, and a loop that writes them back whenever they change.
  local k
  for k in "${SYSCTLS[@]}"; do echo "$k=$(sysctl -n "$k")"; done >"$WORK/state/sysctls"
  nohup bash -c '
    while :; do
      while IFS== read -r k v; do
        f=/proc/sys/${k//.//}
        [[ "$(<"$f")" == "$v" ]] || { echo "$(date +%T.%N) $k=$(<"$f"), restoring $v"; echo "$v" >"$f"; }
      done <"$1"
      sleep 0.05
    done' sysctl-guard "$WORK/state/sysctls" >"$WORK/logs/sysctl-guard.log" 2>&1 &
  echo $! >"$WORK/state/guard.pid"

  # One private mount namespace (in the node's netns) for containerd, the kubelet and
  # kube-proxy: tmpfs over /run, /var/lib and /var/log takes the paths they hard-code
  # (/var/lib/kubelet/device-plugins, /var/log/containers, /var/lib/cni, /run/xtables.lock), and
  # every mount they make dies with it.
  LIBMOUNT_UTAB="$WORK/run/utab" nohup nsenter --net=/run/netns/$NETNS unshare --mount --propagation private -- \
    sh -c 'mount -t tmpfs -o mode=755 rg-run /run && mount -t tmpfs -o mode=755 rg-varlib /var/lib &&
           mount -t tmpfs -o mode=755 rg-varlog /var/log && exec sleep infinity' \
    >"$WORK/logs/holder.log" 2>&1 &
  local holder=$!
  echo $holder >"$WORK/state/holder.pid"
  wait_for 10 "mount namespace" grep -q ' /var/log tmpfs ' "/proc/$holder/mounts"
  IN=(nsenter -t "$holder" --mount --net --)

  PATH="$BIN:$PATH" nohup "${IN[@]}" "$BIN/containerd" --config "$WORK/containerd/config.toml" \
    >"$WORK/logs/containerd.log" 2>&1 &
  echo $! >"$WORK/state/containerd.pid"
  wait_for 30 containerd test -S "$WORK/run/containerd.sock"
  python3 "$HERE/oci-archive.py" localhost/resize-guard/pause:1 "$BIN/pause" "$WORK/images/pause.tar" >/dev/null
  "$BIN/ctr" --address "$WORK/run/containerd.sock" -n k8s.io images import --platform linux/amd64 \
    "$WORK/images/pause.tar" >/dev/null

  PATH="$BIN:$PATH" nohup "${IN[@]}" "$BIN/kubelet" --config="$WORK/kubelet/config.yaml" \
    --kubeconfig="$WORK/kubeconfig" --root-dir="$WORK/kubelet/root" --cert-dir="$WORK/kubelet/pki" \
    --hostname-override=$NODE_NAME --node-ip=$NODE_IP --v=2 >"$WORK/logs/kubelet.log" 2>&1 &
  echo $! >"$WORK/state/kubelet.pid"
  nohup "${IN[@]}" "$BIN/kube-proxy" --config="$WORK/kube-proxy.yaml" --v=2 \
    >"$WORK/logs/kube-proxy.log" 2>&1 &
  echo $! >"$WORK/state/kube-proxy.pid"
  log "node $NODE_NAME started in $(( SECONDS - t0 ))s (Ready is the caller's to wait for)"
}

# Images a caller brings (e.g. upstream's e2e images, third_party/upstream-e2e/build.sh), as `up`
# imports the pause image: the kubelet then finds them and pulls nothing.
cmd_import() {
  [[ $# -ge 1 ]] || die "usage: node.sh import WORK ARCHIVE…"
  BIN="${RESIZE_GUARD_NODE_BIN_DIR:?the directory third_party/node/build.sh prints}"
  [[ -S "$WORK/run/containerd.sock" ]] || die "no containerd in $WORK: run node.sh up first"
  local a
  for a in "$@"; do
    [[ -f "$a" ]] || die "no image archive $a"
    "$BIN/ctr" --address "$WORK/run/containerd.sock" -n k8s.io images import --platform linux/amd64 "$a" >&2 \
      || die "ctr images import $a failed"
  done
}

# Stops everything in reverse and removes every trace; `quiet` for the stale sweep.
cmd_down() {
  local quiet=${1:-}
  [[ -d "$WORK" || -n "$(ip netns list 2>/dev/null | grep -w $NETNS)" ]] || return 0
  if [[ -n "$quiet" ]]; then log "sweeping what an earlier run left in $WORK"; fi
  local f p d
  for f in kube-proxy kubelet; do stop_pid "$WORK/state/$f.pid"; done
  # Containers and their shims: everything in our cgroups, then containerd and the namespace.
  for _ in 1 2 3; do
    { while read -r d; do
        if [[ -d "$d" ]]; then find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
      done < <(cgroup_dirs); } | sort -u | while read -r p; do kill -9 "$p" 2>/dev/null || true; done
    sleep 0.2
  done
  for f in containerd holder registry guard; do stop_pid "$WORK/state/$f.pid"; done
  # Anything else still in the node's netns (a shim, an iptables call).
  for p in $(ip netns pids $NETNS 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  # Anything still running one of the node's binaries (a shim re-parented to init).
  if [[ -n "${RESIZE_GUARD_NODE_BIN_DIR:-}" ]]; then
    for p in $(pgrep -f "^${RESIZE_GUARD_NODE_BIN_DIR}/" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  fi
  sleep 0.3
  # Mounts the host sees under WORK (none expected: they live in the private namespace).
  { awk '{print $2}' /proc/mounts | grep -F "$WORK/" || true; } | sort -r | while read -r d; do
    umount "$d" 2>/dev/null || umount -l "$d" 2>/dev/null || true
  done
  ip netns del $NETNS 2>/dev/null || true
  ip link del $HOST_IF 2>/dev/null || true
  while read -r d; do
    if [[ -d "$d" ]]; then find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
  done < <(cgroup_dirs)
  if [[ -f "$WORK/state/sysctls" ]]; then
    while IFS== read -r k v; do sysctl -qw "$k=$v" || true; done <"$WORK/state/sysctls"
  fi
  # /run/netns is made by `ip netns add` (a bind mount onto itself): remove it if we left it empty.
  if [[ -d /run/netns && -z "$(ls -A /run/netns)" ]]; then umount /run/netns 2>/dev/null || true; rmdir /run/netns 2>/dev/null || true; fi
  if [[ -z "${RESIZE_GUARD_KEEP_TMP:-}" ]]; then rm -rf -- "$WORK"; fi
}

cmd_check() {
  local left=() d
  ip netns list 2>/dev/null | grep -qw $NETNS && left+=("netns $NETNS")
  ip link show $HOST_IF >/dev/null 2>&1 && left+=("link $HOST_IF")
  ip route show $POD_CIDR 2>/dev/null | grep -q . && left+=("route $POD_CIDR")
  while read -r d; do [[ -d "$d" ]] && left+=("cgroup $d"); done < <(cgroup_dirs)
  grep -qF "$WORK" /proc/mounts && left+=("mounts under $WORK")
  [[ -e "$WORK" && -z "${RESIZE_GUARD_KEEP_TMP:-}" ]] && left+=("directory $WORK")
  if [[ -n "${RESIZE_GUARD_NODE_BIN_DIR:-}" ]] && pgrep -f "^${RESIZE_GUARD_NODE_BIN_DIR}/" >/dev/null; then
    left+=("processes: $(pgrep -af "^${RESIZE_GUARD_NODE_BIN_DIR}/" | tr '\n' ';')")
  fi
  if [[ -n "${RESIZE_GUARD_REGISTRY_BIN:-}" ]] && pgrep -f "^${RESIZE_GUARD_REGISTRY_BIN} serve $WORK/" >/dev/null; then
    left+=("the registry")
  fi
  if [[ ${#left[@]} -gt 0 ]]; then printf 'left behind: %s\n' "${left[@]}"; exit 1; fi
  echo "nothing left behind"
}

case "$CMD" in
  net) cmd_net ;;
  up) shift 2; cmd_up "$@" ;;
  import) shift 2; cmd_import "$@" ;;
  down) cmd_down ;;
  check) cmd_check ;;
  *) die "unknown command $CMD (net, up, import, down, check)" ;;
esac
