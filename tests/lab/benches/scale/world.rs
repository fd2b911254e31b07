//! The generated cluster as numbers: which ReplicaSet, node, priority and resize state each pod
//! has, which nodes are busy and what they can hold. Everything is a function of the pod or node
//! index plus a few small tables (ReplicaSet starts, per-node cpu), so any page of the list can
//! be rendered on demand and the benchmark itself holds a few hundred kilobytes, not the pods.
//!
//! Layout: `busy` nodes (1 in 50, at least one) carry [`BUSY_PODS_PER_NODE`] pods each and
//! are filled to [`BUSY_SLACK_MILLI`] below their allocatable cpu; the other pods are dealt
//! round-robin over the remaining nodes. Pods are grouped in ReplicaSets of 20–40 (consecutive
//! indices, as the API server lists them: by namespace and name), each with its own priority
//! class, requests, and (one in three) a native sidecar. A pod on a busy node of the
//! second-highest priority class has a Deferred resize pending on one slot in eight.

use resize_guard_bench::Lcg;

/// Pods on each busy node (the kubelet's default `maxPods`).
pub const BUSY_PODS_PER_NODE: usize = 110;
/// Free cpu (millicores) left on a busy node: a resize growing by more is Deferred.
pub const BUSY_SLACK_MILLI: u64 = 300;
/// What a pending resize adds to its app container's cpu request (millicores).
pub const PENDING_GROWTH_MILLI: u64 = 600;
/// Namespaces the ReplicaSets are spread over.
pub const NAMESPACES: usize = 40;

/// Priority classes, lowest first: (name, value). The first is "no class" (priority 0).
pub const CLASSES: [(&str, i32); 4] = [
    ("", 0),
    ("standard", 1_000),
    ("important", 100_000),
    ("business-critical", 1_000_000),
];

const WORDS: [&str; 16] = [
    "checkout",
    "cart",
    "payments",
    "search",
    "catalog",
    "inventory",
    "orders",
    "shipping",
    "billing",
    "auth",
    "profile",
    "reviews",
    "recommend",
    "notify",
    "gateway",
    "ledger",
];
const ROLES: [&str; 5] = ["api", "worker", "web", "grpc", "consumer"];
/// `k8s.io/apimachinery/pkg/util/rand.SafeEncodeString`'s alphabet (pod-template-hash, name
/// suffixes).
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// One ReplicaSet's shape (all its pods share it).
#[derive(Debug, Clone)]
pub struct ReplicaSet {
    /// Index.
    pub index: usize,
    /// Namespace.
    pub namespace: String,
    /// Deployment name (`app` label).
    pub app: String,
    /// `pod-template-hash`.
    pub hash: String,
    /// Index into [`CLASSES`].
    pub class: usize,
    /// The app container's cpu request (millicores).
    pub cpu_milli: u64,
    /// The app container's memory request (MiB).
    pub mem_mib: u64,
    /// Has a native sidecar init container.
    pub sidecar: bool,
    /// Has a PodDisruptionBudget (and whether it allows a disruption).
    pub pdb: Option<bool>,
}

impl ReplicaSet {
    /// `{app}-{hash}`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.app, self.hash)
    }

    /// Every cpu request of one pod (what the ledger counts for it), millicores.
    pub fn pod_cpu_milli(&self) -> u64 {
        self.cpu_milli + LOG_SHIPPER_CPU_MILLI + if self.sidecar { SIDECAR_CPU_MILLI } else { 0 }
    }
}

/// The log-shipping container's cpu request.
pub const LOG_SHIPPER_CPU_MILLI: u64 = 20;
/// The native sidecar's cpu request.
pub const SIDECAR_CPU_MILLI: u64 = 50;

/// Where a pod is and what state it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodPlace {
    /// Pod index.
    pub index: usize,
    /// ReplicaSet index.
    pub rs: usize,
    /// Node index.
    pub node: usize,
    /// On a busy node.
    pub busy: bool,
    /// Carries a pending (Deferred) resize.
    pub pending: bool,
}

/// The generated cluster.
#[derive(Debug)]
pub struct World {
    /// Nodes.
    pub nodes: usize,
    /// Pods.
    pub pods: usize,
    /// Busy nodes (indices `0..busy_nodes`).
    pub busy_nodes: usize,
    busy_pods: usize,
    /// Start index of each ReplicaSet, plus `pods` at the end.
    rs_start: Vec<usize>,
    /// Each ReplicaSet's shape.
    rs: Vec<ReplicaSet>,
    /// Cpu (millicores) the pods of each node hold.
    node_cpu_milli: Vec<u64>,
    /// ReplicaSets with a PodDisruptionBudget.
    pdb_rs: Vec<usize>,
    /// The list resourceVersion (objects carry smaller ones).
    pub list_rv: u64,
}

impl World {
    /// The cluster of `nodes` nodes and `pods` pods (seeded, so every run sees the same).
    pub fn new(nodes: usize, pods: usize) -> World {
        let nodes = nodes.max(2);
        let busy_nodes = (nodes / 50).max(1);
        let busy_pods = (busy_nodes * BUSY_PODS_PER_NODE).min(pods / 2);
        let mut rng = Lcg(0x5ca1e);
        let mut rs_start = vec![0];
        while rs_start.last().copied().unwrap_or(0) < pods {
            let next = rs_start.last().copied().unwrap_or(0) + rng.range(20, 40) as usize;
            rs_start.push(next.min(pods));
        }
        let rs = (0..rs_start.len() - 1).map(replica_set).collect();
        let mut world = World {
            nodes,
            pods,
            busy_nodes,
            busy_pods,
            rs_start,
            rs,
            node_cpu_milli: vec![0; nodes],
            pdb_rs: vec![],
            list_rv: 0,
        };
        world.pdb_rs = (0..world.replica_sets())
            .filter(|&r| world.rs[r].pdb.is_some())
            .collect();
        for i in 0..pods {
            let p = world.place(i);
            let cpu = world.replica_set(p.rs).pod_cpu_milli();
            world.node_cpu_milli[p.node] += cpu;
        }
        world.list_rv = 100_000_000 + (pods + nodes) as u64 * 3;
        world
    }

    /// Number of ReplicaSets.
    pub fn replica_sets(&self) -> usize {
        self.rs_start.len() - 1
    }

    /// ReplicaSet `r`'s shape.
    pub fn replica_set(&self, r: usize) -> &ReplicaSet {
        &self.rs[r]
    }

    /// The ReplicaSet of pod `i`.
    pub fn rs_of(&self, i: usize) -> usize {
        self.rs_start.partition_point(|&s| s <= i) - 1
    }

    /// First pod index of ReplicaSet `r`.
    pub fn rs_first(&self, r: usize) -> usize {
        self.rs_start[r]
    }

    /// Where pod `i` runs and in what state.
    pub fn place(&self, i: usize) -> PodPlace {
        let (p, bp) = (self.pods as u128, self.busy_pods as u128);
        let before = (i as u128 * bp / p) as usize;
        let busy = ((i as u128 + 1) * bp / p) as usize > before;
        let rs = self.rs_of(i);
        let normal = self.nodes - self.busy_nodes;
        let (node, pending) = if busy {
            let node = before % self.busy_nodes;
            let slot = before / self.busy_nodes;
            // The second-highest class: a resize of the highest class is queued ahead of them.
            let important = self.replica_set(rs).class == CLASSES.len() - 2;
            (node, important && slot.is_multiple_of(8))
        } else {
            (self.busy_nodes + (i - before) % normal, false)
        };
        PodPlace {
            index: i,
            rs,
            node,
            busy,
            pending,
        }
    }

    /// Cpu (millicores) the pods on node `n` hold.
    pub fn node_cpu_milli(&self, n: usize) -> u64 {
        self.node_cpu_milli[n]
    }

    /// Whether node `n` is busy.
    pub fn is_busy(&self, n: usize) -> bool {
        n < self.busy_nodes
    }

    /// Node `n`'s name, as a cloud provider names it.
    pub fn node_name(&self, n: usize) -> String {
        let (a, b) = node_ip_parts(n);
        format!("ip-10-0-{a}-{b}.eu-west-1.compute.internal")
    }

    /// Node `n`'s address.
    pub fn node_ip(&self, n: usize) -> String {
        let (a, b) = node_ip_parts(n);
        format!("10.0.{a}.{b}")
    }

    /// Pod `i`'s name.
    pub fn pod_name(&self, rs: &ReplicaSet, i: usize) -> String {
        let mut h = Lcg(i as u64 ^ 0xa5a5_0000);
        let suffix: String = (0..5).map(|_| SAFE[h.next(27) as usize] as char).collect();
        format!("{}-{suffix}", rs.name())
    }

    /// Pod `i`'s address.
    pub fn pod_ip(&self, i: usize) -> String {
        format!("10.{}.{}.{}", 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255)
    }

    /// ReplicaSets that have a PodDisruptionBudget.
    pub fn pdb_replica_sets(&self) -> &[usize] {
        &self.pdb_rs
    }

    /// Pods with a pending resize.
    pub fn pending_pods(&self) -> impl Iterator<Item = PodPlace> + '_ {
        (0..self.pods).map(|i| self.place(i)).filter(|p| p.pending)
    }
}

/// ReplicaSet `r`'s shape.
fn replica_set(r: usize) -> ReplicaSet {
    let mut h = Lcg(0x9e37_79b9 ^ (r as u64).wrapping_mul(0x1000_0000_01b3));
    let word = WORDS[r % WORDS.len()];
    let role = ROLES[(r / WORDS.len()) % ROLES.len()];
    let hash: String = (0..10).map(|_| SAFE[h.next(27) as usize] as char).collect();
    let class = match r % 10 {
        0..=4 => 0,
        5 | 6 => 1,
        7 | 8 => 2,
        _ => 3,
    };
    ReplicaSet {
        index: r,
        namespace: format!("team-{:02}", r % NAMESPACES),
        app: format!("{word}-{role}-{r:05}"),
        hash,
        class,
        cpu_milli: [100, 250, 500][(r / 3) % 3],
        mem_mib: [128, 256, 512][(r / 7) % 3],
        sidecar: r.is_multiple_of(3),
        pdb: r.is_multiple_of(5).then_some(!r.is_multiple_of(20)),
    }
}

fn node_ip_parts(n: usize) -> (usize, usize) {
    (n / 250 % 256, n % 250 + 2)
}

/// A UUID-shaped string derived from `kind` and `i` (stable across runs).
pub fn uid(kind: u64, i: usize) -> String {
    let mut h = Lcg(kind.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ i as u64);
    let mut word = |n: usize| -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[h.next(16) as usize]))
            .collect()
    };
    format!(
        "{}-{}-4{}-8{}-{}",
        word(8),
        word(4),
        word(3),
        word(3),
        word(12)
    )
}

/// `n` hex digits derived from `seed` (container and image IDs).
pub fn hex(seed: u64, n: usize) -> String {
    let mut h = Lcg(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (0..n)
        .map(|_| char::from(b"0123456789abcdef"[h.next(16) as usize]))
        .collect()
}
