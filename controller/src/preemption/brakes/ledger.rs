//! The brakes' counts in ConfigMap [`CONFIGMAP`] of the install namespace, key [`KEY`]
//! ([`super::persisted`] is the format). A ConfigMap of its own, not an annotation on the
//! Lease: the elector renews the Lease every second with an update that would conflict with
//! (or carry stale copies of) a second writer's changes, a Lease is not where `kubectl` users
//! look for data, and RBAC can grant this one object by name apart from leader election.
//!
//! - [`load`] runs when a replica becomes leader, before its reconcile loop acts: absent, the
//!   counts in memory stand (a first leader starts full, as before); read, they replace them
//!   (clamped); unreadable, or the read fails, every bucket starts empty. Each is logged and
//!   counted (`resize_guard_brakes_state_loads_total{result}`).
//! - [`keep`] writes them (server-side apply, through the lease's fence) whenever they change,
//!   at most once per [`MIN_INTERVAL`] — at once when a plan beyond the saved reserve waits on
//!   it. A plan's evictions wait until a saved document covers them, by counting them or by
//!   its reserve ([`super::Admission::saved`]), so a leader that dies mid-plan leaves its
//!   victims paid for. A failed write is retried and counted
//!   (`resize_guard_brakes_state_writes_total{result="error"}`); the plans waiting on it are
//!   held (`held_state_unsaved`), sending nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::persisted::{Now, Restored, Snapshot};
use super::{Brakes, Saved};
use crate::lease::fence::Leadership;
use crate::metrics::Metrics;

/// The ConfigMap the leader keeps the brakes' counts in.
pub const CONFIGMAP: &str = "resize-guard-brakes";
/// Its key.
pub const KEY: &str = "brakes.json";
/// Fewest time between two writes: changes in between go out together.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Tries of the read at leadership start before the buckets start empty.
const READ_TRIES: u32 = 3;

/// Reads the persisted counts into `brakes` (see the module's doc for each outcome).
pub async fn load(client: kube::Client, namespace: &str, brakes: &Brakes, metrics: &Metrics) {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let mut tries = 0;
    let found = loop {
        tries += 1;
        match api.get_opt(CONFIGMAP).await {
            Ok(found) => break Ok(found),
            Err(e) if tries < READ_TRIES => {
                tracing::debug!(error = %e, "reading the brakes' state; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => break Err(e),
        }
    };
    let now = Now::read();
    let result = match found {
        Ok(None) => {
            tracing::info!(
                configmap = CONFIGMAP,
                "no persisted brakes' state: the counts in memory stand"
            );
            "absent"
        }
        Err(e) => {
            brakes.empty_buckets(now.instant);
            tracing::warn!(configmap = CONFIGMAP, error = %e,
                "could not read the brakes' state: every eviction bucket starts empty");
            "read_error"
        }
        Ok(Some(cm)) => {
            let text = cm
                .data
                .as_ref()
                .and_then(|d| d.get(KEY))
                .map_or("", String::as_str);
            let restored = brakes.restore(text, now);
            match &restored {
                Restored::Whole => {
                    tracing::info!(configmap = CONFIGMAP, "brakes' state restored");
                }
                Restored::Partial(lost) => tracing::warn!(
                    configmap = CONFIGMAP,
                    ?lost,
                    "brakes' state restored in part: what could not be read is assumed at its most conservative"
                ),
                Restored::Unreadable(why) => tracing::warn!(
                    configmap = CONFIGMAP,
                    why,
                    "the brakes' state is unreadable: every eviction bucket starts empty"
                ),
            }
            restored.label()
        }
    };
    metrics.brakes_state_load(result);
}

/// Marks `brakes` persisted while it lives: plans wait for their state to be saved.
struct Persisting<'a>(&'a Brakes);

impl Drop for Persisting<'_> {
    fn drop(&mut self) {
        self.0.persisting.store(false, Ordering::Release);
    }
}

/// Writes the counts whenever they change, until aborted or no longer leading.
pub async fn keep(
    client: kube::Client,
    namespace: String,
    brakes: Arc<Brakes>,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    brakes.persisting.store(true, Ordering::Release);
    let _persisting = Persisting(&brakes);
    let mut changes = brakes.changes.subscribe();
    let mut urgent = brakes.urgent.subscribe();
    let mut last: Option<(tokio::time::Instant, u64)> = None;
    loop {
        let latest = *changes.borrow_and_update();
        if latest <= brakes.saved.borrow().through {
            if changes.changed().await.is_err() {
                return;
            }
            continue;
        }
        if let Some((at, tried)) = last {
            // A plan waiting for a version not yet tried cuts the interval short: such writes
            // come no faster than the plans the buckets let through.
            tokio::select! {
                () = tokio::time::sleep_until(at + MIN_INTERVAL) => {}
                waits = urgent.wait_for(|w| *w > tried) => if waits.is_err() { return },
            }
        }
        let Snapshot {
            version,
            covers,
            doc,
        } = brakes.snapshot(Now::read());
        last = Some((tokio::time::Instant::now(), version));
        let text = serde_json::to_string(&doc).unwrap_or_default();
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CONFIGMAP,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/part-of": "resize-guard"},
            },
            "data": {KEY: text},
        });
        let params = PatchParams::apply("resize-guard-controller").force();
        let failed = match leadership
            .fenced(api.patch(CONFIGMAP, &params, &Patch::Apply(&body)))
            .await
        {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(fenced) => Some(fenced.to_string()),
        };
        metrics.brakes_state_write(if failed.is_none() { "ok" } else { "error" });
        brakes.saved.send_modify(|s: &mut Saved| match failed {
            None => {
                s.through = s.through.max(version);
                s.covers = s.covers.max(covers);
            }
            Some(why) => {
                tracing::warn!(
                    configmap = CONFIGMAP,
                    why,
                    "could not save the brakes' state; retrying"
                );
                s.failed = Some((version, why));
            }
        });
        if !leadership.is_leading() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
