//! Pods and waits the end-to-end suites share: pods shaped like the field test's, bound straight
//! to a (hollow) node, and polling waits that fail with the last state seen.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Server-side applies `object` as `name` through `api`, as field manager `manager`, taking the
/// fields it sets over from any other manager (`force`): how the harness writes what it owns.
pub async fn force_apply<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    object: &(impl serde::Serialize + std::fmt::Debug),
) -> kube::Result<K>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(object),
    )
    .await
}

/// A Guaranteed pod (`requests = limits`) bound to `node` with a PriorityClass.
pub fn guaranteed_pod(
    name: &str,
    node: &str,
    priority_class: &str,
    cpu: &str,
    memory: &str,
) -> Pod {
    pod_json(
        name,
        node,
        priority_class,
        json!({
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        }),
    )
}

/// A Burstable pod (requests only) bound to `node`.
pub fn burstable_pod(name: &str, node: &str, priority_class: &str, cpu: &str, memory: &str) -> Pod {
    pod_json(
        name,
        node,
        priority_class,
        json!({"requests": {"cpu": cpu, "memory": memory}}),
    )
}

fn pod_json(name: &str, node: &str, priority_class: &str, resources: serde_json::Value) -> Pod {
    let mut spec = json!({
        "containers": [{"name": "app", "image": "registry.example/app:1", "resources": resources}],
        "terminationGracePeriodSeconds": 30,
    });
    if !node.is_empty() {
        spec["nodeName"] = json!(node);
    }
    if !priority_class.is_empty() {
        spec["priorityClassName"] = json!(priority_class);
    }
    let value = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": spec,
    });
    serde_json::from_value(value).unwrap_or_default()
}

/// Creates running Guaranteed pods (`name`, priority class, cpu, memory) on `node`, in order.
pub async fn create_all(
    api: &Api<Pod>,
    node: &str,
    pods: &[(&str, &str, &str, &str)],
) -> anyhow::Result<()> {
    for (name, class, cpu, memory) in pods {
        create_running(api, &guaranteed_pod(name, node, class, cpu, memory))
            .await
            .map_err(|e| e.context(format!("pod {name}")))?;
    }
    Ok(())
}

/// The suspended Job that owns, as their controller, the pods [`create_running`] creates in a
/// namespace: resize-guard takes only pods something would recreate as victims
/// (`preemption.allowBarePodVictims: false` by default), and low-priority batch work is what a
/// preemption usually takes. No running controller manages Jobs here (see
/// [`crate::control_plane::CONTROLLERS`]), so the Job never creates, claims or releases a pod,
/// while the garbage collector, where it runs, finds the owner and leaves the pods alone.
pub const OWNER_JOB: &str = "batch";

/// `pod` with [`OWNER_JOB`] of the pod API's namespace as its controlling owner (created on
/// first use), unless it already has owners.
pub async fn owned(api: &Api<Pod>, pod: &Pod) -> anyhow::Result<Pod> {
    let mut pod = pod.clone();
    if pod.metadata.owner_references.is_some() {
        return Ok(pod);
    }
    let ns = api
        .namespace()
        .ok_or_else(|| anyhow::anyhow!("owned pods need a namespaced pod API"))?;
    let jobs: Api<Job> = Api::namespaced(api.clone().into_client(), ns);
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": OWNER_JOB},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "app", "image": "registry.example/app:1"}]}}},
    }))?;
    // One read per pod once the Job exists; two creators racing meet at the 409.
    let job = match jobs.get_opt(OWNER_JOB).await? {
        Some(job) => job,
        None => match jobs.create(&PostParams::default(), &job).await {
            Ok(job) => job,
            Err(kube::Error::Api(e)) if e.code == 409 => jobs.get(OWNER_JOB).await?,
            Err(e) => return Err(e.into()),
        },
    };
    let uid = job
        .metadata
        .uid
        .ok_or_else(|| anyhow::anyhow!("Job {ns}/{OWNER_JOB} has no uid"))?;
    pod.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "name": OWNER_JOB, "uid": uid,
        "controller": true,
    }))?]);
    Ok(pod)
}

/// Creates a pod owned by the namespace's [`OWNER_JOB`] (unless it has owners) and waits until
/// its node's kubelet reports it Running.
pub async fn create_running(api: &Api<Pod>, pod: &Pod) -> anyhow::Result<Pod> {
    create_running_as_is(api, &owned(api, pod).await?).await
}

/// Creates a pod exactly as given (a bare pod stays bare) and waits until it is Running.
pub async fn create_running_as_is(api: &Api<Pod>, pod: &Pod) -> anyhow::Result<Pod> {
    let created = api.create(&PostParams::default(), pod).await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    wait_pod(api, &name, Duration::from_secs(30), |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
}

/// `PATCH pods/<name>/resize` with a strategic-merge `patch`, as `kubectl patch --subresource
/// resize` sends it.
pub async fn patch_resize(
    api: &Api<Pod>,
    name: &str,
    patch: &serde_json::Value,
) -> kube::Result<Pod> {
    api.patch_subresource(
        "resize",
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Strategic(patch),
    )
    .await
}

/// Polls a pod until `ready` holds; the error carries the last state seen.
pub async fn wait_pod(
    api: &Api<Pod>,
    name: &str,
    timeout: Duration,
    ready: impl Fn(&Pod) -> bool,
) -> anyhow::Result<Pod> {
    poll(api, name, timeout, ready, |p| {
        serde_json::to_string_pretty(&p.status).ok()
    })
    .await
    .map_err(|e| anyhow::anyhow!("pod {e}"))
}

/// Polls any namespaced object until `ready` holds; the error carries the last state seen.
pub async fn wait_object<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    ready: impl Fn(&K) -> bool,
) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    poll(api, name, timeout, ready, |o| {
        serde_json::to_string_pretty(o).ok()
    })
    .await
}

/// Gets `name` every 50 ms until `ready` holds; the error shows `describe` of the last version
/// seen.
async fn poll<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    ready: impl Fn(&K) -> bool,
    describe: impl Fn(&K) -> Option<String>,
) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        match api.get_opt(name).await? {
            Some(o) if ready(&o) => return Ok(o),
            other => last = other,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!(
        "{name}: condition not reached after {timeout:?}; last seen: {}",
        last.as_ref()
            .and_then(describe)
            .unwrap_or_else(|| "(gone)".into())
    )
}

/// Waits until the disruption controller (kube-controller-manager) has computed a
/// PodDisruptionBudget's status for its current generation with `healthy` pods counted.
pub async fn wait_pdb_counted(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    healthy: i32,
    timeout: Duration,
) -> anyhow::Result<PodDisruptionBudget> {
    wait_object(api, name, timeout, |pdb| {
        pdb.status.as_ref().is_some_and(|s| {
            s.observed_generation.is_some()
                && s.observed_generation == pdb.metadata.generation
                && s.current_healthy == Some(healthy)
        })
    })
    .await
}

/// Polls until the pod no longer exists.
pub async fn wait_gone(api: &Api<Pod>, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if api.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("pod {name} still exists after {timeout:?}")
}

/// The first `PodResizePending` condition, read here rather than through the policy crate so
/// that the tests' view of what the kubelet wrote shares no code with what they test.
pub fn resize_pending_condition(p: &Pod) -> Option<&PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodResizePending")
}

/// The first `PodResizePending` condition's (reason, message).
pub fn resize_pending(p: &Pod) -> Option<(String, String)> {
    let c = resize_pending_condition(p)?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// A pod condition of `type_` that is `True`: its (reason, message).
pub fn condition(p: &Pod, type_: &str) -> Option<(String, String)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// The allocated request of `resource` of container `app`, as the kubelet reports it.
pub fn allocated(p: &Pod, resource: &str) -> Option<String> {
    container_status(p, "app")?
        .allocated_resources
        .as_ref()?
        .get(resource)
        .map(|q| q.0.clone())
}

/// The allocated cpu request of container `app`.
pub fn allocated_cpu(p: &Pod) -> Option<String> {
    allocated(p, "cpu")
}

/// Restart count of container `app`.
pub fn restart_count(p: &Pod) -> i32 {
    container_status(p, "app").map_or(-1, |c| c.restart_count)
}

/// The status of container `name` of a pod, as its kubelet reports it.
pub fn container_status<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// A resize patch for container `app` setting cpu requests and limits to `cpu`.
pub fn cpu_resize(cpu: &str) -> String {
    json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
        .to_string()
}

/// The hollow node's annotation for how long a pod's containers take to exit once stopped
/// (`third_party/control-plane/cmd/hollow-node/stop.go`; at most the grace period).
pub const STOP_AFTER_ANNOTATION: &str = "hollow-node.resize-guard.io/stop-after";

/// `pod` whose containers take `after` (a Go duration such as `1500ms`) to exit when stopped.
pub fn stopping_after(mut pod: Pod, after: &str) -> Pod {
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(STOP_AFTER_ANNOTATION.to_owned(), after.to_owned());
    pod
}

/// `pod` with a label added.
pub fn labelled(mut pod: Pod, key: &str, value: &str) -> Pod {
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.to_owned());
    pod
}

/// The node label that pins a [`deployment`]'s pods to a test's own hollow nodes.
pub const POOL_LABEL: &str = "resize-guard.io/test-pool";

/// A Deployment of `replicas` Guaranteed pods (container `app`, labels `app=<name>`) with a
/// PriorityClass, scheduled by kube-scheduler onto nodes labelled [`POOL_LABEL`]`=<pool>`.
/// Pods stop within 1 s of an eviction so replacements are not held up.
pub fn deployment(
    name: &str,
    replicas: i32,
    priority_class: &str,
    cpu: &str,
    memory: &str,
    pool: &str,
) -> k8s_openapi::api::apps::v1::Deployment {
    let value = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "app", "image": "registry.example/app:1", "resources": {
                        "requests": {"cpu": cpu, "memory": memory},
                        "limits": {"cpu": cpu, "memory": memory},
                    }}],
                    "priorityClassName": priority_class,
                    "nodeSelector": {POOL_LABEL: pool},
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    });
    serde_json::from_value(value).unwrap_or_default()
}

/// A container `app`'s cpu request and limit as written in the pod's spec.
pub fn spec_cpu(p: &Pod) -> (Option<String>, Option<String>) {
    let Some(c) = p
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "app"))
    else {
        return (None, None);
    };
    let r = c.resources.as_ref();
    let get = |l: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| { l.and_then(|m| m.get("cpu")).map(|q| q.0.clone()) };
    (
        get(r.and_then(|r| r.requests.as_ref())),
        get(r.and_then(|r| r.limits.as_ref())),
    )
}

/// The pod's QoS class as the API server recorded it.
pub fn qos_class(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .unwrap_or_default()
}

/// Creates a PriorityClass (if missing; `never` sets `preemptionPolicy: Never`) and waits until
/// kube-apiserver's Priority admission, which reads PriorityClasses from an informer, knows it:
/// a dry-run pod naming it is admitted, so the caller's pods are.
pub async fn priority_class(
    client: &kube::Client,
    name: &str,
    value: i32,
    never: bool,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let api: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    let mut pc = json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value,
    });
    if never {
        pc["preemptionPolicy"] = json!("Never");
    }
    let pc = serde_json::from_value(pc).with_context(|| format!("PriorityClass {name}"))?;
    match api.create(&PostParams::default(), &pc).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).with_context(|| format!("PriorityClass {name}")),
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let probe = guaranteed_pod("priority-probe", "", name, "1m", "1Mi");
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for _ in 0..100 {
        match pods.create(&dry_run, &probe).await {
            Err(kube::Error::Api(e)) if e.message.contains("no PriorityClass") => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            _ => return Ok(()),
        }
    }
    anyhow::bail!("PriorityClass {name} never reached kube-apiserver's admission")
}
