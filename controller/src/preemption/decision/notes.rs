//! What the controller's Events and conditions say about other pods, by who reads them.
//!
//! An Event (and a pod's condition) is read by whoever may read its namespace, so a pod of
//! another namespace is never named there: the same rule as the webhook's answers
//! (`shared/src/audience.rs`). Notes are decided whole in `crate::preemption::decision`, which
//! names pods as `namespace/name` (`PodKey`'s form); [`for_namespace`] rewrites every such name
//! of another namespace in a note as a count, at the one place Events are queued
//! (`Actuator::record_event`, `crate::preemption::actuator`), so no note — a fresh plan, a
//! resumed one, a stalled or refused eviction, audit mode — can miss it. The controller's log
//! keeps the note whole, for the operator.
//!
//! `Preempted` on a victim of another namespace than its preemptor names the preemptor as "a
//! higher-priority pod in another namespace" with its priority and node (the why, not the who),
//! and relates no object; the preemptor's own `PreemptingForResize` counts it.
//!
//! One exception, [`QUOTES_THE_RECORD`]: `PreemptionPlanRejected` says which entries of the plan
//! record on the preemptor (annotation `resize-guard.io/preemption`, ARCHITECTURE.md,
//! "controller/") fail which rule. Every name it gives is in that annotation, on the same pod, for
//! the same readers (`kubectl get pod -o yaml`), and a record its author planted must stay legible
//! to its author. Counting them there would hide nothing the annotation does not show; the record's
//! format (`shared/src/plan.rs`) is where other namespaces' names would have to go first.

use resize_guard_runtime::events::EventReason;

/// The Event reason whose note quotes the plan record on its own pod, left as written.
pub const QUOTES_THE_RECORD: EventReason = EventReason::PreemptionPlanRejected;

/// `note` for readers of namespace `ns`: every `namespace/name` of another namespace (with its
/// `(priority N)` when one follows) becomes `a pod in another namespace`, and a run of them
/// joined by `, ` or ` and ` one count (`2 pods in other namespaces`).
pub fn for_namespace(note: &str, ns: &str) -> String {
    let words: Vec<&str> = note.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    // Other-namespace pods in the run being built, the punctuation after its last one, and an
    // `and` after it that may join the next.
    let mut run = 0usize;
    let mut tail = "";
    let mut and = false;
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        let (body, after) = split_punctuation(word);
        if pod_namespace(body).is_some_and(|p| p != ns) {
            // Its `(priority N)`, if it follows, goes with it.
            let mut end = after;
            if after.is_empty()
                && words.get(i + 1) == Some(&"(priority")
                && let Some(n) = words.get(i + 2)
                && split_punctuation(n).0.ends_with(')')
            {
                end = split_punctuation(n).1;
                i += 2;
            }
            // `a, b and c`: a run continues over `,` and the word `and`.
            if run > 0 && (tail == "," || and) {
                run += 1;
            } else {
                flush(&mut out, &mut run, tail, &mut and);
                run = 1;
            }
            and = false;
            tail = end;
        } else if run > 0 && tail.is_empty() && !and && word == "and" {
            and = true;
        } else {
            flush(&mut out, &mut run, tail, &mut and);
            tail = "";
            out.push(word.to_owned());
        }
        i += 1;
    }
    flush(&mut out, &mut run, tail, &mut and);
    out.join(" ")
}

/// Writes the run of `run` other-namespace pods with its trailing punctuation, then the `and`
/// held after it.
fn flush(out: &mut Vec<String>, run: &mut usize, tail: &str, and: &mut bool) {
    match *run {
        0 => {}
        1 => out.push(format!("a pod in another namespace{tail}")),
        n => out.push(format!("{n} pods in other namespaces{tail}")),
    }
    if *and {
        out.push("and".to_owned());
    }
    *run = 0;
    *and = false;
}

/// `word` without the punctuation that may follow a name in a note (`,`, `;`, `:`, `.`).
fn split_punctuation(word: &str) -> (&str, &str) {
    let body = word.trim_end_matches([',', ';', ':', '.']);
    (body, &word[body.len()..])
}

/// The namespace of `word` when it is a pod's `namespace/name` (two DNS-1123 labels or
/// subdomains joined by one `/`).
fn pod_namespace(word: &str) -> Option<&str> {
    let (ns, name) = word.split_once('/')?;
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    (dns(ns) && dns(name) && !ns.contains('.')).then_some(ns)
}

/// The `Preempted` Event's note on a victim in `victim_ns`, and whether it may relate the
/// preemptor (only when it is in the same namespace).
pub fn preempted(
    victim_ns: &str,
    preemptor: &resize_guard_policy::pod::PodKey,
    priority: i32,
    node: &str,
) -> (String, bool) {
    if preemptor.namespace == victim_ns {
        (
            format!(
                "Preempted by resize-guard to make room for the in-place resize of {preemptor} (priority {priority}) on node {node}"
            ),
            true,
        )
    } else {
        (
            format!(
                "Preempted by resize-guard to make room for the in-place resize of a higher-priority pod in another namespace (priority {priority}) on node {node}"
            ),
            false,
        )
    }
}

/// The `DisruptionTarget` condition's message on a victim in `victim_ns`.
pub fn disruption_message(victim_ns: &str, preemptor: &resize_guard_policy::pod::PodKey) -> String {
    if preemptor.namespace == victim_ns {
        format!("resize-guard: preempting to make room for the in-place resize of {preemptor}")
    } else {
        "resize-guard: preempting to make room for the in-place resize of a higher-priority pod in another namespace".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::pod::PodKey;

    #[test]
    fn other_namespaces_pods_are_counted_and_the_readers_own_are_named() {
        let note = "preempting batch/filler (priority 0), prod/cache (priority 10), batch/x (priority 0) and ops/y (priority 5) on node n1 to free cpu 1570m for this resize; it also leaves room for the pending resize of ops/z, which the kubelet may admit first";
        assert_eq!(
            for_namespace(note, "prod"),
            "preempting a pod in another namespace, prod/cache (priority 10), 2 pods in other namespaces on node n1 to free cpu 1570m for this resize; it also leaves room for the pending resize of a pod in another namespace, which the kubelet may admit first"
        );
        assert_eq!(
            for_namespace(
                "preempting batch/a (priority 0) and batch/b (priority 0) on node n1",
                "prod"
            ),
            "preempting 2 pods in other namespaces on node n1"
        );
        assert_eq!(
            for_namespace(
                "preempting batch/a (priority 0) and prod/b (priority 1) on node n1",
                "prod"
            ),
            "preempting a pod in another namespace and prod/b (priority 1) on node n1"
        );
        assert_eq!(
            for_namespace("resuming the recorded plan: batch/a, batch/b", "prod"),
            "resuming the recorded plan: 2 pods in other namespaces"
        );
        assert_eq!(
            for_namespace(
                "the resize waits on batch/a still terminating 40s after the plan",
                "prod"
            ),
            "the resize waits on a pod in another namespace still terminating 40s after the plan"
        );
        // The reader's own namespace, and text that names no pod, are left as they are.
        for same in [
            "preempting prod/a (priority 0) and prod/b (priority 1) on node n1",
            "cannot make room on node n1 (Node didn't have enough resource: cpu, requested: 550, used: 1650, capacity: 1930): preemption is disabled by policy (preemption.enabled: false)",
            "metrics.k8s.io answered 503",
        ] {
            assert_eq!(for_namespace(same, "prod"), same);
        }
    }

    #[test]
    fn a_victim_of_another_namespace_learns_why_not_who() {
        let p = PodKey {
            namespace: "prod".into(),
            name: "app".into(),
            uid: "u".into(),
        };
        let (note, related) = preempted("batch", &p, 1000, "n1");
        assert!(!related);
        assert!(!note.contains("prod") && !note.contains("app"), "{note}");
        assert!(
            note.contains("priority 1000") && note.contains("node n1"),
            "{note}"
        );
        assert!(!disruption_message("batch", &p).contains("prod/app"));
        let (note, related) = preempted("prod", &p, 1000, "n1");
        assert!(
            related && note.contains("prod/app (priority 1000)"),
            "{note}"
        );
        assert!(disruption_message("prod", &p).contains("prod/app"));
    }
}
