//! How fast VPA's loop turns: two presets of the recommender's and the updater's flags, VPA
//! v1.6.0's own **defaults** and the **shortest** intervals it supports, for [`crate::vpa`].
//!
//! Between "a container's usage changes" and "VPA resizes it in place" a sample crosses
//! metrics-server (one scrape per `--metric-resolution`), the recommender (one fetch per
//! `--recommender-interval`, into decaying histograms whose percentiles are widened by a
//! confidence factor that grows with history), the VPA object's status, and the updater (one loop
//! per `--updater-interval`, which acts on a pod only if its request is outside the recommended
//! range, or it lived 12 h and the change is >= 10 %). `third_party/vpa/README.md` ("Where VPA's
//! loop spends its time") walks through every step; the flags, their defaults and the upstream
//! lines (in `k8s.io/autoscaler/vertical-pod-autoscaler@v1.6.0`) are:
//!
//! | flag | default | shortest | upstream |
//! |---|---|---|---|
//! | recommender `--recommender-interval` | 1m | 10s | `pkg/recommender/main.go` `metricsFetcherInterval` (l. 64), loop `time.Tick` in `run` (l. 365) |
//! | recommender `--memory-aggregation-interval` | 24h | 10s | `main.go` l. 102; `model/aggregations_config.go` `DefaultMemoryAggregationInterval`; `model/container.go` `addMemorySample` (one peak per interval) |
//! | recommender `--memory-aggregation-interval-count` | 8 | 8 | `main.go` l. 103; only expires aggregates without samples (`model/aggregate_container_state.go` `isExpired`) |
//! | recommender `--memory-histogram-decay-half-life` | 24h | 10s | `main.go` l. 104; `util/decaying_histogram.go` `decayFactor` |
//! | recommender `--cpu-histogram-decay-half-life` | 24h | 10s | `main.go` l. 105 |
//! | recommender `--confidence-interval-cpu` / `-memory` | 24h | 10s | `logic/recommender.go` l. 35/39; `logic/estimator.go` `getConfidence` |
//! | recommender `--pod-recommendation-min-cpu-millicores` | 25 | 10 | `logic/recommender.go` l. 30, `GetRecommendedPodResources` |
//! | recommender `--pod-recommendation-min-memory-mb` | 250 | 10 | `logic/recommender.go` l. 31 |
//! | updater `--updater-interval` | 1m | 1s | `pkg/updater/main.go` l. 58, loop `time.Tick` (l. 246) |
//! | updater `--min-replicas` | 2 | 1 | `main.go` l. 61; `restriction/pods_restriction_factory.go` `GetCreatorMaps` |
//! | updater `--in-recommendation-bounds-eviction-lifetime-threshold` | 12h | 0s | `priority/update_priority_calculator.go` l. 39, `AddPod` |
//! | updater `--in-place-skip-disruption-budget` | false | true | `main.go` l. 78; `restriction/pods_inplace_restriction.go` `CanInPlaceUpdate` |
//!
//! "Shortest" sets every interval to metrics-server's floor (`--metric-resolution` >= 10 s,
//! `sigs.k8s.io/metrics-server@v0.8.0` `cmd/metrics-server/app/options/options.go` `validate`):
//! a shorter fetch only re-reads the same point, and CPU samples with an unchanged timestamp are
//! dropped (`model/container.go` `addCPUSample`). The minimums become the histograms' first bucket
//! (0.01 core, 10^7 bytes: `model/aggregations_config.go` `cpuHistogramOptions` /
//! `memoryHistogramOptions`), below which no percentile resolves anyway. The updater's loop
//! context expires after one interval (`pkg/updater/main.go` l. 248), so 1 s leaves each loop a
//! second for its API calls. Thresholds that are not delays (`--pod-update-threshold` 0.1,
//! `--recommendation-margin-fraction` 0.15, `--eviction-tolerance` 0.5) and the updater's fixed
//! fall-back timeouts (5 min Deferred, 1 h InProgress: `restriction/pods_inplace_restriction.go`)
//! are the same in both presets.

use std::time::Duration;

/// metrics-server's default `--metric-resolution` (`options.go` `NewOptions`).
pub const METRICS_RESOLUTION_DEFAULT: Duration = Duration::from_secs(60);
/// metrics-server's smallest `--metric-resolution` (`options.go` `validate`).
pub const METRICS_RESOLUTION_MIN: Duration = Duration::from_secs(10);

/// Which flags VPA's recommender and updater run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VpaIntervals {
    /// VPA v1.6.0's defaults, written out explicitly.
    Defaults,
    /// The shortest intervals VPA supports (see the module table).
    Shortest,
}

/// The recommender's timing flags.
#[derive(Debug, Clone, PartialEq)]
pub struct RecommenderPreset {
    /// `--recommender-interval`: one fetch of metrics.k8s.io and one status write per VPA.
    pub interval: Duration,
    /// `--memory-aggregation-interval`: one memory sample (the peak) per interval.
    pub memory_aggregation_interval: Duration,
    /// `--memory-aggregation-interval-count`.
    pub memory_aggregation_interval_count: u32,
    /// `--memory-histogram-decay-half-life`.
    pub memory_half_life: Duration,
    /// `--cpu-histogram-decay-half-life`.
    pub cpu_half_life: Duration,
    /// `--confidence-interval-cpu` and `--confidence-interval-memory`: history that counts as
    /// "one day" in the bounds' confidence multiplier.
    pub confidence_interval: Duration,
    /// `--pod-recommendation-min-cpu-millicores` (shared evenly by the pod's containers).
    pub min_cpu_millicores: u32,
    /// `--pod-recommendation-min-memory-mb` (MiB, shared evenly by the pod's containers).
    pub min_memory_mb: u32,
}

impl RecommenderPreset {
    /// The flags, in the table's order.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--recommender-interval={}", go_duration(self.interval)),
            format!(
                "--memory-aggregation-interval={}",
                go_duration(self.memory_aggregation_interval)
            ),
            format!(
                "--memory-aggregation-interval-count={}",
                self.memory_aggregation_interval_count
            ),
            format!(
                "--memory-histogram-decay-half-life={}",
                go_duration(self.memory_half_life)
            ),
            format!(
                "--cpu-histogram-decay-half-life={}",
                go_duration(self.cpu_half_life)
            ),
            format!(
                "--confidence-interval-cpu={}",
                go_duration(self.confidence_interval)
            ),
            format!(
                "--confidence-interval-memory={}",
                go_duration(self.confidence_interval)
            ),
            format!(
                "--pod-recommendation-min-cpu-millicores={}",
                self.min_cpu_millicores
            ),
            format!("--pod-recommendation-min-memory-mb={}", self.min_memory_mb),
        ]
    }
}

/// The updater's flags: its timing and the disruption budget it keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdaterPreset {
    /// `--updater-interval`.
    pub interval: Duration,
    /// `--min-replicas`: groups with fewer live pods are left alone.
    pub min_replicas: u32,
    /// `--in-place-skip-disruption-budget`: in-place resizes that restart nothing ignore
    /// `--min-replicas` and `--eviction-tolerance`.
    pub in_place_skip_disruption_budget: bool,
    /// `--in-recommendation-bounds-eviction-lifetime-threshold`: a pod whose requests are inside
    /// [lowerBound, upperBound] is updated only after living this long.
    pub lifetime_threshold: Duration,
}

impl UpdaterPreset {
    /// The flags, in the table's order, then `--eviction-tolerance` at VPA's default (0.5: the
    /// fraction of a group that may be disrupted), written out so the command line shows it.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--updater-interval={}", go_duration(self.interval)),
            format!("--min-replicas={}", self.min_replicas),
            format!(
                "--in-recommendation-bounds-eviction-lifetime-threshold={}",
                go_duration(self.lifetime_threshold)
            ),
            format!(
                "--in-place-skip-disruption-budget={}",
                self.in_place_skip_disruption_budget
            ),
            "--eviction-tolerance=0.5".to_owned(),
        ]
    }
}

impl VpaIntervals {
    /// The recommender's flags.
    pub fn recommender(self) -> RecommenderPreset {
        match self {
            VpaIntervals::Defaults => RecommenderPreset {
                interval: Duration::from_secs(60),
                memory_aggregation_interval: Duration::from_secs(24 * 3600),
                memory_aggregation_interval_count: 8,
                memory_half_life: Duration::from_secs(24 * 3600),
                cpu_half_life: Duration::from_secs(24 * 3600),
                confidence_interval: Duration::from_secs(24 * 3600),
                min_cpu_millicores: 25,
                min_memory_mb: 250,
            },
            VpaIntervals::Shortest => RecommenderPreset {
                interval: METRICS_RESOLUTION_MIN,
                memory_aggregation_interval: METRICS_RESOLUTION_MIN,
                memory_aggregation_interval_count: 8,
                memory_half_life: METRICS_RESOLUTION_MIN,
                cpu_half_life: METRICS_RESOLUTION_MIN,
                confidence_interval: METRICS_RESOLUTION_MIN,
                min_cpu_millicores: 10,
                min_memory_mb: 10,
            },
        }
    }

    /// The updater's flags.
    pub fn updater(self) -> UpdaterPreset {
        match self {
            VpaIntervals::Defaults => UpdaterPreset {
                interval: Duration::from_secs(60),
                min_replicas: 2,
                in_place_skip_disruption_budget: false,
                lifetime_threshold: Duration::from_secs(12 * 3600),
            },
            VpaIntervals::Shortest => UpdaterPreset {
                interval: Duration::from_secs(1),
                min_replicas: 1,
                in_place_skip_disruption_budget: true,
                lifetime_threshold: Duration::ZERO,
            },
        }
    }

    /// The `--metric-resolution` metrics-server should run with to match.
    pub fn metrics_resolution(self) -> Duration {
        match self {
            VpaIntervals::Defaults => METRICS_RESOLUTION_DEFAULT,
            VpaIntervals::Shortest => METRICS_RESOLUTION_MIN,
        }
    }
}

/// A duration as Go's `time.ParseDuration` reads it: whole seconds as `<n>s`, else `<n>ms`.
pub fn go_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that preset `s`'s value of every `field` is below preset `d`'s, naming the one
    /// that is not.
    macro_rules! assert_below {
        ($s:expr, $d:expr, $($field:ident),+) => {{
            let (s, d) = ($s, $d);
            $(assert!(
                s.$field < d.$field,
                "{}: {:?} >= {:?}",
                stringify!($field),
                s.$field,
                d.$field
            );)+
        }};
    }

    #[test]
    fn shortest_preset_is_nowhere_slower_than_the_defaults() {
        assert_below!(
            VpaIntervals::Shortest.recommender(),
            VpaIntervals::Defaults.recommender(),
            interval,
            memory_aggregation_interval,
            memory_half_life,
            cpu_half_life,
            confidence_interval,
            min_memory_mb,
            min_cpu_millicores
        );
        assert_below!(
            VpaIntervals::Shortest.updater(),
            VpaIntervals::Defaults.updater(),
            interval,
            min_replicas,
            lifetime_threshold
        );
    }

    #[test]
    fn shortest_intervals_never_undercut_the_metrics_resolution() {
        // A fetch or aggregation interval below one scrape only sees the same point again.
        let s = VpaIntervals::Shortest.recommender();
        assert!(s.interval >= METRICS_RESOLUTION_MIN);
        assert!(s.memory_aggregation_interval >= METRICS_RESOLUTION_MIN);
        // Go rejects a zero ticker period (time.Tick returns nil: the loop would never run).
        assert!(!VpaIntervals::Shortest.updater().interval.is_zero());
    }

    #[test]
    fn flags_are_written_as_go_reads_them() {
        assert_eq!(go_duration(Duration::from_secs(86400)), "86400s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(go_duration(Duration::ZERO), "0s");
        let args = VpaIntervals::Defaults.recommender().args();
        assert!(args.contains(&"--recommender-interval=60s".to_owned()));
        assert!(args.contains(&"--pod-recommendation-min-memory-mb=250".to_owned()));
        for args in [args, VpaIntervals::Shortest.updater().args()] {
            let names: std::collections::BTreeSet<_> =
                args.iter().filter_map(|a| a.split('=').next()).collect();
            assert_eq!(names.len(), args.len(), "a flag is repeated: {args:?}");
        }
        let args = VpaIntervals::Shortest.updater().args();
        assert!(args.contains(&"--updater-interval=1s".to_owned()));
        assert!(args.contains(&"--in-place-skip-disruption-budget=true".to_owned()));
    }
}
