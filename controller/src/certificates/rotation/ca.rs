//! The CA Secret, settled: [`CaReading`] reads every slot (current, next, previous, the rotation
//! timestamp) into a usable value or the reason it is not, and [`settle_ca`] says whether the
//! Secret can stand (the current CA signs) or must be written first, and how: a fresh CA, a
//! cleaned-up slot, or the next rotation phase once its time has come.

use std::time::{Duration, SystemTime};

use resize_guard_certs::{Authority, inspect};
use resize_guard_runtime::error_chain;

use super::{CaPlan, Expected, Material, human, renewal_due};
use crate::certificates::secrets::{
    CA_CERT, CA_KEY, NEXT_CA_CERT, NEXT_CA_KEY, PREVIOUS_CA_CERT, ROTATION_SINCE, Stored,
    parse_rfc3339, rfc3339,
};

/// The CA Secret, slot by slot: each usable value or why not.
pub(super) struct CaReading {
    pub(super) current: Result<Authority, String>,
    next: Option<Result<Authority, String>>,
    previous: Option<Result<(SystemTime, String), String>>,
    since: Option<Result<SystemTime, String>>,
}

impl CaReading {
    pub(super) fn read(stored: Option<&Stored>, now: SystemTime) -> CaReading {
        let Some(s) = stored else {
            return CaReading {
                current: Err("the CA Secret does not exist".into()),
                next: None,
                previous: None,
                since: None,
            };
        };
        let current = authority(s, CA_CERT, CA_KEY, now);
        let next = (s.has(NEXT_CA_CERT) || s.has(NEXT_CA_KEY))
            .then(|| authority(s, NEXT_CA_CERT, NEXT_CA_KEY, now));
        let previous = s.has(PREVIOUS_CA_CERT).then(|| {
            let pem = s
                .text(PREVIOUS_CA_CERT)
                .map_err(|e| format!("the CA Secret {e}"))?;
            let info =
                inspect(pem).map_err(|e| format!("{PREVIOUS_CA_CERT}: {}", error_chain(&e)))?;
            if !info.is_ca {
                return Err(format!("{PREVIOUS_CA_CERT} is not a CA certificate"));
            }
            if info.not_after <= now {
                return Err(format!(
                    "{PREVIOUS_CA_CERT} expired at {}",
                    rfc3339(info.not_after)
                ));
            }
            Ok((info.not_before, pem.to_owned()))
        });
        let since = s.annotations.get(ROTATION_SINCE).map(|t| parse_rfc3339(t));
        CaReading {
            current,
            next,
            previous,
            since,
        }
    }

    /// Every usable CA, with its notBefore.
    pub(super) fn trusted(&self) -> Vec<(SystemTime, &str)> {
        let mut out = Vec::new();
        for a in [self.current.as_ref().ok(), usable(&self.next)]
            .into_iter()
            .flatten()
        {
            out.push((a.not_before(), a.cert_pem()));
        }
        if let Some(Ok((not_before, pem))) = &self.previous {
            out.push((*not_before, pem.as_str()));
        }
        out
    }
}

fn usable(slot: &Option<Result<Authority, String>>) -> Option<&Authority> {
    slot.as_ref().and_then(|r| r.as_ref().ok())
}

/// The CA in `cert_key`/`key_key`, usable at `now`, or why not.
fn authority(
    s: &Stored,
    cert_key: &str,
    key_key: &str,
    now: SystemTime,
) -> Result<Authority, String> {
    let cert = s.text(cert_key).map_err(|e| format!("the CA Secret {e}"))?;
    let key = s.text(key_key).map_err(|e| format!("the CA Secret {e}"))?;
    let ca = Authority::from_pem(cert, key).map_err(|e| {
        format!(
            "{cert_key}/{key_key} hold no usable CA: {}",
            error_chain(&e)
        )
    })?;
    if ca.not_after() <= now {
        return Err(format!(
            "the CA in {cert_key} expired at {}",
            rfc3339(ca.not_after())
        ));
    }
    Ok(ca)
}

/// Where the CA Secret stands.
pub(super) enum CaStep<'a> {
    /// It needs no write; this CA signs.
    Settled(&'a Authority),
    /// It must be written first, for this reason.
    Write(Box<CaPlan>, String),
}

/// The current CA when the CA Secret needs no write; else the write and why.
pub(super) fn settle_ca<'a>(ca: &'a CaReading, now: SystemTime, expected: &Expected) -> CaStep<'a> {
    let current = match &ca.current {
        Ok(current) => current,
        Err(problem) => {
            let plan = match usable(&ca.next) {
                Some(next) => (
                    CaPlan {
                        current: Material::Keep(next.clone()),
                        next: None,
                        previous: None,
                        rotation_since: None,
                    },
                    format!("{problem}: promoting the next CA now"),
                ),
                None => (
                    CaPlan {
                        current: Material::Generate,
                        next: None,
                        previous: None,
                        rotation_since: None,
                    },
                    format!("{problem}: generating a new CA"),
                ),
            };
            return CaStep::Write(Box::new(plan.0), plan.1);
        }
    };
    let mut reasons = Vec::new();
    let mut next = match &ca.next {
        Some(Ok(n)) => Some(Material::Keep(n.clone())),
        Some(Err(problem)) => {
            reasons.push(format!("dropping the next CA: {problem}"));
            None
        }
        None => None,
    };
    let mut previous = match &ca.previous {
        Some(Ok((_, pem))) => Some(pem.clone()),
        Some(Err(problem)) => {
            reasons.push(format!("dropping the previous CA: {problem}"));
            None
        }
        None => None,
    };
    let rotating = next.is_some() || previous.is_some();
    let mut since = match &ca.since {
        Some(Ok(t)) if rotating && *t <= now + expected.overlap => Some(*t),
        Some(Ok(t)) if rotating => {
            reasons.push(format!(
                "{ROTATION_SINCE} {} lies in the future: restarting the overlap from now",
                rfc3339(*t)
            ));
            Some(now)
        }
        Some(Err(problem)) if rotating => {
            reasons.push(format!(
                "{ROTATION_SINCE}: {problem}: restarting the overlap from now"
            ));
            Some(now)
        }
        None if rotating => {
            reasons.push(format!(
                "a rotation without {ROTATION_SINCE}: restarting the overlap from now"
            ));
            Some(now)
        }
        Some(_) => {
            reasons.push(format!(
                "no rotation in progress: removing {ROTATION_SINCE}"
            ));
            None
        }
        None => None,
    };
    let overlap_done = since.is_some_and(|t| now >= t + expected.overlap);
    let mut current_material = Material::Keep(current.clone());
    if let (Some(Material::Keep(n)), true) = (&next, overlap_done) {
        reasons.push(format!(
            "the next CA has been trusted for {}: it signs from now on, the old CA stays trusted for {} more",
            human(expected.overlap),
            human(expected.overlap)
        ));
        previous = Some(current.cert_pem().to_owned());
        current_material = Material::Keep(n.clone());
        next = None;
        since = Some(now);
    } else if next.is_none() && previous.is_some() && overlap_done {
        reasons.push(format!(
            "the previous CA has been trusted for {} after its successor took over: removing it",
            human(expected.overlap)
        ));
        previous = None;
        since = None;
    } else if !rotating
        && reasons.is_empty()
        && past_two_thirds(current, expected.spec.ca_validity, now)
    {
        reasons.push(format!(
            "the CA is past 2/3 of its lifetime (expires {}): generating its successor, trusted next to it for {} before it signs",
            rfc3339(current.not_after()),
            human(expected.overlap)
        ));
        next = Some(Material::Generate);
        since = Some(now);
    }
    if reasons.is_empty() {
        return CaStep::Settled(current);
    }
    CaStep::Write(
        Box::new(CaPlan {
            current: current_material,
            next,
            previous,
            rotation_since: since,
        }),
        reasons.join("; "),
    )
}

/// Whether at most a third of the lifetime (the shorter of the certificate's own span and the
/// configured validity, so a backdated `notBefore` does not count) is left at `now`.
fn past_two_thirds(ca: &Authority, validity: Duration, now: SystemTime) -> bool {
    renewal_due(ca.not_before(), ca.not_after(), validity, now)
}
