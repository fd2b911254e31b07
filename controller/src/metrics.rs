//! Prometheus metrics of the controller (DESIGN §7), seconds with millisecond-scale buckets.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Outcome label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `started`, `resumed`, `no_plan`, `pdb_blocked`, `would_preempt`, `error`.
    pub outcome: String,
}

/// All controller metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    preemptions: Family<Outcome, Counter>,
    victims: Counter,
    leader: Gauge,
    deferred: Gauge,
    unblock: Histogram,
    reconcile: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("resize_guard");
        let preemptions = Family::<Outcome, Counter>::default();
        let victims = Counter::default();
        let leader = Gauge::default();
        let deferred = Gauge::default();
        let unblock = Histogram::new([
            0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ]);
        let reconcile = Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
        ]);
        registry.register(
            "preemptions",
            "Preemption decisions by outcome",
            preemptions.clone(),
        );
        registry.register("victims", "Pods preempted", victims.clone());
        registry.register(
            "leader",
            "Whether this replica holds the Lease (1) or not (0)",
            leader.clone(),
        );
        registry.register(
            "deferred_pods",
            "Pods whose resize the kubelet has Deferred, as the leader sees them",
            deferred.clone(),
        );
        registry.register(
            "time_to_unblock_seconds",
            "From recording a preemption plan to the kubelet admitting the resize",
            unblock.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time per reconcile",
            reconcile.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            preemptions,
            victims,
            leader,
            deferred,
            unblock,
            reconcile,
        }
    }

    /// Counts a preemption decision.
    pub fn preemption(&self, outcome: &str) {
        self.preemptions
            .get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts victims.
    pub fn victims(&self, n: u64) {
        self.victims.inc_by(n);
    }

    /// Sets leadership.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Sets the number of Deferred pods.
    pub fn set_deferred(&self, n: usize) {
        self.deferred.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Records a time-to-unblock.
    pub fn unblocked(&self, seconds: f64) {
        self.unblock.observe(seconds);
    }

    /// Records a reconcile duration.
    pub fn reconciled(&self, seconds: f64) {
        self.reconcile.observe(seconds);
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Ok(r) = self.registry.lock() {
            let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        }
        out
    }
}
