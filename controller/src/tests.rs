//! What the controller's unit tests share: a fake API server (tower-test, as kube-rs's
//! controller-rs tests its reconciler) that answers every request and records it.

use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::Value;

/// One request the fake saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) body: Value,
}

impl Seen {
    /// `METHOD /path`.
    pub(crate) fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// The requests a fake saw, in order.
pub(crate) type Log = Arc<Mutex<Vec<Seen>>>;

/// A fake API server answering each request with `answer`: the service to build a
/// `kube::Client` on (with or without more layers), and the requests it sees.
pub(crate) fn fake_api(
    mut answer: impl FnMut(&Seen) -> (StatusCode, Value) + Send + 'static,
) -> (tower_test::mock::Mock<Request<Body>, Response<Body>>, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap();
            let s = Seen {
                method: parts.method,
                path: parts.uri.path().to_owned(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (status, reply) = answer(&s);
            log.lock().unwrap().push(s);
            let response = Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    (service, seen)
}
