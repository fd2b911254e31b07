//! The case generator: a random pod (1–3 app containers, 0–2 init containers that are sidecars
//! or plain, optional pod-level requests/limits, an optional RuntimeClass with overhead, requests
//! and limits present or absent per resource, respelled quantities) and a random strategic-merge
//! resize of it (change, add or remove requests/limits on containers, sidecars, init containers
//! and the pod level — including invalid ones, ones past the node's allocatable and ones that
//! change the QoS class). Pods are valid by construction, so that kube-apiserver stores them;
//! resizes are deliberately not.
//!
//! Every case is a pure function of (run seed, case index): no knowledge of upstream's rules is
//! used to decide the expected answer — the real API server gives it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::quantities::{Q, R, from_table, respell};
use super::rng::Rng;

/// RuntimeClasses the cases use: (name, `overhead.podFixed` cpu, memory; empty = not set).
pub const RUNTIME_CLASSES: [(&str, &str, &str); 2] = [
    ("fidelity-overhead", "250m", "64Mi"),
    ("fidelity-cpu-overhead", "100m", ""),
];

/// Requests and limits of one container or of the pod level, indexed by [`R`].
#[derive(Debug, Clone, Default)]
pub struct Reqs {
    requests: [Option<Q>; 2],
    limits: [Option<Q>; 2],
}

impl Reqs {
    fn request_or_limit(&self, r: R) -> u128 {
        let i = r as usize;
        self.requests[i]
            .as_ref()
            .or(self.limits[i].as_ref())
            .map_or(0, |q| q.value)
    }

    fn json(&self) -> Value {
        let list = |l: &[Option<Q>; 2]| -> Map<String, Value> {
            R::BOTH
                .iter()
                .filter_map(|&r| Some((r.key().to_owned(), json!(l[r as usize].as_ref()?.text))))
                .collect()
        };
        let mut out = Map::new();
        for (key, l) in [("requests", &self.requests), ("limits", &self.limits)] {
            let m = list(l);
            if !m.is_empty() {
                out.insert(key.into(), Value::Object(m));
            }
        }
        Value::Object(out)
    }
}

/// What kind of container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `spec.containers[]`.
    App,
    /// `spec.initContainers[]` with `restartPolicy: Always`.
    Sidecar,
    /// A plain (run-to-completion) init container.
    Init,
}

/// One container of a generated pod.
#[derive(Debug, Clone)]
pub struct Ctr {
    name: String,
    kind: Kind,
    reqs: Reqs,
}

impl Ctr {
    fn json(&self) -> Value {
        let mut v = json!({"name": self.name, "image": "registry.example/app:1"});
        if self.kind == Kind::Sidecar {
            v["restartPolicy"] = json!("Always");
        }
        let res = self.reqs.json();
        if res.as_object().is_some_and(|m| !m.is_empty()) {
            v["resources"] = res;
        }
        v
    }
}

/// A generated pod.
#[derive(Debug, Clone)]
pub struct Shape {
    apps: Vec<Ctr>,
    inits: Vec<Ctr>,
    pod: Option<Reqs>,
    runtime_class: Option<&'static str>,
    /// Bound to a node whose kubelet runs with `InPlacePodLevelResourcesVerticalScaling` off, so
    /// it does not declare it (it still declares `InPlacePodVerticalScalingInitContainers`,
    /// locked on in v1.37).
    pub old_node: bool,
}

impl Shape {
    /// The Pod object, bound to `node`.
    pub fn pod(&self, name: &str, node: &str) -> Value {
        let mut spec = json!({
            "containers": self.apps.iter().map(Ctr::json).collect::<Vec<_>>(),
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
        });
        if !self.inits.is_empty() {
            spec["initContainers"] = self.inits.iter().map(Ctr::json).collect();
        }
        if let Some(p) = &self.pod {
            spec["resources"] = p.json();
        }
        if let Some(rc) = self.runtime_class {
            spec["runtimeClassName"] = json!(rc);
        }
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "fidelity"}},
            "spec": spec,
        })
    }
}

impl Shape {
    /// At least what the kubelet counts for this pod, [cpu nanocores, memory bytes]: every
    /// container's request (or limit) summed, plain init containers included, or the pod-level
    /// request or limit if larger, plus the largest RuntimeClass overhead. Used only to place
    /// pods on nodes where they fit, never to predict an answer.
    pub fn max_requests(&self) -> [u128; 2] {
        R::BOTH.map(|r| {
            let i = r as usize;
            let containers: u128 = self
                .apps
                .iter()
                .chain(&self.inits)
                .map(|c| c.reqs.request_or_limit(r))
                .sum();
            let pod = self.pod.as_ref().map_or(0, |p| {
                [&p.requests[i], &p.limits[i]]
                    .into_iter()
                    .flatten()
                    .map(|q| q.value)
                    .max()
                    .unwrap_or(0)
            });
            let overhead = if self.runtime_class.is_some() {
                RUNTIME_CLASSES
                    .iter()
                    .map(|rc| overhead_value(r, rc))
                    .max()
                    .unwrap_or(0)
            } else {
                0
            };
            containers.max(pod) + overhead
        })
    }
}

/// A RuntimeClass's `overhead.podFixed` for `r` (nanocores or bytes).
fn overhead_value(r: R, rc: &(&str, &str, &str)) -> u128 {
    let text = match r {
        R::Cpu => rc.1,
        R::Memory => rc.2,
    };
    let known = r
        .levels()
        .iter()
        .chain(r.tiny())
        .find_map(|(v, spellings)| spellings.contains(&text).then_some(*v));
    match (text, known) {
        ("", _) => 0,
        (_, Some(v)) => v,
        (t, None) => panic!("RuntimeClass overhead {t:?} is not in the quantity tables"),
    }
}

/// One generated case: a pod and a resize patch.
#[derive(Debug, Clone)]
pub struct Case {
    /// Index in the run.
    pub index: usize,
    /// The pod.
    pub shape: Shape,
    /// The strategic-merge patch sent to `pods/resize`.
    pub patch: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Case `index` of the run seeded with `seed`.
pub fn generate(seed: u64, index: usize) -> Case {
    let mut rng = Rng::for_case(seed, index);
    let profile = match rng.below(100) {
        0..35 => Profile::Guaranteed,
        35..85 => Profile::Burstable,
        _ => Profile::BestEffort,
    };
    let apps: Vec<Ctr> = (0..1 + rng.below(3))
        .map(|i| Ctr {
            name: format!("app{i}"),
            kind: Kind::App,
            reqs: container_reqs(&mut rng, profile),
        })
        .collect();
    let inits: Vec<Ctr> = (0..rng.below(3))
        .map(|i| {
            let sidecar = rng.chance(50);
            Ctr {
                name: format!("{}{i}", if sidecar { "side" } else { "init" }),
                kind: if sidecar { Kind::Sidecar } else { Kind::Init },
                reqs: container_reqs(&mut rng, profile),
            }
        })
        .collect();
    let pod_level_odds = if profile == Profile::BestEffort {
        40
    } else {
        30
    };
    let pod = rng
        .chance(pod_level_odds)
        .then(|| pod_reqs(&mut rng, apps.iter().chain(&inits), profile));
    let runtime_class = rng.chance(25).then(|| rng.pick(&RUNTIME_CLASSES).0);
    let shape = Shape {
        apps,
        inits,
        pod,
        runtime_class,
        old_node: rng.chance(35),
    };
    let patch = resize_patch(&mut rng, &shape);
    Case {
        index,
        shape,
        patch,
    }
}

fn container_reqs(rng: &mut Rng, profile: Profile) -> Reqs {
    let mut reqs = Reqs::default();
    for r in R::BOTH {
        let i = r as usize;
        match profile {
            Profile::BestEffort => {}
            Profile::Guaranteed => {
                let q = from_table(rng, r.levels());
                match rng.below(4) {
                    // Requests defaulted from limits.
                    0 => reqs.limits[i] = Some(q),
                    1 => {
                        reqs.requests[i] = Some(respell(rng, r, &q));
                        reqs.limits[i] = Some(q);
                    }
                    _ => {
                        reqs.requests[i] = Some(q.clone());
                        reqs.limits[i] = Some(q);
                    }
                }
            }
            Profile::Burstable => match rng.below(10) {
                0..3 => {}
                3..6 => reqs.requests[i] = Some(from_table(rng, r.levels())),
                6 => reqs.limits[i] = Some(from_table(rng, r.levels())),
                _ => {
                    let a = from_table(rng, r.levels());
                    let b = from_table(rng, r.levels());
                    let (lo, hi) = if a.value <= b.value { (a, b) } else { (b, a) };
                    reqs.requests[i] = Some(lo);
                    reqs.limits[i] = Some(hi);
                }
            },
        }
    }
    if profile == Profile::Guaranteed && rng.chance(5) {
        reqs.limits[R::Memory as usize] = None;
    }
    reqs
}

/// Pod-level requests/limits consistent with the containers (requests at least their sum,
/// limits at least every container's limit and the pod-level request).
fn pod_reqs<'a>(
    rng: &mut Rng,
    ctrs: impl Iterator<Item = &'a Ctr> + Clone,
    profile: Profile,
) -> Reqs {
    let mut reqs = Reqs::default();
    for r in R::BOTH {
        if !rng.chance(65) {
            continue;
        }
        let i = r as usize;
        let sum: u128 = ctrs.clone().map(|c| c.reqs.request_or_limit(r)).sum();
        let max_limit = ctrs
            .clone()
            .filter_map(|c| c.reqs.limits[i].as_ref().map(|q| q.value))
            .max()
            .unwrap_or(0);
        let extra = |rng: &mut Rng| *rng.pick(&[0, r.step(), 10 * r.step()]);
        let request = sum.max(r.step()) + extra(rng);
        let limit = request.max(max_limit) + extra(rng);
        let q = |rng: &mut Rng, value| Q {
            value,
            text: r.spell(value, rng.chance(30)),
        };
        let mode = if profile == Profile::Guaranteed && rng.chance(60) {
            3
        } else {
            rng.below(4)
        };
        match mode {
            0 => reqs.requests[i] = Some(q(rng, request)),
            1 => reqs.limits[i] = Some(q(rng, limit)),
            2 => {
                reqs.requests[i] = Some(q(rng, request));
                reqs.limits[i] = Some(q(rng, limit));
            }
            _ => {
                reqs.requests[i] = Some(q(rng, limit));
                reqs.limits[i] = Some(q(rng, limit));
            }
        }
    }
    reqs
}

/// A new value for a request or limit whose current value is `current`.
fn new_value(rng: &mut Rng, r: R, current: Option<&Q>) -> Value {
    let q = match rng.below(100) {
        0..55 => from_table(rng, r.levels()),
        55..65 => match current {
            Some(c) => respell(rng, r, c),
            None => from_table(rng, r.levels()),
        },
        65..73 => from_table(rng, r.huge()),
        73..79 => from_table(rng, r.big()),
        79..87 => {
            // Near the node's allocatable: overhead, sidecars and the pod level decide.
            let value = r.allocatable() - rng.below(20) as u128 * r.step();
            Q {
                value,
                text: r.spell(value, rng.chance(30)),
            }
        }
        87..92 => Q {
            value: 0,
            text: "0".into(),
        },
        _ => from_table(rng, r.tiny()),
    };
    json!(q.text)
}

/// The `resources` of a resize of something whose current requirements are `cur`.
fn resource_ops(rng: &mut Rng, cur: &Reqs) -> Value {
    let mut requests = Map::new();
    let mut limits = Map::new();
    let mut touch = [rng.chance(60), rng.chance(60)];
    if touch == [false, false] {
        touch[rng.below(2)] = true;
    }
    for r in R::BOTH {
        let i = r as usize;
        if !touch[i] {
            continue;
        }
        let (req, lim) = (cur.requests[i].as_ref(), cur.limits[i].as_ref());
        let key = r.key().to_owned();
        match rng.below(100) {
            0..20 => {
                requests.insert(key, new_value(rng, r, req));
            }
            20..35 => {
                limits.insert(key, new_value(rng, r, lim));
            }
            35..55 => {
                let v = new_value(rng, r, lim.or(req));
                requests.insert(key.clone(), v.clone());
                limits.insert(key, v);
            }
            55..65 => {
                requests.insert(key.clone(), new_value(rng, r, req));
                limits.insert(key, new_value(rng, r, lim));
            }
            65..72 => {
                requests.insert(key, Value::Null);
            }
            72..79 => {
                limits.insert(key, Value::Null);
            }
            79..87 => {
                for (list, q) in [(&mut requests, req), (&mut limits, lim)] {
                    if let Some(q) = q {
                        list.insert(key.clone(), json!(respell(rng, r, q).text));
                    }
                }
            }
            _ => match (req, lim) {
                (Some(q), None) => {
                    limits.insert(key, json!(respell(rng, r, q).text));
                }
                (None, Some(q)) => {
                    requests.insert(key, json!(respell(rng, r, q).text));
                }
                _ => {
                    limits.insert(key, new_value(rng, r, lim));
                }
            },
        }
    }
    let mut out = Map::new();
    if !requests.is_empty() {
        out.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        out.insert("limits".into(), Value::Object(limits));
    }
    Value::Object(out)
}

/// The resize: one or two targets, sometimes an extra that upstream refuses or silently drops.
fn resize_patch(rng: &mut Rng, shape: &Shape) -> Value {
    let mut apps: BTreeMap<String, Value> = BTreeMap::new();
    let mut inits: BTreeMap<String, Value> = BTreeMap::new();
    let mut pod_level: Option<Value> = None;
    let targets = if rng.chance(70) { 1 } else { 2 };
    for _ in 0..targets {
        // On the nodes with the pod-level resize gate off, more of what needs a declared
        // feature: pod-level resources (refused there) and init containers (accepted: a v1.37
        // kubelet always declares InPlacePodVerticalScalingInitContainers).
        let boost = if shape.old_node { 2 } else { 1 };
        let weight_inits = if shape.inits.is_empty() { 0 } else { 3 * boost };
        let weight_pod = if shape.pod.is_some() {
            2 * boost
        } else {
            boost
        };
        let roll = rng.below(5 + weight_inits + weight_pod);
        if roll < 5 {
            let c = rng.pick(&shape.apps);
            let ops = resource_ops(rng, &c.reqs);
            apps.insert(c.name.clone(), json!({"name": c.name, "resources": ops}));
        } else if roll < 5 + weight_inits {
            let c = rng.pick(&shape.inits);
            let ops = resource_ops(rng, &c.reqs);
            inits.insert(c.name.clone(), json!({"name": c.name, "resources": ops}));
        } else {
            pod_level = Some(resource_ops(
                rng,
                shape.pod.as_ref().unwrap_or(&Reqs::default()),
            ));
        }
    }
    let mut spec = Map::new();
    let mut metadata = None;
    if rng.chance(12) {
        let app0 = &shape.apps[0].name;
        let entry = apps
            .entry(app0.clone())
            .or_insert_with(|| json!({"name": app0, "resources": {}}));
        match rng.below(6) {
            // Only cpu and memory are resizable.
            0 => entry["resources"]["requests"]["ephemeral-storage"] = json!("1Gi"),
            1 => entry["resources"]["requests"]["cpu"] = json!("-100m"),
            // The whole limits map removed.
            2 => entry["resources"]["limits"] = Value::Null,
            // Containers cannot be added on resize.
            3 => {
                apps.insert(
                    "ghost".into(),
                    json!({"name": "ghost", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m"}}}),
                );
            }
            // Silently dropped by the resize strategy, but the webhook sees them.
            4 => entry["image"] = json!("registry.example/app:2"),
            _ => metadata = Some(json!({"labels": {"fidelity-probe": "dropped"}})),
        }
    }
    if !apps.is_empty() {
        spec.insert("containers".into(), apps.into_values().collect());
    }
    if !inits.is_empty() {
        spec.insert("initContainers".into(), inits.into_values().collect());
    }
    if let Some(p) = pod_level {
        spec.insert("resources".into(), p);
    }
    let mut patch = json!({"spec": spec});
    if let Some(m) = metadata {
        patch["metadata"] = m;
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_reproducible_from_seed_and_index() {
        for i in 0..50 {
            let (a, b) = (generate(7, i), generate(7, i));
            assert_eq!(a.shape.pod("p", "n"), b.shape.pod("p", "n"));
            assert_eq!(a.patch, b.patch);
        }
    }

    #[test]
    fn placement_bound_covers_every_container_and_the_overhead() {
        for (name, cpu, memory) in RUNTIME_CLASSES {
            for (r, text) in [(R::Cpu, cpu), (R::Memory, memory)] {
                let v = overhead_value(r, &(name, cpu, memory));
                assert_eq!(v == 0, text.is_empty(), "{name} {text}");
            }
        }
        // A Guaranteed pod with every container at 2 cpu, 2Gi and the overhead.
        let big = Shape {
            apps: vec![
                Ctr {
                    name: "a".into(),
                    kind: Kind::App,
                    reqs: Reqs {
                        requests: [None, None],
                        limits: [
                            Some(Q {
                                value: 2_000_000_000,
                                text: "2".into()
                            }),
                            Some(Q {
                                value: 2 << 30,
                                text: "2Gi".into()
                            }),
                        ],
                    },
                };
                2
            ],
            inits: Vec::new(),
            pod: None,
            runtime_class: Some(RUNTIME_CLASSES[0].0),
            old_node: false,
        };
        assert_eq!(big.max_requests(), [4_250_000_000, (4 << 30) + (64 << 20)]);
    }
}
