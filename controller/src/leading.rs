//! The wiring of what only the Lease holder does ([`Leading`]) — the preemption controller, the
//! certificate manager (`--certificates=self`), the last good policy copy, the brakes' ledger and
//! the deferred-pods gauges — started on gaining the Lease and stopped on losing it (the gauges
//! then read 0: a follower sees no Deferred pod). Losing it aborts everything at once (every write
//! is also fenced by [`Leadership`], so an aborted task cannot write afterwards); a shutdown first
//! lets in-flight reconciles finish while the Lease is still ours, within the fence.
//!
//! Every task runs under the view's [`Supervisor`](resize_guard_runtime::supervisor::Supervisor):
//! a panicking reconcile takes the controller's task down with it (kube-runtime polls reconciles
//! inside the controller's stream), and a reconcile loop that ends without being asked to is as
//! bad; either is recorded, and `crate::run` steps down on it.
//!
//! The brakes' ledger (`crate::preemption::brakes::ledger`) first reads the counts the previous
//! leader persisted, and only then does the reconcile loop start: no plan is judged against the
//! counts of an earlier term or of none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::Controller;
use kube::runtime::reflector::Store;
use resize_guard_cluster::ClusterView;
use resize_guard_runtime::supervisor::Supervisor;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::certificates;
use crate::last_good::LastGood;
use crate::lease::elector::Elector;
use crate::lease::fence::Leadership;
use crate::metrics::Metrics;
use crate::preemption::brakes::ledger;
use crate::preemption::reconcile::{Course, Ctx, error_policy, reconcile};

/// Most pods reconciled at once.
pub const RECONCILE_CONCURRENCY: u16 = 8;

/// How long a shutting-down leader waits for in-flight reconciles.
const DRAIN: Duration = Duration::from_secs(5);

/// What a leader keeps besides preemption.
#[derive(Debug, Clone)]
pub struct Duties {
    /// The webhook's certificates (`--certificates=self`), or nobody's.
    pub certificates: Option<certificates::Settings>,
    /// Where the last good policy is copied (its namespace, the install namespace, is also
    /// where the brakes' counts are persisted).
    pub last_good: LastGood,
}

/// The running work of a leader.
pub struct Leading {
    /// `None` once it finished (a JoinHandle must not be polled after it completed).
    controller: Option<JoinHandle<()>>,
    stop_controller: Option<oneshot::Sender<()>>,
    /// The reconcile loop was asked to stop (its end is then no fault).
    stopping: Arc<AtomicBool>,
    certificates: Option<JoinHandle<()>>,
    gauge: JoinHandle<()>,
    last_good: JoinHandle<()>,
    ledger: JoinHandle<()>,
    metrics: Arc<Metrics>,
}

impl Leading {
    /// Starts the leader's work.
    pub fn start(
        pods: Store<Pod>,
        triggers: impl futures::Stream<Item = Result<Pod, kube::runtime::watcher::Error>>
        + Send
        + 'static,
        client: &kube::Client,
        view: &Arc<ClusterView>,
        metrics: &Arc<Metrics>,
        course: &Course,
        duties: Duties,
    ) -> Leading {
        let Duties {
            certificates,
            last_good,
        } = duties;
        let supervisor = view.supervisor();
        let namespace = last_good.namespace.clone();
        let (ledger, loaded) = spawn_ledger(supervisor, client, metrics, course, namespace);
        let (certificates, last_good) = spawn_duties(
            supervisor,
            client,
            view,
            metrics,
            &course.actuator.leadership,
            certificates,
            last_good,
        );
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        // Bounded: at most RECONCILE_CONCURRENCY pods are reconciled at once (the rest queue,
        // deduplicated), so a flood of Deferred resizes cannot open a write storm.
        let controller = Controller::for_stream(triggers, pods.clone()).with_config(
            kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY),
        );
        let ctx = Arc::new(Ctx {
            view: view.clone(),
            course: course.clone(),
        });
        // A new policy may turn waiting pods into actionable ones (or back): look at all again.
        let policy_changes = futures::stream::unfold(view.policy_changes(), |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let run = controller
            .reconcile_all_on(policy_changes)
            .graceful_shutdown_on(async move {
                let _ = stop_rx.await;
            })
            .run(
                |pod: Arc<Pod>, ctx: Arc<Ctx>| {
                    #[cfg(feature = "testing")]
                    ctx.view.injected_panics().check(
                        resize_guard_runtime::fault::Site::Reconcile,
                        pod.metadata.name.as_deref().unwrap_or_default(),
                    );
                    reconcile(pod, ctx)
                },
                error_policy,
                ctx,
            )
            .for_each(|_| async {});
        let controller = supervisor.spawn("the reconcile loop", {
            let stopping = stopping.clone();
            async move {
                // The brakes' counts first: a plan is judged only against them.
                if loaded.await.is_err() {
                    return Err("the brakes' ledger stopped before reading their counts".to_owned());
                }
                run.await;
                if stopping.load(Ordering::Acquire) {
                    Ok(())
                } else {
                    Err("the controller's stream ended unasked".to_owned())
                }
            }
        });
        let gauge = deferred_gauge(supervisor, pods, metrics.clone());
        Leading {
            controller: Some(controller),
            stop_controller: Some(stop_tx),
            stopping,
            certificates,
            gauge,
            last_good,
            ledger,
            metrics: metrics.clone(),
        }
    }

    /// Shutdown: lets in-flight reconciles finish, for at most `DRAIN` (5 s) and never past the
    /// fence.
    pub async fn drain(&mut self, leadership: &Leadership, elector: &Elector) {
        self.stopping.store(true, Ordering::Release);
        if let Some(stop) = self.stop_controller.take() {
            let _ = stop.send(());
        }
        let Ok(left) = leadership.check() else {
            return;
        };
        tracing::info!(lease = elector.identity(), "draining in-flight reconciles");
        if let Some(handle) = self.controller.as_mut()
            && tokio::time::timeout(left.min(DRAIN), handle).await.is_ok()
        {
            self.controller = None;
        }
    }

    /// Stops everything now.
    pub async fn abort(self) {
        self.gauge.abort();
        self.metrics.set_deferred(0, Duration::ZERO);
        self.last_good.abort();
        self.ledger.abort();
        if let Some(handle) = self.controller {
            handle.abort();
            let _ = handle.await;
        }
        // The certificate manager stops itself once leadership is revoked (and drops its
        // watches); abort it only if it does not.
        if let Some(c) = self.certificates {
            let abort = c.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), c)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

/// Starts the certificate manager (when asked for) and the last good policy copier. Both stop
/// by themselves once leadership is revoked: only a panic is a fault.
fn spawn_duties(
    supervisor: &Supervisor,
    client: &kube::Client,
    view: &Arc<ClusterView>,
    metrics: &Arc<Metrics>,
    leadership: &Leadership,
    certificates: Option<certificates::Settings>,
    last_good: LastGood,
) -> (Option<JoinHandle<()>>, JoinHandle<()>) {
    let last_good = supervisor.spawn("the last good policy copier", {
        let work = crate::last_good::run(
            client.clone(),
            view.clone(),
            last_good,
            leadership.clone(),
            metrics.clone(),
        );
        async move {
            work.await;
            Ok(())
        }
    });
    let certificates = certificates.map(|settings| {
        let work = certificates::run(
            client.clone(),
            settings,
            metrics.clone(),
            leadership.clone(),
        );
        supervisor.spawn("the certificate manager", async move {
            work.await;
            Ok(())
        })
    });
    (certificates, last_good)
}

/// Reads the brakes' persisted counts, says so on the returned channel, then keeps them
/// persisted while this replica leads (`crate::preemption::brakes::ledger`).
fn spawn_ledger(
    supervisor: &Supervisor,
    client: &kube::Client,
    metrics: &Arc<Metrics>,
    course: &Course,
    namespace: String,
) -> (JoinHandle<()>, oneshot::Receiver<()>) {
    let (loaded_tx, loaded) = oneshot::channel::<()>();
    let (client, metrics) = (client.clone(), metrics.clone());
    let (brakes, leadership) = (course.brakes.clone(), course.actuator.leadership.clone());
    let handle = supervisor.spawn("the brakes' ledger", async move {
        ledger::load(client.clone(), &namespace, &brakes, &metrics).await;
        let _ = loaded_tx.send(());
        ledger::keep(client, namespace, brakes, leadership, metrics).await;
        Ok(())
    });
    (handle, loaded)
}

/// `resize_guard_deferred_pods` and `resize_guard_deferred_oldest_seconds`, read from the shared
/// pod cache every 5 s.
fn deferred_gauge(
    supervisor: &Supervisor,
    pods: Store<Pod>,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    supervisor.spawn("the deferred-pods gauge", async move {
        loop {
            let (n, oldest) = deferred(&pods.state(), Timestamp::now());
            metrics.set_deferred(n, oldest);
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
}

/// How many pods have a resize Deferred now, and how long the oldest has been: the age at `now`
/// of its `PodResizePending` condition's `lastTransitionTime` (the kubelet's wall clock; a time
/// in the future, or none, is no age at all).
fn deferred(pods: &[Arc<Pod>], now: Timestamp) -> (usize, Duration) {
    pods.iter()
        .filter(|p| resize_guard_policy::pod::is_deferred_now(p))
        .fold((0, Duration::ZERO), |(n, oldest), pod| {
            let age = resize_guard_policy::pod::resize_pending_for(pod, now);
            (n + 1, oldest.max(age))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A pod on a node whose `PodResizePending` condition says `reason` since `since`.
    fn pending(reason: &str, since: Option<Timestamp>) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.generation = Some(2);
        pod.spec = Some(PodSpec {
            node_name: Some("node-a".into()),
            ..PodSpec::default()
        });
        pod.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodResizePending".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                observed_generation: Some(2),
                last_transition_time: since.map(Time),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        Arc::new(pod)
    }

    #[test]
    fn the_oldest_deferred_resize_is_the_age_of_its_condition() {
        let now: Timestamp = "2030-01-01T00:10:00Z".parse().unwrap();
        let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        let pods = [
            pending("Deferred", at("2030-01-01T00:07:00Z")),
            pending("Deferred", at("2030-01-01T00:01:30Z")),
            // Infeasible is not Deferred, however old.
            pending("Infeasible", at("2029-12-31T00:00:00Z")),
        ];
        assert_eq!(deferred(&pods, now), (2, Duration::from_secs(510)));
    }

    #[test]
    fn a_condition_from_the_future_or_without_a_time_is_no_age() {
        let now: Timestamp = "2030-01-01T00:10:00Z".parse().unwrap();
        let ahead = Some("2030-01-01T00:12:00Z".parse::<Timestamp>().unwrap());
        let pods = [pending("Deferred", ahead), pending("Deferred", None)];
        assert_eq!(deferred(&pods, now), (2, Duration::ZERO));
        assert_eq!(deferred(&[], now), (0, Duration::ZERO));
    }
}
