//! The plumbing every watch of the view shares: a kube watcher retried on [`WatchBackoff`] with
//! each object decoded lean ([`crate::lean`]) or trimmed on arrival, a reflector store kept from
//! it, each item reported to the view's [`crate::watch_health::WatchHealth`], and the supervised
//! task that runs it (whose end is always a fault: kube's watcher never ends on its own).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Resource;
#[cfg(any(test, feature = "testing"))]
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};

use super::ClusterView;
use crate::watch_health::{WatchBackoff, Watched};

/// A watch of `api`, retried on [`WatchBackoff`], every object trimmed.
pub(super) fn trimmed<K>(
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config)
        .backoff(WatchBackoff::default())
        .modify(trim)
}

/// A watch of `api`'s objects decoded lean (`W`, e.g. [`crate::lean::LeanPod`]), retried on
/// [`WatchBackoff`], each event carrying the trimmed object `K` inside.
pub(super) fn lean<W, K>(
    api: Api<W>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + Into<K> + 'static,
    K: Send + 'static,
{
    watcher(api, config)
        .backoff(WatchBackoff::default())
        .map_ok(unwrap_lean)
}

/// The event with the lean object's trimmed object inside.
fn unwrap_lean<W: Into<K>, K>(ev: watcher::Event<W>) -> watcher::Event<K> {
    match ev {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(o.into()),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(o) => watcher::Event::Apply(o.into()),
        watcher::Event::Delete(o) => watcher::Event::Delete(o.into()),
    }
}

/// Keeps a reflector store of a watch's objects.
pub(super) async fn reflect<K>(
    view: Arc<ClusterView>,
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    mut writer: Writer<K>,
    resource: Watched,
) where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        #[cfg(any(test, feature = "testing"))]
        inject(&view, resource, &item);
        if let Ok(ev) = &item {
            writer.apply_watcher_event(ev);
            if resource == Watched::PodDisruptionBudgets {
                view.pdb_generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        view.health.observe(resource, &item);
    }
}

/// A watch task of the view, boxed so the five can be spawned alike.
type WatchTask = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

impl ClusterView {
    /// Runs the watch loop `work` under the view's
    /// [`Supervisor`](resize_guard_runtime::supervisor::Supervisor) as `task`. A watch loop only
    /// returns when its stream ends, which kube's watcher never does on its own (it retries on
    /// [`WatchBackoff`]): any end is a fault.
    pub(super) fn supervise(&self, task: &str, work: impl Future<Output = ()> + Send + 'static) {
        let watched: WatchTask = Box::pin(async move {
            work.await;
            Err::<(), String>("its watch stream ended".to_owned())
        });
        self.supervisor.spawn(task, watched);
    }
}

/// Panics if a test injected a panic for this watch and the object `item` carries.
#[cfg(any(test, feature = "testing"))]
pub(super) fn inject<K: Resource>(
    view: &ClusterView,
    resource: Watched,
    item: &watcher::Result<watcher::Event<K>>,
) {
    if let Ok(
        watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) | watcher::Event::Delete(obj),
    ) = item
    {
        view.injected_panics.check(
            resize_guard_runtime::fault::Site::Watch(resource.as_str()),
            &obj.name_any(),
        );
    }
}
