//! Kubernetes Events, published off the request and reconcile paths through one bounded queue.
//!
//! Callers hand an Event and the object it is about to [`Events::publish`], which never waits:
//! the Event joins a queue of [`CAPACITY`] and one publisher task posts them, at most
//! [`CONCURRENCY`] at a time, through kube's [`Recorder`] (which aggregates repeats into
//! series). When the API server is slow or unreachable and the queue is full, further Events are
//! dropped — counted ([`Events::dropped`]) and logged — instead of piling up as one task each.
//! [`Events::publish_through`] lets a caller wrap the post, e.g. in the controller's leadership
//! fence, so a replica that no longer leads publishes nothing.
//!
//! Both programs decide their Events as an [`EventIntent`] (a review's denial or repair, a
//! preemption's steps) and [`Events::record`] them: one type, one wording of the Event.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
pub use resize_guard_policy::event_reason::EventReason;
use tokio::sync::mpsc;

/// How many Events may wait to be published before new ones are dropped.
pub const CAPACITY: usize = 256;

/// How many Events are posted at once.
pub const CONCURRENCY: usize = 4;

/// The post of one Event, handed to a [`Events::publish_through`] wrapper.
pub type Publish = BoxFuture<'static, Result<(), kube::Error>>;

type Job = Box<dyn FnOnce(Recorder) -> BoxFuture<'static, ()> + Send>;

/// The longest Event note the API server accepts (events.k8s.io `note` is limited to 1 kB).
pub const NOTE_LIMIT: usize = 1024;

/// An Event a program decided to record on an object.
#[derive(Debug, Clone, PartialEq)]
pub struct EventIntent {
    /// The object the Event is about (a pod).
    pub regarding: ObjectReference,
    /// A second object it concerns (the preemptor, on a victim's Event).
    pub related: Option<ObjectReference>,
    /// The Event's reason (one list for both programs); it also gives the Event's type
    /// ([`EventReason::is_warning`]), so no caller can record a reason under the other type.
    pub reason: EventReason,
    /// What was done or judged (`Preempt`, or the review's decision label): keeps different
    /// Events of one object apart when repeats are aggregated into series.
    pub action: String,
    /// The human message, clipped to [`NOTE_LIMIT`] when recorded.
    pub note: String,
}

impl EventIntent {
    /// The Event as kube's recorder posts it, and the object it is about.
    pub fn into_event(self) -> (Event, ObjectReference) {
        let event = Event {
            type_: if self.reason.is_warning() {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: self.reason.as_str().to_owned(),
            note: Some(resize_guard_policy::verdict::clip(&self.note, NOTE_LIMIT)),
            action: self.action,
            secondary: self.related,
        };
        (event, self.regarding)
    }
}

/// A handle on the process's one Event publisher (cheap to clone).
#[derive(Clone)]
pub struct Events {
    queue: mpsc::Sender<Job>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field(
                "queued",
                &(self.queue.max_capacity() - self.queue.capacity()),
            )
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Events {
    /// Starts the publisher task (on the current tokio runtime), reporting as `reporter`.
    pub fn start(client: kube::Client, reporter: Reporter) -> Events {
        Events::with_capacity(client, reporter, CAPACITY)
    }

    /// [`Events::start`] with a queue of `capacity` Events.
    pub fn with_capacity(client: kube::Client, reporter: Reporter, capacity: usize) -> Events {
        let (queue, jobs) = mpsc::channel::<Job>(capacity.max(1));
        let recorder = Recorder::new(client, reporter);
        let jobs = futures::stream::unfold(jobs, |mut rx| async move {
            rx.recv().await.map(|job| (job, rx))
        });
        tokio::spawn(jobs.for_each_concurrent(CONCURRENCY, move |job| job(recorder.clone())));
        Events {
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues the Event `intent` describes; a failed post is logged.
    pub fn record(&self, intent: EventIntent) {
        let (event, regarding) = intent.into_event();
        self.publish(event, regarding);
    }

    /// [`Events::record`], with the post made through `through` ([`Events::publish_through`]).
    pub fn record_through<F, Fut, E>(&self, intent: EventIntent, through: F)
    where
        F: FnOnce(Publish) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let (event, regarding) = intent.into_event();
        self.publish_through(event, regarding, through);
    }

    /// Queues `event` about `regarding`; a failed post is logged.
    pub fn publish(&self, event: Event, regarding: ObjectReference) {
        self.publish_through(event, regarding, |post| post);
    }

    /// Queues `event` about `regarding`; the publisher runs `through(post)` instead of the bare
    /// post, so `through` decides whether and how it goes out (an `Err` is logged).
    pub fn publish_through<F, Fut, E>(&self, event: Event, regarding: ObjectReference, through: F)
    where
        F: FnOnce(Publish) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let reason = event.reason.clone();
        let job: Job = Box::new(move |recorder: Recorder| {
            Box::pin(async move {
                let reason = event.reason.clone();
                let post: Publish =
                    Box::pin(async move { recorder.publish(&event, &regarding).await });
                if let Err(e) = through(post).await {
                    tracing::warn!(error = %e, reason, "could not record event");
                }
            })
        });
        if let Err(e) = self.queue.try_send(job) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            let why = match e {
                mpsc::error::TrySendError::Full(_) => "the Event queue is full",
                mpsc::error::TrySendError::Closed(_) => "the Event publisher has stopped",
            };
            tracing::warn!(reason, dropped, "{why}; dropped an Event");
        }
    }

    /// How many Events were dropped because the queue was full (or the publisher had stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http::{Request, Response};
    use kube::client::Body;
    use kube::runtime::events::EventType;

    use super::*;

    /// A client whose API server records each request path and answers every Event post.
    fn fake() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                log.lock().unwrap().push(request.uri().path().to_owned());
                let event = serde_json::json!({"kind": "Event", "apiVersion": "events.k8s.io/v1",
                    "metadata": {"name": "e", "namespace": "ns"},
                    "eventTime": "2026-12-01T00:00:00.000000Z"});
                send.send_response(
                    Response::builder()
                        .status(201)
                        .body(Body::from(serde_json::to_vec(&event).unwrap()))
                        .unwrap(),
                );
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some("n".into()),
            action: "Test".into(),
            secondary: None,
        }
    }

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        }
    }

    fn reporter() -> Reporter {
        Reporter {
            controller: "test".into(),
            instance: None,
        }
    }

    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn events_beyond_the_queue_are_dropped_and_counted_not_spawned() {
        let (client, seen) = fake();
        let events = Events::with_capacity(client, reporter(), 3);
        // The single-threaded test runtime runs the publisher only when this test yields, so
        // all five meet a queue of three.
        for i in 0..5 {
            events.publish(event("Tested"), pod(&format!("p{i}")));
        }
        assert_eq!(events.dropped(), 2);
        settle().await;
        assert_eq!(seen.lock().unwrap().len(), 3, "{seen:?}");
        events.publish(event("Tested"), pod("later"));
        settle().await;
        assert_eq!(
            seen.lock().unwrap().len(),
            4,
            "the queue drains and accepts again"
        );
        assert_eq!(events.dropped(), 2);
    }

    #[tokio::test]
    async fn a_wrapper_can_withhold_the_post() {
        let (client, seen) = fake();
        let events = Events::start(client, reporter());
        events.publish_through(event("Fenced"), pod("p"), |_post| async {
            Err::<(), _>("not the leader")
        });
        events.publish_through(event("Allowed"), pod("q"), |post| post);
        settle().await;
        assert_eq!(
            *seen.lock().unwrap(),
            ["/apis/events.k8s.io/v1/namespaces/ns/events"]
        );
    }
}
