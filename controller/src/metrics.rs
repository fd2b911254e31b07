//! Prometheus metrics of the controller (ARCHITECTURE.md, "Observability"), seconds with
//! millisecond-scale buckets, in the program's one registry (`runtime/src/exposition.rs`: with the
//! process metrics, `resize_guard_build_info` and `resize_guard_policy_mode`), served as
//! OpenMetrics text.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use resize_guard_runtime::certificate_expiry::CertificateExpiry;
use resize_guard_runtime::exposition::Exposition;

/// Outcome label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `started`, `resumed`, `no_plan`, `pdb_blocked`, `would_preempt`, `plan_rejected`,
    /// `reverted_infeasible`, `error`, and for plans the brakes hold back `breaker_opened`,
    /// `held_breaker_open`, `held_node_busy`, `held_victims_per_resize`, `held_eviction_rate`,
    /// `held_namespace_rate`, `held_state_unsaved`.
    pub outcome: String,
}

/// Label of the brakes' persisted state counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateResult {
    /// Loads: `restored`, `partial`, `unreadable`, `absent`, `read_error`; writes: `ok`, `error`.
    pub result: String,
}

/// What a certificate repair or error concerns.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct What {
    /// `ca`, `serving`, `ca_bundle` (and for errors also `read`, `watch`, `converge`).
    pub what: String,
}

/// Label of the watch error counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Resource {
    /// `pods`, `nodes`, `poddisruptionbudgets` or `configmap`.
    pub resource: String,
}

/// Label of the supervised task exit counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Task {
    /// The task, in words (`the reconcile loop`, `the pods watch`).
    pub task: String,
}

/// All controller metrics.
#[derive(Debug)]
pub struct Metrics {
    exposition: Exposition,
    preemptions: Family<Outcome, Counter>,
    victims: Counter,
    leader: Gauge,
    deferred: Gauge,
    deferred_oldest: Gauge,
    unblock: Histogram,
    reconcile: Histogram,
    cert_repairs: Family<What, Counter>,
    cert_errors: Family<What, Counter>,
    cert_expiry: CertificateExpiry,
    fenced: Counter,
    plan_conflicts: Counter,
    watch_errors: Family<Resource, Counter>,
    last_good_errors: Counter,
    task_exits: Family<Task, Counter>,
    brakes_loads: Family<StateResult, Counter>,
    brakes_writes: Family<StateResult, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let exposition = Exposition::new("resize-guard-controller");
        let preemptions = Family::<Outcome, Counter>::default();
        let victims = Counter::default();
        let leader = Gauge::default();
        let deferred = Gauge::default();
        let deferred_oldest = Gauge::default();
        let unblock = Histogram::new([
            0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ]);
        let reconcile = Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
        ]);
        let cert_repairs = Family::<What, Counter>::default();
        let cert_errors = Family::<What, Counter>::default();
        let cert_expiry = CertificateExpiry::default();
        let fenced = Counter::default();
        let plan_conflicts = Counter::default();
        let watch_errors = Family::<Resource, Counter>::default();
        let last_good_errors = Counter::default();
        let task_exits = Family::<Task, Counter>::default();
        let brakes_loads = Family::<StateResult, Counter>::default();
        let brakes_writes = Family::<StateResult, Counter>::default();
        exposition.register_with(|registry| {
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
                "deferred_oldest_seconds",
                "How long the oldest resize the kubelet has Deferred has been so (its PodResizePending condition's lastTransitionTime), as the leader sees it; 0 when none is",
                deferred_oldest.clone(),
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
            registry.register(
                "certificate_repairs",
                "Writes of the CA Secret, the serving Secret or a caBundle (creation and rotation included)",
                cert_repairs.clone(),
            );
            registry.register(
                "certificate_errors",
                "Failed certificate reads, watches and repairs",
                cert_errors.clone(),
            );
            cert_expiry.register(
                registry,
                "notAfter of the stored serving certificate and of the current CA, in seconds since the Unix epoch",
            );
            registry.register(
                "fenced_writes",
                "Writes not made because this replica did not hold the Lease (or its fence passed)",
                fenced.clone(),
            );
            registry.register(
                "plan_write_conflicts",
                "Plan-annotation writes the API server refused because the annotation no longer held what the decision read (the pod is read and judged again)",
                plan_conflicts.clone(),
            );
            registry.register(
                "watch_errors",
                "Errors of the cluster view's watches, by resource",
                watch_errors.clone(),
            );
            registry.register(
                "last_good_policy_write_errors",
                "Failed writes of the persisted last good policy copy",
                last_good_errors.clone(),
            );
            registry.register(
                "task_exits",
                "Supervised tasks (reconcile loop, watches) that panicked or ended unasked; the replica steps down on the first",
                task_exits.clone(),
            );
            registry.register(
                "brakes_state_loads",
                "Reads of the brakes' persisted counts on becoming leader, by result (unreadable and read_error start every bucket empty)",
                brakes_loads.clone(),
            );
            registry.register(
                "brakes_state_writes",
                "Writes of the brakes' counts to ConfigMap resize-guard-brakes, by result",
                brakes_writes.clone(),
            );
        });
        Metrics {
            exposition,
            preemptions,
            victims,
            leader,
            deferred,
            deferred_oldest,
            unblock,
            reconcile,
            cert_repairs,
            cert_errors,
            cert_expiry,
            fenced,
            plan_conflicts,
            watch_errors,
            last_good_errors,
            task_exits,
            brakes_loads,
            brakes_writes,
        }
    }

    /// Counts a read of the brakes' persisted counts.
    pub fn brakes_state_load(&self, result: &str) {
        self.brakes_loads
            .get_or_create(&StateResult {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Counts a write of the brakes' counts.
    pub fn brakes_state_write(&self, result: &str) {
        self.brakes_writes
            .get_or_create(&StateResult {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Counts a supervised task that stopped.
    pub fn task_exited(&self, task: &str) {
        self.task_exits
            .get_or_create(&Task {
                task: task.to_owned(),
            })
            .inc();
    }

    /// Counts a failed write of the last good policy copy.
    pub fn last_good_write_failed(&self) {
        self.last_good_errors.inc();
    }

    /// Counts a watch error of `resource`.
    pub fn watch_error(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&Resource {
                resource: resource.to_owned(),
            })
            .inc();
    }

    /// Counts a write the leadership fence stopped.
    pub fn fenced_write(&self) {
        self.fenced.inc();
    }

    /// Counts a plan-annotation write refused because the annotation changed since it was read.
    pub fn plan_write_conflict(&self) {
        self.plan_conflicts.inc();
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

    /// Sets the number of Deferred pods and how long the oldest has been Deferred.
    pub fn set_deferred(&self, n: usize, oldest: std::time::Duration) {
        self.deferred.set(i64::try_from(n).unwrap_or(i64::MAX));
        self.deferred_oldest
            .set(i64::try_from(oldest.as_secs()).unwrap_or(i64::MAX));
    }

    /// Records a time-to-unblock.
    pub fn unblocked(&self, seconds: f64) {
        self.unblock.observe(seconds);
    }

    /// Records a reconcile duration.
    pub fn reconciled(&self, seconds: f64) {
        self.reconcile.observe(seconds);
    }

    /// Counts a certificate repair (`ca`, `serving`, `ca_bundle`).
    pub fn certificate_repair(&self, what: &str) {
        self.cert_repairs
            .get_or_create(&What {
                what: what.to_owned(),
            })
            .inc();
    }

    /// Counts a certificate failure.
    pub fn certificate_error(&self, what: &str) {
        self.cert_errors
            .get_or_create(&What {
                what: what.to_owned(),
            })
            .inc();
    }

    /// Records a certificate's `notAfter` (`serving` or `ca`).
    pub fn certificate_expiry(&self, certificate: &str, not_after: std::time::SystemTime) {
        self.cert_expiry.set(certificate, not_after);
    }

    /// Drops the certificate expiry series (a replica that stopped leading no longer knows).
    pub fn forget_certificate_expiry(&self) {
        self.cert_expiry.clear();
    }

    /// The program's registry: its policy-mode source and later collectors go there.
    pub fn exposition(&self) -> &Exposition {
        &self.exposition
    }

    /// The OpenMetrics exposition of the program's one registry (process metrics, build info,
    /// policy mode and the metrics above), `# EOF` included.
    pub fn render(&self) -> String {
        self.exposition.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::policy::Mode;
    use resize_guard_runtime::exposition::assert_contains;

    #[test]
    fn one_registry_carries_build_info_and_the_live_mode() {
        let m = Metrics::new();
        m.exposition().follow_policy_mode(|| Some(Mode::Enforce));
        let text = m.render();
        assert_contains(
            &text,
            &[
                "program=\"resize-guard-controller\"} 1",
                "# TYPE process_cpu_seconds counter",
                "resize_guard_policy_mode{mode=\"enforce\"} 1",
                "resize_guard_policy_mode{mode=\"audit\"} 0",
                "# TYPE resize_guard_fenced_writes counter",
                "resize_guard_deferred_pods 0",
                "resize_guard_deferred_oldest_seconds 0",
            ],
        );
    }

    #[test]
    fn the_deferred_gauges_carry_the_count_and_the_oldest_age_in_seconds() {
        let m = Metrics::new();
        m.set_deferred(2, std::time::Duration::from_millis(510_900));
        let text = m.render();
        assert_contains(
            &text,
            &[
                "# TYPE resize_guard_deferred_oldest_seconds gauge",
                "resize_guard_deferred_pods 2",
                "resize_guard_deferred_oldest_seconds 510",
            ],
        );
    }

    #[test]
    fn certificate_metrics_have_the_documented_names() {
        let m = Metrics::new();
        m.certificate_repair("ca_bundle");
        m.certificate_error("read");
        m.certificate_expiry(
            "serving",
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_900_000_000),
        );
        let text = m.render();
        assert_contains(
            &text,
            &[
                "resize_guard_certificate_repairs_total{what=\"ca_bundle\"} 1",
                "resize_guard_certificate_errors_total{what=\"read\"} 1",
                "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 1900000000",
            ],
        );
    }
}
