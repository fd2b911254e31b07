//! The intake: the bounds an admission request passes before it is reviewed, so no sender can
//! make the webhook hold more memory or work than these limits allow, and kube-apiserver's own
//! reviews keep being answered within the webhook's `timeoutSeconds` while someone floods the
//! port.
//!
//! 1. **Size first.** A declared `Content-Length` above [`Limits::max_body_bytes`] is refused
//!    (413) before a byte of the body is read; an undeclared (chunked) body is cut off at the
//!    same limit while it is read.
//! 2. **Two lanes.** Real `pods/resize` reviews are small (see [`MAX_BODY_BYTES`]); a body
//!    declared larger than [`Limits::large_body_bytes`], or of unknown length, waits for one of
//!    the few permits of the *large* lane, everything else for one of the *regular* lane. A flood
//!    of maximum-size bodies therefore queues behind itself and never takes a permit a real
//!    review needs. A permit is held while the body is read and the review runs, so at most
//!    `max_reviews × large_body_bytes + max_large_reviews × max_body_bytes` of bodies are in
//!    memory at once.
//! 3. **Shed, do not queue for ever.** A request that gets no permit within
//!    [`Limits::queue_timeout`] is answered 503 at once and counted
//!    (`resize_guard_admission_refusals_total{reason="shed"}`). kube-apiserver treats any
//!    non-200 as a failed call and applies the webhook's `failurePolicy`
//!    (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go`,
//!    `Dispatch`): with `Ignore` (deploy/) that resize is admitted without resize-guard and
//!    counted in `apiserver_admission_webhook_fail_open_count`. Answering "allowed" ourselves
//!    would hide the same outcome from that metric, and answering "denied" would refuse a resize
//!    nobody judged, so shedding is the honest answer; the lanes keep it for the flood.
//! 4. **Real reviews arrive whole.** A body declared `n` bytes long must arrive within
//!    [`Limits::body_grace`] `+ n /` [`Limits::body_min_rate`] (and never later than
//!    [`Limits::body_read_timeout`], which alone bounds a body of unknown length): 408 otherwise.
//!    The deadline is per request, so the regular lane's small bodies get a short one: a
//!    trickled 4 KiB body holds its permit about half a second, not the whole
//!    `--body-read-timeout` (see [`BODY_GRACE`] and [`BODY_MIN_RATE`] for the numbers). The head
//!    of the request and the TLS handshake have their own deadlines on the listener
//!    ([`crate::server`]).
//! 5. **One source, one share.** With the peer's address known ([`crate::connections::Peer`]),
//!    a source holds at most [`Limits::max_reviews_per_source`] permits of the regular lane and
//!    [`Limits::max_large_reviews_per_source`] of the large one; more waits (within the same
//!    queue timeout) for one of its own, then is shed
//!    (`resize_guard_admission_refusals_total{reason="source-shed"}`). A sender at one address
//!    can therefore never hold the permits kube-apiserver's reviews need, however fast it
//!    sends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default (and sized) limit on an AdmissionReview body: 1.5 MiB.
///
/// A `pods/resize` review carries the pod twice (`object`, `oldObject`). The largest realistic one
/// measured
/// (`tests::the_largest_realistic_resize_review_fits_and_a_typical_one_takes_the_regular_lane`: 12
/// containers and 2 init containers with 60 environment variables, 12 mounts and 3 probes each, 30
/// volumes, 20 labels, a `kubectl.kubernetes.io/last-applied-configuration` annotation,
/// managedFields and a full status) is 700 KiB; the same pod with 3 containers of 15 variables each
/// is 112 KiB. What lets a pod grow past the measured one without an absurd spec is its
/// annotations, which validation caps at 256 KiB in total (`TotalAnnotationSizeLimitB`,
/// `staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`, `ValidateAnnotationsSize`):
/// the measured review with both copies' annotations at the cap is 930 KiB, and 1.5 MiB leaves half
/// again for a larger spec. The old 4 MiB default admitted bodies no API server sends for a resize,
/// at over twice the memory and CPU per request.
pub const MAX_BODY_BYTES: usize = 1536 * 1024;

/// Bodies declared above this go to the large lane (default 256 KiB: more than twice the
/// 3-container review measured with [`MAX_BODY_BYTES`], so real reviews stay in the regular
/// lane; the rare larger one shares the large lane).
pub const LARGE_BODY_BYTES: usize = 256 * 1024;

/// The fixed part of a body's deadline (default 500 ms). kube-apiserver writes a review in one
/// go right after its head: a few KiB are one or two TCP segments, within the first round
/// trip's congestion window (10 segments, ~14 KiB); the regular lane's largest (256 KiB) needs
/// about five round trips of slow start, milliseconds inside a cluster. 500 ms also covers two
/// retransmissions of a lost segment at Linux's minimum retransmission timeout (200 ms,
/// `TCP_RTO_MIN`). A trickling sender holds its permit for this long, not for
/// `--body-read-timeout`.
pub const BODY_GRACE: Duration = Duration::from_millis(500);

/// The slowest body accepted beyond [`BODY_GRACE`] (default 1 MiB/s, 8 Mbit/s): far below any
/// link between kube-apiserver and a pod, so a real review never meets it; it makes the
/// deadline grow with the declared size (256 KiB: 0.75 s; 1.5 MiB: 2 s, under the 3 s
/// `--body-read-timeout`).
pub const BODY_MIN_RATE: u64 = 1024 * 1024;

/// The intake's limits (the `--max-body-bytes`, `--large-body-bytes`, `--body-read-timeout`,
/// `--body-read-grace`, `--body-min-bytes-per-second`, `--admission-queue-timeout`,
/// `--max-concurrent-reviews`, `--max-concurrent-large-reviews` and their `-per-source` flags).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Bodies declared above this (or not declared) use the large lane.
    pub large_body_bytes: usize,
    /// How long the whole body may take to arrive, at most.
    pub body_read_timeout: Duration,
    /// The fixed part of a declared body's deadline.
    pub body_grace: Duration,
    /// Bytes per second a declared body must arrive at beyond `body_grace` (0: no rate, only
    /// `body_read_timeout`).
    pub body_min_rate: u64,
    /// How long a request may wait for a permit before it is shed.
    pub queue_timeout: Duration,
    /// Permits of the regular lane.
    pub max_reviews: usize,
    /// Permits of the large lane.
    pub max_large_reviews: usize,
    /// Permits of the regular lane one source may hold.
    pub max_reviews_per_source: usize,
    /// Permits of the large lane one source may hold.
    pub max_large_reviews_per_source: usize,
}

impl Limits {
    /// The defaults with another body limit (in-process routers, benchmarks).
    pub fn with_max_body(max_body_bytes: usize) -> Limits {
        Limits {
            max_body_bytes,
            large_body_bytes: LARGE_BODY_BYTES.min(max_body_bytes),
            body_read_timeout: Duration::from_secs(3),
            queue_timeout: Duration::from_secs(1),
            body_grace: BODY_GRACE,
            body_min_rate: BODY_MIN_RATE,
            max_reviews: 32,
            max_large_reviews: 2,
            max_reviews_per_source: 8,
            max_large_reviews_per_source: 1,
        }
    }

    /// How long a body declared `declared` bytes long (or undeclared) may take to arrive.
    pub fn body_deadline(&self, declared: Option<usize>) -> Duration {
        match declared {
            Some(n) if self.body_min_rate > 0 => {
                let transfer = Duration::from_secs_f64(n as f64 / self.body_min_rate as f64);
                (self.body_grace + transfer).min(self.body_read_timeout)
            }
            _ => self.body_read_timeout,
        }
    }
}

/// Which permits a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Bodies of a real review's size.
    Regular,
    /// Declared above [`Limits::large_body_bytes`], or of unknown length.
    Large,
}

impl Lane {
    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Regular => "regular",
            Lane::Large => "large",
        }
    }
}

/// Why a request was refused before review.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The body is (or was declared) larger than the limit.
    #[error("the body exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// No permit within the queue timeout.
    #[error("overloaded: no {} review slot free within {waited:?}", lane.name())]
    Shed {
        /// The lane that was full.
        lane: Lane,
        /// How long it waited.
        waited: Duration,
    },
    /// The source already holds its share of the lane's permits, and none of them came free
    /// within the queue timeout.
    #[error("overloaded: this source holds its {} review slots and none came free within {waited:?}", lane.name())]
    SourceShed {
        /// The lane.
        lane: Lane,
        /// How long it waited.
        waited: Duration,
    },
    /// The body did not arrive in time.
    #[error("the body did not arrive within {0:?}")]
    BodyTimeout(Duration),
    /// Reading the body failed (the connection broke, a malformed chunk).
    #[error("reading the body failed")]
    Body(#[source] axum::Error),
    /// `Content-Length` is not a number.
    #[error("Content-Length is not a byte count")]
    BadLength,
}

impl Refusal {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::Shed { .. } | Refusal::SourceShed { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Refusal::Body(_) | Refusal::BadLength => StatusCode::BAD_REQUEST,
        }
    }

    /// The lane a shed request waited for.
    pub fn lane(&self) -> Option<Lane> {
        match self {
            Refusal::Shed { lane, .. } | Refusal::SourceShed { lane, .. } => Some(*lane),
            _ => None,
        }
    }

    /// A short, stable tag (the metric's `reason` label).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::TooLarge { .. } => "too-large",
            Refusal::Shed { .. } => "shed",
            Refusal::SourceShed { .. } => "source-shed",
            Refusal::BodyTimeout(_) => "body-timeout",
            Refusal::Body(_) => "body-error",
            Refusal::BadLength => "bad-length",
        }
    }
}

/// The permits of both lanes, and each source's share of them.
#[derive(Debug, Clone)]
pub struct Intake {
    limits: Limits,
    regular: Arc<Semaphore>,
    large: Arc<Semaphore>,
    sources: Arc<Sources>,
}

/// A request let in: its lane's permit (and its source's), held until the review is answered.
#[derive(Debug)]
pub struct Ticket {
    /// The lane it came through.
    pub lane: Lane,
    declared: Option<usize>,
    _permit: OwnedSemaphorePermit,
    _source: Option<SourcePermit>,
}

/// Each source's permits per lane: an entry lives while a request of that source holds or
/// waits for one (so the map never holds more sources than there are open connections).
#[derive(Debug, Default)]
struct Sources {
    shares: Mutex<HashMap<(IpAddr, Lane), Arc<Semaphore>>>,
}

impl Sources {
    /// The semaphore of `source` in `lane`, created with `permits` when absent.
    fn share(&self, key: (IpAddr, Lane), permits: usize) -> Arc<Semaphore> {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        shares
            .entry(key)
            .or_insert_with(|| Arc::new(Semaphore::new(permits.max(1))))
            .clone()
    }

    /// Forgets `key` when nobody holds or waits for its permits.
    fn release(&self, key: (IpAddr, Lane)) {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        if shares.get(&key).is_some_and(|s| Arc::strong_count(s) == 1) {
            shares.remove(&key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One of a source's permits; the last one released forgets the source.
#[derive(Debug)]
struct SourcePermit {
    key: (IpAddr, Lane),
    sources: Arc<Sources>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for SourcePermit {
    fn drop(&mut self) {
        // The permit holds a reference to the semaphore: release it before counting.
        drop(self.permit.take());
        self.sources.release(self.key);
    }
}

/// Waits at most `wait` for a permit of `semaphore`.
async fn permit_within(semaphore: &Arc<Semaphore>, wait: Duration) -> Option<OwnedSemaphorePermit> {
    if let Ok(p) = semaphore.clone().try_acquire_owned() {
        return Some(p);
    }
    // Timed out, or closed (never: the semaphores are never closed).
    tokio::time::timeout(wait, semaphore.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}

impl Intake {
    /// Permits per [`Limits`] (a lane of 0 permits is given 1: a lane must be able to serve).
    pub fn new(limits: Limits) -> Intake {
        Intake {
            regular: Arc::new(Semaphore::new(limits.max_reviews.max(1))),
            large: Arc::new(Semaphore::new(limits.max_large_reviews.max(1))),
            sources: Arc::default(),
            limits,
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Checks the declared size and waits (at most [`Limits::queue_timeout`]) for a permit, with
    /// no share per source (in-process routers, tests).
    pub async fn admit(&self, headers: &HeaderMap) -> Result<Ticket, Refusal> {
        self.admit_from(headers, None).await
    }

    /// Checks the declared size and waits (at most [`Limits::queue_timeout`] in all) for one of
    /// the permits of `source` (when known), then for one of the lane's.
    pub async fn admit_from(
        &self,
        headers: &HeaderMap,
        source: Option<IpAddr>,
    ) -> Result<Ticket, Refusal> {
        let declared = declared_length(headers)?;
        if declared.is_some_and(|n| n > self.limits.max_body_bytes) {
            return Err(Refusal::TooLarge {
                limit: self.limits.max_body_bytes,
            });
        }
        let lane = match declared {
            Some(n) if n <= self.limits.large_body_bytes => Lane::Regular,
            _ => Lane::Large,
        };
        let (semaphore, per_source) = match lane {
            Lane::Regular => (&self.regular, self.limits.max_reviews_per_source),
            Lane::Large => (&self.large, self.limits.max_large_reviews_per_source),
        };
        let wait = self.limits.queue_timeout;
        let started = tokio::time::Instant::now();
        let source = match source {
            Some(ip) => {
                let key = (ip, lane);
                let share = self.sources.share(key, per_source);
                let permit = permit_within(&share, wait).await;
                drop(share);
                let held = SourcePermit {
                    key,
                    sources: self.sources.clone(),
                    permit,
                };
                if held.permit.is_none() {
                    return Err(Refusal::SourceShed { lane, waited: wait });
                }
                Some(held)
            }
            None => None,
        };
        let left = wait.saturating_sub(started.elapsed());
        let Some(permit) = permit_within(semaphore, left).await else {
            return Err(Refusal::Shed { lane, waited: wait });
        };
        Ok(Ticket {
            lane,
            declared,
            _permit: permit,
            _source: source,
        })
    }

    /// Reads the body of a request let in with `ticket`, within the size limit and the deadline.
    pub async fn read(&self, ticket: &Ticket, body: Body) -> Result<Bytes, Refusal> {
        let limit = self.limits.max_body_bytes;
        let read = async {
            let mut stream = body.into_data_stream();
            let mut buf = Vec::with_capacity(ticket.declared.unwrap_or(0).min(limit));
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(Refusal::Body)?;
                if buf.len() + chunk.len() > limit {
                    return Err(Refusal::TooLarge { limit });
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(Bytes::from(buf))
        };
        let deadline = self.limits.body_deadline(ticket.declared);
        tokio::time::timeout(deadline, read)
            .await
            .map_err(|_| Refusal::BodyTimeout(deadline))?
    }
}

fn declared_length(headers: &HeaderMap) -> Result<Option<usize>, Refusal> {
    let Some(value) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
        .ok_or(Refusal::BadLength)
}

#[cfg(test)]
mod tests;
