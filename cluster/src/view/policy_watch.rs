//! The two policy ConfigMaps the view watches — the policy itself and the controller's last good
//! copy — each by name, and what a reading does: the policy in force changes as
//! [`crate::policy_source`] rules, a reload is counted, and an invalid, deleted or missing policy
//! is logged and reported as an `InvalidPolicy`, `PolicyDeleted` or `NoPolicy` Warning Event.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::Resource;
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::watcher;
use resize_guard_policy::event_reason::EventReason;
use resize_guard_policy::policy::{POLICY_KEY, Policy};
use resize_guard_runtime::Events;

use super::watches::trimmed;
use super::{ClusterView, PolicyReloadHook, ViewConfig};
use crate::policy_source::{PolicySource, parse};
use crate::watch_health::Watched;

impl ClusterView {
    /// Applies one source's reading; a change of the policy in force ticks
    /// [`ClusterView::policy_changes`] and is logged; losing every policy publishes a `NoPolicy`
    /// Warning Event on the policy ConfigMap (once per spell without one).
    fn update_policy(&self, config: &ViewConfig, update: impl FnOnce(&mut PolicySource) -> bool) {
        let Ok(mut source) = self.policy.write() else {
            return;
        };
        let changed = update(&mut source);
        let (in_force, why_none) = (source.in_force().cloned(), source.why_none());
        let settled = source.settled();
        drop(source);
        if changed {
            match &in_force {
                Some(f) => tracing::info!(
                    origin = f.origin.as_str(),
                    effective_policy = %f.policy.to_yaml(),
                    "policy loaded"
                ),
                None => tracing::warn!("no policy in force"),
            }
            self.policy_version.send_modify(|v| *v += 1);
        }
        if in_force.is_some() {
            self.no_policy_reported.store(false, Ordering::Release);
            return;
        }
        let Some(why) = why_none.filter(|_| settled) else {
            return;
        };
        if self.no_policy_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            why,
            "nothing is denied, repaired or preempted until a policy parses"
        );
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: EventReason::NoPolicy.as_str().into(),
            note: Some(format!(
                "{why}; resize-guard denies, repairs and preempts nothing until {POLICY_KEY} in ConfigMap {}/{} parses",
                self.namespace, config.policy_configmap
            )),
            action: "LoadPolicy".into(),
            secondary: None,
        };
        let regarding = named_config_map(&config.policy_configmap, &self.namespace);
        config.events.publish(event, regarding);
    }
}

/// What a watch of one named ConfigMap saw.
enum Seen<'a> {
    /// Listed or changed.
    Present(&'a ConfigMap),
    /// Deleted (`Some`), or absent from a (re)list (`None`).
    Gone(Option<&'a ConfigMap>),
}

/// Watches the ConfigMap `name` in the install namespace (a field selector, which RBAC's
/// `resourceNames` allows), telling `on` whenever it is present or gone, and `watched`'s health
/// about every item.
async fn watch_config_map(
    client: kube::Client,
    view: &ClusterView,
    name: &str,
    watched: Watched,
    mut on: impl FnMut(Seen<'_>),
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &view.namespace);
    let watch = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = trimmed(api, watch, |cm: &mut ConfigMap| {
        cm.metadata.managed_fields = None;
    })
    .boxed();
    let mut seen_in_list = false;
    while let Some(item) = stream.next().await {
        match &item {
            Err(_) | Ok(watcher::Event::InitDone) => {}
            Ok(watcher::Event::Init) => seen_in_list = false,
            Ok(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm)) => {
                seen_in_list = true;
                on(Seen::Present(cm));
            }
            Ok(watcher::Event::Delete(cm)) => on(Seen::Gone(Some(cm))),
        }
        if matches!(item, Ok(watcher::Event::InitDone)) && !seen_in_list {
            on(Seen::Gone(None));
        }
        view.health.observe(watched, &item);
    }
}

/// The policy ConfigMap's watch task.
pub(super) async fn watch_policy(client: kube::Client, view: Arc<ClusterView>, config: ViewConfig) {
    let name = config.policy_configmap.clone();
    watch_config_map(
        client,
        &view,
        &name,
        Watched::ConfigMap,
        |seen| match seen {
            Seen::Present(cm) => {
                let read = parse(cm.data.as_ref());
                report_policy(&read, cm, &config.events, &config.on_policy_reload);
                view.update_policy(&config, |s| s.config_map(Some(read)));
            }
            Seen::Gone(cm) => {
                if cm.is_some() || view.policy_in_force().is_some() {
                    policy_gone(&name, &view.namespace, cm, &config.events);
                } else {
                    tracing::warn!(configmap = %name, "no policy ConfigMap");
                }
                view.update_policy(&config, |s| s.config_map(None));
            }
        },
    )
    .await;
}

/// The name of the controller's last good copy of the policy ConfigMap `policy_configmap`.
pub fn last_good_name(policy_configmap: &str) -> String {
    format!("{policy_configmap}-last-good")
}

/// Watches the controller's last good copy (read at start when the policy ConfigMap gives no
/// policy; see [`crate::policy_source`]).
pub(super) async fn watch_last_good(
    client: kube::Client,
    view: Arc<ClusterView>,
    config: ViewConfig,
) {
    let name = last_good_name(&config.policy_configmap);
    watch_config_map(client, &view, &name, Watched::LastGoodPolicy, |seen| {
        let read = match seen {
            Seen::Present(cm) => Some(parse(cm.data.as_ref())),
            Seen::Gone(_) => None,
        };
        if let Some(Err(why)) = &read {
            tracing::warn!(configmap = %name, why, "the last good policy copy is invalid");
        }
        view.update_policy(&config, |s| s.last_good(read));
    })
    .await;
}

/// A reference to the ConfigMap `name` in `namespace`, when only its name is known.
fn named_config_map(name: &str, namespace: &str) -> ObjectReference {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
    .object_ref(&())
}

/// The policy ConfigMap disappeared: keep the policy in force, say so in the log and in a
/// `PolicyDeleted` Warning Event on the (deleted) ConfigMap.
fn policy_gone(name: &str, namespace: &str, cm: Option<&ConfigMap>, events: &Events) {
    tracing::warn!(configmap = %name, "policy ConfigMap deleted; keeping the last good policy until it is recreated");
    let regarding = match cm {
        Some(cm) => cm.object_ref(&()),
        // Gone at a relist: only its name is known.
        None => named_config_map(name, namespace),
    };
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: EventReason::PolicyDeleted.as_str().into(),
        note: Some(format!(
            "the policy ConfigMap {namespace}/{name} was deleted; keeping the last good policy until it is recreated"
        )),
        action: "LoadPolicy".into(),
        secondary: None,
    };
    events.publish(event, regarding);
}

/// The `InvalidPolicy` Event's action: `LoadPolicy` and a fingerprint of the error. kube's
/// recorder folds Events with the same object, reason and action into one series that keeps its
/// first note, so without the fingerprint a second, different mistake in the same ConfigMap
/// would show only as a higher count on the first one's message; the same mistake read again
/// still counts in its series.
fn load_action(error: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    error.hash(&mut h);
    format!("LoadPolicy-{:08x}", h.finish() as u32)
}

/// Counts a reload and, for one that failed, logs it and publishes an `InvalidPolicy` Warning
/// Event on the ConfigMap.
fn report_policy(
    read: &Result<(Policy, String), String>,
    cm: &ConfigMap,
    events: &Events,
    on_reload: &PolicyReloadHook,
) {
    on_reload(read.is_ok());
    if let Err(e) = read {
        tracing::warn!(error = %e, "invalid policy; keeping the last good one");
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: EventReason::InvalidPolicy.as_str().into(),
            note: Some(format!("{e}; keeping the last good policy")),
            action: load_action(e),
            secondary: None,
        };
        events.publish(event, cm.object_ref(&()));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn different_mistakes_are_different_series_and_the_same_one_is_one() {
        let a = super::load_action("policy.yaml: `mode` is not stated");
        let b = super::load_action("policy.yaml line 1, column 6: qos: expected mapping start");
        assert_ne!(a, b);
        assert_eq!(a, super::load_action("policy.yaml: `mode` is not stated"));
        assert!(a.starts_with("LoadPolicy-") && a.len() <= 128, "{a}");
    }
}
