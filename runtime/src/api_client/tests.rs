//! [`ApiRetry`] on kube's client against a fake API server: what is retried, how often, and what
//! reaches the caller as it came.

use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use kube::api::{Api, PostParams};
use kube::client::Body;
use serde_json::json;
use tower::ServiceBuilder;

use super::*;

/// A fake API server: `answers[i]` answers the i-th request (the last one repeats); returns the
/// client (through [`layer`]) and the paths it saw.
fn fake(answers: Vec<(u16, Option<&'static str>)>) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Some((request, send)) = handle.next_request().await {
            log.lock()
                .unwrap()
                .push(format!("{} {}", request.method(), request.uri().path()));
            let (code, retry_after) = answers[n.min(answers.len() - 1)];
            n += 1;
            let body = if code == 200 {
                json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}})
            } else {
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                       "reason": "TooManyRequests", "message": "fake"})
            };
            let mut response = Response::builder().status(StatusCode::from_u16(code).unwrap());
            if let Some(after) = retry_after {
                response = response.header("Retry-After", after);
            }
            send.send_response(
                response
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap(),
            );
        }
    });
    let service = ServiceBuilder::new()
        .layer(layer())
        .map_err(BoxError::from)
        .service(service);
    (kube::Client::new(service, "default"), seen)
}

fn evict(api: &Api<Pod>) -> impl std::future::Future<Output = kube::Result<serde_json::Value>> {
    let eviction = Eviction {
        metadata: kube::api::ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        delete_options: None,
    };
    let api = api.clone();
    async move {
        api.create_subresource("eviction", "p", &PostParams::default(), &eviction)
            .await
    }
}

#[tokio::test(start_paused = true)]
async fn a_throttled_read_is_retried_after_the_servers_retry_after() {
    let (client, seen) = fake(vec![(429, Some("1")), (200, None)]);
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let start = tokio::time::Instant::now();
    pods.get("p").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(start.elapsed() >= Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn an_eviction_refusal_reaches_the_caller_unretried() {
    for code in [429, 503] {
        let (client, seen) = fake(vec![(code, Some("10")), (200, None)]);
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let e = evict(&pods).await.unwrap_err();
        assert!(matches!(e, kube::Error::Api(s) if s.code == code));
        assert_eq!(
            *seen.lock().unwrap(),
            ["POST /api/v1/namespaces/default/pods/p/eviction"]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_max_retries_and_the_answer_comes_through() {
    let (client, seen) = fake(vec![(503, None)]);
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let start = tokio::time::Instant::now();
    let e = pods.get("p").await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 503));
    assert_eq!(seen.lock().unwrap().len(), MAX_RETRIES as usize + 1);
    // Bounded: at most MAX_DELAY (plus jitter) per retry.
    assert!(start.elapsed() <= MAX_DELAY * 2 * MAX_RETRIES);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_max_delay_is_left_to_the_caller() {
    let (client, seen) = fake(vec![(429, Some("60")), (200, None)]);
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let e = pods.get("p").await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 429));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn other_failures_are_not_retried() {
    for code in [404, 409, 500] {
        let (client, seen) = fake(vec![(code, None), (200, None)]);
        let pods: Api<Pod> = Api::namespaced(client, "default");
        pods.get("p").await.unwrap_err();
        assert_eq!(seen.lock().unwrap().len(), 1, "{code}");
    }
}
