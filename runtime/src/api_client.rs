//! The Kubernetes client both programs build: kube's own stack (TLS, authentication, timeouts,
//! tracing) with [`ApiRetry`] in place of kube's default retry layer.
//!
//! kube 5's default layer (`kube_client::client::retry::RetryPolicy::server_retry`) retries every
//! 429, 503 and 504 — up to 15 times, backing off to 1000 s and honouring `Retry-After`. For most
//! requests that is right: API Priority and Fairness answers 429 with `Retry-After` when the
//! server is busy, and the request was never carried out. For an eviction it is wrong: a
//! PodDisruptionBudget refusal is also a 429 (upstream `createTooManyRequestsError`,
//! `pkg/registry/core/pod/storage/eviction.go`; `Retry-After: 10` while the budget's status is
//! still being computed). Retried blindly, the refusal never reaches the controller, which waits
//! until its leadership fence runs out and then gives up as "not leader".
//!
//! [`ApiRetry`] therefore retries briefly and never for a request whose refusal means
//! something ([`refusal_means_something`]: the Eviction API). Those answers reach the caller
//! as they came, and the caller tells a budget refusal from throttling by the response's
//! `Status` (its `DisruptionBudget` cause), not by guessing.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::{Body, ClientBuilder};
use tower::buffer::BufferLayer;
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::retry::{Policy, RetryLayer};
use tower::util::rng::HasherRng;
use tower::{BoxError, ServiceBuilder};

/// The first back-off.
pub const MIN_DELAY: Duration = Duration::from_millis(100);
/// The longest back-off, and the longest `Retry-After` honoured (a longer one ends the retries:
/// the caller decides what to do with a server that asks for more patience).
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// Retries per request (with the delays above, about 3 s of back-off in all).
pub const MAX_RETRIES: u32 = 5;

/// Requests waiting for the stack under the retry layer (kube's own buffer holds as many).
const BUFFER: usize = 1024;

/// Builds the client from `config`, with [`ApiRetry`] instead of kube's default retry layer.
pub fn build(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    // kube's stack ends in a boxed service that cannot be cloned, and a retry needs a clone of
    // the service per attempt: a buffer (as `kube::Client::new` puts in front of every stack)
    // makes one.
    let stack = ServiceBuilder::new()
        .layer(layer())
        .layer(BufferLayer::new(BUFFER));
    Ok(ClientBuilder::try_from(config)?.with_layer(&stack).build())
}

/// The retry layer [`build`] puts on kube's stack (tests put it on a fake API server, so they go
/// through the same retries production does).
pub fn layer() -> RetryLayer<ApiRetry> {
    RetryLayer::new(ApiRetry::new())
}

/// True for requests whose refusal the caller must see as it came: a POST to a pod's `eviction`
/// subresource (a 429 there may be a PodDisruptionBudget's answer).
pub fn refusal_means_something<B>(request: &Request<B>) -> bool {
    request.method() == Method::POST && request.uri().path().ends_with("/eviction")
}

/// The answers worth a retry: the request was not carried out and may succeed later.
fn retryable(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
    )
}

/// The server's `Retry-After` in whole seconds (the only form kube-apiserver sends).
fn retry_after<B>(response: &Response<B>) -> Option<Duration> {
    let value = response.headers().get(http::header::RETRY_AFTER)?;
    value
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// A short, jittered exponential retry of 429/503/504 — except where the refusal means
/// something (see the module docs).
#[derive(Clone)]
pub struct ApiRetry {
    backoff: ExponentialBackoff,
    attempts: u32,
}

impl ApiRetry {
    /// A fresh policy (one is cloned per request).
    pub fn new() -> ApiRetry {
        // Valid parameters (min <= max, max > 0, jitter in [0, 100]), so the fallback to tower's
        // own default back-off is never taken.
        let mut maker = ExponentialBackoffMaker::new(MIN_DELAY, MAX_DELAY, 0.5, HasherRng::new())
            .unwrap_or_default();
        ApiRetry {
            backoff: maker.make_backoff(),
            attempts: 0,
        }
    }
}

impl Default for ApiRetry {
    fn default() -> Self {
        ApiRetry::new()
    }
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ApiRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        if !retryable(response.status())
            || refusal_means_something(request)
            || self.attempts >= MAX_RETRIES
        {
            return None;
        }
        self.attempts += 1;
        let backoff = self.backoff.next_backoff();
        match retry_after(response) {
            Some(wait) if wait > MAX_DELAY => None,
            Some(wait) => Some(tokio::time::sleep(wait)),
            None => Some(backoff),
        }
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        // Only bodies held in memory can be cloned; a streamed one is sent once.
        let body = request.body().try_clone()?;
        let mut copy = Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone())
            .version(request.version())
            .body(body)
            .ok()?;
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests;
