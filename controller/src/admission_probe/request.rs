//! Sending one probe: a strategic-merge PATCH of `{}` to a pod's `resize` subresource with
//! `dryRun=All` — nothing changes and nothing is stored, yet the API server runs the whole
//! admission chain (a no-op update is still admitted before storage would notice it changed
//! nothing) — read whole, `Warning` headers included, which kube's typed API drops. The PATCH
//! goes through the program's client (`resize_guard_runtime::api_client`), so it is retried as
//! every other request is.

use resize_guard_policy::dry_run::{PATCH_CONTENT_TYPE, resize_uri};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

use super::outcome::{Answer, Outcome, classify};

/// The field manager the probe's PATCH names (a dry run stores nothing under it).
const FIELD_MANAGER: &str = "resize-guard-admission-probe";

/// What one probe found, and the probed pod as the API server returned it (for an Event), when
/// it was admitted.
#[derive(Debug, Clone)]
pub struct Probed {
    /// What it found.
    pub outcome: Outcome,
    /// The pod, when admitted.
    pub pod: Option<ObjectReference>,
}

/// Sends one probe of pod `namespace/name`, giving up after `timeout`.
pub async fn probe(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Probed {
    let sent = tokio::time::timeout(timeout, send(client, namespace, name)).await;
    let (answer, pod) = match sent {
        Ok(Ok(answered)) => answered,
        Ok(Err(why)) => {
            return Probed {
                outcome: Outcome::Error(why),
                pod: None,
            };
        }
        Err(_) => {
            return Probed {
                outcome: Outcome::Error(format!(
                    "no answer from the API server within {timeout:?}"
                )),
                pod: None,
            };
        }
    };
    Probed {
        outcome: classify(&answer),
        pod,
    }
}

/// Sends the probe's PATCH about pod `namespace/name` as `client`'s user and returns the whole
/// answer, with the pod as the API server returned it when admitted; `Err` when there was none
/// (connection, TLS, a body that could not be read), with the reason. (Also how the tests show
/// what anyone else's dry run gets back.)
pub async fn send(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(Answer, Option<ObjectReference>), String> {
    let request = http::Request::patch(resize_uri(namespace, name, FIELD_MANAGER))
        .header(http::header::CONTENT_TYPE, PATCH_CONTENT_TYPE)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(b"{}".to_vec()))
        .map_err(|e| format!("building the probe request: {e}"))?;
    let response = client.send(request).await.map_err(|e| {
        format!(
            "sending the probe: {}",
            resize_guard_runtime::error_chain(&e)
        )
    })?;
    let (head, body) = response.into_parts();
    let body = body
        .collect_bytes()
        .await
        .map_err(|e| format!("reading the probe's answer: {e}"))?;
    let warnings = head.headers.get_all(http::header::WARNING);
    let answer = Answer::read(
        head.status.as_u16(),
        warnings.iter().filter_map(|v| v.to_str().ok()),
        &body,
    );
    let pod = answer
        .admitted()
        .then(|| serde_json::from_slice::<Pod>(&body).ok())
        .flatten()
        .map(|p| reference(&p));
    Ok((answer, pod))
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// Whether `name` can name a pod in a request path: a DNS-1123 subdomain (what the API server
/// accepts as a pod name), so it can never reach another path or add a query.
pub fn valid_pod_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::{Request, Response};
    use kube::client::Body;

    use super::*;

    #[test]
    fn only_pod_names_reach_the_path() {
        for ok in ["resize-guard-controller-7d9f8-x2k4q", "a", "a.b-c", "0"] {
            assert!(valid_pod_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Upper",
            "a/b",
            "a?dryRun=None",
            "..",
            "-a",
            "a-",
            "a..b",
            "a b",
            &"x".repeat(254),
        ] {
            assert!(!valid_pod_name(bad), "{bad}");
        }
    }

    /// A fake API server answering every request with `status`, `warnings` and `body`; counts
    /// requests and checks each is the probe's PATCH.
    fn api(
        status: u16,
        warnings: &'static [&'static str],
        body: &'static str,
    ) -> (kube::Client, Arc<AtomicUsize>) {
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                assert_eq!(req.method(), http::Method::PATCH);
                assert_eq!(
                    req.uri().to_string(),
                    "/api/v1/namespaces/resize-guard/pods/c-0/resize?dryRun=All&fieldManager=resize-guard-admission-probe"
                );
                assert_eq!(
                    req.headers()[http::header::CONTENT_TYPE],
                    "application/strategic-merge-patch+json"
                );
                let sent = req.into_body().collect_bytes().await.unwrap();
                assert_eq!(&sent[..], b"{}");
                let mut resp = Response::builder().status(status);
                for w in warnings {
                    resp = resp.header(http::header::WARNING, format!("299 - \"{w}\""));
                }
                Ok::<_, std::convert::Infallible>(
                    resp.body(Body::from(body.as_bytes().to_vec())).unwrap(),
                )
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c-0","namespace":"resize-guard","uid":"u-1"}}"#;
    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn an_answer_with_the_note_reached_and_names_the_pod() {
        let (client, seen) = api(
            200,
            &["resize-guard: admission probe reached webhook replica w-1 at /mutate"],
            POD,
        );
        let p = probe(&client, "resize-guard", "c-0", T).await;
        assert!(
            matches!(&p.outcome, Outcome::Reached(a) if a.replica == "w-1"),
            "{p:?}"
        );
        let pod = p.pod.unwrap();
        assert_eq!(
            (
                pod.namespace.as_deref(),
                pod.name.as_deref(),
                pod.uid.as_deref()
            ),
            (Some("resize-guard"), Some("c-0"), Some("u-1"))
        );
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_answer_without_it_bypassed_and_a_refusal_is_an_error() {
        let (client, _) = api(200, &[], POD);
        let p = probe(&client, "resize-guard", "c-0", T).await;
        assert_eq!(p.outcome, Outcome::Bypassed);
        assert!(p.pod.is_some());
        let (client, _) = api(
            403,
            &[],
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"c-0\" is forbidden: no","code":403}"#,
        );
        let p = probe(&client, "resize-guard", "c-0", T).await;
        assert_eq!(
            p.outcome,
            Outcome::Error(
                "the API server answered HTTP 403: pods \"c-0\" is forbidden: no".into()
            )
        );
        assert!(p.pod.is_none());
    }

    #[tokio::test]
    async fn no_answer_in_time_is_an_error_saying_so() {
        let service = tower::service_fn(|_req: Request<Body>| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        });
        let client = kube::Client::new(service, "default");
        let p = probe(&client, "resize-guard", "c-0", Duration::from_millis(50)).await;
        assert_eq!(
            p.outcome,
            Outcome::Error("no answer from the API server within 50ms".into())
        );
    }
}
