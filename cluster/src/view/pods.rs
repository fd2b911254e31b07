//! The one pod watch: every pod into the view's [`PodIndex`] (a relist builds a fresh index and
//! swaps it in whole), and, for the controller, the pods [`super::ViewConfig::keep_pod_if`] selects
//! into a reflector store and a broadcast, in that order.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;

use super::ClusterView;
use super::KeepPod;
use super::initial_list::{InitialList, listed};
#[cfg(any(test, feature = "testing"))]
use super::watches::inject;
use crate::index::PodIndex;
use crate::lean::LeanPod;
use crate::watch_health::Watched;

/// How many pod events [`ClusterView::pod_events`] buffers per receiver before it lags.
pub const POD_EVENTS_CAPACITY: usize = 4096;

/// Pods are listed 100 per page rather than kube's default 500: a page's body is held whole
/// while it is decoded (~20 kB of JSON per pod), and its peak stays resident after the list;
/// 100 keeps that peak small for a few more requests (1,500 at 150,000 pods, each served from
/// kube-apiserver's watch cache).
pub const POD_PAGE_SIZE: u32 = 100;

fn pod_list_config() -> watcher::Config {
    watcher::Config::default().page_size(POD_PAGE_SIZE)
}

/// The pod watch task: the index, then the store and the broadcast.
pub(super) async fn watch_pods(
    view: Arc<ClusterView>,
    api: Api<LeanPod>,
    initial: InitialList,
    mut store: Option<(Writer<Pod>, KeepPod)>,
) {
    let mut stream = listed(
        api,
        pod_list_config(),
        initial,
        "pods",
        view.lists_in_pages.clone(),
    )
    .boxed();
    let mut relist: Option<PodIndex> = None;
    let mut announce = Announcements::default();
    while let Some(item) = stream.next().await {
        #[cfg(any(test, feature = "testing"))]
        inject(&view, Watched::Pods, &item);
        let mut kept = None;
        if let Ok(ev) = &item {
            apply_to_index(&view, ev, &mut relist);
            if let Some((w, keep)) = store.as_mut() {
                kept = keep_in_store(w, *keep, ev);
            }
        }
        view.health.observe(Watched::Pods, &item);
        if let Ok(ev) = item {
            for p in announce.after(ev, kept == Some(true)) {
                if view.pod_events.receiver_count() > 0 {
                    // Only fails without receivers (a race with the last one leaving).
                    let _ = view.pod_events.send(Arc::new(p));
                }
            }
        }
    }
}

/// Which selected pods the broadcast announces after each event, once the store shows them: an
/// applied or deleted pod at once, a relist's pods at its `InitDone` (until then kube's reflector
/// buffers the relist, and a receiver that looked a pod up on its event would not find it).
#[derive(Debug, Default)]
struct Announcements {
    listed: Vec<Pod>,
}

impl Announcements {
    /// The pods to send after `ev` was applied; `kept` says whether its pod is selected.
    fn after(&mut self, ev: watcher::Event<Pod>, kept: bool) -> Vec<Pod> {
        match ev {
            watcher::Event::Init => {
                self.listed.clear();
                vec![]
            }
            watcher::Event::InitApply(p) if kept => {
                self.listed.push(p);
                vec![]
            }
            watcher::Event::InitDone => std::mem::take(&mut self.listed),
            watcher::Event::Apply(p) | watcher::Event::Delete(p) if kept => vec![p],
            _ => vec![],
        }
    }
}

/// Applies `ev` to the store as far as `keep` selects its pod: a pod that stops matching is
/// deleted from it. Returns whether the event's pod is selected (`None` for list boundaries).
fn keep_in_store(store: &mut Writer<Pod>, keep: KeepPod, ev: &watcher::Event<Pod>) -> Option<bool> {
    match ev {
        watcher::Event::Init | watcher::Event::InitDone => {
            store.apply_watcher_event(ev);
            None
        }
        watcher::Event::InitApply(p) => {
            let kept = keep(p);
            if kept {
                store.apply_watcher_event(ev);
            }
            Some(kept)
        }
        watcher::Event::Apply(p) => {
            let kept = keep(p);
            if kept {
                store.apply_watcher_event(ev);
            } else if store
                .as_reader()
                .get(&reflector::ObjectRef::from_obj(p))
                .is_some()
            {
                store.apply_watcher_event(&watcher::Event::Delete(p.clone()));
            }
            Some(kept)
        }
        watcher::Event::Delete(p) => {
            store.apply_watcher_event(ev);
            Some(keep(p))
        }
    }
}

/// A relist builds a fresh index in `relist` and swaps it in at `InitDone`.
fn apply_to_index(view: &ClusterView, ev: &watcher::Event<Pod>, relist: &mut Option<PodIndex>) {
    match ev {
        watcher::Event::Init => *relist = Some(PodIndex::default()),
        watcher::Event::InitApply(p) => {
            if let Some(r) = relist.as_mut() {
                r.apply(p);
            }
        }
        watcher::Event::InitDone => {
            if let Some(mut fresh) = relist.take() {
                fresh.compact();
                if let Ok(mut idx) = view.pods.write() {
                    *idx = fresh;
                }
            }
        }
        watcher::Event::Apply(p) => {
            if let Ok(mut idx) = view.pods.write() {
                idx.apply(p);
            }
        }
        watcher::Event::Delete(p) => {
            if let Ok(mut idx) = view.pods.write() {
                idx.delete(&p.uid().unwrap_or_default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p
    }

    fn names(pods: Vec<Pod>) -> Vec<String> {
        pods.into_iter().filter_map(|p| p.metadata.name).collect()
    }

    #[test]
    fn a_relist_is_announced_at_its_end_and_a_change_at_once() {
        let mut a = Announcements::default();
        assert!(a.after(watcher::Event::Init, false).is_empty());
        assert!(
            a.after(watcher::Event::InitApply(pod("kept")), true)
                .is_empty()
        );
        assert!(
            a.after(watcher::Event::InitApply(pod("other")), false)
                .is_empty()
        );
        assert_eq!(names(a.after(watcher::Event::InitDone, false)), ["kept"]);
        assert_eq!(names(a.after(watcher::Event::Apply(pod("a")), true)), ["a"]);
        assert_eq!(
            names(a.after(watcher::Event::Delete(pod("d")), true)),
            ["d"]
        );
        assert!(a.after(watcher::Event::Apply(pod("no")), false).is_empty());
        // A relist that starts over forgets what the broken one listed.
        a.after(watcher::Event::Init, false);
        a.after(watcher::Event::InitApply(pod("lost")), true);
        a.after(watcher::Event::Init, false);
        assert!(a.after(watcher::Event::InitDone, false).is_empty());
    }
}
