//! How a watch of many objects gets its first state: a streaming list where the API server
//! serves one, pages where it does not.
//!
//! A paged LIST holds a whole page's body while it decodes it; a streaming list
//! (`sendInitialEvents=true`, KEP-3157 "WatchList") sends the objects one watch event at a time
//! and ends the initial state with a bookmark, so nothing larger than one object is held at
//! once. kube-apiserver serves it when its `WatchList` feature gate is on: beta and on by
//! default from v1.34, off by default in v1.33 (`k8s.io/apiserver` `pkg/features`
//! `kube_features.go`), and any cluster may turn it off. Then the watch request is refused with
//! 422 Invalid ("sendInitialEvents is forbidden for watch unless the WatchList feature gate is
//! enabled", `k8s.io/apimachinery` `pkg/apis/meta/internalversion/validation`
//! `validateWatchOptions`). On that answer (or a 400) the watch falls back to paged lists for
//! the life of the process, says so once in the log, and counts nothing against the watch's
//! health: the refusal is an answer, not a fault.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt, stream::BoxStream};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher;

use super::watches::lean;

pub use resize_guard_runtime::args::InitialList;

/// A lean watch of `api` ([`lean`]) whose initial state comes as `initial` says; `paged` is the
/// configuration of the paged form (page size, selectors), which the streaming form shares;
/// `refused` is set when the API server refuses the streaming form.
pub(super) fn listed<W, K>(
    api: Api<W>,
    paged: watcher::Config,
    initial: InitialList,
    what: &'static str,
    refused: Arc<AtomicBool>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + Into<K> + 'static,
    W::DynamicType: Default,
    K: Send + 'static,
{
    // While streaming, what the paged fallback needs; `None` once listing in pages.
    let (first, fallback): (BoxStream<'static, _>, _) = match initial {
        InitialList::Streaming => (
            lean(api.clone(), paged.clone().streaming_lists()).boxed(),
            Some((api, paged)),
        ),
        InitialList::Paged => (lean(api, paged).boxed(), None),
    };
    futures::stream::unfold(
        (first, fallback, refused),
        move |(mut stream, fallback, refused)| async move {
            let item = stream.next().await?;
            let refusal = fallback.as_ref().and_then(|_| refuses_streaming(&item));
            let (Some(why), Some((api, paged))) = (refusal, fallback.as_ref()) else {
                return Some((item, (stream, fallback, refused)));
            };
            refused.store(true, Ordering::Release);
            tracing::warn!(
                watch = what,
                "the API server does not serve streaming lists ({why}); listing in pages"
            );
            let mut stream: BoxStream<'static, _> = lean(api.clone(), paged.clone()).boxed();
            let item = stream.next().await?;
            Some((item, (stream, None, refused)))
        },
    )
}

/// The server's answer when it refused a streaming list's watch request.
fn refuses_streaming<K>(item: &watcher::Result<watcher::Event<K>>) -> Option<String> {
    match item {
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(status)))
            if status.code == 422 || status.code == 400 =>
        {
            Some(format!(
                "{} {}: {}",
                status.code, status.reason, status.message
            ))
        }
        _ => None,
    }
}
