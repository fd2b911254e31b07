//! Which limits a resize lowers (as the kubelet sees them) and the judgement against usage.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::fixture::{PodBuilder, container};

const MI: i64 = 1 << 20;

fn pod(app_limit: &str) -> PodBuilder {
    PodBuilder::new("shop", "app")
        .node("n1")
        .container(container("app").guaranteed("500m", app_limit))
}

/// [`pod`] at `app_limit` whose status still reports the 256Mi limit the kubelet applied.
fn applied_256mi(app_limit: &str) -> Pod {
    let mut p = pod(app_limit).build();
    p.status = Some(
        serde_json::from_value(serde_json::json!({
            "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0, "resources": {"limits": {"memory": "256Mi"}}}]
        }))
        .unwrap(),
    );
    p
}

fn usage(containers: &[(&str, i64)], age: u64) -> Evidence {
    Evidence::Measured(PodUsage {
        containers: containers
            .iter()
            .map(|(n, b)| ((*n).to_owned(), *b))
            .collect::<BTreeMap<_, _>>(),
        age: Duration::from_secs(age),
        window: "10s".into(),
    })
}

fn rule(percent: u32) -> MemoryDecrease {
    MemoryDecrease {
        headroom_percent: percent,
        ..MemoryDecrease::default()
    }
}

fn container_lowering(name: &str, from: Option<i64>, to: i64) -> Lowering {
    Lowering {
        scope: Scope::Container(name.into()),
        from,
        to,
    }
}

#[test]
fn a_lowered_container_limit_is_judged_once() {
    let old = pod("256Mi").build();
    let new = pod("256Mi").resize("app", "memory", "100Mi").build();
    assert_eq!(
        lowered_limits(&old, &new),
        vec![container_lowering("app", Some(256 * MI), 100 * MI)]
    );
}

#[test]
fn a_lowered_pod_level_limit_is_judged_for_the_pod() {
    let build = |limit: &str| {
        PodBuilder::new("shop", "app")
            .pod_limit("memory", limit)
            .container(container("app").request("memory", "64Mi"))
            .container(container("log").request("memory", "16Mi"))
            .build()
    };
    assert_eq!(
        lowered_limits(&build("1Gi"), &build("200Mi")),
        vec![Lowering {
            scope: Scope::Pod,
            from: Some(1024 * MI),
            to: 200 * MI
        }]
    );
}

#[test]
fn raising_or_keeping_a_limit_or_touching_cpu_lowers_nothing() {
    let old = pod("256Mi").build();
    for new in [
        pod("256Mi").resize("app", "memory", "300Mi").build(),
        pod("256Mi").resize("app", "cpu", "250m").build(),
        old.clone(),
    ] {
        assert_eq!(lowered_limits(&old, &new), vec![]);
    }
}

#[test]
fn a_limit_set_where_there_was_none_counts_as_lowered() {
    let old = PodBuilder::new("shop", "app")
        .container(container("app").request("memory", "64Mi"))
        .build();
    let new = PodBuilder::new("shop", "app")
        .container(
            container("app")
                .request("memory", "64Mi")
                .limit("memory", "128Mi"),
        )
        .build();
    assert_eq!(
        lowered_limits(&old, &new),
        vec![container_lowering("app", None, 128 * MI)]
    );
}

#[test]
fn sidecars_count_and_ordinary_init_containers_do_not_run() {
    let build = |side: &str, init: &str| {
        PodBuilder::new("shop", "app")
            .init_container(container("setup").guaranteed("100m", init))
            .init_container(container("proxy").guaranteed("100m", side).sidecar())
            .container(container("app").guaranteed("500m", "256Mi"))
            .build()
    };
    let lowered = lowered_limits(&build("64Mi", "64Mi"), &build("32Mi", "16Mi"));
    assert_eq!(
        lowered[0],
        container_lowering("proxy", Some(64 * MI), 32 * MI)
    );
    assert!(
        lowered
            .iter()
            .all(|l| l.scope != Scope::Container("setup".into()))
    );
}

#[test]
fn the_applied_limit_is_the_before_when_the_status_reports_it() {
    // An earlier 256Mi → 200Mi the kubelet refused: the container still has 256Mi.
    let old = applied_256mi("200Mi");
    let new = pod("200Mi").resize("app", "memory", "220Mi").build();
    assert_eq!(
        lowered_limits(&old, &new)[0],
        container_lowering("app", Some(256 * MI), 220 * MI)
    );
    // A CPU-only resize of that pod does not judge its memory again.
    let cpu = pod("200Mi").resize("app", "cpu", "250m").build();
    assert_eq!(lowered_limits(&old, &cpu), vec![]);
}

#[test]
fn a_limit_below_the_applied_one_is_unapplied() {
    let refused = applied_256mi("100Mi");
    assert_eq!(
        unapplied_lowerings(&refused),
        vec![container_lowering("app", Some(256 * MI), 100 * MI)]
    );
    assert_eq!(unapplied_lowerings(&pod("100Mi").build()), vec![]);
}

#[test]
fn pod_level_limits_and_overhead_make_the_pod_limit() {
    let limit_of = |b: PodBuilder| pod_memory_limit(&b.build().spec.unwrap());
    let declared = PodBuilder::new("shop", "app")
        .pod_limit("memory", "1Gi")
        .overhead("memory", "10Mi")
        .container(container("app").request("memory", "100Mi"));
    assert_eq!(limit_of(declared), Some(1024 * MI + 10 * MI));
    let undeclared = PodBuilder::new("shop", "app")
        .container(container("app").guaranteed("1", "1Gi"))
        .container(container("log").request("memory", "10Mi"));
    assert_eq!(limit_of(undeclared), None);
    let summed = PodBuilder::new("shop", "app")
        .container(container("app").guaranteed("1", "1Gi"))
        .container(container("log").guaranteed("1", "10Mi"));
    assert_eq!(limit_of(summed), Some(1034 * MI));
}

#[test]
fn below_usage_is_refused_and_above_usage_plus_headroom_is_clear() {
    let lowering = || vec![container_lowering("app", Some(256 * MI), 100 * MI)];
    let check = judge(lowering(), &usage(&[("app", 150 * MI)], 12), &rule(10));
    let MemoryCheck::Below { offenders, age } = &check else {
        panic!("{check:?}")
    };
    assert_eq!(*age, Duration::from_secs(12));
    assert_eq!(offenders[0].needed, 165 * MI);
    let message = check.message(&rule(10));
    let missing: Vec<&str> = [
        "container \"app\" memory limit 256Mi → 100Mi, working set 150Mi",
        "cannot decrease memory limits",
        "measured 12s ago",
        "at least 165Mi",
    ]
    .into_iter()
    .filter(|part| !message.contains(part))
    .collect();
    assert!(missing.is_empty(), "{message} lacks {missing:?}");
    let clear = judge(lowering(), &usage(&[("app", 90 * MI)], 12), &rule(10));
    assert!(matches!(clear, MemoryCheck::Clear(_)), "{clear:?}");
    assert_eq!(
        clear.annotation().unwrap(),
        "container \"app\" 256Mi->100Mi usage 90Mi needed 99Mi"
    );
}

#[test]
fn within_the_headroom_is_refused_for_the_race_not_the_kubelet() {
    let check = judge(
        vec![container_lowering("app", Some(256 * MI), 160 * MI)],
        &usage(&[("app", 150 * MI)], 1),
        &rule(10),
    );
    let message = check.message(&rule(10));
    assert!(message.contains("within the 10% headroom"), "{message}");
    assert!(message.contains("usage growing by 10Mi"), "{message}");
}

#[test]
fn zero_headroom_judges_exactly_as_the_kubelet() {
    // validateMemoryResizeAction refuses when usage >= the new limit.
    let at = |to: i64| {
        judge(
            vec![container_lowering("app", Some(256 * MI), to)],
            &usage(&[("app", 150 * MI)], 1),
            &rule(0),
        )
    };
    assert!(matches!(at(150 * MI), MemoryCheck::Below { .. }));
    assert!(matches!(at(150 * MI + 1), MemoryCheck::Clear(_)));
}

#[test]
fn no_usage_is_never_a_denial() {
    let lowering = || vec![container_lowering("app", Some(256 * MI), 100 * MI)];
    let down = Evidence::Unavailable("metrics.k8s.io: 503 Service Unavailable".into());
    let unjudged = judge(lowering(), &down, &rule(10));
    assert!(unjudged.summary().contains("503"), "{unjudged:?}");
    let stale = judge(lowering(), &usage(&[("app", 150 * MI)], 121), &rule(10));
    assert!(
        matches!(&stale, MemoryCheck::Unjudged(why) if why.contains("121s ago")),
        "{stale:?}"
    );
    let other = judge(lowering(), &usage(&[("proxy", 150 * MI)], 1), &rule(10));
    assert!(
        matches!(&other, MemoryCheck::Unjudged(why) if why.contains("container \"app\"")),
        "{other:?}"
    );
    assert!(matches!(
        judge(lowering(), &Evidence::NotFetched, &rule(10)),
        MemoryCheck::NeedsUsage(_)
    ));
    let off = MemoryDecrease {
        below_usage: BelowUsage::Allow,
        ..rule(10)
    };
    assert_eq!(
        judge(lowering(), &usage(&[("app", 150 * MI)], 1), &off),
        MemoryCheck::NotApplicable
    );
}

#[test]
fn the_pod_limit_is_judged_against_the_sum_of_its_containers() {
    let pod_lowering = vec![Lowering {
        scope: Scope::Pod,
        from: Some(512 * MI),
        to: 200 * MI,
    }];
    let check = judge(
        pod_lowering.clone(),
        &usage(&[("app", 150 * MI), ("proxy", 60 * MI)], 1),
        &rule(0),
    );
    assert!(matches!(check, MemoryCheck::Below { .. }), "{check:?}");
    assert!(matches!(
        judge(pod_lowering, &usage(&[], 1), &rule(0)),
        MemoryCheck::Unjudged(_)
    ));
}

#[test]
fn human_bytes_are_exact_or_one_decimal() {
    assert_eq!(human_bytes(150 * MI), "150Mi");
    assert_eq!(human_bytes(150 * MI + 300 * 1024), "150.3Mi");
    assert_eq!(human_bytes(512), "512");
    assert_eq!(human_bytes(300 * 1024), "300Ki");
    // Under a mebibyte, kibibytes rather than a long run of bytes.
    assert_eq!(human_bytes(279_348), "272.8Ki");
    // A suggested limit is never below what it stands for.
    assert_eq!(human_bytes_up(279_348), "273Ki");
    assert_eq!(human_bytes_up(150 * MI + 300 * 1024), "150.3Mi");
    assert_eq!(human_bytes_up(150 * MI + 1), "150.1Mi");
    assert_eq!(human_bytes_up(2 * MI), "2Mi");
}

proptest! {
    /// Only measured, fresh usage can refuse; and it refuses exactly when some lowered limit is
    /// at or below usage or below usage plus the headroom.
    #[test]
    fn only_fresh_usage_refuses_and_exactly_below_the_line(
        limits in proptest::collection::vec((1i64..4096, 1i64..4096), 1..4),
        used in proptest::collection::vec(0i64..4096, 0..4),
        percent in 0u32..100,
        age in 0u64..300,
        available in any::<bool>(),
    ) {
        let lowered: Vec<Lowering> = limits
            .iter()
            .enumerate()
            .map(|(i, (from, to))| container_lowering(&format!("c{i}"), Some(from * MI), to * MI))
            .collect();
        let measured: Vec<(String, i64)> = used
            .iter()
            .enumerate()
            .map(|(i, u)| (format!("c{i}"), u * MI))
            .collect();
        let evidence = if available {
            Evidence::Measured(PodUsage {
                containers: measured.iter().cloned().collect(),
                age: Duration::from_secs(age),
                window: String::new(),
            })
        } else {
            Evidence::Unavailable("down".into())
        };
        let check = judge(lowered.clone(), &evidence, &rule(percent));
        let below_line = lowered.iter().any(|l| {
            measured.iter().find(|(n, _)| Scope::Container(n.clone()) == l.scope).is_some_and(|(_, u)| {
                let needed = *u + ((i128::from(*u) * i128::from(percent) + 99) / 100) as i64;
                l.to <= *u || l.to < needed
            })
        });
        let refused = matches!(check, MemoryCheck::Below { .. });
        prop_assert_eq!(refused, available && age <= 120 && below_line);
    }
}
