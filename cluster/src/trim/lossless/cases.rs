//! Generated pods for the trimming property test: the policy crate's builders in every shape a
//! decision distinguishes (resource shapes, sidecars, pod-level resources, resizes stored and
//! pending, terminating, mirror, Windows, ephemeral containers), plus noise nothing reads.

use std::collections::BTreeMap;

use crate::trim::LAST_APPLIED;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, EnvVar, EphemeralContainer, HTTPGetAction, Pod, PodCondition, PodIP, PodOS,
    Probe, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use resize_guard_policy::fixture::{ContainerBuilder, PodBuilder, container};
use resize_guard_policy::upstream::pod;

/// A container's resource shape.
#[derive(Debug, Clone)]
pub enum Shape {
    None,
    Requests(&'static str, &'static str),
    Guaranteed(&'static str, &'static str),
    Burstable(&'static str, &'static str, &'static str),
    LimitsOnly(&'static str),
}

pub fn shape() -> impl Strategy<Value = Shape> {
    let cpu = prop::sample::select(vec!["100m", "250m", "500m", "1", "1500m", "3"]);
    let mem = prop::sample::select(vec!["64Mi", "256Mi", "1Gi", "3Gi"]);
    prop_oneof![
        Just(Shape::None),
        (cpu.clone(), mem.clone()).prop_map(|(c, m)| Shape::Requests(c, m)),
        (cpu.clone(), mem.clone()).prop_map(|(c, m)| Shape::Guaranteed(c, m)),
        (cpu.clone(), cpu.clone(), mem).prop_map(|(r, l, m)| Shape::Burstable(r, l, m)),
        cpu.prop_map(Shape::LimitsOnly),
    ]
}

pub fn apply(b: ContainerBuilder, s: &Shape) -> ContainerBuilder {
    match s {
        Shape::None => b,
        Shape::Requests(c, m) => b.request("cpu", c).request("memory", m),
        Shape::Guaranteed(c, m) => b.guaranteed(c, m),
        Shape::Burstable(r, l, m) => b.request("cpu", r).limit("cpu", l).request("memory", m),
        Shape::LimitsOnly(c) => b.limit("cpu", c),
    }
}

/// Everything that varies about a generated pod.
#[derive(Debug, Clone)]
pub struct PodCase {
    pub containers: Vec<Shape>,
    pub inits: Vec<(Shape, bool)>,
    pub pod_level: Option<(&'static str, &'static str)>,
    pub pod_level_resize: bool,
    pub pod_level_actuating: bool,
    pub overhead: bool,
    pub priority: i32,
    pub never_preempts: bool,
    pub node: Option<&'static str>,
    pub running: bool,
    pub qos_status: Option<&'static str>,
    pub resize: Option<&'static str>,
    pub pending: Option<&'static str>,
    pub terminating: bool,
    pub phase: Option<&'static str>,
    pub mirror: bool,
    pub windows: bool,
    pub ephemeral: bool,
    pub app: u8,
    pub namespace: &'static str,
    pub noise: u64,
}

prop_compose! {
    pub fn pod_case()(
        containers in prop::collection::vec(shape(), 1..=3),
        inits in prop::collection::vec((shape(), any::<bool>()), 0..=2),
        pod_level in prop::option::weighted(0.3, (
            prop::sample::select(vec!["1", "2", "4"]),
            prop::sample::select(vec!["1Gi", "4Gi"]),
        )),
        pod_level_resize in any::<bool>(),
        pod_level_actuating in any::<bool>(),
        overhead in prop::bool::weighted(0.2),
        priority in prop::sample::select(vec![0, 100, 1000, 100_000, 2_000_000_000]),
        never_preempts in prop::bool::weighted(0.1),
        node in prop::sample::select(vec![Some("n1"), Some("n1"), Some("n1"), Some("n2"), None]),
        running in prop::bool::weighted(0.8),
        qos_status in prop::sample::select(vec![None, Some("Guaranteed"), Some("Burstable"), Some("BestEffort")]),
        resize in prop::option::weighted(0.5, prop::sample::select(vec!["200m", "2", "3500m", "9"])),
        pending in prop::sample::select(vec![None, None, Some("Deferred"), Some("Infeasible")]),
        terminating in prop::bool::weighted(0.1),
        phase in prop::sample::select(vec![None, None, None, Some("Succeeded"), Some("Pending")]),
        mirror in prop::bool::weighted(0.05),
        windows in prop::bool::weighted(0.05),
        ephemeral in prop::bool::weighted(0.3),
        app in 0u8..4,
        namespace in prop::sample::select(vec!["web", "batch", "kube-system", "resize-guard"]),
        noise in any::<u64>(),
    ) -> PodCase {
        PodCase {
            containers, inits, pod_level, pod_level_resize, pod_level_actuating, overhead, priority, never_preempts, node, running,
            qos_status, resize, pending, terminating, phase, mirror, windows, ephemeral, app,
            namespace, noise,
        }
    }
}

pub fn build(case: &PodCase, name: &str) -> Pod {
    let mut b = PodBuilder::new(case.namespace, name)
        .priority(case.priority)
        .label("app", &format!("app-{}", case.app));
    for (i, s) in case.containers.iter().enumerate() {
        b = b.container(apply(container(&format!("c{i}")), s));
    }
    for (i, (s, sidecar)) in case.inits.iter().enumerate() {
        let c = apply(container(&format!("init{i}")), s);
        b = b.init_container(if *sidecar { c.sidecar() } else { c });
    }
    if let Some((cpu, mem)) = case.pod_level {
        b = b.pod_request("cpu", cpu).pod_limit("memory", mem);
    }
    if case.overhead {
        b = b.overhead("cpu", "50m").overhead("memory", "32Mi");
    }
    if case.never_preempts {
        b = b.never_preempt();
    }
    if let Some(n) = case.node {
        b = b.node(n);
    }
    if case.running {
        b = b.running(i64::from(case.app) * 100 + case.priority.rem_euclid(97) as i64);
    }
    if let Some(q) = case.qos_status {
        b = b.qos_status(q);
    }
    if let Some(cpu) = case.resize {
        b = b.resize("c0", "cpu", cpu);
    }
    if let Some(reason) = case.pending {
        b = b.resize_pending(reason, "Node didn't have enough resource: cpu");
    }
    if case.terminating {
        b = b.terminating();
    }
    if let Some(p) = case.phase {
        b = b.phase(p);
    }
    if case.mirror {
        b = b.annotation(pod::MIRROR_ANNOTATION, "abc123");
    }
    let mut pod = b.build();
    let spec = pod.spec.as_mut().unwrap();
    if case.pod_level_resize
        && let Some(requests) = spec.resources.as_mut().and_then(|r| r.requests.as_mut())
    {
        // A stored pod-level resize: the spec moves, the status keeps the admitted amount.
        requests.insert("cpu".into(), Quantity("3".into()));
    }
    if case.pod_level_actuating
        && let Some(actual) = pod
            .status
            .as_mut()
            .and_then(|s| s.resources.as_mut())
            .and_then(|r| r.requests.as_mut())
    {
        // The runtime reports more than the kubelet allocated (a shrink being actuated).
        actual.insert("cpu".into(), Quantity("3500m".into()));
    }
    let spec = pod.spec.as_mut().unwrap();
    if case.windows {
        spec.os = Some(PodOS {
            name: "windows".into(),
        });
    }
    if case.ephemeral {
        spec.ephemeral_containers = Some(vec![EphemeralContainer {
            name: "debugger".into(),
            image: Some("busybox:1.36".into()),
            target_container_name: Some("c0".into()),
            ..Default::default()
        }]);
    }
    add_noise(&mut pod, case.noise);
    pod
}

/// Fields nothing in resize-guard reads, chosen by the bits of `seed`.
pub fn add_noise(pod: &mut Pod, seed: u64) {
    let bit = |n: u32| seed >> n & 1 == 1;
    let m = &mut pod.metadata;
    m.resource_version = Some(format!("{}", seed % 100_000));
    m.creation_timestamp = Some(Time(Timestamp::from_second(1_700_000_000).unwrap()));
    m.generate_name = Some("web-7c9d8f6b54-".into());
    m.finalizers = bit(0).then(|| vec!["example.com/cleanup".into()]);
    m.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-7c9d8f6b54".into(),
        uid: "5b0f3c1e".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    m.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kube-controller-manager".into()),
        operation: Some("Update".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(serde_json::json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c0\"}": {"f:image": {}, "f:env": {}}}},
        }))),
        ..Default::default()
    }]);
    let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
    if bit(1) {
        annotations.insert(LAST_APPLIED.into(), "x".repeat(8_000));
    }
    if bit(2) {
        annotations.insert("prometheus.io/scrape".into(), "true".into());
        annotations.insert("example.com/big".into(), "y".repeat(4_000));
    }
    if bit(3) {
        // The controller's plan annotation: kept.
        annotations.insert(
            "resize-guard.io/preemption-plan".into(),
            r#"{"generation":2,"victims":[]}"#.into(),
        );
    }
    let spec = pod.spec.as_mut().unwrap();
    spec.service_account_name = Some("web".into());
    spec.dns_policy = Some("ClusterFirst".into());
    spec.scheduler_name = Some("default-scheduler".into());
    spec.priority_class_name = Some("standard".into());
    spec.restart_policy = Some("Always".into());
    spec.termination_grace_period_seconds = bit(4).then_some(45);
    spec.node_selector = Some([("kubernetes.io/os".into(), "linux".into())].into());
    spec.tolerations = Some(vec![Toleration {
        key: Some("node.kubernetes.io/not-ready".into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: Some(300),
        ..Default::default()
    }]);
    spec.volumes = Some(vec![Volume {
        name: "config".into(),
        ..Default::default()
    }]);
    let noisy = |c: &mut Container| {
        c.image = Some("registry.example.com/app:1.2.3".into());
        c.image_pull_policy = Some("IfNotPresent".into());
        c.command = Some(vec!["/app".into(), "--serve".into()]);
        c.env = Some(
            (0..5)
                .map(|i| EnvVar {
                    name: format!("VAR_{i}"),
                    value: Some(format!("value-{i}")),
                    ..Default::default()
                })
                .collect(),
        );
        c.ports = Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]);
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::String("http".into()),
                ..Default::default()
            }),
            period_seconds: Some(10),
            ..Default::default()
        };
        c.liveness_probe = Some(probe.clone());
        c.readiness_probe = Some(probe);
        c.volume_mounts = Some(vec![VolumeMount {
            name: "config".into(),
            mount_path: "/etc/app".into(),
            ..Default::default()
        }]);
        c.termination_message_path = Some("/dev/termination-log".into());
    };
    spec.containers.iter_mut().for_each(noisy);
    spec.init_containers.iter_mut().flatten().for_each(noisy);
    let status = pod.status.get_or_insert_with(Default::default);
    status.host_ip = Some("10.0.3.41".into());
    status.pod_ip = Some("10.42.3.117".into());
    status.pod_ips = Some(vec![PodIP {
        ip: "10.42.3.117".into(),
    }]);
    status.observed_generation = pod.metadata.generation;
    status.message = bit(5).then(|| "some message".into());
    let cond = |t: &str| PodCondition {
        type_: t.into(),
        status: "True".into(),
        last_transition_time: Some(Time(Timestamp::from_second(1_700_000_100).unwrap())),
        ..Default::default()
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.insert(0, cond("Ready"));
    conditions.insert(0, cond("PodScheduled"));
    conditions.push(cond("ContainersReady"));
    if bit(6) {
        conditions.push(PodCondition {
            reason: Some("PreemptionByResizeGuard".into()),
            ..cond("DisruptionTarget")
        });
    }
    let waiting = bit(7);
    let noisy_status = |s: &mut ContainerStatus| {
        s.image = "registry.example.com/app:1.2.3".into();
        s.image_id = "registry.example.com/app@sha256:9c4e1b7f".into();
        s.container_id = Some("containerd://5f0c9a1b".into());
        s.restart_count = 2;
        s.last_state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("OOMKilled".into()),
                message: Some("z".repeat(500)),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.state = Some(if waiting {
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("CrashLoopBackOff".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }
        } else {
            ContainerState {
                running: Some(Default::default()),
                ..Default::default()
            }
        });
    };
    status
        .container_statuses
        .iter_mut()
        .flatten()
        .for_each(noisy_status);
    status
        .init_container_statuses
        .iter_mut()
        .flatten()
        .for_each(noisy_status);
}
