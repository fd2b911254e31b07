//! Which policy is in force, and why — fail safe: nothing is denied, repaired or preempted under
//! a policy resize-guard has not read and parsed.
//!
//! Two sources, both ConfigMaps in the install namespace:
//! - **the policy ConfigMap** (`resize-guard`, key `policy.yaml`), which operators edit;
//! - **the last good copy** (`resize-guard-last-good`), which only the controller writes, each
//!   time the policy ConfigMap parses, so a restart keeps the last good policy even when the
//!   ConfigMap is broken, empty of its key, or gone.
//!
//! | the policy ConfigMap | a policy already in force | the last good copy | in force |
//! |---|---|---|---|
//! | parses | any | any | the ConfigMap's |
//! | garbled, key-less or missing | yes | any | the one in force (kept) |
//! | garbled, key-less or missing | no | parses | the last good copy |
//! | garbled, key-less or missing | no | missing or garbled | **none**: the webhook allows with a warning, the controller idles |
//!
//! Nothing but the ConfigMap itself is adopted before both sources have been read once
//! ([`PolicySource::settled`]), so a process never acts on a copy the ConfigMap is about to
//! replace. Pure: the view feeds it watch events.

use std::sync::Arc;

use resize_guard_policy::policy::{POLICY_KEY, Policy};

/// Where the policy in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The policy ConfigMap, as it is now or as it last parsed.
    ConfigMap,
    /// The controller's last good copy, read at start because the ConfigMap gave none.
    LastGood,
}

impl Origin {
    /// The `origin` metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::ConfigMap => "configmap",
            Origin::LastGood => "last-good",
        }
    }
}

/// The policy in force.
#[derive(Debug, Clone)]
pub struct InForce {
    /// The parsed policy.
    pub policy: Arc<Policy>,
    /// Its `policy.yaml` text (what the controller persists as the last good copy).
    pub yaml: Arc<str>,
    /// Where it came from.
    pub origin: Origin,
}

/// What one source says now.
#[derive(Debug, Clone, Default)]
enum Reading {
    /// Not listed yet.
    #[default]
    Unread,
    /// Listed: no such ConfigMap.
    Missing,
    /// Present but unusable: why.
    Bad(String),
    /// Parses.
    Good(Arc<Policy>, Arc<str>),
}

/// The state of both sources and the policy in force.
#[derive(Debug, Clone, Default)]
pub struct PolicySource {
    config_map: Reading,
    last_good: Reading,
    in_force: Option<InForce>,
}

/// Every value [`PolicySource::config_map_state`] answers: the series of
/// `resize_guard_policy_configmap_state{state}`.
pub const CONFIG_MAP_STATES: &[&str] = &["valid", "invalid", "missing", "unread"];

/// Parses a ConfigMap's `data` as a policy: the policy and its text, or why not.
pub fn parse(
    data: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<(Policy, String), String> {
    let policy = Policy::from_config_map(data).map_err(|e| e.to_string())?;
    let yaml = data
        .and_then(|d| d.get(POLICY_KEY))
        .cloned()
        .unwrap_or_default();
    Ok((policy, yaml))
}

impl PolicySource {
    /// The policy ConfigMap was listed or changed: its parse, or `None` when it does not exist.
    /// Returns true when the policy in force changed.
    pub fn config_map(&mut self, read: Option<Result<(Policy, String), String>>) -> bool {
        self.config_map = reading(read);
        self.settle()
    }

    /// The last good copy was listed or changed (`None`: it does not exist). Returns true when
    /// the policy in force changed.
    pub fn last_good(&mut self, read: Option<Result<(Policy, String), String>>) -> bool {
        self.last_good = reading(read);
        self.settle()
    }

    /// The policy in force, if any.
    pub fn in_force(&self) -> Option<&InForce> {
        self.in_force.as_ref()
    }

    /// Why no policy is in force (`None` when one is): the sentence readiness, warnings and
    /// Events carry.
    pub fn why_none(&self) -> Option<String> {
        if self.in_force.is_some() {
            return None;
        }
        let cm = match &self.config_map {
            Reading::Unread => return Some("the policy ConfigMap has not been read yet".into()),
            Reading::Missing => "the policy ConfigMap does not exist".to_owned(),
            Reading::Bad(why) => format!("the policy ConfigMap is invalid ({why})"),
            Reading::Good(..) => return None,
        };
        let copy = match &self.last_good {
            Reading::Unread => "its last good copy has not been read yet".to_owned(),
            Reading::Missing => "no last good copy exists".to_owned(),
            Reading::Bad(why) => format!("the last good copy is invalid ({why})"),
            Reading::Good(..) => return None,
        };
        Some(format!("no policy in force: {cm} and {copy}"))
    }

    /// What the policy ConfigMap holds as last read, whatever policy is in force: `valid`,
    /// `invalid` (garbled or key-less), `missing` or `unread` (one of [`CONFIG_MAP_STATES`]).
    pub fn config_map_state(&self) -> &'static str {
        match self.config_map {
            Reading::Good(..) => "valid",
            Reading::Bad(_) => "invalid",
            Reading::Missing => "missing",
            Reading::Unread => "unread",
        }
    }

    /// Both sources have been read once: from then on "no policy" is a fact, not a start-up
    /// state.
    pub fn settled(&self) -> bool {
        !matches!(self.config_map, Reading::Unread) && !matches!(self.last_good, Reading::Unread)
    }

    /// The degraded note for `/readyz`: why no policy is in force, or the policy ConfigMap's
    /// problem while an earlier policy stays in force; `None` when the ConfigMap is in force.
    pub fn note(&self) -> Option<String> {
        if let Some(why) = self.why_none() {
            return Some(why);
        }
        let problem = match &self.config_map {
            Reading::Missing => "the policy ConfigMap does not exist".to_owned(),
            Reading::Bad(why) => format!("the policy ConfigMap is invalid ({why})"),
            Reading::Unread | Reading::Good(..) => return None,
        };
        Some(match self.in_force.as_ref()?.origin {
            Origin::LastGood => format!("{problem}; the last good copy is in force"),
            Origin::ConfigMap => format!("{problem}; the last policy it held stays in force"),
        })
    }

    fn settle(&mut self) -> bool {
        let next = match (&self.config_map, &self.last_good, &self.in_force) {
            (Reading::Good(p, y), ..) => Some(InForce {
                policy: p.clone(),
                yaml: y.clone(),
                origin: Origin::ConfigMap,
            }),
            // Wait for both sources before adopting anything but the ConfigMap itself.
            (Reading::Unread, ..) | (_, Reading::Unread, None) => self.in_force.clone(),
            (_, _, Some(kept)) => Some(kept.clone()),
            (_, Reading::Good(p, y), None) => Some(InForce {
                policy: p.clone(),
                yaml: y.clone(),
                origin: Origin::LastGood,
            }),
            (_, _, None) => None,
        };
        let changed = match (&next, &self.in_force) {
            (Some(a), Some(b)) => a.yaml != b.yaml || a.origin != b.origin,
            (None, None) => false,
            _ => true,
        };
        self.in_force = next;
        changed
    }
}

fn reading(read: Option<Result<(Policy, String), String>>) -> Reading {
    match read {
        None => Reading::Missing,
        Some(Err(why)) => Reading::Bad(why),
        Some(Ok((p, yaml))) => Reading::Good(Arc::new(p), yaml.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::policy::Mode;

    fn good(yaml: &str) -> Option<Result<(Policy, String), String>> {
        Some(Ok((Policy::from_yaml(yaml).unwrap(), yaml.to_owned())))
    }

    fn bad() -> Option<Result<(Policy, String), String>> {
        Some(Err("policy.yaml line 1: unknown field `mdoe`".into()))
    }

    fn mode(s: &PolicySource) -> Option<(Mode, Origin)> {
        s.in_force().map(|f| (f.policy.mode, f.origin))
    }

    #[test]
    fn nothing_is_in_force_before_both_sources_are_read() {
        let mut s = PolicySource::default();
        assert_eq!(s.config_map_state(), "unread");
        assert!(s.why_none().unwrap().contains("not been read"));
        s.config_map(bad());
        assert!(!s.settled());
        assert_eq!(mode(&s), None);
        assert!(
            s.why_none()
                .unwrap()
                .contains("last good copy has not been read")
        );
    }

    #[test]
    fn a_good_config_map_is_in_force_at_once() {
        let mut s = PolicySource::default();
        assert!(s.config_map(good("mode: audit\n")));
        assert_eq!(mode(&s), Some((Mode::Audit, Origin::ConfigMap)));
        assert_eq!(s.why_none(), None);
    }

    #[test]
    fn a_broken_missing_or_keyless_config_map_at_start_falls_back_to_the_last_good_copy() {
        let keyless = Some(parse(Some(&Default::default())));
        for cm in [bad(), None, keyless] {
            let mut s = PolicySource::default();
            s.config_map(cm.clone());
            s.last_good(good("mode: audit\n"));
            assert_eq!(mode(&s), Some((Mode::Audit, Origin::LastGood)), "{cm:?}");
            assert!(
                s.note()
                    .unwrap()
                    .ends_with("; the last good copy is in force"),
                "{cm:?}"
            );
        }
    }

    #[test]
    fn with_no_good_source_nothing_is_in_force_and_it_says_why() {
        let mut s = PolicySource::default();
        s.config_map(bad());
        s.last_good(None);
        assert!(s.settled());
        assert_eq!(mode(&s), None);
        assert_eq!(
            s.why_none().unwrap(),
            "no policy in force: the policy ConfigMap is invalid (policy.yaml line 1: unknown field `mdoe`) and no last good copy exists"
        );
        // Never the defaults (enforce + preempt) by omission.
        s.config_map(None);
        assert_eq!(mode(&s), None);
        assert!(s.why_none().unwrap().contains("does not exist"));
    }

    #[test]
    fn a_policy_in_force_is_kept_when_the_config_map_breaks_or_goes() {
        let mut s = PolicySource::default();
        s.last_good(None);
        s.config_map(good("mode: audit\n"));
        assert_eq!(s.config_map_state(), "valid");
        assert!(!s.config_map(bad()));
        assert_eq!(mode(&s), Some((Mode::Audit, Origin::ConfigMap)));
        // The origin stays `configmap`: only the ConfigMap's state says it broke.
        assert_eq!(s.config_map_state(), "invalid");
        assert!(!s.config_map(None));
        assert_eq!(mode(&s), Some((Mode::Audit, Origin::ConfigMap)));
        assert_eq!(s.config_map_state(), "missing");
        // A fixed ConfigMap takes over again.
        assert!(s.config_map(good("mode: enforce\n")));
        assert_eq!(mode(&s), Some((Mode::Enforce, Origin::ConfigMap)));
        assert_eq!(s.config_map_state(), "valid");
    }

    #[test]
    fn a_later_good_config_map_replaces_the_last_good_copy() {
        let mut s = PolicySource::default();
        s.config_map(bad());
        s.last_good(good("mode: audit\n"));
        assert!(s.config_map(good("mode: enforce\n")));
        assert_eq!(mode(&s), Some((Mode::Enforce, Origin::ConfigMap)));
    }
}
