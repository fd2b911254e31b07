//! End-to-end proof that hollow nodes run the real kubelet: on kube-apiserver v1.37.2 (no
//! kube-scheduler; pods are bound with `spec.nodeName`), upstream's kubelet v1.37.2 registers the
//! node with allocatable = capacity − reservation, runs pods, defers a resize that does not fit
//! with its own message and Event, completes it in place once room is freed, refuses a memory-limit
//! decrease below usage with its own error — and leaves nothing outside its work directory.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::objects::{
    allocated, allocated_cpu, condition, create_running, guaranteed_pod, patch_resize,
    restart_count, wait_gone, wait_pod,
};
use serde_json::json;

const T: Duration = Duration::from_secs(30);

static CP: OnceLock<ControlPlane> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn cp() -> &'static ControlPlane {
    CP.get_or_init(|| {
        std::thread::spawn(|| ControlPlane::start(&Options::default()))
            .join()
            .expect("control plane thread")
            .expect("start the real control plane")
    })
}

/// Prints the control-plane logs and the hollow nodes' log tails when a test panics.
struct Diag(Vec<PathBuf>);

impl Drop for Diag {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let cp = cp();
            eprintln!(
                "==== control-plane logs ({}) ====\n{}",
                cp.dir().display(),
                cp.dump_logs()
            );
            for log in &self.0 {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail = &text[text.len().saturating_sub(6000)..];
                eprintln!("==== {} ====\n{tail}", log.display());
            }
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", COUNTER.fetch_add(1, Ordering::SeqCst))
}

async fn namespace(client: &kube::Client, prefix: &str) -> String {
    let name = unique(prefix);
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.clone());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

async fn resize(pods: &Api<Pod>, name: &str, body: serde_json::Value) {
    patch_resize(pods, name, &body).await.unwrap();
}

fn cpu_resize(cpu: &str) -> serde_json::Value {
    json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
}

fn memory_resize(memory: &str) -> serde_json::Value {
    json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"memory": memory}, "limits": {"memory": memory}}}]}})
}

/// Container `app`'s `status.resources` value, as the kubelet reports what it actuated.
fn actual(p: &Pod, which: &str, resource: &str) -> Option<String> {
    let r = resize_guard_harness::objects::container_status(p, "app")?
        .resources
        .as_ref()?;
    let list = if which == "limits" {
        r.limits.as_ref()?
    } else {
        r.requests.as_ref()?
    };
    list.get(resource).map(|q| q.0.clone())
}

/// Polls until the kubelet has recorded an Event `reason` on the pod whose message contains
/// `part` (Events are sent asynchronously).
async fn wait_event(client: &kube::Client, ns: &str, pod: &str, reason: &str, part: &str) -> Event {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={pod},reason={reason}"));
    let deadline = Instant::now() + T;
    loop {
        let found = events.list(&lp).await.unwrap().items;
        if let Some(e) = found.into_iter().find(|e| message(e).contains(part)) {
            return e;
        }
        if Instant::now() > deadline {
            let all = events.list(&ListParams::default()).await.unwrap().items;
            let seen: Vec<_> = all
                .iter()
                .map(|e| {
                    format!(
                        "{} {}: {}",
                        e.involved_object.name.clone().unwrap_or_default(),
                        e.reason.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default()
                    )
                })
                .collect();
            panic!("no {reason} Event with {part:?} on {ns}/{pod} after {T:?}; events: {seen:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn message(e: &Event) -> String {
    e.message.clone().unwrap_or_default()
}

/// Entries of /tmp that a stock kubemark hollow node leaves behind.
fn kubemark_tmp_leftovers() -> BTreeSet<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("hollow-kubelet.") || n.starts_with("kubelet_remote_"))
        .collect()
}

/// Paths of the unix sockets a process has bound.
fn bound_unix_sockets(pid: u32) -> Vec<String> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && inodes.contains(f[6])).then(|| f[7].to_owned())
        })
        .collect()
}

/// Files the process has open (paths only).
fn open_files(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| l.starts_with('/'))
        .collect()
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

/// Registration with the configured machine, reservation, pods, labels, taints and feature gates,
/// as the kubelet's own node status setters compute them.
#[tokio::test]
async fn registers_ready_with_allocatable_capacity_minus_reserved() {
    let cp = cp();
    let a = unique("reg");
    let b = unique("reg-gate");
    let configs = [
        HollowNodeConfig::new(&a, 4, "8Gi")
            .reserved("250m", "512Mi")
            .pods(50)
            .label("resize-guard.io/test", "hollow")
            .taint("dedicated=hollow:NoSchedule"),
        HollowNodeConfig::t3_medium(&b)
            .feature_gate("InPlacePodLevelResourcesVerticalScaling=false"),
    ];
    let _d = Diag(
        configs
            .iter()
            .map(|c| cp.dir().join(format!("hollow-node-{}.log", c.name)))
            .collect(),
    );
    let nodes = HollowNode::start_all(cp, &configs).await.unwrap();
    for n in &nodes {
        eprintln!(
            "hollow node {}: Ready in {:?}, unshared memory {:.1} MiB",
            n.name(),
            n.registration_time(),
            n.unshared_memory_bytes().unwrap_or(0) as f64 / 1048576.0
        );
    }
    let api: Api<Node> = Api::all(cp.client().await.unwrap());
    let node = api.get(&a).await.unwrap();
    let status = node.status.clone().unwrap();
    let q = |l: &std::collections::BTreeMap<
        String,
        k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    >,
             k: &str| l[k].0.clone();
    let (cap, alloc) = (status.capacity.unwrap(), status.allocatable.unwrap());
    assert_eq!(
        (q(&cap, "cpu"), q(&cap, "memory"), q(&cap, "pods")),
        ("4".into(), "8Gi".into(), "50".into())
    );
    assert_eq!(
        (q(&alloc, "cpu"), q(&alloc, "memory"), q(&alloc, "pods")),
        ("3750m".into(), "7680Mi".into(), "50".into())
    );
    assert_eq!(
        node.metadata.labels.as_ref().unwrap()["resize-guard.io/test"],
        "hollow"
    );
    let taints = node
        .spec
        .as_ref()
        .unwrap()
        .taints
        .clone()
        .unwrap_or_default();
    assert!(
        taints.iter().any(|t| t.key == "dedicated"
            && t.value.as_deref() == Some("hollow")
            && t.effect == "NoSchedule"),
        "taints: {taints:?}"
    );
    let info = status.node_info.unwrap();
    assert_eq!(
        info.kubelet_version, "v1.37.2",
        "the kubelet is upstream v1.37.2"
    );
    let declared = |n: &Node| {
        n.status
            .as_ref()
            .unwrap()
            .declared_features
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        declared(&node),
        [
            "ExtendWebSocketsToKubelet",
            "InPlacePodLevelResourcesVerticalScaling",
            "InPlacePodVerticalScalingInitContainers",
            "RestartAllContainersOnContainerExits"
        ]
    );
    let gated = api.get(&b).await.unwrap();
    assert_eq!(
        gated.status.as_ref().unwrap().allocatable.as_ref().unwrap()["cpu"].0,
        "1930m"
    );
    assert!(
        !declared(&gated).contains(&"InPlacePodLevelResourcesVerticalScaling".to_owned()),
        "a kubelet feature gate turned off is no longer declared: {:?}",
        declared(&gated)
    );
    for n in nodes {
        n.remove(cp.client().await.unwrap()).await.unwrap();
    }
}

/// Ten nodes at once: how fast they register and what each costs.
#[tokio::test]
async fn ten_nodes_register_together() {
    let cp = cp();
    let configs: Vec<_> = (0..10)
        .map(|_| HollowNodeConfig::t3_medium(&unique("ten")))
        .collect();
    let _d = Diag(
        configs
            .iter()
            .map(|c| cp.dir().join(format!("hollow-node-{}.log", c.name)))
            .collect(),
    );
    let started = Instant::now();
    let nodes = HollowNode::start_all(cp, &configs).await.unwrap();
    let all_ready = started.elapsed();
    // Idle cost: memory after start-up settled, CPU over 10 s.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu0: Vec<Duration> = nodes.iter().map(|n| n.cpu_time().unwrap()).collect();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let window = t0.elapsed();
    let cpu: Duration = nodes
        .iter()
        .zip(&cpu0)
        .map(|(n, c)| n.cpu_time().unwrap() - *c)
        .sum();
    let memory: Vec<u64> = nodes
        .iter()
        .map(|n| n.unshared_memory_bytes().unwrap())
        .collect();
    eprintln!(
        "ten hollow nodes Ready in {all_ready:?} (slowest {:?}); per idle node: unshared memory mean \
         {:.1} MiB (max {:.1} MiB), CPU {:.2} % of a core",
        nodes
            .iter()
            .map(HollowNode::registration_time)
            .max()
            .unwrap(),
        memory.iter().sum::<u64>() as f64 / 10.0 / 1048576.0,
        *memory.iter().max().unwrap() as f64 / 1048576.0,
        cpu.as_secs_f64() / window.as_secs_f64() / 10.0 * 100.0
    );
    for n in nodes {
        n.remove(cp.client().await.unwrap()).await.unwrap();
    }
}

/// ARCHITECTURE.md's field test on the real kubelet: a 1930m node, a 1500m filler, 250m → 550m is
/// Deferred with the kubelet's message and Event; deleting the filler makes the kubelet complete
/// it in place.
#[tokio::test]
async fn deferred_resize_completes_in_place_when_the_filler_leaves() {
    let cp = cp();
    let client = cp.client().await.unwrap();
    let name = unique("t3-medium");
    let cfg = HollowNodeConfig::t3_medium(&name);
    let _d = Diag(vec![cp.dir().join(format!("hollow-node-{name}.log"))]);
    let node = HollowNode::start(cp, &cfg).await.unwrap();
    let ns = namespace(&client, "field").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for (pod, cpu) in [("filler", "1500m"), ("app", "250m")] {
        create_running(&pods, &guaranteed_pod(pod, &name, "", cpu, "256Mi"))
            .await
            .unwrap();
    }
    let app = pods.get("app").await.unwrap();
    assert_eq!(
        app.status.as_ref().unwrap().qos_class.as_deref(),
        Some("Guaranteed")
    );
    assert_eq!(actual(&app, "requests", "cpu").as_deref(), Some("250m"));

    resize(&pods, "app", cpu_resize("550m")).await;
    let deferred = wait_pod(&pods, "app", T, |p| {
        condition(p, "PodResizePending").is_some()
    })
    .await
    .unwrap();
    let (reason, msg) = condition(&deferred, "PodResizePending").unwrap();
    assert_eq!(reason, "Deferred");
    assert!(
        msg.starts_with("Node didn't have enough resource: cpu, requested: "),
        "the kubelet's message shape: {msg}"
    );
    assert_eq!(msg, crate::scenario::FIELD_TEST_DEFERRED);
    assert_eq!(allocated_cpu(&deferred).as_deref(), Some("250m"));
    let cond = deferred
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "PodResizePending")
        .unwrap();
    assert_eq!(cond.observed_generation, Some(2));
    let ev = wait_event(&client, &ns, "app", "ResizeDeferred", "").await;
    let m = message(&ev);
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(m.starts_with("Pod resize OutOfcpu: {"), "{m}");
    assert!(
        m.contains(r#""generation":2,"error":"Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930"}"#),
        "{m}"
    );
    eprintln!("ResizeDeferred: {m}");

    let freed = Instant::now();
    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    let done = wait_pod(&pods, "app", T, |p| {
        condition(p, "PodResizePending").is_none()
            && condition(p, "PodResizeInProgress").is_none()
            && actual(p, "requests", "cpu").as_deref() == Some("550m")
    })
    .await
    .unwrap();
    let completed = freed.elapsed();
    assert_eq!(allocated_cpu(&done).as_deref(), Some("550m"));
    assert_eq!(actual(&done, "limits", "cpu").as_deref(), Some("550m"));
    assert_eq!(restart_count(&done), 0, "resized in place, no restart");
    let started_ev = wait_event(&client, &ns, "app", "ResizeStarted", "").await;
    let completed_ev = wait_event(&client, &ns, "app", "ResizeCompleted", "").await;
    for e in [&started_ev, &completed_ev] {
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert!(message(e).contains(r#""generation":2"#), "{}", message(e));
        eprintln!("{}: {}", e.reason.clone().unwrap_or_default(), message(e));
    }
    assert!(message(&completed_ev).starts_with("Pod resize completed: {"));
    wait_gone(&pods, "filler", T).await.unwrap();
    eprintln!(
        "filler deleted → resize completed (status.resources 550m, conditions cleared) in {completed:?}"
    );
    node.remove(client).await.unwrap();
}

/// The kubelet checks memory usage (from the fake cAdvisor) before lowering a limit: below usage
/// fails with its own error; above usage completes.
#[tokio::test]
async fn memory_limit_decrease_below_usage_fails_with_the_kubelets_error() {
    let cp = cp();
    let client = cp.client().await.unwrap();
    let name = unique("usage");
    let cfg = HollowNodeConfig::new(&name, 2, "4Gi").pod_memory_usage("200Mi");
    let _d = Diag(vec![cp.dir().join(format!("hollow-node-{name}.log"))]);
    let node = HollowNode::start(cp, &cfg).await.unwrap();
    let ns = namespace(&client, "usage").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_running(&pods, &guaranteed_pod("app", &name, "", "100m", "256Mi"))
        .await
        .unwrap();

    resize(&pods, "app", memory_resize("128Mi")).await;
    let want = "cannot decrease memory limits: attempting to set pod memory limit (134217728) below current usage (209715200)";
    let ev = wait_event(&client, &ns, "app", "ResizeError", "").await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        message(&ev).starts_with("Pod resize error: {"),
        "{}",
        message(&ev)
    );
    assert!(
        message(&ev).contains(&format!(r#""generation":2,"error":"{want}""#)),
        "{}",
        message(&ev)
    );
    eprintln!("ResizeError: {}", message(&ev));
    // The condition alternates between a fresh attempt (no reason) and the error while the
    // kubelet retries; wait for the error to be published.
    let failed = wait_pod(&pods, "app", Duration::from_secs(60), |p| {
        condition(p, "PodResizeInProgress") == Some(("Error".to_owned(), want.to_owned()))
    })
    .await
    .unwrap();
    assert_eq!(
        actual(&failed, "limits", "memory").as_deref(),
        Some("256Mi"),
        "nothing actuated"
    );
    assert_eq!(
        allocated(&failed, "memory").as_deref(),
        Some("128Mi"),
        "admitted, then failed to actuate"
    );

    // Above usage: the kubelet actuates the new limit.
    resize(&pods, "app", memory_resize("224Mi")).await;
    let done = wait_pod(&pods, "app", T, |p| {
        condition(p, "PodResizeInProgress").is_none()
            && actual(p, "limits", "memory").as_deref() == Some("224Mi")
    })
    .await
    .unwrap();
    assert_eq!(restart_count(&done), 0);
    let completed = wait_event(
        &client,
        &ns,
        "app",
        "ResizeCompleted",
        r#""memory":"224Mi""#,
    )
    .await;
    let m = message(&completed);
    eprintln!("ResizeCompleted after the failed decrease: {m}");
    assert!(m.contains(r#""generation":3"#), "{m}");
    node.remove(client).await.unwrap();
}

/// Everything the kubelet writes stays in its work directory, which is gone after stop; nothing
/// like stock kubemark's /tmp/hollow-kubelet.* or /tmp/kubelet_remote_*.sock appears.
#[tokio::test]
async fn leaves_nothing_outside_its_work_dir() {
    let cp = cp();
    let client = cp.client().await.unwrap();
    let before = kubemark_tmp_leftovers();
    let name = unique("tidy");
    let _d = Diag(vec![cp.dir().join(format!("hollow-node-{name}.log"))]);
    let node = HollowNode::start(cp, &HollowNodeConfig::new(&name, 1, "2Gi"))
        .await
        .unwrap();
    let ns = namespace(&client, "tidy").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_running(&pods, &guaranteed_pod("app", &name, "", "100m", "64Mi"))
        .await
        .unwrap();

    let work = node.work_dir().to_owned();
    let sockets = bound_unix_sockets(node.pid());
    assert!(!sockets.is_empty());
    for s in &sockets {
        assert!(
            s.starts_with(&*work.to_string_lossy()),
            "unix socket {s} outside {}",
            work.display()
        );
    }
    for f in open_files(node.pid()) {
        assert!(
            f.starts_with(&*work.to_string_lossy())
                || Path::new(&f) == node.log_path()
                || f.starts_with("/dev/")
                || f.starts_with("/sys/fs/cgroup/"),
            "open file {f} outside {}",
            work.display()
        );
    }
    let files = files_under(&work);
    eprintln!("work dir {}: {files:?}", work.display());
    assert!(files.contains(&"cri.sock".to_owned()), "{files:?}");
    assert!(
        files.iter().any(|f| f.starts_with("kubelet/pods/")),
        "pod dirs in the work dir: {files:?}"
    );

    pods.delete("app", &DeleteParams::default()).await.unwrap();
    wait_gone(&pods, "app", T).await.unwrap();
    let removed = node.stop();
    assert_eq!(removed, work);
    if std::env::var_os("RESIZE_GUARD_KEEP_TMP").is_none() {
        assert!(
            !work.exists(),
            "work dir {} removed on stop",
            work.display()
        );
    }
    let new: Vec<_> = kubemark_tmp_leftovers()
        .difference(&before)
        .cloned()
        .collect();
    assert!(new.is_empty(), "left in /tmp: {new:?}");

    // A kubelet restarted under the same name re-registers; start waits for its own heartbeat,
    // not the Ready the Node still shows from the first process.
    let again = HollowNode::start(cp, &HollowNodeConfig::new(&name, 1, "2Gi"))
        .await
        .unwrap();
    assert_ne!(again.work_dir(), work.as_path());
    again.remove(client).await.unwrap();
}
