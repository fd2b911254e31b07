//! The objects as kube-apiserver v1.37 serves them, rendered as JSON bytes on demand.
//!
//! Each shape is built once as a `serde_json::Value` (per ReplicaSet and resize state for pods,
//! per node kind for nodes) with `@@n@@` holes where objects differ (name, uid, addresses,
//! container IDs…), serialised, and split at the holes: rendering one object is then copying a
//! dozen byte slices, so the fake API server keeps up with the clients it feeds and only one
//! page of objects ever exists as bytes at a time.
//!
//! The shapes are in `pod.rs` and `node.rs` (nodes, PodDisruptionBudgets); this module holds the
//! template machinery, the managedFields builder they share, and the AdmissionReview bodies.

use std::ops::Range;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::world::{PodPlace, World, uid};
use super::{node, pod};

/// A resource the fake API server lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `v1` Nodes.
    Nodes,
    /// `v1` Pods.
    Pods,
    /// `policy/v1` PodDisruptionBudgets.
    Pdbs,
}

impl Kind {
    /// `(apiVersion, kind)` of one object.
    pub fn type_meta(self) -> (&'static str, &'static str) {
        match self {
            Kind::Nodes => ("v1", "Node"),
            Kind::Pods => ("v1", "Pod"),
            Kind::Pdbs => ("policy/v1", "PodDisruptionBudget"),
        }
    }

    /// How many objects of this kind the world has.
    pub fn count(self, world: &World) -> usize {
        match self {
            Kind::Nodes => world.nodes,
            Kind::Pods => world.pods,
            Kind::Pdbs => world.pdb_replica_sets().len(),
        }
    }
}

/// A serialised object with holes.
#[derive(Debug)]
pub struct Template {
    text: Vec<u8>,
    /// `(text range, hole after it)`; the last hole is `usize::MAX` (none).
    parts: Vec<(Range<usize>, usize)>,
}

/// The marker of hole `n` inside a template's strings.
pub fn hole(n: usize) -> String {
    format!("@@{n}@@")
}

impl Template {
    /// Serialises `v` and finds its holes.
    pub fn new(v: &Value) -> Template {
        let text = serde_json::to_vec(v).unwrap_or_default();
        let mut parts = vec![];
        let (mut from, mut i) = (0, 0);
        while i + 1 < text.len() {
            if text[i] == b'@' && text[i + 1] == b'@' {
                let digits = text[i + 2..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let end = i + 2 + digits;
                if digits > 0 && text[end..].starts_with(b"@@") {
                    let n: usize = std::str::from_utf8(&text[i + 2..end])
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(usize::MAX);
                    parts.push((from..i, n));
                    from = end + 2;
                    i = from;
                    continue;
                }
            }
            i += 1;
        }
        parts.push((from..text.len(), usize::MAX));
        Template { text, parts }
    }

    /// Appends the object with `holes` filled in; `type_meta` (`"apiVersion":…,"kind":…,`) is
    /// inserted after the opening brace, as a watch event's object carries it and a list's
    /// items do not.
    pub fn render(&self, out: &mut Vec<u8>, holes: &[&str], type_meta: Option<&str>) {
        let mut first = true;
        for (range, n) in &self.parts {
            let mut text = &self.text[range.clone()];
            if first && let Some(tm) = type_meta {
                out.extend_from_slice(&text[..1]);
                out.extend_from_slice(tm.as_bytes());
                text = &text[1..];
            }
            first = false;
            out.extend_from_slice(text);
            if let Some(h) = holes.get(*n) {
                out.extend_from_slice(h.as_bytes());
            }
        }
    }
}

/// RFC 3339 time `secs` after 2026-01-10T00:00:00Z.
pub fn at(secs: u64) -> String {
    Timestamp::from_second(1_768_003_200 + secs as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Renders objects of one kind, caching the templates of the last few ReplicaSets.
#[derive(Default)]
pub struct Renderer {
    pods: Vec<((usize, bool), Template)>,
    nodes: Vec<(bool, Template)>,
}

impl Renderer {
    /// Appends object `i` of `kind`.
    pub fn render(
        &mut self,
        world: &World,
        kind: Kind,
        i: usize,
        out: &mut Vec<u8>,
        type_meta: bool,
    ) {
        let tm = type_meta.then(|| {
            let (v, k) = kind.type_meta();
            format!(r#""apiVersion":"{v}","kind":"{k}","#)
        });
        match kind {
            Kind::Pods => self.pod(world, i, out, tm.as_deref()),
            Kind::Nodes => self.node(world, i, out, tm.as_deref()),
            Kind::Pdbs => {
                let r = world.pdb_replica_sets()[i];
                let mut v = node::pdb_json(world, world.replica_set(r), i);
                if let Some(obj) = v.as_object_mut().filter(|_| type_meta) {
                    let (api, k) = kind.type_meta();
                    obj.insert("apiVersion".into(), api.into());
                    obj.insert("kind".into(), k.into());
                }
                out.extend_from_slice(&serde_json::to_vec(&v).unwrap_or_default());
            }
        }
    }

    fn pod(&mut self, world: &World, i: usize, out: &mut Vec<u8>, tm: Option<&str>) {
        let place = world.place(i);
        let key = (place.rs, place.pending);
        let pos = match self.pods.iter().position(|(k, _)| *k == key) {
            Some(p) => p,
            None => {
                if self.pods.len() >= 4 {
                    self.pods.remove(0);
                }
                let rs = world.replica_set(place.rs);
                self.pods
                    .push((key, Template::new(&pod::pod_json(rs, place.pending))));
                self.pods.len() - 1
            }
        };
        let holes = pod::holes(world, place);
        let refs: Vec<&str> = holes.iter().map(String::as_str).collect();
        self.pods[pos].1.render(out, &refs, tm);
    }

    fn node(&mut self, world: &World, n: usize, out: &mut Vec<u8>, tm: Option<&str>) {
        let busy = world.is_busy(n);
        let pos = match self.nodes.iter().position(|(b, _)| *b == busy) {
            Some(p) => p,
            None => {
                self.nodes
                    .push((busy, Template::new(&node::node_json(busy))));
                self.nodes.len() - 1
            }
        };
        let holes = node::holes(world, n);
        let refs: Vec<&str> = holes.iter().map(String::as_str).collect();
        self.nodes[pos].1.render(out, &refs, tm);
    }
}

/// Which field keys a granular list's items (structured-merge-diff `k:{…}` keys).
fn list_keys(field: &str) -> Option<&'static [&'static str]> {
    Some(match field {
        "containers" | "initContainers" | "env" | "volumes" => &["name"],
        "ports" => &["containerPort", "protocol"],
        "volumeMounts" => &["mountPath"],
        "conditions" => &["type"],
        "podIPs" | "hostIPs" => &["ip"],
        "ownerReferences" => &["uid"],
        "addresses" => &["type"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        _ => return None,
    })
}

/// A managedFields `fieldsV1` set naming every field of `v` (an object).
pub fn fields_v1(v: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = v {
        for (k, child) in m {
            out.insert(format!("f:{k}"), field_set(k, child));
        }
    }
    Value::Object(out)
}

pub fn field_set(key: &str, v: &Value) -> Value {
    match v {
        Value::Object(_) => {
            let mut set = fields_v1(v);
            if let Some(m) = set.as_object_mut() {
                m.insert(".".into(), json!({}));
            }
            set
        }
        Value::Array(items) => match list_keys(key) {
            Some(keys) => {
                let mut m = Map::new();
                m.insert(".".into(), json!({}));
                for item in items {
                    let k: Map<String, Value> = keys
                        .iter()
                        .map(|k| ((*k).to_owned(), item[*k].clone()))
                        .collect();
                    let mut set = fields_v1(item);
                    if let Some(s) = set.as_object_mut() {
                        s.insert(".".into(), json!({}));
                    }
                    m.insert(format!("k:{}", Value::Object(k)), set);
                }
                Value::Object(m)
            }
            None => json!({}),
        },
        _ => json!({}),
    }
}

pub fn managed(manager: &str, operation: &str, time: &str, sub: Option<&str>, set: Value) -> Value {
    let mut m = json!({
        "manager": manager, "operation": operation, "apiVersion": "v1", "time": time,
        "fieldsType": "FieldsV1", "fieldsV1": set,
    });
    if let Some(s) = sub {
        m["subresource"] = json!(s);
    }
    m
}

/// The policy ConfigMap: `mode: enforce`, the default policy.
pub fn policy_configmap(namespace: &str, name: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": namespace, "uid": uid(5, 0),
            "resourceVersion": "99999999", "creationTimestamp": at(0),
            "labels": {"app.kubernetes.io/name": "resize-guard"}},
        "data": {"policy.yaml": "mode: enforce\n"},
    })
}

/// Pod `i` as an AdmissionReview object: parsed, with apiVersion and kind.
pub fn pod_value(world: &World, i: usize) -> Value {
    let mut out = vec![];
    Renderer::default().render(world, Kind::Pods, i, &mut out, true);
    serde_json::from_slice(&out).unwrap_or(Value::Null)
}

/// The `pods/resize` AdmissionReview of pod `place` growing its app container's cpu request by
/// `grow_milli`, as kube-apiserver sends it.
pub fn resize_review(world: &World, place: PodPlace, grow_milli: u64, n: usize) -> Vec<u8> {
    let old = pod_value(world, place.index);
    let mut new = old.clone();
    let rs = world.replica_set(place.rs);
    new["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
        json!(format!("{}m", rs.cpu_milli + grow_milli));
    let user = json!({"username": "system:serviceaccount:kube-system:vpa-updater", "uid": uid(7, 0),
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]});
    let mut review = resize_guard_harness::review::resize_review(&uid(6, n), user, &old, &new);
    review["request"]["options"] = json!({"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "vpa-updater"});
    serde_json::to_vec(&review).unwrap_or_default()
}
