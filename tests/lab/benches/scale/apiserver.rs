//! An in-process kube-apiserver for the view's four watches: a tower service behind a real
//! `kube::Client`, so the reflectors, the watcher's paging and the client's decoding run exactly
//! as in production.
//!
//! It answers what kube-runtime's `watcher` sends (`kube-runtime` 5, `watcher.rs`):
//! - LIST (`limit=500`, `continue`; kube 5's default `ListSemantic::MostRecent` sends no
//!   `resourceVersion`, which kube-apiserver's watch cache serves in pages) with a page of
//!   `limit` objects rendered from the world on demand, the list's `metadata.resourceVersion`,
//!   and a `continue` token while objects remain. With [`ListMode::Unpaged`] a
//!   `resourceVersion=0` list (`ListSemantic::Any`) ignores `limit` and answers the whole
//!   collection in one (streamed) body, as the watch cache does (`cacher.go`
//!   `computeListLimit`: "the limit is ignored for requests that set RV == 0");
//! - WATCH (`watch=true`): the body stays open with a BOOKMARK a minute, like the watch cache;
//!   with `sendInitialEvents=true` (a streaming list) every object first as ADDED, then a
//!   BOOKMARK annotated `k8s.io/initial-events-end: "true"`;
//! - the policy ConfigMap (namespaced, `fieldSelector=metadata.name=…`; no last good copy): one
//!   ConfigMap whose `policy.yaml` is `mode: enforce` (the default policy).
//!
//! Anything else is logged to stderr and answered 404, so a new request shows up.

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::json;

use super::objects::{Kind, Renderer, policy_configmap};
use super::world::World;

/// Response bodies of the fake API server.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// How a `resourceVersion=0` LIST is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMode {
    /// In pages of the requested `limit` (what the benchmark measures by default).
    Paged,
    /// Whole, ignoring `limit`, like kube-apiserver's watch cache.
    Unpaged,
}

/// Objects per chunk of a streamed list body.
const CHUNK: usize = 500;
/// Objects per chunk of a streaming list's events: ~170 kB, what a client's reads of a real
/// server's watch stream hold at a time (one 500-object chunk, ~10 MB, would sit in the
/// benchmark's own memory and be counted as the program's).
const EVENT_CHUNK: usize = 8;
/// The watch cache's bookmark period.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// What the server did, for the report.
#[derive(Debug, Default)]
pub struct Stats {
    /// When the last page of the pod list was handed to the client.
    pub last_pod_page: Mutex<Option<Instant>>,
    /// Time spent rendering objects.
    pub render_nanos: AtomicU64,
    /// Body bytes rendered.
    pub bytes: AtomicU64,
    /// LIST requests answered.
    pub lists: AtomicU64,
    /// WATCH requests answered.
    pub watches: AtomicU64,
    /// Requests answered 404.
    pub unknown: AtomicU64,
    /// The query of the first pod LIST (what the watcher asks for).
    pub first_pod_list: Mutex<Option<String>>,
}

/// The fake API server.
#[derive(Debug)]
pub struct FakeApi {
    /// The cluster it serves.
    pub world: Arc<World>,
    /// What it did.
    pub stats: Arc<Stats>,
    /// `RESIZE_GUARD`'s namespace (holds the policy ConfigMap).
    pub namespace: String,
    /// The policy ConfigMap's name.
    pub configmap: String,
    /// How `resourceVersion=0` lists are answered.
    pub mode: ListMode,
}

/// The fake API server as the transport of a `kube::Client`.
pub fn client(api: Arc<FakeApi>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let api = api.clone();
        async move { Ok::<_, Infallible>(api.handle(&req)) }
    });
    kube::Client::new(service, "default")
}

enum Target {
    Objects(Kind),
    ConfigMaps,
}

impl FakeApi {
    fn handle<B>(self: &Arc<Self>, req: &Request<B>) -> Response<Body> {
        let query = parse_query(req.uri().query().unwrap_or_default());
        let cm_path = format!("/api/v1/namespaces/{}/configmaps", self.namespace);
        let target = match req.uri().path() {
            "/api/v1/nodes" => Some(Target::Objects(Kind::Nodes)),
            "/api/v1/pods" => Some(Target::Objects(Kind::Pods)),
            "/apis/policy/v1/poddisruptionbudgets" => Some(Target::Objects(Kind::Pdbs)),
            p if p == cm_path => Some(Target::ConfigMaps),
            _ => None,
        };
        let (Some(target), true) = (target, req.method() == http::Method::GET) else {
            return self.not_found(req);
        };
        let q = |k: &str| query.get(k).map(String::as_str).unwrap_or_default();
        let watch = q("watch") == "true";
        if watch {
            self.stats.watches.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.lists.fetch_add(1, Ordering::Relaxed);
        }
        match target {
            Target::ConfigMaps => {
                let selected = q("fieldSelector");
                let wanted = format!("metadata.name={}", self.configmap);
                // Any other name (the controller's last good copy) does not exist here.
                let exists = selected.is_empty() || selected == wanted;
                let cm = policy_configmap(&self.namespace, &self.configmap);
                if watch {
                    let mut first = Vec::new();
                    if q("sendInitialEvents") == "true" && exists {
                        let mut obj = cm.clone();
                        obj["apiVersion"] = json!("v1");
                        obj["kind"] = json!("ConfigMap");
                        first.extend_from_slice(
                            json!({"type": "ADDED", "object": obj})
                                .to_string()
                                .as_bytes(),
                        );
                        first.push(b'\n');
                        first.extend_from_slice(&bookmark("v1", "ConfigMap", "99999999", true));
                    }
                    return watch_body(Bytes::from(first), "v1", "ConfigMap", 99_999_999);
                }
                let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": self.world.list_rv.to_string()},
                    "items": if exists { vec![cm] } else { vec![] }});
                ok(Full::new(Bytes::from(list.to_string())).boxed_unsync())
            }
            Target::Objects(kind) if watch => {
                if q("sendInitialEvents") == "true" {
                    self.initial_events(kind)
                } else {
                    let (api, k) = kind.type_meta();
                    watch_body(Bytes::new(), api, k, self.world.list_rv)
                }
            }
            Target::Objects(kind) => {
                if kind == Kind::Pods
                    && let Ok(mut first) = self.stats.first_pod_list.lock()
                {
                    first.get_or_insert_with(|| req.uri().query().unwrap_or_default().to_owned());
                }
                let limit: usize = q("limit").parse().unwrap_or(0);
                let start: usize = q("continue")
                    .strip_prefix("rg-")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                if limit == 0 || (self.mode == ListMode::Unpaged && q("resourceVersion") == "0") {
                    self.whole_list(kind)
                } else {
                    self.page(kind, start, limit)
                }
            }
        }
    }

    fn not_found<B>(&self, req: &Request<B>) -> Response<Body> {
        self.stats.unknown.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "scale: fake API server: no answer for {} {}",
            req.method(),
            req.uri()
        );
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("the fake API server does not serve {}", req.uri().path()),
            "reason": "NotFound", "details": {}, "code": 404});
        let mut resp = ok(Full::new(Bytes::from(status.to_string())).boxed_unsync());
        *resp.status_mut() = StatusCode::NOT_FOUND;
        resp
    }

    /// `{"kind":"…List",…,"items":[` for a list of `kind`.
    fn list_head(&self, kind: Kind, cont: Option<(usize, usize)>) -> String {
        let (api, k) = kind.type_meta();
        let more = cont
            .map(|(next, left)| format!(r#","continue":"rg-{next}","remainingItemCount":{left}"#))
            .unwrap_or_default();
        format!(
            r#"{{"kind":"{k}List","apiVersion":"{api}","metadata":{{"resourceVersion":"{}"{more}}},"items":["#,
            self.world.list_rv
        )
    }

    /// Renders objects `range` of `kind` into `out`, comma-separated (a leading comma unless
    /// `range` starts the list), or as newline-terminated ADDED events.
    fn render(&self, kind: Kind, range: Range<usize>, out: &mut Vec<u8>, events: bool) {
        self.render_with(&mut Renderer::default(), kind, range, out, events);
    }

    /// [`FakeApi::render`] with a renderer (and its cached templates) kept across calls.
    fn render_with(
        &self,
        r: &mut Renderer,
        kind: Kind,
        range: Range<usize>,
        out: &mut Vec<u8>,
        events: bool,
    ) {
        let t = Instant::now();
        for i in range {
            if events {
                out.extend_from_slice(br#"{"type":"ADDED","object":"#);
                r.render(&self.world, kind, i, out, true);
                out.extend_from_slice(b"}\n");
            } else {
                if i > 0 {
                    out.push(b',');
                }
                r.render(&self.world, kind, i, out, false);
            }
        }
        self.account(t, out.len());
    }

    fn account(&self, t: Instant, bytes: usize) {
        self.stats
            .render_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn pods_listed(&self, kind: Kind) {
        if kind == Kind::Pods
            && let Ok(mut last) = self.stats.last_pod_page.lock()
        {
            *last = Some(Instant::now());
        }
    }

    /// One page of a paged list.
    fn page(&self, kind: Kind, start: usize, limit: usize) -> Response<Body> {
        let count = kind.count(&self.world);
        let end = (start + limit).min(count);
        let cont = (end < count).then_some((end, count - end));
        let mut out = self.list_head(kind, cont).into_bytes();
        let start = start.min(end);
        // The first item of a later page needs no leading comma.
        let mut items = Vec::with_capacity((end - start) * 16 * 1024);
        self.render(kind, start..end, &mut items, false);
        out.extend_from_slice(items.strip_prefix(b",").unwrap_or(&items));
        out.extend_from_slice(b"]}");
        if cont.is_none() {
            self.pods_listed(kind);
        }
        ok(Full::new(Bytes::from(out)).boxed_unsync())
    }

    /// Every object of `kind` rendered [`CHUNK`] at a time as the client reads them (list items,
    /// or ADDED events when `events`), then `last`; the pods count as listed once all are out.
    fn rendered(
        self: &Arc<Self>,
        kind: Kind,
        events: bool,
        last: Vec<u8>,
    ) -> impl futures::Stream<Item = Bytes> + use<> {
        let count = kind.count(&self.world);
        let this = self.clone();
        futures::stream::unfold(Some((0usize, last, Renderer::default())), move |state| {
            let this = this.clone();
            async move {
                let (next, last, mut r) = state?;
                if next == count {
                    this.pods_listed(kind);
                    return Some((Bytes::from(last), None));
                }
                let chunk = if events { EVENT_CHUNK } else { CHUNK };
                let end = (next + chunk).min(count);
                let mut out = Vec::with_capacity(chunk * 16 * 1024);
                this.render_with(&mut r, kind, next..end, &mut out, events);
                Some((Bytes::from(out), Some((end, last, r))))
            }
        })
    }

    /// The whole list in one body, rendered chunk by chunk as the client reads it.
    fn whole_list(self: &Arc<Self>, kind: Kind) -> Response<Body> {
        let head = Bytes::from(self.list_head(kind, None));
        let body = futures::stream::once(async move { head })
            .chain(self.rendered(kind, false, b"]}".to_vec()))
            .map(|b| Ok::<_, Infallible>(Frame::data(b)));
        ok(StreamBody::new(body).boxed_unsync())
    }

    /// A streaming list: every object as ADDED, the end bookmark, then an open watch.
    fn initial_events(self: &Arc<Self>, kind: Kind) -> Response<Body> {
        let (api, k) = kind.type_meta();
        let rv = self.world.list_rv;
        let events = self
            .rendered(kind, true, bookmark(api, k, &rv.to_string(), true))
            .chain(bookmarks(api, k, rv));
        ok(StreamBody::new(events.map(|b| Ok::<_, Infallible>(Frame::data(b)))).boxed_unsync())
    }
}

fn ok(body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// A BOOKMARK event line.
fn bookmark(api: &str, kind: &str, rv: &str, initial_end: bool) -> Vec<u8> {
    let mut meta = json!({"resourceVersion": rv});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let mut line =
        json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api, "metadata": meta}})
            .to_string()
            .into_bytes();
    line.push(b'\n');
    line
}

/// A bookmark a minute, forever.
fn bookmarks(
    api: &'static str,
    kind: &'static str,
    rv: u64,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(BOOKMARK_EVERY).await;
        Some((Bytes::from(bookmark(api, kind, &rv.to_string(), false)), ()))
    })
}

/// A watch response: `first`, then bookmarks; never ends.
fn watch_body(first: Bytes, api: &'static str, kind: &'static str, rv: u64) -> Response<Body> {
    let body = futures::stream::once(async move { first })
        .filter(|b| futures::future::ready(!b.is_empty()))
        .chain(bookmarks(api, kind, rv))
        .map(|b| Ok::<_, Infallible>(Frame::data(b)));
    ok(StreamBody::new(body).boxed_unsync())
}

fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` decoding.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(v) => {
                    out.push(v);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
