//! Every key of `policy.yaml` with what it means, for the generated policy reference
//! (`docs/src/reference/policy.md`, written by `docs/tool`). The types, defaults and accepted
//! values come from the policy types themselves ([`super::Policy::default`] serialized,
//! [`variants`]);
//! only the meaning is written here, and the tests below hold this table to the types: every key
//! of the serialized default policy has one row of its type, and every row names a key the
//! parser accepts, so a key added, renamed or removed fails `cargo test` until its row follows.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, Visitor};

use super::{BelowUsage, BreakerScope, Mode, OnQosChange, PdbMode};

/// What a key holds.
#[derive(Debug, Clone, Copy)]
pub enum KeyType {
    /// A mapping of further keys.
    Section,
    /// `true` or `false`.
    Boolean,
    /// A whole number from 0 to 4294967295.
    Integer,
    /// A label selector in `kubectl -l` syntax.
    Selector,
    /// A list of strings.
    Strings,
    /// One of an enum's values ([`variants`] of its type).
    OneOf(fn() -> &'static [&'static str]),
}

impl KeyType {
    /// True when `value` (a key of the serialized default policy) is of this type.
    pub fn fits(self, value: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (self, value) {
            (KeyType::Section, Value::Object(_)) | (KeyType::Boolean, Value::Bool(_)) => true,
            (KeyType::Integer, Value::Number(n)) => n.as_u64().is_some(),
            (KeyType::Selector, Value::String(_)) => true,
            (KeyType::OneOf(values), Value::String(s)) => values().contains(&s.as_str()),
            (KeyType::Strings, Value::Array(items)) => items.iter().all(Value::is_string),
            _ => false,
        }
    }
}

/// One key of `policy.yaml`.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Its YAML path, `.`-separated (`preemption.maxVictimsPerResize`).
    pub path: &'static str,
    /// What it holds.
    pub ty: KeyType,
    /// What it means, in Markdown.
    pub meaning: &'static str,
}

const fn key(path: &'static str, ty: KeyType, meaning: &'static str) -> Key {
    Key { path, ty, meaning }
}

/// Every key, sections before their keys, in the order the reference lists them.
pub const KEYS: &[Key] = &[
    key(
        "mode",
        KeyType::OneOf(variants::<Mode>),
        "`enforce`: deny, repair and preempt. `audit`: never deny or preempt; warn and record \
         `Would…` Events. Must be stated: a document without it is refused, never enforcement \
         by omission.",
    ),
    key(
        "qos",
        KeyType::Section,
        "Resizes that would change the pod's QoS class.",
    ),
    key(
        "qos.onChange",
        KeyType::OneOf(variants::<OnQosChange>),
        "`reject`: deny the resize with a message naming the containers and the fix. `repair`: \
         change the requested resources minimally so the class is kept, when possible.",
    ),
    key(
        "feasibility",
        KeyType::Section,
        "Resizes the node cannot hold.",
    ),
    key(
        "feasibility.rejectInfeasible",
        KeyType::Boolean,
        "Deny resizes larger than the node's allocatable.",
    ),
    key(
        "feasibility.rejectStuckDeferred",
        KeyType::Boolean,
        "Deny Deferred resizes that no preemption can resolve.",
    ),
    key(
        "feasibility.revertInfeasible",
        KeyType::Boolean,
        "The controller patches drifted Infeasible pods back to their actual resources (never \
         in an excluded namespace, `kube-system` or the install namespace).",
    ),
    key(
        "preemption",
        KeyType::Section,
        "Removing lower-priority pods so that a Deferred resize fits its node.",
    ),
    key(
        "preemption.enabled",
        KeyType::Boolean,
        "Preempt at all. Must be stated whenever the `preemption:` section sets any other key.",
    ),
    key(
        "preemption.pdb",
        KeyType::OneOf(variants::<PdbMode>),
        "`respect`: evict through the Eviction API, never breaking a PodDisruptionBudget. \
         `bestEffort`: delete as kube-scheduler does; PodDisruptionBudgets only steer the choice \
         of victims.",
    ),
    key(
        "preemption.maxVictimsPerResize",
        KeyType::Integer,
        "Most victims one resize may cost (at least 1): in one plan, and over the plans made for \
         the same resize that helped nobody (victims gone, no resize on the node admitted since).",
    ),
    key(
        "preemption.maxEvictionsPerMinute",
        KeyType::Integer,
        "Most victims removed per minute across the cluster (at least 1). A whole plan of up to \
         `maxVictimsPerResize` may go at once; the rate refills after it.",
    ),
    key(
        "preemption.maxEvictionsPerNamespacePerMinute",
        KeyType::Integer,
        "Most victims removed per minute for the preemptors of one namespace (at least 1), inside \
         the cluster-wide `maxEvictionsPerMinute` (a value above it changes nothing): one tenant \
         whose resizes churn cannot spend the whole cluster's rate.",
    ),
    key(
        "preemption.circuitBreaker",
        KeyType::Section,
        "Stop preempting for a while when plans keep failing to unblock their resizes. A plan is \
         futile when its victims were removed, the same resize then needs another plan, and no \
         other resize on the node was admitted meanwhile.",
    ),
    key(
        "preemption.circuitBreaker.futilePlans",
        KeyType::Integer,
        "Futile plans within `windowSeconds` that open the breaker (0 turns it off).",
    ),
    key(
        "preemption.circuitBreaker.windowSeconds",
        KeyType::Integer,
        "The window futile plans are counted in, in seconds.",
    ),
    key(
        "preemption.circuitBreaker.pauseSeconds",
        KeyType::Integer,
        "How long preemption stops once the breaker opens, in seconds (with a \
         `PreemptionPaused` Warning Event).",
    ),
    key(
        "preemption.circuitBreaker.scope",
        KeyType::OneOf(variants::<BreakerScope>),
        "What futile plans are counted over, and so what an open breaker stops: `namespace` \
         (the preemptor's: one tenant's futile plans pause only that tenant), `node`, or \
         `cluster` (any futile plans stop every preemption).",
    ),
    key(
        "preemption.maxGracePeriodSeconds",
        KeyType::Integer,
        "Cap on a victim's termination grace period, in seconds. Unset: each victim's own \
         `terminationGracePeriodSeconds` is honoured, as kube-scheduler's preemption does.",
    ),
    key(
        "preemption.minDeferredSeconds",
        KeyType::Integer,
        "How long a resize must have been Deferred before preempting for it, in seconds.",
    ),
    key(
        "preemption.stallAfterSeconds",
        KeyType::Integer,
        "How long a resize may wait on something that should happen without resize-guard acting \
         (its victims terminating, the kubelet admitting it) before it is reported stalled: a \
         `PreemptionStalled` Warning Event, and the node's plan-in-flight claim released \
         (10 to 86400; victims' grace periods stay honoured).",
    ),
    key(
        "preemption.protectedNamespaces",
        KeyType::Strings,
        "Namespaces whose pods are never victims, in addition to `kube-system` and the install \
         namespace, which always are.",
    ),
    key(
        "preemption.protectedSelector",
        KeyType::Selector,
        "Pods matching this label selector are never victims.",
    ),
    key(
        "preemption.allowDaemonSetVictims",
        KeyType::Boolean,
        "May pods owned by a DaemonSet be victims? Off by default: the DaemonSet controller puts \
         the pod straight back on the same node, so the room does not stay free.",
    ),
    key(
        "preemption.allowBarePodVictims",
        KeyType::Boolean,
        "May pods with no controlling owner be victims? Nothing recreates them, so preempting one \
         loses it for good. Off by default; `true` treats them as kube-scheduler's preemption \
         does.",
    ),
    key("memory", KeyType::Section, "Resizes that lower memory."),
    key(
        "memory.decrease",
        KeyType::Section,
        "Lowering a memory limit below what the container uses: the kubelet refuses a limit at \
         or below current usage and leaves the resize in progress, and a spike between its check \
         and the cgroup write is an OOM kill.",
    ),
    key(
        "memory.decrease.belowUsage",
        KeyType::OneOf(variants::<BelowUsage>),
        "`reject`: deny with the numbers (usage, its age, the new limit, the headroom). `warn`: \
         allow with a warning carrying the same numbers. `allow`: do not judge; usage is never \
         fetched.",
    ),
    key(
        "memory.decrease.headroomPercent",
        KeyType::Integer,
        "The new limit must exceed the working set by this much, in percent of the working set \
         (0 judges exactly as the kubelet does; 0 to 1000).",
    ),
    key(
        "memory.decrease.maxUsageAgeSeconds",
        KeyType::Integer,
        "Usage measured longer ago than this, in seconds, is not judged with (at least 1).",
    ),
    key(
        "namespaces",
        KeyType::Section,
        "Which namespaces resize-guard looks at.",
    ),
    key(
        "namespaces.exclude",
        KeyType::Strings,
        "Namespaces resize-guard ignores: their resizes are not judged, their pods are never \
         victims and never reverted (the install namespace is always added).",
    ),
];

/// The values serde accepts for the enum `T`, as written in YAML (its variants after
/// `rename_all`): what its derived `Deserialize` hands to `deserialize_enum`.
pub fn variants<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let found = Cell::new(&[][..]);
    // The probe always fails once it has seen the variants: there is no value to make.
    let _ = T::deserialize(VariantProbe(&found));
    found.get()
}

/// A deserializer that records the variants `deserialize_enum` is asked for, and refuses all.
struct VariantProbe<'a>(&'a Cell<&'static [&'static str]>);

/// [`VariantProbe`]'s only answer.
#[derive(Debug)]
struct Probed;

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Probed
    }
}

impl<'de> Deserializer<'de> for VariantProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        self.0.set(variants);
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::super::Policy;
    use super::*;

    /// Every key of `value`, sections included, with its path.
    fn paths<'v>(value: &'v Value, prefix: &str, out: &mut Vec<(String, &'v Value)>) {
        if let Value::Object(map) = value {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push((path.clone(), v));
                paths(v, &path, out);
            }
        }
    }

    fn default_keys() -> BTreeMap<String, Value> {
        let value = serde_json::to_value(Policy::default()).unwrap();
        let mut out = Vec::new();
        paths(&value, "", &mut out);
        out.into_iter().map(|(p, v)| (p, v.clone())).collect()
    }

    /// A document setting `path` to a value of `ty`, with what must be stated around it.
    fn document(path: &str, ty: KeyType) -> String {
        let sample = match ty {
            KeyType::Section => "{}".to_owned(),
            KeyType::Boolean => "true".to_owned(),
            // Inside every key's range (at least 10, at most 1000).
            KeyType::Integer => "30".to_owned(),
            KeyType::Selector => "team=platform".to_owned(),
            KeyType::Strings => "[team-a]".to_owned(),
            KeyType::OneOf(values) => values()[0].to_owned(),
        };
        let mut doc = String::new();
        if path == "preemption" {
            return "mode: audit\npreemption:\n  enabled: true\n".to_owned();
        }
        if path != "mode" {
            doc.push_str("mode: audit\n");
        }
        let parts: Vec<&str> = path.split('.').collect();
        if parts[0] == "preemption" && path != "preemption.enabled" {
            // `enabled` first, then the key's own lines under the same section.
            doc.push_str("preemption:\n  enabled: true\n");
            for (depth, part) in parts.iter().enumerate().skip(1) {
                doc.push_str(&"  ".repeat(depth));
                doc.push_str(part);
                doc.push(':');
                doc.push_str(if depth + 1 == parts.len() { " " } else { "\n" });
            }
        } else {
            for (depth, part) in parts.iter().enumerate() {
                doc.push_str(&"  ".repeat(depth));
                doc.push_str(part);
                doc.push(':');
                doc.push_str(if depth + 1 == parts.len() { " " } else { "\n" });
            }
        }
        doc.push_str(&sample);
        doc.push('\n');
        doc
    }

    #[test]
    fn every_key_of_the_default_policy_has_one_row_of_its_type() {
        let rows: BTreeMap<&str, &Key> = KEYS.iter().map(|k| (k.path, k)).collect();
        assert_eq!(rows.len(), KEYS.len(), "a path is listed twice in KEYS");
        for (path, value) in default_keys() {
            let row = rows
                .get(path.as_str())
                .unwrap_or_else(|| panic!("policy key {path} has no row in KEYS: add one"));
            assert!(
                row.ty.fits(&value),
                "KEYS says {path} is {:?}, the default policy holds {value}",
                row.ty
            );
        }
    }

    #[test]
    fn every_row_names_a_key_the_parser_accepts() {
        let defaults = default_keys();
        for k in KEYS {
            let doc = document(k.path, k.ty);
            Policy::from_yaml(&doc)
                .unwrap_or_else(|e| panic!("KEYS row {} is not a policy key: {e}\n{doc}", k.path));
            // A row missing from the serialized default is an optional key, never a section.
            if !defaults.contains_key(k.path) {
                assert!(
                    !matches!(k.ty, KeyType::Section),
                    "section {} is not in the default policy",
                    k.path
                );
            }
            let parent = k.path.rsplit_once('.').map(|(p, _)| p);
            if let Some(parent) = parent {
                assert!(
                    KEYS.iter()
                        .any(|s| s.path == parent && matches!(s.ty, KeyType::Section)),
                    "{} has no section row {parent}",
                    k.path
                );
            }
        }
    }

    #[test]
    fn a_row_naming_no_key_is_caught() {
        // What the test above does with a stale row: the parser refuses the unknown key.
        for (path, ty) in [
            ("preemption.maxVictimPerResize", KeyType::Integer),
            ("qos.onChanges", KeyType::OneOf(variants::<OnQosChange>)),
            ("tenancy", KeyType::Section),
        ] {
            assert!(Policy::from_yaml(&document(path, ty)).is_err(), "{path}");
        }
    }

    #[test]
    fn variants_are_the_values_as_written_in_yaml() {
        assert_eq!(variants::<Mode>(), ["enforce", "audit"]);
        assert_eq!(variants::<PdbMode>(), ["respect", "bestEffort"]);
        assert_eq!(variants::<BelowUsage>(), ["reject", "warn", "allow"]);
        assert!(variants::<u32>().is_empty());
    }
}
